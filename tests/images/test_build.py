"""``drakit image build`` for real: Debian packages, pip, gcc, into drakit's shared cache (the
first run builds cold, about two minutes; later runs reuse the cache). Each image is then opened
as a runtime would and its programs run: busybox's shell, the pause program, and drakit itself
(a suite through pytest-xdist workers, every module importable)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from drakit.clusters.images import BUSYBOX_REF, PAUSE_REF, build_images, driver_ref
from drakit.clusters.images.oci import normalize_ref, read_archive
from drakit.clusters.local.pytest_fixture import skip_or_fail
from tests.images import rootfs

TOOLS = ("apt-get", "apt-cache", "dpkg-deb", "dpkg", "gcc")


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        skip_or_fail(f"building images needs a Debian host with {', '.join(missing)}")
    return {b.ref: b for b in build_images()}


@pytest.fixture(scope="module")
def as_root() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        skip_or_fail("running an image's programs here needs root and unshare (chroot in a private mount namespace)")


@pytest.fixture(scope="module")
def driver_root(built: dict[str, Any], as_root: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    root = tmp_path_factory.mktemp("driver-image")
    config = rootfs.unpack(built[driver_ref()].path, root)
    yield root, config


def test_three_archives_named_as_the_cases_name_them(built: dict[str, Any]) -> None:
    assert list(built) == [PAUSE_REF, BUSYBOX_REF, driver_ref()]
    for ref, b in built.items():
        got = read_archive(b.path)
        assert got["ref"] == normalize_ref(ref) and got["digest"] == b.digest
        assert got["config"]["os"] == "linux"
    assert driver_ref().endswith(":" + metadata.version("drakit"))
    assert built[driver_ref()].unpacked < 150e6, built[driver_ref()].unpacked
    assert built[BUSYBOX_REF].unpacked < 4e6 and built[PAUSE_REF].unpacked < 1.5e6


def test_a_warm_build_rewrites_nothing(built: dict[str, Any]) -> None:
    started = time.monotonic()
    again = build_images()
    assert time.monotonic() - started < 30
    assert [(b.ref, b.digest, b.rebuilt) for b in again] == [(b.ref, b.digest, False) for b in built.values()]


def test_busybox_shell(built: dict[str, Any], as_root: None, tmp_path: Path) -> None:
    config = rootfs.unpack(built[BUSYBOX_REF].path, tmp_path)
    assert config["config"]["Cmd"] == ["sh"]
    res = rootfs.run(tmp_path, config, ["sh", "-c", "echo $((6 * 7)); env | grep -c '^PATH='; ls /bin | grep -cx cat; "
                                        "id -u; touch /tmp/x && echo tmp-writable"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["42", "1", "1", "0", "tmp-writable"]


def test_pause_waits_until_sigterm(built: dict[str, Any], tmp_path: Path) -> None:
    config = rootfs.unpack(built[PAUSE_REF].path, tmp_path)
    assert config["config"]["Entrypoint"] == ["/pause"] and sorted(os.listdir(tmp_path)) == ["pause"]
    assert subprocess.run([tmp_path / "pause", "-v"], capture_output=True, text=True).stdout == "drakit pause\n"
    proc = subprocess.Popen([tmp_path / "pause"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
    ldd = subprocess.run(["file", tmp_path / "pause"], capture_output=True, text=True).stdout if shutil.which("file") else ""
    assert not ldd or "statically linked" in ldd or "static-pie" in ldd, ldd


IMPORT_ALL = """
import importlib, pkgutil, drakit
bad = []
names = [m.name for m in pkgutil.walk_packages(drakit.__path__, "drakit.")]
for name in names:
    try:
        importlib.import_module(name)
    except Exception as exc:
        bad.append(f"{name}: {exc!r}")
print(len(names), bad)
"""


def test_drakit_in_its_image(driver_root: tuple[Path, Any]) -> None:
    root, config = driver_root
    cfg = config["config"]
    assert cfg["Entrypoint"] == ["drakit"] and cfg["User"] == "65532:65532"
    res = rootfs.run(root, config, ["drakit", "--version"])
    assert (res.returncode, res.stdout.strip()) == (0, f"drakit {metadata.version('drakit')}"), res.stderr
    res = rootfs.run(root, config, ["python3", "-c", IMPORT_ALL])
    assert res.returncode == 0, res.stderr
    count, bad = res.stdout.split(" ", 1)
    assert int(count) > 150 and bad.strip() == "[]", res.stdout
    res = rootfs.run(root, config, ["drakit", "driver", "manifests", "--image", "x:1"])
    assert res.returncode == 0 and "kind: DaemonSet" in res.stdout, res.stderr


def test_drakit_run_inside_with_workers(driver_root: tuple[Path, Any]) -> None:
    """A suite through pytest-xdist's workers (execnet ships its own source to them)."""
    root, config = driver_root
    suites = next((root / "usr/local/lib").glob("python3*/dist-packages/drakit/conformance/suites"))
    inside = "/" + str(suites.relative_to(root)) + "/consumable-capacity"
    res = rootfs.run(root, config, ["drakit", "run", inside, "-n", "2", "--plain", "--out", "/tmp/out"])
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    results = json.loads((root / "tmp/out/results.json").read_text())
    statuses = [c["status"] for c in results["cases"]]
    assert statuses and set(statuses) == {"passed"}, statuses
