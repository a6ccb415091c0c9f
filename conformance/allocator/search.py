"""The reference structured allocator: upstream's depth-first, first-solution search.

One :class:`Allocator` per scheduling cycle (the cluster state it was built from does not
change); :meth:`Allocator.allocate` is called per node with the pod's unallocated claims and
returns one result per claim, ``None`` when the node cannot satisfy them, or raises
:class:`AllocationError` (fatal) / :class:`NodeAllocationError` (this node only).
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..cel import CelCompileError, CelDevice, CelRuntimeError, compile_selector, encode_device, evaluate_derived
from ..model.attributes import AttributeValue
from ..quantity import Quantity
from ..model.claim import DeviceClass, DeviceRequestSpec, ResourceClaim
from ..model.slice import Device, ResourceSlice, node_matches
from . import capacity as cap
from .constraints import ConstraintTracker, GroupIntersection, lookup_attribute
from .pools import Pool, SliceIndex
from .results import build_configs, build_node_selector
from .types import (ALLOCATION_LIMIT, AllocatedState, AllocationError, AllocationResult, CandidateDevice, DeviceID,
                    DeviceResult, Features, NodeAllocationError, NodeInfo, device_id_str)

OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"  # what a node declares in status.declaredFeatures
CEL_HINT = (". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
            "for optional fields")


class _MaxSize(Exception):
    """Internal: the claim would exceed 32 devices on this branch."""


@dataclass(slots=True)
class _RequestData:
    claim: int
    request_name: str       # base request name
    sub_name: str | None    # subrequest name for firstAvailable entries
    spec: DeviceRequestSpec
    device_class: DeviceClass
    parent: bool            # part of a firstAvailable list
    num_devices: int = 0
    all_devices: list[CandidateDevice] | None = None
    derived: dict[str, str] = field(default_factory=dict)  # attribute name -> CEL expression

    @property
    def result_name(self) -> str:
        return f"{self.request_name}/{self.sub_name}" if self.sub_name else self.request_name

    @property
    def message_name(self) -> str:
        return self.sub_name or self.request_name


class SelectorCache:
    """CEL results per (expression, device); device attributes do not change during a run, so the
    cache may outlive one allocator. Encoded CEL inputs are cached per device too."""

    def __init__(self) -> None:
        self._encoded: dict[int, tuple[Device, object]] = {}
        self._results: dict[tuple[str, int], object] = {}

    def encoded(self, device: Device, driver: str) -> object:
        hit = self._encoded.get(id(device))
        if hit is None or hit[0] is not device:
            enc = encode_device(CelDevice(driver, device.attributes,
                                          {k: c.value for k, c in device.capacity.items()},
                                          device.allow_multiple_allocations))
            hit = (device, enc)
            self._encoded[id(device)] = hit
        return hit[1]

    def derived(self, expression: str, device: Device, driver: str) -> AttributeValue:
        key = ("derived:" + expression, id(device))
        got = self._results.get(key)
        if got is None:
            try:
                got = evaluate_derived(expression, self.encoded(device, driver))  # type: ignore[arg-type]
            except CelRuntimeError as exc:
                got = exc
            self._results[key] = got  # type: ignore[assignment]
        if isinstance(got, CelRuntimeError):
            raise got
        return got  # type: ignore[return-value]

    def evaluate(self, expression: str, device: Device, driver: str, allow_multiple: bool) -> bool:
        key = (expression, id(device))
        got = self._results.get(key)
        if got is None:
            selector = compile_selector(expression)  # CelCompileError propagates
            try:
                got = selector.matches(self.encoded(device, driver))
            except CelRuntimeError as exc:
                got = exc
            self._results[key] = got
        if isinstance(got, CelRuntimeError):
            raise got
        return got


@dataclass
class _CallState:
    """Mutable state of one allocate() call."""

    allocating: dict[DeviceID, set[int]] = field(default_factory=dict)     # device -> claims allocating it
    allocating_capacity: dict[DeviceID, dict[str, Quantity]] = field(default_factory=dict)
    counters: dict[tuple[str, str], dict[str, dict[str, Quantity]]] = field(default_factory=dict)
    groups: dict[tuple[str, str], dict[str, GroupIntersection]] = field(default_factory=dict)
    results: list[list[tuple[DeviceResult, CandidateDevice]]] = field(default_factory=list)
    selectable: dict[tuple[int, int, int, int], bool] = field(default_factory=dict)
    chosen_sub: dict[tuple[int, int], int] = field(default_factory=dict)
    steps: int = 0


class Allocator:
    def __init__(self, features: Features, classes: Mapping[str, DeviceClass],
                 slices: Sequence[ResourceSlice] | SliceIndex, allocated: AllocatedState | None = None, *,
                 share_ids: Callable[[], str] | None = None, cel_cache: SelectorCache | None = None) -> None:
        self.features = features
        self.classes = classes
        self.index = slices if isinstance(slices, SliceIndex) else SliceIndex(slices)
        self.allocated = allocated or AllocatedState()
        self.share_ids = share_ids or (lambda: str(uuid.uuid4()))
        self.cel = cel_cache or SelectorCache()
        self._available: dict[tuple[str, str], dict[str, dict[str, Quantity]]] = {}
        self._group_baseline: dict[tuple[str, str], dict[str, GroupIntersection]] = {}
        self._shared = self.allocated.shared_devices()
        self.last_steps = 0

    # -- public ---------------------------------------------------------------------------

    def allocate(self, node: NodeInfo, claims: Sequence[ResourceClaim]) -> list[AllocationResult] | None:
        pools, order = self.index.view(node, self.features)
        self._pools = pools
        self._node = node
        self._claims = claims
        self._order = order
        self._by_pool = {p.key: p for p in pools}
        st = _CallState(results=[[] for _ in claims])
        self._st = st
        self._requests: dict[tuple[int, int, int], _RequestData] = {}
        self._constraints: list[list[ConstraintTracker]] = []
        for ci, claim in enumerate(claims):
            self._prepass(ci, claim)
        try:
            done = self._allocate_one(0, 0, 0, 0, False, 0)
        except _MaxSize:
            raise AllocationError("allocation max size exceeded") from None
        finally:
            self.last_steps = st.steps
        if not done:
            if any(p.invalid for p in pools):
                raise NodeAllocationError("invalid resource pools were encountered")
            return None
        return [self._build_result(ci, claim) for ci, claim in enumerate(claims)]

    # -- pre-pass ---------------------------------------------------------------------------

    def _prepass(self, ci: int, claim: ResourceClaim) -> None:
        f = self.features
        min_devices = 0  # devices the claim needs at least, request by request
        for ri, req in enumerate(claim.spec.requests):
            where = f"claim {claim.ref}, request {req.name}"
            if req.first_available and not f.prioritized_list:
                raise AllocationError(f"{where}: has subrequests, but the DRAPrioritizedList feature is disabled")
            specs = [req.exactly] if req.exactly is not None else list(req.first_available)
            counts: list[int] = []
            for si, spec in enumerate(specs):
                assert spec is not None
                sub_name = spec.name if req.first_available else None
                sub_where = f"claim {claim.ref}, {'subrequest' if sub_name else 'request'} {spec.name}"
                if spec.derived_attributes and not f.derived_attributes:
                    raise AllocationError(f"claim {claim.ref}, request {spec.name}: cannot handle request with derived "
                                          f"attributes, the feature is disabled")
                if spec.capacity is not None and not f.consumable_capacity:
                    raise AllocationError(f"{sub_where}: has capacity requests, but the DRAConsumableCapacity feature is disabled")
                if spec.admin_access is not None and not f.admin_access:
                    raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
                cls = self.classes.get(spec.device_class_name)
                if cls is None:
                    raise AllocationError(f"{sub_where}: could not retrieve device class {spec.device_class_name}: "
                                          f"deviceclass.resource.k8s.io \"{spec.device_class_name}\" not found")
                rd = _RequestData(ci, req.name, sub_name, spec, cls, bool(req.first_available),
                                  derived={a.name: a.expression for a in spec.derived_attributes})
                self._requests[(ci, ri, si)] = rd
                if spec.allocation_mode == "ExactCount":
                    rd.num_devices = spec.count
                else:
                    rd.all_devices = self._enumerate_all(rd, ri, si)
                    rd.num_devices = len(rd.all_devices)
                counts.append(rd.num_devices)
            need = min(counts) if counts else 0
            if need > ALLOCATION_LIMIT - min_devices:
                raise AllocationError(f"claim {claim.ref}, request {req.name}: adding {need} devices exceeds the claim "
                                      f"limit of {ALLOCATION_LIMIT}, with {min_devices} already accounted for")
            min_devices += need
        trackers: list[ConstraintTracker] = []
        for c in claim.spec.constraints:
            name = c.match_attribute or c.distinct_attribute
            assert name is not None
            trackers.append(ConstraintTracker(name, c.requests, c.match_attribute is None,
                                              self.features.list_type_attributes))
        self._constraints.append(trackers)

    def _enumerate_all(self, rd: _RequestData, ri: int, si: int) -> list[CandidateDevice]:
        where = f"claim {self._claims[rd.claim].ref}, request {rd.message_name}"
        out: list[CandidateDevice] = []
        by_pool: dict[int, list[CandidateDevice]] = {}
        for cand in self._order:
            by_pool.setdefault(cand.pool_index, []).append(cand)
        for pi, pool in enumerate(self._pools):
            if pool.incomplete:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.driver}/{pool.name} "
                                      f"is currently being updated")
            if pool.invalid:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.driver}/{pool.name} "
                                      f"is currently invalid")
            for cand in by_pool.get(pi, ()):
                if not self._is_selectable(rd, ri, si, cand):
                    continue
                if self.features.consumable_capacity and not self._capacity_fits(rd, cand, in_call=False):
                    continue
                out.append(cand)
        return out

    # -- search -----------------------------------------------------------------------------

    def _allocate_one(self, ci: int, ri: int, si: int, dev: int, in_sub: bool, start: int) -> bool:
        st = self._st
        st.steps += 1
        if ci == len(self._claims):
            return True
        claim = self._claims[ci]
        if ri == len(claim.spec.requests):
            try:
                return self._allocate_one(ci + 1, 0, 0, 0, False, 0)
            except _MaxSize:
                return False
        rd = self._requests[(ci, ri, si)]
        if not in_sub and rd.parent:
            all_exceeded = True
            for s in itertools.count():
                if (ci, ri, s) not in self._requests:
                    if all_exceeded:
                        raise _MaxSize
                    return False
                try:
                    ok = self._allocate_one(ci, ri, s, dev, True, 0)
                except _MaxSize:
                    continue
                all_exceeded = False
                if ok:
                    st.chosen_sub[(ci, ri)] = s
                    return True
        spec = rd.spec
        if spec.allocation_mode == "All" and not rd.all_devices:
            return False
        if dev >= rd.num_devices:
            return self._allocate_one(ci, ri + 1, 0, 0, False, 0)
        if len(st.results[ci]) + rd.num_devices - dev > ALLOCATION_LIMIT:
            raise _MaxSize
        if spec.allocation_mode == "All":
            assert rd.all_devices is not None
            cand = rd.all_devices[dev]
            undo = self._allocate_device(rd, ri, si, cand, must=True)
            if undo is None:
                return False
            try:
                done = self._allocate_one(ci, ri, si, dev + 1, in_sub, 0)
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done
        order = self._order
        for pos in range(start, len(order)):
            cand = order[pos]
            if spec.admin_access:
                if ci in st.allocating.get(cand.id, ()):
                    continue
            elif self._in_use(cand):
                continue
            if not self._is_selectable(rd, ri, si, cand):
                continue
            if self.features.consumable_capacity and not self._capacity_fits(rd, cand, in_call=True):
                continue
            undo = self._allocate_device(rd, ri, si, cand, must=False)
            if undo is None:
                continue
            try:
                done = self._allocate_one(ci, ri, si, dev + 1, in_sub, pos + 1)
            except BaseException:
                undo()
                raise
            if done:
                return True
            undo()
        return False

    def _multi(self, cand: CandidateDevice) -> bool:
        return self.features.consumable_capacity and cand.device.allow_multiple_allocations

    def _in_use(self, cand: CandidateDevice) -> bool:
        if cand.id in self.allocated.devices:
            return True
        return bool(self._st.allocating.get(cand.id))

    def _is_selectable(self, rd: _RequestData, ri: int, si: int, cand: CandidateDevice) -> bool:
        d = cand.device
        if d.binding_conditions and not self.features.device_binding_and_status:
            return False
        key = (rd.claim, ri, si, id(d))
        hit = self._st.selectable.get(key)
        if hit is not None:
            return hit
        ok = self._eval_selectors(rd, cand)
        if ok and cand.slice.per_device_node_selection:
            ok = node_matches(self._node.name, dict(self._node.labels), want_node=d.node_name, all_nodes=d.all_nodes,
                              selector=d.node_selector)
        self._st.selectable[key] = ok
        return ok

    def _eval_selectors(self, rd: _RequestData, cand: CandidateDevice) -> bool:
        multi = self._multi(cand)
        claim_ref = self._claims[rd.claim].ref
        for owner, exprs in ((f"class {rd.device_class.name}", rd.device_class.selectors),
                             (f"claim {claim_ref}", rd.spec.selectors)):
            for i, expr in enumerate(exprs):
                try:
                    if not self.cel.evaluate(expr, cand.device, cand.slice.driver, multi):
                        return False
                except CelCompileError as exc:
                    raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {exc}") from None
                except CelRuntimeError as exc:
                    hint = CEL_HINT if "no such key" in str(exc) else ""
                    raise AllocationError(f"{owner}: selector #{i} on device {device_id_str(cand.id)}: "
                                          f"CEL runtime error: {exc}{hint}") from None
        return True

    def _capacity_fits(self, rd: _RequestData, cand: CandidateDevice, *, in_call: bool) -> bool:
        """Whether the request's (rounded) capacity fits the device. ``in_call=False`` is the
        static check of the All pre-pass: the device's own capacity only, nothing committed."""
        d = cand.device
        try:
            consumed = cap.consumption(rd.spec.capacity, d.capacity, self.features.fractional_capacity)
        except cap.CapacityError as exc:
            raise AllocationError(f"claim {self._claims[rd.claim].ref}, request {rd.message_name}: checking capacity "
                                  f"for device {device_id_str(cand.id)}: {exc}") from None
        if consumed is None:
            return False
        if not in_call:
            return cap.fits(consumed, d.capacity, None, None)
        return cap.fits(consumed, d.capacity, self.allocated.capacity.get(cand.id),
                        self._st.allocating_capacity.get(cand.id))

    # -- accepting one device ----------------------------------------------------------------

    def _allocate_device(self, rd: _RequestData, ri: int, si: int, cand: CandidateDevice,
                         *, must: bool) -> Callable[[], None] | None:
        st = self._st
        f = self.features
        d = cand.device
        ci = rd.claim
        multi = self._multi(cand)
        admin = bool(rd.spec.admin_access)
        if admin and not multi and ci in st.allocating.get(cand.id, ()):
            return None
        if not admin and self._in_use(cand):
            return None
        if cand.slice.skip_node_operations and not (
                f.optional_node_operations and OPTIONAL_NODE_OPERATIONS in self._node.declared_features):
            return None
        if d.consumes_counters and not f.partitionable_devices:
            return None
        undo_steps: list[Callable[[], None]] = []

        def rollback() -> None:
            for step in reversed(undo_steps):
                step()

        skip_counters = multi and self._capacity_in_use(cand.id)
        if f.compatibility_groups and not skip_counters and d.consumes_counters:
            restore = self._consume_groups(cand)
            if restore is None:
                return None
            undo_steps.append(restore)
        if not skip_counters and d.consumes_counters:
            release_counters = self._reserve_counters(cand)
            if release_counters is None:
                rollback()
                return None
            undo_steps.append(release_counters)

        if f.device_taints and not self._tolerated(rd, d):
            rollback()
            return None
        added: list[ConstraintTracker] = []
        for tracker in self._constraints[ci]:
            if not tracker.applies(rd.request_name, rd.sub_name):
                continue
            try:
                value = self._lookup(rd, cand, tracker.attribute)
            except AllocationError:
                for t in added:
                    t.remove(cand.id)
                rollback()
                raise
            if not tracker.add(cand.id, value):
                for t in added:
                    t.remove(cand.id)
                rollback()
                if must:
                    raise AllocationError(f"claim {self._claims[ci].ref}, request {rd.message_name}: cannot add device "
                                          f"{device_id_str(cand.id)} because a claim constraint would not be satisfied")
                return None
            added.append(tracker)
        undo_steps.append(lambda: [t.remove(cand.id) for t in added])
        if not multi:
            st.allocating.setdefault(cand.id, set()).add(ci)
            undo_steps.append(lambda: st.allocating[cand.id].discard(ci))
        share_id = None
        consumed = None
        if f.consumable_capacity:
            if not self._capacity_fits(rd, cand, in_call=True):
                rollback()
                return None
            if multi:
                consumed = cap.consumption(rd.spec.capacity, d.capacity, f.fractional_capacity) or {}
                existed = cand.id in st.allocating_capacity
                before = dict(st.allocating_capacity.get(cand.id, {}))
                mine = dict(before)
                for k, q in consumed.items():
                    mine[k] = (mine[k] + q) if k in mine else q
                st.allocating_capacity[cand.id] = mine

                def restore_capacity() -> None:
                    # A share undone leaves no trace: later shares must pay counters again.
                    if existed:
                        st.allocating_capacity[cand.id] = before
                    else:
                        st.allocating_capacity.pop(cand.id, None)
                undo_steps.append(restore_capacity)
                share_id = self.share_ids()
                if not d.capacity:
                    consumed = None
        result = DeviceResult(
            request=rd.result_name, driver=cand.id[0], pool=cand.id[1], device=cand.id[2],
            admin_access=admin, tolerations=rd.spec.tolerations,
            binding_conditions=d.binding_conditions if f.device_binding_and_status else (),
            binding_failure_conditions=d.binding_failure_conditions if f.device_binding_and_status else (),
            share_id=share_id, consumed_capacity=consumed,
            skip_node_operations=cand.slice.skip_node_operations,
        )
        results = st.results[ci]
        results.append((result, cand))
        n = len(results)
        undo_steps.append(lambda: results.__delitem__(slice(n - 1, None)))
        return rollback

    def _lookup(self, rd: _RequestData, cand: CandidateDevice, name: str) -> AttributeValue | None:
        """A derived attribute of the request wins over the device's own attribute of that name."""
        expression = rd.derived.get(name)
        if expression is None:
            return lookup_attribute(cand.device, cand.slice.driver, name)
        try:
            return self.cel.derived(expression, cand.device, cand.slice.driver)
        except CelCompileError as exc:
            raise AllocationError(f"compile derived attribute {name} failed: {exc}") from None
        except CelRuntimeError as exc:
            raise AllocationError(f"evaluate derived attribute {name} on device {device_id_str(cand.id)} failed: "
                                  f"{exc}") from None

    def _tolerated(self, rd: _RequestData, d: Device) -> bool:
        for taint in d.taints:
            if taint.effect not in ("NoSchedule", "NoExecute"):
                continue
            if not any(_tolerates(t, taint) for t in rd.spec.tolerations):
                return False
        return True

    # -- counters ------------------------------------------------------------------------------

    def _available_counters(self, pool: Pool) -> dict[str, dict[str, Quantity]]:
        """Counter-set values minus what committed allocations consume (once per allocator)."""
        got = self._available.get(pool.key)
        if got is not None:
            return got
        avail = {name: dict(counters) for name, counters in pool.counter_sets.items()}
        for s in pool.slices + pool.other_slices:
            for d in s.devices:
                if self.allocated.is_allocated((pool.driver, pool.name, d.name), self._shared):
                    for c in d.consumes_counters:
                        for name, q in c.counters.items():
                            if c.counter_set in avail and name in avail[c.counter_set]:
                                avail[c.counter_set][name] = avail[c.counter_set][name] - q
        self._available[pool.key] = avail
        return avail

    def _capacity_in_use(self, dev: DeviceID) -> bool:
        """A shareable device that already has a share (committed or in this call) pays no counters."""
        return dev in self.allocated.capacity or dev in self._shared or dev in self._st.allocating_capacity

    def _reserve_counters(self, cand: CandidateDevice) -> Callable[[], None] | None:
        d = cand.device
        pool = self._by_pool[(cand.id[0], cand.id[1])]
        avail = self._available_counters(pool)
        used = self._st.counters.setdefault(pool.key, {})
        for c in d.consumes_counters:
            sets = used.setdefault(c.counter_set, {})
            for name, q in c.counters.items():
                sets[name] = sets[name] + q if name in sets else q

        def release() -> None:
            for c in d.consumes_counters:
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

    # -- compatibility groups ----------------------------------------------------------------

    def _groups_baseline(self, pool: Pool) -> dict[str, GroupIntersection]:
        """Per counter set, the groups of devices already allocated in the pool (read from the slices)."""
        got = self._group_baseline.get(pool.key)
        if got is not None:
            return got
        baseline: dict[str, GroupIntersection] = {}
        for s in pool.slices + pool.other_slices:
            for d in s.devices:
                if not self.allocated.is_allocated((pool.driver, pool.name, d.name), self._shared):
                    continue
                for c in d.consumes_counters:
                    baseline[c.counter_set] = baseline.get(c.counter_set, GroupIntersection()).add(
                        frozenset(c.compatibility_groups))
        self._group_baseline[pool.key] = baseline
        return baseline

    def _consume_groups(self, cand: CandidateDevice) -> Callable[[], None] | None:
        pool = self._by_pool[(cand.id[0], cand.id[1])]
        running = self._st.groups.setdefault(pool.key, {})
        baseline = self._groups_baseline(pool)
        saved: list[tuple[str, GroupIntersection | None]] = []

        def restore() -> None:
            for name, prev in reversed(saved):
                if prev is None:
                    running.pop(name, None)
                else:
                    running[name] = prev

        for c in cand.device.consumes_counters:
            existed = running.get(c.counter_set)
            cur = existed if existed is not None else baseline.get(c.counter_set, GroupIntersection())
            groups = frozenset(c.compatibility_groups)
            if not cur.admits(groups):
                restore()
                return None
            saved.append((c.counter_set, existed))
            running[c.counter_set] = cur.add(groups)
        return restore

    # -- results -------------------------------------------------------------------------------

    def _build_result(self, ci: int, claim: ResourceClaim) -> AllocationResult:
        picked = self._st.results[ci]
        chosen: list[tuple[str, DeviceClass]] = []
        for ri, req in enumerate(claim.spec.requests):
            si = self._st.chosen_sub.get((ci, ri), 0) if req.first_available else 0
            rd = self._requests[(ci, ri, si)]
            chosen.append((rd.result_name, rd.device_class))
        configs = build_configs(claim, chosen)
        selector = build_node_selector(claim, [c for _, c in picked], self._node)
        return AllocationResult(tuple(r for r, _ in picked), configs, selector)


def _tolerates(t, taint) -> bool:  # type: ignore[no-untyped-def]
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if t.operator in ("", "Equal"):
        return (t.value or "") == (taint.value or "")
    return t.operator == "Exists"
