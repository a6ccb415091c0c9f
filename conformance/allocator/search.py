"""The reference structured allocator: upstream's depth-first, first-solution search.

One :class:`Allocator` per scheduling cycle (the cluster state it was built from does not
change); :meth:`Allocator.allocate` is called per node with the pod's unallocated claims and
returns one result per claim, ``None`` when the node cannot satisfy them, or raises
:class:`AllocationError` (fatal) / :class:`NodeAllocationError` (this node only).

Upstream has three implementations and ``NewAllocator`` picks one from the switches that are on
(:meth:`Features.channel`); where their answers differ, drakit follows the one picked:

- only ``experimental`` refuses devices of a slice with ``skipNodeOperations`` (unless the gate
  is on and the node declares the feature) and copies the list into the result;
- ``stable`` ignores capacity requests (no gate error), refuses ``distinctAttribute``
  constraints, counts only dedicated allocations against shared counters, ignores
  ``bindsToNode``, shows CEL ``allowMultipleAllocations`` as false, has no start location in
  the search, and gathers pools its own way (see :mod:`.pools`).
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..cel import CelCompileError, CelRuntimeError
from ..attributes import AttributeValue
from ..quantity import Quantity
from ..model.claim import DeviceClass, DeviceRequestSpec, ResourceClaim, Toleration
from ..model.slice import Device, DeviceTaint, ResourceSlice, node_matches
from . import capacity as cap
from .constraints import ConstraintTracker, GroupIntersection, lookup_attribute
from .counters import CounterBook
from .pools import SliceIndex
from .selectors import SelectorCache
from .results import build_configs, build_node_selector
from .types import (ALLOCATION_LIMIT, CHANNELS, AllocatedState, AllocationError, AllocationResult, CandidateDevice,
                    DeviceID, DeviceResult, Features, NodeAllocationError, NodeInfo, device_id_str)

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
                 share_ids: Callable[[], str] | None = None, cel_cache: SelectorCache | None = None,
                 channels: Sequence[str] = CHANNELS) -> None:
        self.features = features
        self.channels = tuple(channels)  # the implementations upstream may pick from (all, as the scheduler)
        self.channel: str | None = None  # the one it picks: set by allocate()
        self.classes = classes
        self.index = slices if isinstance(slices, SliceIndex) else SliceIndex(slices)
        self.allocated = allocated or AllocatedState()
        self.share_ids = share_ids or (lambda: str(uuid.uuid4()))
        self.cel = cel_cache or SelectorCache()
        self._book = CounterBook(self.allocated)  # committed counters and groups, per pool
        self.last_steps = 0

    # -- public ---------------------------------------------------------------------------

    def allocate(self, node: NodeInfo, claims: Sequence[ResourceClaim]) -> list[AllocationResult] | None:
        self.channel = self.features.channel(self.channels)
        self._stable = self.channel == "stable"
        self._experimental = self.channel == "experimental"
        if self._stable and not self._book.dedicated_only:
            self._book = CounterBook(self.allocated, dedicated_only=True)
        pools, order = self.index.view(node, self.features, self.channel)
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
            if not f.consumable_capacity and not self._stable:
                # Checked for every entry before any entry is validated; the stable
                # implementation does not know capacity requests and ignores them.
                for spec in specs:
                    assert spec is not None
                    if spec.capacity is not None:
                        what = f"subrequest {spec.name}" if req.first_available else f"request {req.name}"
                        raise AllocationError(f"claim {claim.ref}, {what}: has capacity requests, but the "
                                              f"DRAConsumableCapacity feature is disabled")
            counts: list[int] = []
            for si, spec in enumerate(specs):
                assert spec is not None
                sub_name = spec.name if req.first_available else None
                sub_where = f"claim {claim.ref}, request {spec.name}"  # upstream names the entry itself
                if spec.derived_attributes and not f.derived_attributes:
                    raise AllocationError(f"{sub_where}: cannot handle request with derived attributes, the feature "
                                          f"is disabled")
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
        for i, c in enumerate(claim.spec.constraints):
            if self._stable and c.match_attribute is None:
                # The stable implementation knows matchAttribute only.
                raise AllocationError(f"claim {claim.ref}, constraint #{i}: empty constraint (unsupported constraint "
                                      f"type?)")
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
                # stable has no start location: every device of the request searches from the top
                done = self._allocate_one(ci, ri, si, dev + 1, in_sub, 0 if self._stable else pos + 1)
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
        multi = cand.device.allow_multiple_allocations and not self._stable
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
            # The All pre-pass names the device alone, the search its full ID.
            device = device_id_str(cand.id) if in_call else d.name
            raise AllocationError(f"claim {self._claims[rd.claim].ref}, request {rd.message_name}: checking capacity "
                                  f"for device {device}: {exc}") from None
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
        if self._experimental and cand.slice.skip_node_operations and not (
                f.optional_node_operations and OPTIONAL_NODE_OPERATIONS in self._node.declared_features):
            return None  # only the experimental implementation looks at skipNodeOperations
        if d.consumes_counters and not f.partitionable_devices:
            return None
        undo_steps: list[Callable[[], None]] = []

        def rollback() -> None:
            for step in reversed(undo_steps):
                step()

        # A shareable device that already has a share (committed or in this call) pays no counters.
        skip_counters = multi and (self._book.in_use(cand.id) or cand.id in st.allocating_capacity)
        pool = self._by_pool[(cand.id[0], cand.id[1])]
        if f.compatibility_groups and not skip_counters and d.consumes_counters:
            restore = self._book.consume_groups(pool, st.groups.setdefault(pool.key, {}), d)
            if restore is None:
                return None
            undo_steps.append(restore)
        if not skip_counters and d.consumes_counters:
            release_counters = self._book.reserve(pool, st.counters.setdefault(pool.key, {}), d)
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

        def remove_from_constraints() -> None:
            for t in added:
                t.remove(cand.id)
        undo_steps.append(remove_from_constraints)
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
            skip_node_operations=cand.slice.skip_node_operations if self._experimental else (),
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

    # -- results -------------------------------------------------------------------------------

    def _build_result(self, ci: int, claim: ResourceClaim) -> AllocationResult:
        picked = self._st.results[ci]
        chosen: list[tuple[str, DeviceClass]] = []
        for ri, req in enumerate(claim.spec.requests):
            si = self._st.chosen_sub.get((ci, ri), 0) if req.first_available else 0
            rd = self._requests[(ci, ri, si)]
            chosen.append((rd.result_name, rd.device_class))
        configs = build_configs(claim, chosen)
        selector = build_node_selector(claim, [c for _, c in picked], self._node, binds_to_node=not self._stable)
        return AllocationResult(tuple(r for r, _ in picked), configs, selector)


def _tolerates(t: Toleration, taint: DeviceTaint) -> bool:
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if t.operator in ("", "Equal"):
        return bool((t.value or "") == (taint.value or ""))
    return t.operator == "Exists"
