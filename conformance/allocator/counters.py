"""Shared counters and compatibility groups of partitionable devices: what committed allocations
already hold per pool, and reserving a candidate's share of it during the search."""

from __future__ import annotations

from typing import Callable

from ..model.slice import Device
from ..quantity import Quantity
from .constraints import GroupIntersection
from .types import AllocatedState, DeviceID, Pool

CounterUse = dict[str, dict[str, Quantity]]   # counter set -> counter -> amount
Running = dict[str, GroupIntersection]         # counter set -> groups of the devices drawing from it


class CounterBook:
    """Per pool, the counters left after committed allocations and the compatibility groups they
    hold; both are read from the slices once per allocator, as upstream caches them.

    ``dedicated_only``: only dedicated allocations consume counters (the stable implementation
    knows nothing else); otherwise a device with committed shares or capacity counts too.
    """

    def __init__(self, allocated: AllocatedState, *, dedicated_only: bool = False,
                 shared: dict[tuple[int, bool], tuple[Pool, tuple[str, ...], CounterUse]] | None = None) -> None:
        """``shared``: the last result per pool, kept by whoever outlives this book (the slice
        index): reused while the pool's committed devices are the same."""
        self.allocated = allocated
        self.dedicated_only = dedicated_only
        self._last = shared if shared is not None else {}
        self._shared = allocated.shared_devices()
        self._available: dict[tuple[str, str], CounterUse] = {}
        self._baseline: dict[tuple[str, str], Running] = {}

    def in_use(self, dev: DeviceID) -> bool:
        """A committed share or committed capacity on the device."""
        return dev in self.allocated.capacity or dev in self._shared

    def _committed(self, dev: DeviceID) -> bool:
        if self.dedicated_only:
            return dev in self.allocated.devices
        return self.allocated.is_allocated(dev, self._shared)

    def available(self, pool: Pool) -> CounterUse:
        """Counter-set values minus what committed allocations consume."""
        got = self._available.get(pool.key)
        if got is not None:
            return got
        committed = tuple(d.name for s in pool.slices + pool.other_slices for d in s.devices
                          if d.consumes_counters and self._committed((pool.driver, pool.name, d.name)))
        last = self._last.get((id(pool), self.dedicated_only))
        if last is not None and last[0] is pool and last[1] == committed:
            self._available[pool.key] = last[2]
            return last[2]
        avail = {name: dict(counters) for name, counters in pool.counter_sets.items()}
        for s in pool.slices + pool.other_slices:
            for d in s.devices:
                if not d.consumes_counters or not self._committed((pool.driver, pool.name, d.name)):
                    continue
                for c in d.consumes_counters:
                    for name, q in c.counters.items():
                        if c.counter_set in avail and name in avail[c.counter_set]:
                            avail[c.counter_set][name] = avail[c.counter_set][name] - q
        self._available[pool.key] = avail
        self._last[(id(pool), self.dedicated_only)] = (pool, committed, avail)
        return avail

    def reserve(self, pool: Pool, used: CounterUse, device: Device) -> Callable[[], None] | None:
        """Add the device's consumption to ``used`` (this call's, for the pool) if every counter
        set still covers it: returns the undo, or None (and ``used`` unchanged)."""
        avail = self.available(pool)
        for c in device.consumes_counters:
            sets = used.setdefault(c.counter_set, {})
            for name, q in c.counters.items():
                sets[name] = sets[name] + q if name in sets else q

        def release() -> None:
            for c in device.consumes_counters:
                for name, q in c.counters.items():
                    used[c.counter_set][name] = used[c.counter_set][name] - q

        zero = Quantity.from_number(0)
        for set_name, counters in avail.items():
            consumed = used.get(set_name, {})
            for name, q in counters.items():
                if q < consumed.get(name, zero):
                    release()
                    return None
        return release

    def baseline(self, pool: Pool) -> Running:
        """Per counter set, the groups of devices already allocated in the pool."""
        got = self._baseline.get(pool.key)
        if got is not None:
            return got
        out: Running = {}
        for s in pool.slices + pool.other_slices:
            for d in s.devices:
                if not self.allocated.is_allocated((pool.driver, pool.name, d.name), self._shared):
                    continue
                for c in d.consumes_counters:
                    groups = frozenset(c.compatibility_groups)
                    out[c.counter_set] = out.get(c.counter_set, GroupIntersection()).add(groups)
        self._baseline[pool.key] = out
        return out

    def consume_groups(self, pool: Pool, running: Running, device: Device) -> Callable[[], None] | None:
        """Fold the device's groups into ``running`` (this call's, for the pool) if they are
        compatible with every counter set's devices so far: returns the undo, or None."""
        baseline = self.baseline(pool)
        saved: list[tuple[str, GroupIntersection | None]] = []

        def restore() -> None:
            for name, prev in reversed(saved):
                if prev is None:
                    running.pop(name, None)
                else:
                    running[name] = prev

        for c in device.consumes_counters:
            existed = running.get(c.counter_set)
            cur = existed if existed is not None else baseline.get(c.counter_set, GroupIntersection())
            groups = frozenset(c.compatibility_groups)
            if not cur.admits(groups):
                restore()
                return None
            saved.append((c.counter_set, existed))
            running[c.counter_set] = cur.add(groups)
        return restore
