"""Per-claim locks: calls for the same claim run one at a time, calls for different claims in
parallel. A claim's lock exists while a call holds or waits for it, so the table stays as small
as the calls in flight."""

from __future__ import annotations

import threading
from typing import Any


class ClaimLocks:
    """``with locks.hold(uid):`` around everything a call does to one claim."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, list[Any]] = {}  # uid -> [lock, holders and waiters]

    def hold(self, uid: str) -> _Held:
        return _Held(self, uid)


class _Held:
    """One claim's lock, held in a ``with`` block (a class, not a generator context manager:
    this is on every call's path)."""

    __slots__ = ("locks", "uid", "entry")

    def __init__(self, locks: ClaimLocks, uid: str) -> None:
        self.locks = locks
        self.uid = uid

    def __enter__(self) -> None:
        locks = self.locks
        with locks._guard:
            entry = locks._locks.get(self.uid)
            if entry is None:
                entry = locks._locks[self.uid] = [threading.Lock(), 0]
            entry[1] += 1
        self.entry = entry
        entry[0].acquire()

    def __exit__(self, *exc: object) -> None:
        entry, locks = self.entry, self.locks
        entry[0].release()
        with locks._guard:
            entry[1] -= 1
            if entry[1] == 0:
                del locks._locks[self.uid]
