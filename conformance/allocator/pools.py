"""Pool gathering: which slices a node sees, which pools are complete, invalid or stale, and
the order in which their devices are searched.

The ``stable`` implementation gathers differently from ``incubating``/``experimental`` (see
:meth:`Features.channel`): it keeps every slice with shared counters whatever its node
selection, and it searches a pool's slices in the order they were listed instead of by name.
Its pool order is Go map order (random) upstream; here it is the sorted one, one of the
orders upstream may produce.
"""

from __future__ import annotations

from typing import Sequence

from ..model.slice import ResourceSlice, node_matches
from ..quantity import Quantity
from .nodeview import NodeView
from .types import AllocationError, CandidateDevice, Features, NodeInfo, Pool


class SliceIndex:
    """All slices of a cluster, split the way the allocator reads them.

    It also remembers each node's gathered pools and search order: slices never change under an
    index, so a caller that keeps the index while the slices stay the same (the reference
    scheduler does) pays for pool gathering once per node, not once per scheduling cycle.
    """

    def __init__(self, slices: Sequence[ResourceSlice]) -> None:
        self._views: dict[tuple[str, tuple[tuple[str, str], ...], Features, str], NodeView] = {}
        # node name, channel -> (features, labels, view) of the last lookup: the common case of
        # one node asked for again with the same labels costs no sorting.
        self._last: dict[tuple[str, str], tuple[Features, dict[str, str], NodeView]] = {}
        self._entry_ids: dict[tuple[object, ...], int] = {}
        # per pool, the counters its committed devices leave (see CounterBook.available)
        self.counters: dict[tuple[int, bool], tuple[Pool, tuple[str, ...], dict[str, dict[str, Quantity]]]] = {}
        self.all: list[ResourceSlice] = list(slices)
        self.position: dict[int, int] = {id(s): i for i, s in enumerate(self.all)}
        self.node_local: dict[str, list[ResourceSlice]] = {}
        self.shared: list[ResourceSlice] = []
        self.by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
        for s in slices:
            if s.node_name:
                self.node_local.setdefault(s.node_name, []).append(s)
            else:
                self.shared.append(s)
            self.by_pool.setdefault((s.driver, s.pool.name), []).append(s)

    def entry_id(self, key: tuple[object, ...]) -> int:
        """A small number standing for a request entry's :attr:`~.plan.Entry.key` (what the
        views cache per entry is kept under)."""
        got = self._entry_ids.get(key)
        if got is None:
            got = self._entry_ids[key] = len(self._entry_ids)
        return got

    def view(self, node: NodeInfo, features: Features, channel: str = "incubating") -> NodeView:
        """The node's gathered pools and search order (see :class:`~.nodeview.NodeView`)."""
        last = self._last.get((node.name, channel))
        if last is not None and (last[0] is features or last[0] == features) and last[1] == node.labels:
            return last[2]
        key = (node.name, tuple(sorted(node.labels.items())), features, channel)
        hit = self._views.get(key)
        if hit is None:
            pools = gather_pools(self, node, features, channel)
            hit = NodeView(pools, candidates(pools))
            self._views[key] = hit
        self._last[(node.name, channel)] = (features, dict(node.labels), hit)
        return hit


def uses_compatibility_groups(s: ResourceSlice) -> bool:
    return any(c.compatibility_groups for d in s.devices for c in d.consumes_counters)


def _slice_relevant(s: ResourceSlice, node: NodeInfo) -> bool:
    try:
        if s.node_name or s.all_nodes or s.node_selector is not None:
            return node_matches(node.name, dict(node.labels), want_node=s.node_name, all_nodes=s.all_nodes,
                                selector=s.node_selector)
        if s.per_device_node_selection:
            return any(node_matches(node.name, dict(node.labels), want_node=d.node_name, all_nodes=d.all_nodes,
                                    selector=d.node_selector) for d in s.devices)
    except ValueError as exc:  # pragma: no cover - selectors are validated at admission
        raise AllocationError(f"gather pool information: failed to perform node selection for slice {s.name}: {exc}") from None
    return False


def gather_pools(index: SliceIndex, node: NodeInfo, features: Features, channel: str = "incubating") -> list[Pool]:
    stable = channel == "stable"
    collected: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in index.all if stable else index.node_local.get(node.name, []) + index.shared:
        if not features.partitionable_devices and (s.per_device_node_selection or s.shared_counters):
            continue
        if not features.compatibility_groups and uses_compatibility_groups(s):
            continue
        if not (stable and s.shared_counters) and not _slice_relevant(s, node):
            continue
        key = (s.driver, s.pool.name)
        have = collected.get(key)
        if have is None or s.pool.generation > have[0].pool.generation:
            collected[key] = [s]
        elif s.pool.generation == have[0].pool.generation:
            have.append(s)
    pools: list[Pool] = []
    for key, got in collected.items():
        gen = got[0].pool.generation
        want = got[0].pool.resource_slice_count
        others: list[ResourceSlice] = []
        if len(got) != want:
            everything = index.by_pool.get(key, [])
            if any(s.pool.generation > gen for s in everything):
                continue  # the node's view is stale: the pool is dropped silently
            same = [s for s in everything if s.pool.generation == gen]
            if not features.compatibility_groups:
                same = [s for s in same if not uses_compatibility_groups(s)]
            if len(same) != want:
                pools.append(Pool(key[0], key[1], gen, incomplete=True))
                continue
            mine = {id(s) for s in got}
            others = [s for s in same if id(s) not in mine]
        pools.append(_build_pool(key, gen, got, others, features, index if stable else None))
    pools.sort(key=lambda p: (p.has_binding_conditions and not stable, p.driver.encode(), p.name.encode()))
    return pools


def _build_pool(key: tuple[str, str], gen: int, targeting: list[ResourceSlice], others: list[ResourceSlice],
                features: Features, listed: SliceIndex | None = None) -> Pool:
    """``listed``: keep the slices in the order of that index (stable) instead of by name."""
    pool = Pool(key[0], key[1], gen)
    if listed is not None:
        order = listed.position
        targeting = sorted(targeting, key=lambda s: order[id(s)])
        others = sorted(others, key=lambda s: order[id(s)])
    else:
        targeting = sorted(targeting, key=lambda s: s.name.encode())
        others = sorted(others, key=lambda s: s.name.encode())
    counter_slices = [s for s in targeting + others if s.shared_counters] if features.partitionable_devices else []
    pool.slices = [s for s in targeting if not (features.partitionable_devices and s.shared_counters)]
    pool.other_slices = [s for s in others if not (features.partitionable_devices and s.shared_counters)]
    seen: set[str] = set()
    for s in pool.slices:
        for d in s.devices:
            if d.name in seen:
                pool.invalid = f"duplicate device name {d.name}"
            seen.add(d.name)
            if d.binding_conditions:
                pool.has_binding_conditions = True
    if not features.partitionable_devices or pool.invalid:
        return pool
    for s in counter_slices:
        for cs in s.shared_counters:
            if cs.name in pool.counter_sets:
                pool.invalid = f"duplicate counter set name {cs.name}"
                return pool
            pool.counter_sets[cs.name] = dict(cs.counters)
    for s in pool.slices + pool.other_slices:
        for d in s.devices:
            for c in d.consumes_counters:
                have = pool.counter_sets.get(c.counter_set)
                if have is None:
                    pool.invalid = f"counter set {c.counter_set} not found"
                    return pool
                for name in c.counters:
                    if name not in have:
                        pool.invalid = f"counter {name} not found in counter set {c.counter_set}"
                        return pool
    return pool


def candidates(pools: list[Pool]) -> list[CandidateDevice]:
    """Every device of every usable pool, in search order (incomplete and invalid pools skipped)."""
    out: list[CandidateDevice] = []
    for pi, pool in enumerate(pools):
        if pool.incomplete or pool.invalid:
            continue
        for si, s in enumerate(pool.slices):
            for di, d in enumerate(s.devices):
                out.append(CandidateDevice(d, s, (pool.driver, pool.name, d.name), pi, si, di))
    return out
