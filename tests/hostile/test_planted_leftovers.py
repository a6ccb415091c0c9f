"""Issue 32 §1: the sweep of what killed runs left, and ``drakit cluster down``, act only on what
drakit made and can prove it made. A state file planted in the temp folder (by this user or
another) naming a live unrelated process and a ``drakit-*`` folder elsewhere changes nothing;
a process drakit did start for a killed run is still stopped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from drakit.clusters import trust
from drakit.clusters.leftovers import OWNER_FILE, sweep
from drakit.clusters.local import ownstate, procs
from drakit.clusters.local.launcher import MARKER, ClusterError, LocalCluster

NOBODY = 65534


def _made(tmp: Path, prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir=tmp))


def _dead_owner() -> dict[str, object]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = procs.start_ticks(child.pid)
    child.wait()
    return {"pid": child.pid, "start_ticks": ticks}


def _start(argv: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, start_new_session=True)
    while Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[0] != argv[0].encode():
        assert proc.poll() is None, f"{argv} ended"
        time.sleep(0.01)  # until it has exec'd
    return proc


def _entry(p: subprocess.Popen[bytes], name: str = "etcd") -> dict[str, object]:
    return {"name": name, "pid": p.pid, "start_ticks": procs.start_ticks(p.pid), "exe": "x", "log": "x"}


def _alive(p: subprocess.Popen[bytes]) -> bool:
    return p.poll() is None


def test_a_planted_state_of_this_user_stops_and_removes_nothing_outside(tmp_path: Path) -> None:
    """The attack of the issue: a run folder of this user whose state names a live unrelated
    process (started before the folder, not drakit's program, not naming it) and a ``drakit-*``
    folder elsewhere. The unrelated process lives, the folder elsewhere stays."""
    sleeper = _start(["sleep", "300"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = Path(tempfile.mkdtemp(prefix="drakit-n-", dir=elsewhere))  # looks like drakit's, not tied
    (victim / "data").write_text("keep")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    planted = _made(tmp, "drakit-local-")
    (planted / MARKER).write_text("x")
    procs.write_state(planted, {"owner": _dead_owner(), "detached": False, "processes": [_entry(sleeper)],
                                "extra_dirs": [str(victim), str(elsewhere)]})
    try:
        sweep(tmp)
        assert _alive(sleeper)
        assert (victim / "data").read_text() == "keep"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_other_users_links_and_loose_folders_are_never_touched(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making another user's files needs root")
    owner = _dead_owner()
    theirs = _made(tmp_path, "drakit-local-")
    (theirs / MARKER).write_text("x")
    procs.write_state(theirs, {"owner": owner, "detached": False, "processes": []})
    for p in (theirs, *theirs.iterdir()):
        os.chown(p, NOBODY, NOBODY)
    loose = _made(tmp_path, "drakit-")  # this user's, but others may write in it
    (loose / OWNER_FILE).write_text(json.dumps(owner))
    loose.chmod(0o755)
    target = _made(tmp_path / "..", "drakit-")  # a dead run's folder, elsewhere
    (target / OWNER_FILE).write_text(json.dumps(owner))
    link = tmp_path / "drakit-abcdefgh"
    link.symlink_to(target)
    hand_made = tmp_path / "drakit-local-not-mkdtemp"  # not a name mkdtemp makes
    hand_made.mkdir(mode=0o700)
    (hand_made / MARKER).write_text("x")
    procs.write_state(hand_made, {"owner": owner, "detached": False, "processes": []})
    try:
        assert sweep(tmp_path) == []
        assert all(p.exists() for p in (theirs, loose, link, target, hand_made)) and link.is_symlink()
    finally:
        shutil.rmtree(target)


def test_a_process_drakit_started_for_a_killed_run_is_still_stopped(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Proven: its program is in drakit's cache, it names the run folder, it started after the
    run folder was made. Stopped, and the run folder and the folder tied to it removed."""
    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    shutil.copy2(shutil.which("tail") or "/usr/bin/tail", cache / "bin" / "etcd")  # runs until stopped
    monkeypatch.setenv("DRAKIT_CACHE", str(cache))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    run = _made(tmp, "drakit-local-")
    (run / MARKER).write_text("x")
    nodes = _made(tmp, "drakit-n-")
    procs.tie(nodes, run)
    early = _start(["sleep", "300"])  # started before: never proven, whatever it names
    (run / "etcd.log").write_text("")
    ours = _start([str(cache / "bin" / "etcd"), "-f", f"{run}/etcd.log"])
    procs.write_state(run, {"owner": _dead_owner(), "detached": False, "processes": [_entry(ours), _entry(early, "x")],
                            "extra_dirs": [str(nodes)]})
    try:
        assert sweep(tmp) == [run]
        ours.wait(timeout=20)
        assert _alive(early) and not nodes.exists()
    finally:
        for p in (early, ours):
            p.kill()
            p.wait()


def test_cluster_down_stops_only_proven_processes_and_refuses_a_foreign_run_dir(tmp_path: Path) -> None:
    sleeper = _start(["sleep", "300"])
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    (run_dir / MARKER).write_text("x")
    procs.write_state(run_dir, {"owner": _dead_owner(), "detached": True, "processes": [_entry(sleeper)],
                                "extra_dirs": [str(tmp_path)]})
    said: list[str] = []
    try:
        cluster = LocalCluster.attach(run_dir, progress=said.append)
        cluster.down()
        assert _alive(sleeper) and tmp_path.is_dir()
        assert said == [f"{run_dir}: left alone 1 live process(es) its state lists that drakit cannot prove it started "
                        f"(pid {sleeper.pid})"]
    finally:
        sleeper.kill()
        sleeper.wait()
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        (theirs / MARKER).write_text("x")
        procs.write_state(theirs, {"detached": True, "processes": []})
        os.chown(theirs, NOBODY, NOBODY)
        with pytest.raises(ClusterError, match=r"belongs to uid 65534, not to this user"):
            LocalCluster.attach(theirs)


def test_the_default_run_dirs_user_folder_made_first_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making another user's files needs root")
    folder = tmp_path / f"drakit-{os.geteuid()}"
    folder.mkdir(mode=0o700)
    os.chown(folder, NOBODY, NOBODY)
    with pytest.raises(ValueError, match="is not this user's own private folder"):
        ownstate.user_temp_folder(tmp_path)
    os.chown(folder, 0, 0)
    assert ownstate.user_temp_folder(tmp_path) == folder


def test_records_are_read_without_following_a_link_and_bounded(tmp_path: Path) -> None:
    folder = _made(tmp_path, "drakit-")
    (tmp_path / "real").write_text(json.dumps({"pid": 1}))
    (folder / OWNER_FILE).symlink_to(tmp_path / "real")
    assert trust.read_own(folder, OWNER_FILE) is None
    (folder / OWNER_FILE).unlink()
    os.mkfifo(folder / OWNER_FILE)  # never blocks
    assert trust.read_own(folder, OWNER_FILE) is None
    (folder / OWNER_FILE).unlink()
    (folder / OWNER_FILE).write_bytes(b"x" * (trust.RECORD_LIMIT + 1))
    assert trust.read_own(folder, OWNER_FILE) is None


def test_cluster_commands_refuse_a_foreign_or_forged_run_dir_in_one_line(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("keep")
    link = tmp_path / "run"
    link.symlink_to(victim)
    said = {}
    for command in (["down", "--run-dir", str(link)], ["status", "--run-dir", f"{tmp_path}/a\nforged"]):
        res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "cluster", *command],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stdout + res.stderr
        said[command[0]] = res.stderr
    assert said["down"] == (f"drakit cluster: run dir {link} is a symbolic link; drakit never acts through one: drakit "
                            f"acts only in its own folders; give another --run-dir\n")
    assert "holds the control character '\\n'" in said["status"]
    assert (victim / "keep").read_text() == "keep"
