"""What one claim asks for, validated: the pre-pass of an allocate() call.

Upstream validates a pod's claims at the start of every Allocate call, before it looks at any
device. Except for ``All`` requests (their device count is the node's), nothing of that depends
on the node, so :class:`ClaimPlan` is built once per claim and allocator and reused for every
node the allocator tries; a claim that fails validation fails the same way on every node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..quantity import Quantity
from ..model.claim import DeviceClass, DeviceRequestSpec, ResourceClaim
from .types import ALLOCATION_LIMIT, AllocationError, CandidateDevice, Features


@dataclass(slots=True)
class RequestData:
    claim: int
    request_name: str       # base request name
    sub_name: str | None    # subrequest name for firstAvailable entries
    spec: DeviceRequestSpec
    device_class: DeviceClass
    parent: bool            # part of a firstAvailable list
    num_devices: int = 0
    all_devices: list[CandidateDevice] | None = None
    derived: dict[str, str] = field(default_factory=dict)  # attribute name -> CEL expression
    capacity_key: tuple[object, ...] | None = None         # the capacity request, hashable (None: none)

    @property
    def result_name(self) -> str:
        return f"{self.request_name}/{self.sub_name}" if self.sub_name else self.request_name

    @property
    def message_name(self) -> str:
        return self.sub_name or self.request_name


@dataclass(frozen=True, slots=True)
class ConstraintSpec:
    attribute: str
    requests: tuple[str, ...]
    distinct: bool


@dataclass(frozen=True, slots=True, eq=False)
class Entry:
    """One request entry (``exactly`` or a ``firstAvailable`` entry) as a node check sees it.
    What it can take on a node depends on ``key`` alone."""

    class_selectors: tuple[str, ...]
    selectors: tuple[str, ...]
    capacity_key: tuple[object, ...] | None
    capacity: dict[str, Quantity] | None
    need: int
    admin: bool

    @property
    def key(self) -> tuple[object, ...]:
        return (self.class_selectors, self.selectors, self.capacity_key)


@dataclass(slots=True)
class ClaimPlan:
    requests: dict[tuple[int, int], RequestData]   # (request index, subrequest index)
    subrequests: tuple[int, ...]                    # per request: how many entries
    constraints: tuple[ConstraintSpec, ...]
    node_dependent: bool   # has an All request: its devices are the node's, so the plan is per node
    # The search cannot raise on its own account: every request is ExactCount, no derived
    # attributes, and the claim cannot grow past the device limit whatever is chosen.
    plain: bool
    entries: tuple[tuple[Entry, ...], ...] = ()  # per request, its entries (ExactCount requests only)


def has_all(claim: ResourceClaim) -> bool:
    for req in claim.spec.requests:
        for spec in ([req.exactly] if req.exactly is not None else req.first_available):
            if spec is not None and spec.allocation_mode == "All":
                return True
    return False


def _capacity_key(spec: DeviceRequestSpec) -> tuple[object, ...] | None:
    if spec.capacity is None:
        return None
    return tuple(sorted((name, str(q), q.value) for name, q in spec.capacity.items()))


def build_plan(ci: int, claim: ResourceClaim, features: Features, classes: Mapping[str, DeviceClass], stable: bool,
               enumerate_all: Callable[[RequestData, int, int], list[CandidateDevice]]) -> ClaimPlan:
    """Validate the claim as upstream's Allocate does (same checks, same order, same messages).
    ``enumerate_all`` lists the node's devices for an All request (it may raise too)."""
    f = features
    min_devices = 0  # devices the claim needs at least, request by request
    max_devices = 0  # devices it may get at most
    requests: dict[tuple[int, int], RequestData] = {}
    subrequests: list[int] = []
    entries: list[tuple[Entry, ...]] = []
    plain = True
    node_dependent = False
    for ri, req in enumerate(claim.spec.requests):
        if req.first_available and not f.prioritized_list:
            raise AllocationError(f"claim {claim.ref}, request {req.name}: has subrequests, but the "
                                  f"DRAPrioritizedList feature is disabled")
        specs = [req.exactly] if req.exactly is not None else list(req.first_available)
        if not f.consumable_capacity and not stable:
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
            if spec.derived_attributes and not f.derived_attributes:
                raise AllocationError(f"claim {claim.ref}, request {spec.name}: cannot handle request with derived "
                                      f"attributes, the feature is disabled")
            if spec.admin_access is not None and not f.admin_access:
                raise AllocationError(f"claim {claim.ref}, request {req.name}: admin access is requested, but the "
                                      f"feature is disabled")
            cls = classes.get(spec.device_class_name)
            if cls is None:
                # upstream names the entry itself
                raise AllocationError(f"claim {claim.ref}, request {spec.name}: could not retrieve device class "
                                      f"{spec.device_class_name}: deviceclass.resource.k8s.io "
                                      f"\"{spec.device_class_name}\" not found")
            rd = RequestData(ci, req.name, sub_name, spec, cls, bool(req.first_available),
                             derived={a.name: a.expression for a in spec.derived_attributes},
                             capacity_key=_capacity_key(spec))
            requests[(ri, si)] = rd
            if spec.allocation_mode == "ExactCount":
                rd.num_devices = spec.count
            else:
                node_dependent = True
                plain = False
                rd.all_devices = enumerate_all(rd, ri, si)
                rd.num_devices = len(rd.all_devices)
            if rd.derived:
                plain = False
            counts.append(rd.num_devices)
        subrequests.append(len(specs))
        entries.append(tuple(Entry(rd.device_class.selectors, rd.spec.selectors, rd.capacity_key, rd.spec.capacity,
                                   rd.num_devices, bool(rd.spec.admin_access))
                             for (r, _), rd in requests.items() if r == ri))
        need = min(counts) if counts else 0
        if need > ALLOCATION_LIMIT - min_devices:
            raise AllocationError(f"claim {claim.ref}, request {req.name}: adding {need} devices exceeds the claim "
                                  f"limit of {ALLOCATION_LIMIT}, with {min_devices} already accounted for")
        min_devices += need
        max_devices += max(counts) if counts else 0
    constraints: list[ConstraintSpec] = []
    for i, c in enumerate(claim.spec.constraints):
        if stable and c.match_attribute is None:
            # The stable implementation knows matchAttribute only.
            raise AllocationError(f"claim {claim.ref}, constraint #{i}: empty constraint (unsupported constraint "
                                  f"type?)")
        name = c.match_attribute or c.distinct_attribute
        assert name is not None
        constraints.append(ConstraintSpec(name, c.requests, c.match_attribute is None))
    return ClaimPlan(requests, tuple(subrequests), tuple(constraints), node_dependent,
                     plain and max_devices <= ALLOCATION_LIMIT, tuple(entries))
