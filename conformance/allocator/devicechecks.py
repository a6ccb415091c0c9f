"""The allocator's checks of one device for one request: in use, selectable (binding conditions,
the class's and the request's selectors, per-device node selection), capacity, and the lookup
of an attribute for a constraint. A mixin of :class:`~.search.Allocator`.

Where a check refuses a device and an explaining run is on (``_trace``, see :mod:`.trace`), the
check tells the tracer which one and with what; without a tracer that costs one comparison on
the refusing path only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from ..attributes import AttributeValue
from ..cel import CelCompileError, CelRuntimeError
from ..model.claim import ResourceClaim
from ..quantity import Quantity
from . import capacity as cap
from . import selectable as sel
from .constraints import GroupIntersection, lookup_attribute
from .nodeview import NodeView
from .plan import RequestData
from .selectors import SelectorCache
from .types import (AllocatedState, AllocationError, CandidateDevice, DeviceID, DeviceResult, Features, NodeInfo,
                    device_id_str)


CEL_HINT = (". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
            "for optional fields")


@dataclass
class CallState:
    """Mutable state of one allocate() call."""

    allocating: dict[DeviceID, set[int]] = field(default_factory=dict)     # device -> claims allocating it
    allocating_capacity: dict[DeviceID, dict[str, Quantity]] = field(default_factory=dict)
    counters: dict[tuple[str, str], dict[str, dict[str, Quantity]]] = field(default_factory=dict)
    groups: dict[tuple[str, str], dict[str, GroupIntersection]] = field(default_factory=dict)
    results: list[list[tuple[DeviceResult, CandidateDevice]]] = field(default_factory=list)
    selectable: dict[tuple[int, int, int, int], bool] = field(default_factory=dict)
    chosen_sub: dict[tuple[int, int], int] = field(default_factory=dict)
    steps: int = 0


class Tracer(Protocol):
    """What an explaining run gives the allocator (see :mod:`.trace`): told, for each device a
    check refuses, which check (``kind``) and the values it looked at."""

    def reject(self, alloc: Any, rd: RequestData, cand: CandidateDevice, kind: str, **values: Any) -> None: ...


class DeviceChecks:
    features: Features
    allocated: AllocatedState
    cel: SelectorCache
    _st: CallState
    _node: NodeInfo
    _view: NodeView
    _claims: Sequence[ResourceClaim]
    _stable: bool
    _trace: Tracer | None = None  # set by an explaining run only

    def _multi(self, cand: CandidateDevice) -> bool:
        return self.features.consumable_capacity and cand.device.allow_multiple_allocations

    def _in_use(self, cand: CandidateDevice) -> bool:
        if cand.id in self.allocated.devices:
            return True
        return bool(self._st.allocating.get(cand.id))

    def _is_selectable(self, rd: RequestData, ri: int, si: int, cand: CandidateDevice) -> bool:
        if not sel.gate_allows(cand, self.features):
            if self._trace is not None:
                self._trace.reject(self, rd, cand, "binding-conditions")
            return False
        key = (rd.claim, ri, si, id(cand.device))
        hit = self._st.selectable.get(key)
        if hit is not None:
            return hit
        ok = self._eval_selectors(rd, cand)
        if ok and not sel.on_node(cand, self._node):
            ok = False
            if self._trace is not None:
                self._trace.reject(self, rd, cand, "node-selection")
        self._st.selectable[key] = ok
        return ok

    def _eval_selectors(self, rd: RequestData, cand: CandidateDevice) -> bool:
        multi = cand.device.allow_multiple_allocations and not self._stable
        claim_ref = self._claims[rd.claim].ref
        for owner, exprs in ((f"class {rd.device_class.name}", rd.device_class.selectors),
                             (f"claim {claim_ref}", rd.spec.selectors)):
            for i, expr in enumerate(exprs):
                try:
                    if not self.cel.evaluate(expr, cand.device, cand.slice.driver, multi):
                        if self._trace is not None:
                            self._trace.reject(self, rd, cand, "selector", owner=owner, index=i, expression=expr)
                        return False
                except CelCompileError as exc:
                    raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {exc}") from None
                except CelRuntimeError as exc:
                    if self._trace is not None:
                        self._trace.reject(self, rd, cand, "cel-error", owner=owner, index=i, expression=expr,
                                           error=str(exc))
                    hint = CEL_HINT if "no such key" in str(exc) else ""
                    raise AllocationError(f"{owner}: selector #{i} on device {device_id_str(cand.id)}: "
                                          f"CEL runtime error: {exc}{hint}") from None
        return True

    def _capacity_fits(self, rd: RequestData, cand: CandidateDevice, *, in_call: bool) -> bool:
        """Whether the request's (rounded) capacity fits the device. ``in_call=False`` is the
        static check of the All pre-pass: the device's own capacity only, nothing committed."""
        try:
            consumed, alone = self._view.consumption(rd.capacity_key, rd.spec.capacity, cand,
                                                     self.features.fractional_capacity)
        except cap.CapacityError as exc:
            # The All pre-pass names the device alone, the search its full ID.
            device = device_id_str(cand.id) if in_call else cand.device.name
            raise AllocationError(f"claim {self._claims[rd.claim].ref}, request {rd.message_name}: checking capacity "
                                  f"for device {device}: {exc}") from None
        if consumed is None:
            if self._trace is not None:
                self._trace.reject(self, rd, cand, "capacity-shape")
            return False
        committed = self.allocated.capacity.get(cand.id) if in_call else None
        allocating = self._st.allocating_capacity.get(cand.id) if in_call else None
        if not committed and not allocating:
            if not alone and self._trace is not None:
                self._trace.reject(self, rd, cand, "capacity", consumed=consumed)
            return alone
        ok = cap.fits(consumed, cand.device.capacity, committed, allocating)
        if not ok and self._trace is not None:
            self._trace.reject(self, rd, cand, "capacity", consumed=consumed, committed=committed,
                               allocating=allocating)
        return ok

    def _lookup(self, rd: RequestData, cand: CandidateDevice, name: str) -> AttributeValue | None:
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
