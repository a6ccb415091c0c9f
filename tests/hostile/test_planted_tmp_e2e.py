"""Issue 32 §1, end to end: a real ``drakit run`` as root (reference backend, one case) with a
TMPDIR holding another user's planted ``drakit-*`` folders whose states name a live unrelated
process and a folder outside, a link among them, and links in ``--out`` pointing outside. After the
run every planted thing is unchanged (paths, inodes, mtimes, modes, owners, contents) and the
unrelated process is alive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drakit.clusters.leftovers import OWNER_FILE
from drakit.clusters.local import procs
from drakit.clusters.local.launcher import MARKER

from .inputs import VALID

NOBODY = 65534


def _snapshot(*roots: Path) -> dict[str, tuple[object, ...]]:
    """Every path below *roots* (links not followed): inode, mtime, mode, owner, content or target."""
    out: dict[str, tuple[object, ...]] = {}
    for root in roots:
        paths = [root]
        if root.is_dir() and not root.is_symlink():
            for folder, dirs, files in os.walk(root):
                paths += [Path(folder) / n for n in dirs + files]
        for p in paths:
            st = os.lstat(p)
            body: object = os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None
            out[str(p)] = (st.st_ino, st.st_mtime_ns, st.st_mode, st.st_uid, body)
    return out


def _give_away(path: Path) -> None:
    for folder, dirs, files in os.walk(path):
        for n in dirs + files:
            os.chown(Path(folder) / n, NOBODY, NOBODY, follow_symlinks=False)
    os.chown(path, NOBODY, NOBODY)


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's files, and the run as root, need root")
def test_a_root_run_in_a_planted_tmp_changes_nothing_but_its_own_files(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)  # as /tmp
    outside = tmp_path / "outside"
    outside.mkdir()
    victim_dir = outside / "drakit-n-vvvvvvvv"  # this user's, looks like drakit's, named by the states
    victim_dir.mkdir(mode=0o700)
    (victim_dir / "data").write_text("keep")
    victim_file = outside / "passwd"
    victim_file.write_text("root:x:0:0\n")
    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_owner = {"pid": dead.pid, "start_ticks": procs.start_ticks(dead.pid)}
    dead.wait()
    try:
        sleeping = {"name": "etcd", "pid": sleeper.pid, "start_ticks": procs.start_ticks(sleeper.pid),
                    "exe": "/bin/sleep", "log": str(victim_file)}
        state = {"owner": dead_owner, "detached": False, "processes": [sleeping],
                 "extra_dirs": [str(victim_dir), str(outside)]}
        theirs = [tmp / "drakit-local-aaaaaaaa", tmp / "drakit-bbbbbbbb", tmp / "drakit-n-cccccccc",
                  tmp / "drakit-cg-dddddddd"]
        for folder in theirs:
            folder.mkdir(mode=0o700)
        (theirs[0] / MARKER).write_text("x")
        procs.write_state(theirs[0], state)
        (theirs[1] / OWNER_FILE).write_text(json.dumps(dead_owner))
        for tied in theirs[2:]:
            procs.tie(tied, tmp / "drakit-local-gone0000")
        for folder in theirs:
            _give_away(folder)
        link = tmp / "drakit-local-eeeeeeee"  # this user's link to the folder outside
        link.symlink_to(victim_dir)
        out = tmp_path / "out"
        out.mkdir()
        for name in (".drakit-write-test", "results.json.tmp", ".drakit-shard.json", "driver-logs"):
            (out / name).symlink_to(victim_file if name != "driver-logs" else outside)
        planted = [*theirs, link, outside, *(out / n for n in os.listdir(out))]
        before = _snapshot(*planted)
        (tmp_path / "v.case.yaml").write_text(VALID)
        res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(tmp_path / "v.case.yaml"),
                              "--out", str(out), "--plain"], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1"})
        assert res.returncode == 0, res.stdout + res.stderr
        assert json.loads((out / "results.json").read_text())["verdict"]["result"] == "pass"
        assert _snapshot(*planted) == before
        assert sleeper.poll() is None, "the unrelated process was signalled"
        assert sorted(p.name for p in tmp.iterdir()) == sorted(p.name for p in [*theirs, link])  # its own went
    finally:
        sleeper.kill()
        sleeper.wait()
