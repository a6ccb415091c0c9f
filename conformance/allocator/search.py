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
from typing import Callable, Mapping, Sequence

from ..model.claim import DeviceClass, ResourceClaim
from ..model.slice import ResourceSlice
from .constraints import ConstraintTracker
from .devicechecks import CallState as _CallState, DeviceChecks
from .counters import CounterBook
from .plan import ClaimPlan, RequestData, build_plan, has_all
from .precheck import Requests, entries_of, short
from .nodeview import NodeView
from .pools import SliceIndex
from .selectors import SelectorCache
from .taints import tolerated
from .results import build_configs, build_node_selector
from .types import (ALLOCATION_LIMIT, CHANNELS, AllocatedState, AllocationError, AllocationResult, CandidateDevice,
                    DeviceResult, Features, NodeAllocationError, NodeInfo, device_id_str)

OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"  # what a node declares in status.declaredFeatures


class _MaxSize(Exception):
    """Internal: the claim would exceed 32 devices on this branch."""


class Allocator(DeviceChecks):
    def __init__(self, features: Features, classes: Mapping[str, DeviceClass],
                 slices: Sequence[ResourceSlice] | SliceIndex, allocated: AllocatedState | None = None, *,
                 share_ids: Callable[[], str] | None = None, cel_cache: SelectorCache | None = None,
                 channels: Sequence[str] = CHANNELS, precheck: bool = True) -> None:
        self.features = features
        self.channels = tuple(channels)  # the implementations upstream may pick from (all, as the scheduler)
        # Skip the search on a node that cannot have enough devices (see _short); off, every call
        # searches as upstream does (same outcome, and last_steps counts upstream's steps).
        self.precheck = precheck
        self.channel: str | None = None  # the one it picks: set by allocate()
        self.classes = classes
        self.index = slices if isinstance(slices, SliceIndex) else SliceIndex(slices)
        self.allocated = allocated or AllocatedState()
        self.share_ids = share_ids or (lambda: str(uuid.uuid4()))
        self.cel = cel_cache or SelectorCache()
        self._book = CounterBook(self.allocated, shared=self.index.counters)  # committed counters and groups, per pool
        self._plans: dict[tuple[int, int], tuple[ResourceClaim, ClaimPlan | AllocationError]] = {}
        self._picked: tuple[Features, tuple[str, ...], str] | None = None  # the features' channel
        self._views_for: tuple[Features, str | None] | None = None
        self._views: dict[str, tuple[dict[str, str], NodeView]] = {}  # node name -> labels, view
        self._quick: dict[tuple[int, ...], tuple[tuple[ResourceClaim, ...], Requests | None]] = {}
        self.last_steps = 0

    # -- public ---------------------------------------------------------------------------

    def allocate(self, node: NodeInfo, claims: Sequence[ResourceClaim]) -> list[AllocationResult] | None:
        picked = self._picked
        if picked is None or picked[0] is not self.features or picked[1] != self.channels:
            picked = self._picked = (self.features, self.channels, self.features.channel(self.channels))
        self.channel = picked[2]
        self._stable = self.channel == "stable"
        self._experimental = self.channel == "experimental"
        if self._stable and not self._book.dedicated_only:
            self._book = CounterBook(self.allocated, dedicated_only=True, shared=self.index.counters)
        view = self._node_view(node, picked[2])
        self._view = view
        self._node = node
        self._claims = claims
        quick = self._quick_plans(claims) if self.precheck and self._trace is None else None
        if quick is not None and short(view, quick, self.allocated, node, self.features, self._stable, self.cel):
            # Cannot fit, and the search could not have failed otherwise: no search needed.
            self.last_steps = 0
            if view.invalid:
                raise NodeAllocationError("invalid resource pools were encountered")
            return None
        self._pools = view.pools
        self._order = view.order
        self._by_pool = view.by_key
        st = _CallState(results=[[] for _ in claims])
        self._st = st
        plans = [self._plan(ci, claim) for ci, claim in enumerate(claims)]
        try:
            self._setup(view, plans)
            done = self._allocate_one(0, 0, 0, 0, False, 0)
        except _MaxSize:
            raise AllocationError("allocation max size exceeded") from None
        finally:
            self.last_steps = st.steps
        if not done:
            if view.invalid:
                raise NodeAllocationError("invalid resource pools were encountered")
            return None
        return [self._build_result(ci, claim) for ci, claim in enumerate(claims)]

    def _node_view(self, node: NodeInfo, channel: str) -> NodeView:
        key = (self.features, channel)
        if self._views_for != key:
            self._views_for, self._views = key, {}
        hit = self._views.get(node.name)
        if hit is not None and hit[0] == node.labels:
            return hit[1]
        view = self.index.view(node, self.features, channel)
        self._views[node.name] = (dict(node.labels), view)
        return view

    def _quick_plans(self, claims: Sequence[ResourceClaim]) -> Requests | None:
        """The claims' request entries for :func:`.precheck.short` when all claims are plain
        (:attr:`ClaimPlan.plain`); None otherwise. Raises what validating the claims raises."""
        key = tuple(map(id, claims))
        hit = self._quick.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], claims)):
            return hit[1]
        out: Requests | None = None
        if not any(has_all(c) for c in claims):
            out = entries_of([self._plan(ci, claim) for ci, claim in enumerate(claims)], self.index)
        self._quick[key] = (tuple(claims), out)
        return out

    def _setup(self, view: NodeView, plans: list[ClaimPlan]) -> None:
        """The search's tables: requests, the devices each one's selectors accept, constraints."""
        self._requests: dict[tuple[int, int, int], RequestData] = {}
        self._matches: dict[tuple[int, int, int], tuple[CandidateDevice, ...] | None] = {}
        self._constraints: list[list[ConstraintTracker]] = []
        for ci, plan in enumerate(plans):
            for (ri, si), rd in plan.requests.items():
                self._requests[(ci, ri, si)] = rd
                if rd.all_devices is None:
                    # An explaining run sees every device's checks one by one.
                    self._matches[(ci, ri, si)] = None if self._trace is not None else view.matching(rd.device_class.selectors, rd.spec.selectors,
                                                                self._node, self.features, self._stable, self.cel)
            self._constraints.append([ConstraintTracker(c.attribute, c.requests, c.distinct,
                                                        self.features.list_type_attributes)
                                      for c in plan.constraints])

    # -- pre-pass ---------------------------------------------------------------------------

    def _plan(self, ci: int, claim: ResourceClaim) -> ClaimPlan:
        """The claim's validated requests: once per allocator, or per call for a claim with All
        requests (their devices are the node's). A claim that fails validation fails again."""
        key = (ci, id(claim))
        hit = self._plans.get(key)
        if hit is not None and hit[0] is claim:
            if isinstance(hit[1], AllocationError):
                raise hit[1]
            return hit[1]
        try:
            plan = build_plan(ci, claim, self.features, self.classes, self._stable,
                              self._enumerate_all)
        except AllocationError as exc:
            if not has_all(claim):
                self._plans[key] = (claim, exc)
            raise
        if not plan.node_dependent:
            self._plans[key] = (claim, plan)
        return plan

    def _enumerate_all(self, rd: RequestData, ri: int, si: int) -> list[CandidateDevice]:
        where = f"claim {self._claims[rd.claim].ref}, request {rd.message_name}"
        out: list[CandidateDevice] = []
        by_pool = self._view.by_pool
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
        # The devices the selectors accept, worked out once per node; None: evaluate one by one
        # (a selector fails on some device, and upstream fails when it gets there).
        matching = self._matches[(ci, ri, si)]
        order = self._order if matching is None else matching
        consumable = self.features.consumable_capacity
        committed = self.allocated.devices
        allocating = st.allocating
        trace = self._trace
        for pos in range(start, len(order)):
            cand = order[pos]
            if spec.admin_access:
                if ci in allocating.get(cand.id, ()):
                    if trace is not None:
                        trace.reject(self, rd, cand, "allocating")
                    continue
            elif cand.id in committed or allocating.get(cand.id):
                if trace is not None:
                    trace.reject(self, rd, cand, "allocated" if cand.id in committed else "allocating")
                continue
            if matching is None and not self._is_selectable(rd, ri, si, cand):
                continue
            if consumable and not self._capacity_fits(rd, cand, in_call=True):
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

    # -- accepting one device ----------------------------------------------------------------

    def _allocate_device(self, rd: RequestData, ri: int, si: int, cand: CandidateDevice,
                         *, must: bool) -> Callable[[], None] | None:
        st = self._st
        f = self.features
        d = cand.device
        ci = rd.claim
        multi = self._multi(cand)
        admin = bool(rd.spec.admin_access)
        trace = self._trace
        if admin and not multi and ci in st.allocating.get(cand.id, ()):
            if trace is not None:
                trace.reject(self, rd, cand, "allocating")
            return None
        if not admin and self._in_use(cand):
            if trace is not None:
                trace.reject(self, rd, cand, "allocated" if cand.id in self.allocated.devices else "allocating")
            return None
        if self._experimental and cand.slice.skip_node_operations and not (
                f.optional_node_operations and OPTIONAL_NODE_OPERATIONS in self._node.declared_features):
            if trace is not None:
                trace.reject(self, rd, cand, "skip-node-operations")
            return None  # only the experimental implementation looks at skipNodeOperations
        if d.consumes_counters and not f.partitionable_devices:
            if trace is not None:
                trace.reject(self, rd, cand, "partitionable-off")
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
                if trace is not None:
                    trace.reject(self, rd, cand, "compatibility-group", pool=pool)
                return None
            undo_steps.append(restore)
        if not skip_counters and d.consumes_counters:
            release_counters = self._book.reserve(pool, st.counters.setdefault(pool.key, {}), d)
            if release_counters is None:
                rollback()
                if trace is not None:
                    trace.reject(self, rd, cand, "counters", pool=pool)
                return None
            undo_steps.append(release_counters)

        if f.device_taints and not tolerated(rd.spec.tolerations, d):
            rollback()
            if trace is not None:
                trace.reject(self, rd, cand, "taint")
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
                if trace is not None:
                    trace.reject(self, rd, cand, "constraint", tracker=tracker, value=value)
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
                consumed = self._view.consumption(rd.capacity_key, rd.spec.capacity, cand, f.fractional_capacity)[0] or {}
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
