"""Who else runs cases on this cluster at the same time, and how this process keeps apart.

- ``-n N`` against one cluster: the xdist workers of this process (``clusterlock``, ``flock``
  in a folder the controller made), each worker's cluster-scoped names under its prefix
  (``gw1-``);
- ``--drakit-shard i/N`` with N > 1: the other shards of the run, anywhere (``leaselock``, a
  Lease on the cluster: ``--drakit-shard-lock NAMESPACE/NAME``, else ``$DRAKIT_SHARD_LOCK``,
  else ``default/drakit-shard-lock``), the shard's prefix (``s2-``) before the worker's.

Both together hold both locks, the process's first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .base import HarnessError
from .names import worker_prefix


class Locks:
    """Several locks taken in order and released in reverse, as one."""

    def __init__(self, locks: list[Any]) -> None:
        self.locks = locks
        self.held: str | None = None

    def acquire(self, exclusive: bool) -> None:
        for lock in self.locks:
            lock.acquire(exclusive)
        self.held = "exclusive" if exclusive else "shared"

    def release(self) -> None:
        for lock in reversed(self.locks):
            lock.release()
        self.held = None

    def close(self) -> None:
        for lock in reversed(self.locks):
            lock.close()


def shared_cluster(config: Any, api: Any, run_id: str) -> tuple[str, Any]:
    """(prefix of this process's cluster-scoped names, the lock its cases hold or None)."""
    locks: list[Any] = []
    worker = None
    lock_dir = (getattr(config, "workerinput", None) or {}).get("drakit_lock_dir")
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0) > 1 and lock_dir:
        from .clusterlock import ClusterLock
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        locks.append(ClusterLock(Path(lock_dir)))
    shard_text = config.getoption("--drakit-shard", None)
    index = None
    if shard_text:
        from drakit.conformance.shards import parse_shard
        shard = parse_shard(shard_text)
        if shard.count > 1:
            from .leaselock import DEFAULT_WHERE, LeaseLock, parse_where
            where = config.getoption("--drakit-shard-lock", None) or os.environ.get("DRAKIT_SHARD_LOCK") or DEFAULT_WHERE
            try:
                parse_where(where)
            except ValueError as exc:
                raise HarnessError(f"--shard-lock: {exc}") from None
            index = shard.index
            locks.append(LeaseLock(api, where, holder=f"s{shard.index}-{worker or 'main'}-{run_id}"))
    prefix = worker_prefix(worker, index)
    if not locks:
        return prefix, None
    return prefix, locks[0] if len(locks) == 1 else Locks(locks)
