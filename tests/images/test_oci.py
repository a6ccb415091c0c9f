"""OCI layers and archives (clusters.images.oci) and what the images must be called: no build,
no Debian tools."""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import os
import re
import tarfile
from pathlib import Path

import pytest
import yaml

from drakit.clusters.images import oci
from drakit.clusters.images.build import BUSYBOX_REF, PAUSE_REF, archive_name, driver_ref
from drakit.clusters.images.pysite import DRAKIT_ROOTS, SITE_TRIM

ROOT = Path(__file__).resolve().parents[2]


def _tree(base: Path, umask: int) -> Path:
    old = os.umask(umask)
    try:
        (base / "bin").mkdir(parents=True)
        (base / "bin/tool").write_text("#!/bin/sh\necho hi\n")
        (base / "bin/tool").chmod(0o777 & ~umask)
        os.link(base / "bin/tool", base / "bin/tool2")
        (base / "bin/sh").symlink_to("/bin/tool")
        (base / "etc").mkdir()
        (base / "etc/passwd").write_text("root:x:0:0::/:/bin/sh\n")
        (base / "tmp").mkdir()
        (base / "tmp").chmod(0o1777)
        (base / "a" / "b").mkdir(parents=True)
        (base / "a" / "b" / "c").write_text("c")
        (base / "a.txt").write_text("after a/ in byte order, before it by component")
    finally:
        os.umask(old)
    for p in [*base.rglob("*"), base]:
        os.utime(p, (12345, 67890 + len(str(p))), follow_symlinks=False)
    return base


def test_layer_is_deterministic_whatever_the_umask_and_mtimes(tmp_path: Path) -> None:
    one = oci.write_layer(_tree(tmp_path / "one", 0o022), tmp_path / "blobs", "x")
    two = oci.write_layer(_tree(tmp_path / "two", 0o002), tmp_path / "blobs2", "x")
    assert one == two
    blob = (tmp_path / "blobs" / one.digest.split(":")[1]).read_bytes()
    assert "sha256:" + hashlib.sha256(blob).hexdigest() == one.digest and len(blob) == one.size
    plain = gzip.decompress(blob)
    assert "sha256:" + hashlib.sha256(plain).hexdigest() == one.diff_id


def test_layer_entries(tmp_path: Path) -> None:
    layer = oci.write_layer(_tree(tmp_path / "t", 0o022), tmp_path / "blobs", "x")
    with tarfile.open(tmp_path / "blobs" / layer.digest.split(":")[1]) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == ["a", "a/b", "a/b/c", "a.txt", "bin", "bin/sh", "bin/tool", "bin/tool2", "etc", "etc/passwd", "tmp"]
    by = {m.name: m for m in members}
    assert all(m.mtime == oci.EPOCH and m.uid == 0 and m.gid == 0 and m.uname == "" for m in members)
    assert by["tmp"].mode == 0o1777 and by["bin"].mode == 0o755
    assert by["bin/tool"].mode == 0o755 and by["etc/passwd"].mode == 0o644
    assert by["bin/sh"].issym() and by["bin/sh"].linkname == "/bin/tool"
    assert by["bin/tool2"].islnk() and by["bin/tool2"].linkname == "bin/tool"
    assert layer.unpacked == len("#!/bin/sh\necho hi\n") + len("root:x:0:0::/:/bin/sh\n") + 1 + len(
        "after a/ in byte order, before it by component")


def test_layer_refuses_a_device_or_fifo(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    os.mkfifo(tmp_path / "r" / "fifo")
    with pytest.raises(ValueError, match="fifo: only files, folders and symlinks"):
        oci.write_layer(tmp_path / "r", tmp_path / "blobs", "x")


@pytest.mark.parametrize(("ref", "full"), [
    ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
    ("drakit/fake-driver:0.1.0", "docker.io/drakit/fake-driver:0.1.0"),
    ("busybox:1.36", "docker.io/library/busybox:1.36"),
    ("busybox", "docker.io/library/busybox:latest"),
    ("localhost/x:1", "localhost/x:1"),
    ("localhost:5000/x/y:2", "localhost:5000/x/y:2"),
    ("localhost:5000/x", "localhost:5000/x:latest"),
])
def test_normalize_ref(ref: str, full: str) -> None:
    assert oci.normalize_ref(ref) == full


def test_archive_round_trip(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    layers = tuple(oci.write_layer(_tree(tmp_path / n, 0o022), blobs, n) for n in ("l1",))
    (tmp_path / "l2").mkdir()
    (tmp_path / "l2" / "f").write_text("second")
    layers += (oci.write_layer(tmp_path / "l2", blobs, "l2"),)
    img = oci.Image("drakit/x:1", "amd64", layers + layers[:1], {"Cmd": ["sh"]}, {"k": "v"})
    dest = tmp_path / "x.oci.tar"
    oci.write_archive(img, blobs, dest)
    got = oci.read_archive(dest)
    assert got["ref"] == "docker.io/drakit/x:1" and got["digest"] == img.digest
    assert got["config"]["rootfs"]["diff_ids"] == [lay.diff_id for lay in img.layers]
    assert got["config"]["config"] == {"Cmd": ["sh"]} and got["config"]["architecture"] == "amd64"
    assert [lay["digest"] for lay in got["manifest"]["layers"]] == [lay.digest for lay in img.layers]
    blob_names = [m for m in got["members"] if m.startswith("blobs/sha256/")]
    assert len(blob_names) == len(set(blob_names)) == 4  # config, manifest, two distinct layers
    with tarfile.open(dest) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
    assert index["manifests"][0]["annotations"][oci.ANN_REF] == "1"
    first = dest.read_bytes()
    oci.write_archive(img, blobs, dest)
    assert dest.read_bytes() == first


def test_read_archive_refuses_what_is_not_an_oci_layout(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as tar:
        tar.add(__file__, arcname="manifest.json")
    with pytest.raises(ValueError, match="no oci-layout in the archive"):
        oci.read_archive(bad)


def test_image_names_are_the_ones_the_cases_use() -> None:
    from drakit.conformance.backends.drivertarget import DriverSide
    from drakit.fake_driver.deploy import DEFAULT_IMAGE
    images: set[str] = set()
    for case in (ROOT / "conformance" / "suites").rglob("*.yaml"):
        images |= {m[1] for m in re.findall(r'image:\s*("?)(\$\{podImage\}|[^\s,}"]+)\1', case.read_text(encoding="utf-8"))}
    # every image a case names is one drakit builds and loads into its nodes (no registry here)
    assert images <= {PAUSE_REF, BUSYBOX_REF, "${podImage}"} and {PAUSE_REF, "${podImage}"} <= images
    assert DriverSide(None, None).pod_image == BUSYBOX_REF
    assert driver_ref() == DEFAULT_IMAGE
    for doc in yaml.safe_load_all((ROOT / "fake_driver/deploy/kubelet-plugin.yaml").read_text(encoding="utf-8")):
        for c in doc["spec"]["template"]["spec"]["containers"]:
            assert c["imagePullPolicy"] == "IfNotPresent"
    assert archive_name(PAUSE_REF) == "pause-3.10.oci.tar"
    assert archive_name(BUSYBOX_REF) == "busybox-1.37.0-1.oci.tar"


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_drakit_imports_nothing_the_image_trims() -> None:
    trimmed = {rel.replace("/", ".") for rel in SITE_TRIM if rel != "bin"}
    used = set()
    for root in DRAKIT_ROOTS:
        for path in (ROOT / root).rglob("*.py"):
            used |= {(m, str(path.relative_to(ROOT))) for m in _imports(path)}
    hits = sorted((m, where) for m, where in used for t in trimmed if m == t or m.startswith(t + "."))
    assert not hits, f"modules the image does not ship are imported: {hits}"
    # the check itself sees a trimmed import
    assert any(m.startswith("cel_expr_python.ext") for m, _ in used)


def test_image_build_refuses_unknown_names_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from drakit.conformance.cli import main
    assert main(["image", "build", "--only", "pause,bogus"]) == 2
    err = capsys.readouterr().err
    assert err == "drakit image build: unknown image(s) bogus: known are pause, busybox, driver\n"


def test_archive_refs_names_the_images_of_oci_and_docker_archives_and_refuses_others(tmp_path):
    import io

    from drakit.clusters.images.oci import archive_refs

    def tar(name: str, files: dict[str, bytes]) -> Path:
        path = tmp_path / name
        with tarfile.open(path, "w") as t:
            for member, data in files.items():
                info = tarfile.TarInfo(member)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        return path

    oci = tar("oci.tar", {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}', "index.json": json.dumps(
        {"manifests": [{"digest": "sha256:0", "annotations": {"io.containerd.image.name": "example.com/a:1"}}]}).encode()})
    assert archive_refs(oci) == ["example.com/a:1"]
    docker = tar("docker.tar", {"manifest.json": json.dumps([{"RepoTags": ["vendor/driver:2", "vendor/driver:latest"]}]).encode()})
    assert archive_refs(docker) == ["vendor/driver:2", "vendor/driver:latest"]
    for bad, says in [(tar("none.tar", {"hello": b"x"}), "no index.json"),
                      (tar("unnamed.tar", {"index.json": b'{"manifests": [{"digest": "sha256:0"}]}'}), "names no image"),
                      (tar("broken.tar", {"index.json": b"{"}), "not an image archive")]:
        with pytest.raises(ValueError, match=says):
            archive_refs(bad)
    text = tmp_path / "notes.txt"
    text.write_text("not a tar")
    with pytest.raises(ValueError, match="not an image archive"):
        archive_refs(text)


def test_cluster_up_refuses_a_load_image_that_is_no_image_in_one_line_before_starting_anything(tmp_path, capsys):
    from drakit.conformance.cli import main as drakit

    run_dir = tmp_path / "rd"
    notes = tmp_path / "notes.txt"
    notes.write_text("not a tar")
    for value, says in [(str(tmp_path / "nope.tar"), "nope.tar: no such file"), (str(tmp_path), "not a file"),
                        (str(notes), "not an image archive")]:
        assert drakit(["cluster", "up", "--run-dir", str(run_dir), "--load-image", value]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("drakit cluster: --load-image: ") and says in err, err
    assert drakit(["cluster", "up", "--run-dir", str(run_dir), "--nodes", "0", "--load-image", "drakit"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "imported into kubelet nodes on containerd" in err, err
    assert not run_dir.exists()  # nothing started
