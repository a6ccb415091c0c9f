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

Nothing is believed because a record says so (:mod:`drakit.clusters.trust`): a folder is swept only
when it is this user's own (seen with ``lstat``, mode 0700, a name mkdtemp made, directly in the
temp folder scanned), its records are regular files of this user read without following a link,
a process is stopped only when it is proven one drakit started for that run folder, and a folder a
state names outside the run folder only when it is itself such a folder tied back to that run. A
shared ``/tmp`` with other users' ``drakit-*`` files in it is the normal case: they are left alone.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from drakit.clusters import trust

OWNER_FILE = ".drakit-owner"
RUN_PREFIX = "drakit-local-"  # a local cluster's run folder (mkdtemp)
#: The mkdtemp prefixes of the folders :func:`claim` marks: fake nodes' sockets, a driver's node
#: sockets, the parallel workers' lock, the kubeconfig's keys.
OWNER_PREFIXES = ("drakit-", "drakit-drv-", "drakit-lock-", "drakit-kc-")


def claim(folder: Path) -> None:
    """Mark *folder* (made by mkdtemp with one of :data:`OWNER_PREFIXES`) as this process's, so a
    later run can tell when it was left behind."""
    from drakit.clusters.local import procs
    if not any(trust.own_folder(folder, p) for p in OWNER_PREFIXES):
        raise ValueError(f"{folder} is not a private mkdtemp folder named with one of {OWNER_PREFIXES}: "
                         f"the sweep would never remove it")
    (folder / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "start_ticks": procs.start_ticks(os.getpid())}))


def _record(folder: Path, name: str) -> Any:
    raw = trust.read_own(folder, name)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _orphaned(folder: Path) -> bool:
    """A tied folder whose cluster's run folder is gone and that no live process names, nor its
    run folder (a detached cluster whose run folder someone removed keeps its nodes running: left
    alone); the cgroups of its pods are removed with it."""
    from drakit.clusters.local.containerd import cgroup_parent, remove_cgroups
    from drakit.clusters.local.ownstate import MARKER, tied_run
    run_dir = tied_run(folder)
    if run_dir is None or os.path.lexists(run_dir / MARKER):
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


def _owner_gone(owner: object) -> bool:
    from drakit.clusters.local import procs
    if not isinstance(owner, dict):
        return False
    pid, ticks = owner.get("pid"), owner.get("start_ticks")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    return not procs.is_alive(pid, ticks if isinstance(ticks, int) else None)


def sweep(tmp: Path | None = None, progress: Callable[[str], None] | None = None) -> list[Path]:
    """Remove the folders killed drakit runs left in *tmp* (default: the temp dir, and the short
    folders drakit puts Unix sockets in when the temp dir is too long for them); return them."""
    from drakit.clusters.sockdir import fallback_roots
    roots = fallback_roots() if tmp is None else [Path(tmp)]
    return [p for root in roots for p in _sweep(root, [*roots, *fallback_roots()], progress)]


def _sweep(root: Path, roots: Sequence[Path], progress: Callable[[str], None] | None) -> list[Path]:
    removed: list[Path] = []
    kept: list[str] = []
    try:
        entries = [root / e.name for e in os.scandir(root) if e.name.startswith("drakit-")]
    except OSError:
        return removed
    for folder in sorted(entries):
        try:
            if not _swept(folder, roots, kept):
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    if removed and progress is not None:
        progress(f"removed {len(removed)} folder(s) that killed drakit runs left in {root}")
    if kept and progress is not None:
        progress(f"left {len(kept)} folder(s) of killed runs in {root}: {'; '.join(kept)}")
    return removed


def _swept(folder: Path, roots: Sequence[Path], kept: list[str]) -> bool:
    """Whether *folder* (an entry ``drakit-*`` of a temp folder) is a killed run's, and everything
    of it that could be removed or stopped was."""
    from drakit.clusters.local import ownstate, procs
    if trust.own_folder(folder, RUN_PREFIX) and trust.read_own(folder, ownstate.MARKER) is not None:  # a run folder
        run = ownstate.read_run_state(folder, list(roots))
        if run is None or run.state.get("detached") or not _owner_gone(run.state.get("owner")):
            return False
        if run.procs:
            procs.stop(run.procs)
        if run.unproven and _named_by_a_process(str(folder), *map(str, run.tied)):
            kept.append(f"{folder.name}: a process drakit cannot prove it started still names it")
            return False
        from drakit.clusters.local.containerd import cgroup_parent, remove_cgroups
        remove_cgroups(cgroup_parent(folder, ""))  # the pods' cgroups runc made
        for extra in run.tied:
            shutil.rmtree(extra, ignore_errors=True)
        return True
    if any(trust.own_folder(folder, p) for p in OWNER_PREFIXES):
        owner = _record(folder, OWNER_FILE)  # a fake node's folder: sockets, checkpoints, no process
        return owner is not None and _owner_gone(owner)
    if any(trust.own_folder(folder, p) for p in ownstate.TIED_PREFIXES):  # tied to a run folder
        return _orphaned(folder)
    return False
