"""The archives in a real containerd (the one ``drakit cluster build`` builds): imported the way
``kind load image-archive`` does (the archive on ctr's stdin, ``--all-platforms --digests``) and
the way a node runtime does (``ctr -n k8s.io images import FILE``), then checked complete and
unpacked under the names the cases and manifests use. containerd runs in a private mount
namespace with its own /run and folders; no CRI, no NRI, no container started."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from drakit.clusters.images import BUSYBOX_REF, PAUSE_REF, build_images, driver_ref
from drakit.clusters.images.oci import normalize_ref
from drakit.clusters.local.build import bin_dir
from drakit.clusters.local.pytest_fixture import skip_or_fail

CONFIG = """version = 3
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.nri.v1.nri", "io.containerd.cri.v1.runtime",
                    "io.containerd.cri.v1.images"]
[grpc]
  address = "{d}/containerd.sock"
"""

SCRIPT = r"""
set -e
mount -t tmpfs tmpfs /run
"$BIN/containerd" --config "$D/config.toml" --log-level error >"$D/containerd.log" 2>&1 &
trap 'kill $!; wait $! || true' EXIT
i=0; until [ -S "$D/containerd.sock" ]; do i=$((i+1)); [ $i -lt 100 ] || exit 9; sleep 0.1; done
ctr() { "$BIN/ctr" -a "$D/containerd.sock" -n k8s.io "$@"; }
shift
for a in "$@"; do
  case "$a" in
    *busybox*|*fake-driver*) ctr images import --all-platforms --digests --snapshotter=overlayfs - <"$a" >/dev/null ;;
    *) ctr images import "$a" >/dev/null ;;
  esac
done
echo "== names"; ctr images ls -q
echo "== check"; ctr images check
"""


@pytest.fixture(scope="module")
def containerd() -> Path:
    b = bin_dir()
    if not all((b / n).is_file() for n in ("containerd", "ctr")):
        skip_or_fail(f"containerd and ctr are not built in {b}; run 'drakit cluster build'")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        skip_or_fail("containerd needs root and unshare here (a private mount namespace)")
    return b


def test_archives_import_into_containerd(containerd: Path, tmp_path: Path) -> None:
    missing = [t for t in ("apt-get", "dpkg-deb", "gcc") if shutil.which(t) is None]
    if missing:
        skip_or_fail(f"building images needs {', '.join(missing)}")
    built = build_images()
    (tmp_path / "config.toml").write_text(CONFIG.format(d=tmp_path))
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", SCRIPT, "sh", "x",
                          *[str(b.path) for b in built]], capture_output=True, text=True, timeout=300, check=False,
                         env={**os.environ, "BIN": str(containerd), "D": str(tmp_path)})
    assert res.returncode == 0, res.stderr[-2000:] + (tmp_path / "containerd.log").read_text()[-2000:]
    names_part, check_part = res.stdout.split("== check")
    names = set(names_part.split()[2:])
    for ref in (PAUSE_REF, BUSYBOX_REF, driver_ref()):
        assert normalize_ref(ref) in names, names
    by_ref = {b.ref: b for b in built}
    rows = {line.split()[0]: line for line in check_part.splitlines()[2:] if line.strip()}
    for ref in (PAUSE_REF, BUSYBOX_REF, driver_ref()):
        row = rows[normalize_ref(ref)]
        assert by_ref[ref].digest in row and "complete" in row and row.split()[-1] == "true", row
