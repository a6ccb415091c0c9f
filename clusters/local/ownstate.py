"""A local cluster's run folder and its ``state.json``, believed only as far as they are proven
drakit's (:mod:`drakit.clusters.trust`): what ``drakit cluster down``, a stale ``--run-dir`` and
the sweep of killed runs stop and remove.

- The run folder is this user's own real folder that no one else may write to; its state and
  marker are regular files of this user, read without following a link.
- A process the state lists is stopped only when proven drakit's for that run folder.
- A folder the state lists outside the run folder (``extra_dirs``) is removed only when it is
  an own mkdtemp folder directly in a temp folder whose tie record names the run folder.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.clusters import trust
from drakit.clusters.local import procs

MARKER = ".drakit-local-cluster"
#: mkdtemp prefixes of the folders a run makes outside its run folder (tied to it).
TIED_PREFIXES = ("drakit-n-", "drakit-cg-")


@dataclass
class RunState:
    state: dict[str, Any]
    procs: list[procs.ProcInfo] = field(default_factory=list)  # alive and proven drakit's
    unproven: list[procs.ProcInfo] = field(default_factory=list)  # alive, not proven: never signalled
    tied: list[Path] = field(default_factory=list)  # extra folders proven tied to the run folder


def folder_problem(run_dir: Path) -> str | None:
    """Why *run_dir* (existing) is not a folder drakit may act in: a link, not a folder, another
    user's, or writable by others; None when it is fine."""
    try:
        st = os.lstat(run_dir)
    except OSError as exc:
        return f"{run_dir}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{run_dir} is a symbolic link; drakit never acts through one"
    if not stat.S_ISDIR(st.st_mode):
        return f"{run_dir} is not a folder"
    if st.st_uid != os.geteuid():
        return f"{run_dir} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"{run_dir} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def user_temp_folder(base: Path) -> Path:
    """``<temp>/drakit-<uid>``, the per-user folder of the default run folder: made 0700 if absent,
    else it must be this user's own 0700 folder (another user may have made it first in a shared
    ``/tmp``); ValueError with the one line else."""
    folder = base / f"drakit-{os.geteuid()}"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    if not trust.own_folder(folder):
        raise ValueError(f"{folder} is not this user's own private folder ({folder_problem(folder) or 'mode is not 0700'}); "
                         f"remove it or give --run-dir")
    return folder


def default_base() -> Path:
    return Path(tempfile.gettempdir())


def born(run_dir: Path) -> float | None:
    """When the run began using *run_dir*: the folder's birth time, else (a file system that does not
    keep one) when its marker was written, before any of its processes started."""
    made = trust.birth_time(run_dir)
    if made is not None:
        return made
    try:
        st = os.lstat(run_dir / MARKER)
    except OSError:
        return None
    return st.st_mtime if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() else None


def read_run_state(run_dir: Path, roots: list[Path] | None = None) -> RunState | None:
    """*run_dir*'s state, split into what is proven drakit's and what is not; None when there is
    no state drakit may believe (no folder of this user's, no state file of its own)."""
    if folder_problem(run_dir) is not None:
        return None
    raw = trust.read_own(run_dir, procs.STATE_FILE)
    try:
        state = json.loads(raw) if raw is not None else None
    except ValueError:
        state = None
    if not isinstance(state, dict):
        return None
    from drakit.clusters.sockdir import fallback_roots
    out = RunState(state)
    out.tied = tied_dirs(state, run_dir, roots if roots is not None else fallback_roots())
    when, programs = born(run_dir), trust.drakit_programs()
    for p in procs.procs_from_state(state):
        if procs.info_alive(p):
            proven = trust.proven(p.pid, p.start_ticks, [run_dir, *out.tied], when, programs)
            (out.procs if proven else out.unproven).append(p)
    return out


def tied_run(folder: Path) -> Path | None:
    """The run folder an own tied *folder* names in its record (None when unreadable or not
    this user's)."""
    raw = trust.read_own(folder, procs.CLUSTER_FILE)
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    run_dir = data.get("run_dir") if isinstance(data, dict) else None
    return Path(run_dir) if isinstance(run_dir, str) and os.path.isabs(run_dir) and "\0" not in run_dir else None


def tied_dirs(state: dict[str, Any], run_dir: Path, roots: list[Path]) -> list[Path]:
    """The folders *state* lists outside *run_dir* that are provably its own: own folders made by
    mkdtemp directly in a temp folder, whose tie record names *run_dir*. Any other entry is ignored."""
    out = []
    extras = state.get("extra_dirs")
    for extra in extras if isinstance(extras, list) else []:
        path = Path(str(extra))
        if (trust.temp_child(path, roots) and any(trust.own_folder(path, p) for p in TIED_PREFIXES)
                and tied_run(path) == run_dir):
            out.append(path)
    return out


def checked_state(run_dir: Path, default: bool, say: Callable[[str], None]) -> RunState | None:
    """*run_dir*'s state as far as it is proven drakit's (None: no state, or no folder); ValueError
    with the one line when the run folder, or (*default*) the per-user folder it is in, is not
    this user's own. What its state lists and drakit cannot prove is said through *say*."""
    if default:
        user_temp_folder(run_dir.parent.parent)
    if not os.path.lexists(run_dir):
        return None
    if (problem := folder_problem(run_dir)) is not None:
        raise ValueError(f"run dir {problem}: drakit acts only in its own folders; give another --run-dir")
    run = read_run_state(run_dir)
    if run is not None and run.unproven:
        say(f"{run_dir}: left alone {len(run.unproven)} live process(es) its state lists that drakit cannot prove "
            f"it started (pid {', '.join(str(p.pid) for p in run.unproven)})")
    return run


def wipe(run_dir: Path) -> None:
    """Remove what is in *run_dir*, never following a link out of it."""
    import shutil
    for child in run_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
