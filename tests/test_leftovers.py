"""The folders a killed run leaves are removed by the next run, and only those."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from drakit.clusters.leftovers import OWNER_FILE, claim, sweep
from drakit.clusters.local import procs
from drakit.clusters.local.launcher import MARKER


def _made(tmp: Path, prefix: str) -> Path:
    """A folder as drakit makes it: mkdtemp's name and mode 0700."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=tmp))


def _dead_pid() -> tuple[int, int | None]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = procs.start_ticks(child.pid)
    child.wait()
    return child.pid, ticks


def test_sweep_removes_dead_runs_folders_and_keeps_live_and_foreign_ones(tmp_path: Path) -> None:
    pid, ticks = _dead_pid()
    dead_node = _made(tmp_path, "drakit-")
    (dead_node / OWNER_FILE).write_text(json.dumps({"pid": pid, "start_ticks": ticks}))
    (dead_node / "plugins").mkdir()
    live_node = _made(tmp_path, "drakit-")
    claim(live_node)  # this process: alive
    dead_cluster = _made(tmp_path, "drakit-local-")
    (dead_cluster / MARKER).write_text("x")
    outside = _made(tmp_path, "drakit-n-")
    procs.tie(outside, dead_cluster)
    procs.write_state(dead_cluster, {"owner": {"pid": pid, "start_ticks": ticks}, "detached": False, "processes": [],
                                     "extra_dirs": [str(outside)]})
    detached = _made(tmp_path, "drakit-local-")
    (detached / MARKER).write_text("x")
    procs.write_state(detached, {"owner": {"pid": pid, "start_ticks": ticks}, "detached": True, "processes": []})
    unrelated = tmp_path / "drakit-something-else"
    unrelated.mkdir()
    other = tmp_path / "not-drakit"
    other.mkdir()
    (other / OWNER_FILE).write_text(json.dumps({"pid": pid, "start_ticks": ticks}))
    said: list[str] = []
    removed = sweep(tmp_path, progress=said.append)
    assert sorted(removed) == sorted([dead_cluster, dead_node])  # and the folder tied to the first, with it
    assert sorted(tmp_path.iterdir()) == sorted([detached, live_node, unrelated, other])
    assert said == [f"removed 2 folder(s) that killed drakit runs left in {tmp_path}"]
    assert os.path.isdir(live_node)


def test_a_kubelet_nodes_folder_outside_its_run_folder_goes_once_that_run_folder_is_gone(tmp_path: Path) -> None:
    """A run killed after its run folder went (or whose run folder someone removed) leaves its
    kubelet nodes' folder: swept then, unless its cluster still runs or a process names it."""
    run_dir = _made(tmp_path, "drakit-local-")
    (run_dir / MARKER).write_text("x")
    nodes = _made(tmp_path, "drakit-n-")
    procs.tie(nodes, run_dir)
    (nodes / "node1").mkdir()
    assert sweep(tmp_path) == []  # its cluster's run folder is there: no owner state, kept
    (run_dir / MARKER).unlink()
    named = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(60)", f"{nodes}/node1"])
    try:
        while str(nodes).encode() not in Path(f"/proc/{named.pid}/cmdline").read_bytes():
            time.sleep(0.01)  # until it has exec'd
        assert sweep(tmp_path) == []  # a process (a kubelet of a detached cluster) names it
    finally:
        named.kill()
        named.wait()
    assert sweep(tmp_path) == [nodes]
    assert not nodes.exists()



def test_a_containerd_runs_cgroups_go_with_its_record_once_the_run_folder_is_gone(tmp_path: Path) -> None:
    """The pods' cgroups of a killed run whose run folder is gone (no state lists them any more)
    are found through the run's ``drakit-cg-*`` record and removed with it (real cgroups)."""
    from drakit.clusters.local.containerd import cgroup_dirs, cgroup_parent, make_cgroups, remove_cgroups
    run_dir = tmp_path / "drakit-local-gone"  # never made: as if removed before the sweep
    parent = cgroup_parent(run_dir, "node1")
    try:
        made = make_cgroups(parent)
    except OSError as exc:
        pytest.skip(f"cannot make cgroups here: {exc}")
    if not made:
        pytest.skip("no cgroup hierarchy here")
    try:
        record = _made(tmp_path, "drakit-cg-")
        procs.tie(record, run_dir)
        assert sweep(tmp_path) == [record]
        assert cgroup_dirs(cgroup_parent(run_dir, "")) == []
    finally:
        remove_cgroups(cgroup_parent(run_dir, ""))
