"""What a killed drakit run leaves in the temp dir, and the cleanup of it.

A run stopped by SIGKILL cannot clean up: the local cluster's run folder (``drakit-local-*``:
etcd data, PKI keys, logs; its processes die with the run, through ``setpriv --pdeathsig``), the
real kubelet nodes' folders outside it (``drakit-n-*``), the fake nodes' folders of the node
agent (``drakit-*`` with an owner file: plugin sockets, checkpoints, CDI specs), and the cgroups
runc made for a containerd node's pods (empty: their processes died with the node's PID
namespace). Each carries its owner (pid and start time). :func:`sweep` removes the ones of this
user whose owner is gone, stopping any process a cluster's state still lists; a later ``drakit
run`` does it before it starts, and so does ``drakit cluster down``. Folders of live runs, of
other users, and of clusters started with ``drakit cluster up`` (they outlive their starter on
purpose) are never touched.

A run folder's ``state.json`` lists what the run made outside it; those folders are also tied to
it (an outside nodes' folder, or a ``drakit-cg-*`` record for its pods' cgroups), so that they go,
with the cgroups, once the run folder itself is gone (a test's temp folder removed, say) and no
live process names either.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

OWNER_FILE = ".drakit-owner"


def claim(folder: Path) -> None:
    """Mark *folder* as this process's, so a later run can tell when it was left behind."""
    from drakit.clusters.local import procs
    (folder / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "start_ticks": procs.start_ticks(os.getpid())}))


def _orphaned(folder: Path) -> bool:
    """A tied folder whose cluster's run folder is gone and that no live process names, nor its
    run folder (a detached cluster whose run folder someone removed keeps its nodes running: left
    alone); the cgroups of its pods are removed with it."""
    from drakit.clusters.local import procs
    from drakit.clusters.local.containerd import cgroup_parent, remove_cgroups
    from drakit.clusters.local.launcher import MARKER
    run_dir = procs.tied_to(folder)
    if run_dir is None or (run_dir / MARKER).exists():
        return False
    if _named_by_a_process(str(folder), str(run_dir)):
        return False
    remove_cgroups(cgroup_parent(run_dir, ""))
    return True


def _named_by_a_process(*paths: str) -> bool:
    """Whether a live process's command line holds one of *paths* or a path under one (one pass
    over /proc)."""
    needles = [p.encode() + end for p in paths for end in (b"/", b"\0")]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes() + b"\0"
                if any(n in cmdline for n in needles):
                    return True
            except OSError:
                continue
    return False


def _owner_gone(owner: dict[str, object]) -> bool:
    from drakit.clusters.local import procs
    try:
        pid = int(owner.get("pid") or 0)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return False
    ticks = owner.get("start_ticks")
    return pid > 0 and not procs.is_alive(pid, int(ticks) if isinstance(ticks, int) else None)


def _mine(path: Path) -> bool:
    try:
        st = path.lstat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and path.is_dir() and not path.is_symlink()


def sweep(tmp: Path | None = None, progress: Callable[[str], None] | None = None) -> list[Path]:
    """Remove the folders killed drakit runs left in *tmp* (default: the temp dir, and the short
    folders drakit puts Unix sockets in when the temp dir is too long for them); return them."""
    if tmp is None:
        from drakit.clusters.sockdir import fallback_roots
        return [p for root in fallback_roots() for p in _sweep(root, progress)]
    return _sweep(Path(tmp), progress)


def _sweep(root: Path, progress: Callable[[str], None] | None) -> list[Path]:
    from drakit.clusters.local import procs
    from drakit.clusters.local.launcher import MARKER
    removed: list[Path] = []
    try:
        entries = [p for p in root.iterdir() if p.name.startswith("drakit-")]
    except OSError:
        return removed
    for folder in sorted(entries):
        if not _mine(folder):
            continue
        try:
            if (folder / MARKER).is_file():  # a local cluster's run folder
                state = procs.read_state(folder)
                if state is None or state.get("detached") or not _owner_gone(state.get("owner") or {}):
                    continue
                alive = [p for p in procs.procs_from_state(state) if procs.info_alive(p)]
                if alive:
                    procs.stop(alive)
                from drakit.clusters.local.containerd import cgroup_parent, remove_cgroups
                remove_cgroups(cgroup_parent(folder, ""))  # the pods' cgroups runc made
                for extra in state.get("extra_dirs") or []:
                    extra_path = Path(str(extra))
                    if extra_path.name.startswith("drakit-") and _mine(extra_path):
                        shutil.rmtree(extra_path, ignore_errors=True)
            elif (folder / OWNER_FILE).is_file():  # a fake node's folder
                if not _owner_gone(json.loads((folder / OWNER_FILE).read_text())):
                    continue
            elif (folder / procs.CLUSTER_FILE).is_file():  # tied to a cluster's run folder
                if not _orphaned(folder):
                    continue
            else:
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    if removed and progress is not None:
        progress(f"removed {len(removed)} folder(s) that killed drakit runs left in {root}")
    return removed
