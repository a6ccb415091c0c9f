"""What one node sees of the cluster's slices, with what never changes about it worked out once.

A :class:`NodeView` is kept by the :class:`~.pools.SliceIndex` per node, feature set and
upstream implementation. Next to the pools and the search order it remembers, per selector
set (a class's selectors plus a request's), the candidates those selectors accept, and per
capacity request what it would consume of each device. Slices and device attributes do not
change under an index, so these hold for every allocator and claim that uses the index; what
does change (committed devices, counters, capacity) is never cached here.

A selector set whose evaluation fails on any of the node's devices is remembered as ``None``:
the search then evaluates device by device as upstream does, and fails where upstream fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cel import CelCompileError, CelRuntimeError
from ..quantity import Quantity
from . import capacity as cap
from . import selectable as sel
from .plan import Entry
from .selectors import SelectorCache
from .types import CandidateDevice, DeviceID, Features, NodeInfo, Pool

Consumed = dict[str, Quantity]  # capacity name -> amount


@dataclass(slots=True, eq=False)
class NodeView:
    pools: list[Pool]
    order: list[CandidateDevice]
    by_key: dict[tuple[str, str], Pool] = field(default_factory=dict)
    by_pool: dict[int, list[CandidateDevice]] = field(default_factory=dict)  # pool index -> its candidates
    _matching: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[CandidateDevice, ...] | None] = field(
        default_factory=dict)
    invalid: bool = False  # some pool is invalid
    _by_id: dict[DeviceID, CandidateDevice] = field(default_factory=dict)
    _consumed: dict[tuple[object, DeviceID], tuple[Consumed | None, bool] | cap.CapacityError] = field(
        default_factory=dict)
    _fitting: dict[int, frozenset[DeviceID] | None] = field(default_factory=dict)  # by SliceIndex.entry_id

    def __post_init__(self) -> None:
        self.by_key = {p.key: p for p in self.pools}
        self.invalid = any(p.invalid for p in self.pools)
        self._by_id = {c.id: c for c in self.order}
        for c in self.order:
            self.by_pool.setdefault(c.pool_index, []).append(c)

    def matching(self, class_selectors: tuple[str, ...], selectors: tuple[str, ...], node: NodeInfo,
                 features: Features, stable: bool, cel: SelectorCache) -> tuple[CandidateDevice, ...] | None:
        """The candidates, in search order, that every selector accepts (and that the feature set
        lets the search see at all), or None when a selector fails on one of them."""
        key = (class_selectors, selectors)
        try:
            return self._matching[key]
        except KeyError:
            pass
        got: tuple[CandidateDevice, ...] | None
        try:
            got = tuple(c for c in self.order if _selectable(c, class_selectors, selectors, node, features, stable, cel))
        except (CelCompileError, CelRuntimeError, ValueError):
            got = None
        self._matching[key] = got
        return got

    def consumption(self, capacity_key: object, spec_capacity: dict[str, Quantity] | None, cand: CandidateDevice,
                    fractional: bool) -> tuple[Consumed | None, bool]:
        """:func:`.capacity.consumption` of the request on the device, and whether that fits the
        device with nothing else on it; computed once (its :class:`~.capacity.CapacityError` is
        raised every time)."""
        key = (capacity_key, cand.id)
        try:
            got = self._consumed[key]
        except KeyError:
            try:
                consumed = cap.consumption(spec_capacity, cand.device.capacity, fractional)
                got = (consumed, consumed is not None and cap.fits(consumed, cand.device.capacity, None, None))
            except cap.CapacityError as exc:
                got = exc
            self._consumed[key] = got
        if isinstance(got, cap.CapacityError):
            raise got
        return got

    def fitting(self, e: Entry, key: int, node: NodeInfo, features: Features, stable: bool,
                cel: SelectorCache) -> frozenset[DeviceID] | None:
        """The devices an entry could take on an empty node: its selectors accept them and its
        capacity request fits them. None when a selector or a capacity fails on one of them.
        ``key``: the entry's :meth:`~.pools.SliceIndex.entry_id`."""
        try:
            return self._fitting[key]
        except KeyError:
            pass
        got: frozenset[DeviceID] | None = None
        matching = self.matching(e.class_selectors, e.selectors, node, features, stable, cel)
        if matching is not None:
            if not features.consumable_capacity:
                got = frozenset(c.id for c in matching)
            else:
                try:
                    got = frozenset(c.id for c in matching
                                    if self.consumption(e.capacity_key, e.capacity, c, features.fractional_capacity)[1])
                except cap.CapacityError:
                    got = None
        self._fitting[key] = got
        return got

    def fits_committed(self, e: Entry, dev: DeviceID, committed: Consumed) -> bool:
        """Whether the entry's consumption still fits the device next to committed shares."""
        consumed, _ = self._consumed[(e.capacity_key, dev)]  # type: ignore[misc]
        cand = self._by_id[dev]
        return cap.fits(consumed, cand.device.capacity, committed, None)  # type: ignore[arg-type]


def _selectable(c: CandidateDevice, class_selectors: tuple[str, ...], selectors: tuple[str, ...], node: NodeInfo,
                features: Features, stable: bool, cel: SelectorCache) -> bool:
    d = c.device
    if not sel.gate_allows(c, features):
        return False
    multi = d.allow_multiple_allocations and not stable
    driver = c.slice.driver
    for expr in class_selectors:
        if not cel.evaluate(expr, d, driver, multi):
            return False
    for expr in selectors:
        if not cel.evaluate(expr, d, driver, multi):
            return False
    return sel.on_node(c, node)
