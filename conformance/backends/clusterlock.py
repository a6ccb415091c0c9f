"""Cases of parallel workers on one shared cluster: side by side, or one alone.

Every xdist worker of a run against one cluster (``-n N --kubeconfig K``) holds this lock while
a case runs: shared for a case whose cluster-scoped objects carry the worker's prefix
(``names``), exclusive for a cluster-wide one (``names.cluster_wide``), which then runs with no
other case on the cluster. It is a reader-writer lock over two ``flock`` files in a folder the
xdist controller makes for the run (``--drakit-lock-dir``, given to the workers, removed at the
end): a turnstile everyone passes, held by a waiting exclusive case so that no new shared one
overtakes it, and the lock itself. A killed worker's locks go with its process.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class ClusterLock:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._fds: tuple[int, int] | None = None
        self.held: str | None = None  # "shared" | "exclusive"

    def _open(self) -> tuple[int, int]:
        if self._fds is None:
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)  # never a link
            self._fds = (os.open(self.folder / "turnstile", flags, 0o600), os.open(self.folder / "cluster", flags, 0o600))
        return self._fds

    def acquire(self, exclusive: bool) -> None:
        turnstile, lock = self._open()
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        self.held = "exclusive" if exclusive else "shared"

    def release(self) -> None:
        if self.held is not None and self._fds is not None:
            fcntl.flock(self._fds[1], fcntl.LOCK_UN)
        self.held = None

    def close(self) -> None:
        self.release()
        if self._fds is not None:
            for fd in self._fds:
                os.close(fd)
            self._fds = None
