"""The ``--out`` folder of ``drakit run`` and ``drakit report``: checked before anything runs,
locked for the run, and written through :mod:`drakit.reports.safefs` only (never through a link).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, Any

from drakit.reports.safefs import UnsafePath, check_path, open_lock, preflight

#: What a run writes into ``--out`` (each must be a regular file or absent before the run).
RUN_FILES = ("results.json", "junit.xml", "report.html")
LOCK_FILE = ".drakit-run.lock"


def out_folder(out: Path, names: tuple[str, ...] = RUN_FILES, command: str = "drakit") -> bool:
    """Create *out* before anything runs and check the files drakit will write there; False (and
    the one line) when a name is a link, a folder, not a regular file, or the folder is not
    writable."""
    try:
        preflight(check_path(out, "--out"), names, "--out")
    except UnsafePath as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return False
    return True


def lock_out(out: Path) -> IO[str] | None:
    """Lock *out* for this run (an open file holding ``flock``; the kernel drops it when the
    process ends, however it ends); None, and the one line, when another run holds it or the
    lock file is a link or not a regular file."""
    import fcntl
    try:
        fd = open_lock(out, LOCK_FILE, "--out")
    except UnsafePath as exc:
        print(f"drakit run: {exc}", file=sys.stderr)
        return None
    lock: Any = os.fdopen(fd, "r+", encoding="ascii", errors="replace")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = lock.read(32).strip()
        lock.close()
        print(f"drakit run: --out {out} is in use by another drakit run{f' (pid {holder})' if holder.isdigit() else ''}: "
              f"wait for it or give another --out", file=sys.stderr)
        return None
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    return lock  # type: ignore[no-any-return]
