"""An explaining run of the allocator: each device's first failing check, with its values.

The checks are the allocator's own (:mod:`.devicechecks`, :mod:`.search`): where one refuses a
device, it tells the :class:`Tracer` set as ``Allocator._trace`` which check and what it held
in hand, and the tracer turns that into a :class:`Refusal` (a kind, a sentence with the values,
the values as data). Nothing here decides anything the allocator does not.

:class:`Probe` is an allocator that never keeps a device: after the checks accept one it notes
it and takes it back, so the search goes on to the next device and every device of a request
meets the checks once, in the search's order, with nothing else held. That is how a request's
devices are explained one by one; the ordinary search (with a tracer) explains what only a
combination shows (a constraint no combination meets).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..attributes import AttributeValue
from ..cel import compile_selector
from ..quantity import Quantity
from .constraints import ConstraintTracker, lookup_attribute
from .plan import RequestData
from .search import Allocator
from .taints import tolerates
from .types import CandidateDevice, DeviceID, Pool, device_id_str

# The kinds, in the order a device meets them (the search's order; see the module docstring).
KINDS = ("allocated", "allocating", "binding-conditions", "selector", "cel-error", "node-selection", "capacity-shape",
         "capacity", "skip-node-operations", "partitionable-off", "compatibility-group", "counters", "taint",
         "constraint")


@dataclass(frozen=True, slots=True)
class Refusal:
    kind: str
    text: str
    values: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"check": self.kind, "message": self.text, "values": dict(self.values)}


def show(v: AttributeValue | None) -> str:
    if v is None or v.kind is None:
        return "missing"
    if v.is_list:
        return "[" + ", ".join(str(e) for e in v.elements()) + "]"
    return repr(v.value) if isinstance(v.value, str) else str(v.value).lower() if isinstance(v.value, bool) else str(v.value)


def _q(q: Quantity | None) -> str:
    return "0" if q is None else str(q)


class Tracer:
    """Collects refusals per (claim index, request result name): each device's first one.

    ``holders``: which claims hold a committed device (for "allocated"); ``taint_origin``:
    where a taint comes from (the slice or a DeviceTaintRule), both from whoever read the state.
    """

    def __init__(self, holders: Mapping[DeviceID, list[str]] | None = None,
                 taint_origin: Callable[[CandidateDevice, Any], str] | None = None) -> None:
        self.holders = holders or {}
        self.taint_origin = taint_origin
        self.refused: dict[tuple[int, str], dict[DeviceID, Refusal]] = {}
        self.accepted: dict[tuple[int, str], list[DeviceID]] = {}
        self.constraints: dict[tuple[int, str], dict[DeviceID, str]] = {}  # (claim, attribute) -> values seen

    def reject(self, alloc: Any, rd: RequestData, cand: CandidateDevice, kind: str, **values: Any) -> None:
        if kind == "constraint":
            t: ConstraintTracker = values["tracker"]
            seen = self.constraints.setdefault((rd.claim, t.attribute), {})
            seen.setdefault(cand.id, show(values["value"]))
            for dev, v in t.held:
                seen.setdefault(dev, show(v))
        per = self.refused.setdefault((rd.claim, rd.result_name), {})
        if cand.id not in per:
            per[cand.id] = getattr(self, "_" + kind.replace("-", "_"))(alloc, rd, cand, **values)

    def accept(self, rd: RequestData, cand: CandidateDevice) -> None:
        self.accepted.setdefault((rd.claim, rd.result_name), []).append(cand.id)

    # -- one builder per kind ------------------------------------------------------------------

    def _allocated(self, alloc: Any, rd: RequestData, cand: CandidateDevice) -> Refusal:
        who = self.holders.get(cand.id) or []
        multi = cand.device.allow_multiple_allocations
        text = f"already allocated to {', '.join('claim ' + c for c in who) or 'another claim'}"
        if multi and not alloc.features.consumable_capacity:
            text += " (it allows multiple allocations, but DRAConsumableCapacity is off)"
        values: dict[str, Any] = {"claims": who, "allowMultipleAllocations": multi}
        # Being in use is checked first and hides the rest; say whether the selectors (the next
        # check) would refuse the device too, so that freeing it is not taken for a remedy.
        hidden = Tracer(self.holders)
        alloc._trace = hidden
        try:
            alloc._eval_selectors(rd, cand)
        except Exception:  # a CEL error: the search itself will meet it where it matters
            pass
        finally:
            alloc._trace = self
        also = next((r for per in hidden.refused.values() for r in per.values()), None)
        if also is not None:
            values["alsoRefusedBy"] = also.to_json()
            text += f"; and {also.text}"
        return Refusal("allocated", text, values)

    def _allocating(self, alloc: Any, rd: RequestData, cand: CandidateDevice) -> Refusal:
        claims = sorted(alloc._st.allocating.get(cand.id, ()))
        names = [alloc._claims[c].ref for c in claims]
        return Refusal("allocating", f"already picked in this attempt for claim {', '.join(names)}", {"claims": names})

    def _binding_conditions(self, alloc: Any, rd: RequestData, cand: CandidateDevice) -> Refusal:
        conds = list(cand.device.binding_conditions)
        return Refusal("binding-conditions", f"has binding conditions {conds}, and DRADeviceBindingConditions or "
                                             f"DRAResourceClaimDeviceStatus is off", {"bindingConditions": conds})

    def _selector(self, alloc: Any, rd: RequestData, cand: CandidateDevice, *, owner: str, index: int,
                  expression: str) -> Refusal:
        seen = attribute_values(expression, cand)
        missing = [k for k, v in seen.items() if v == "missing"]
        shown = ", ".join(f"{k} = {v}" for k, v in seen.items() if v != "missing")
        text = f"{owner} selector #{index} is false: {expression}"
        if shown:
            text += f" ({shown})"
        if missing:
            text += f" (missing attribute{'s' if len(missing) > 1 else ''}: {', '.join(missing)})"
        return Refusal("selector", text, {"owner": owner, "index": index, "expression": expression,
                                          "attributes": seen, "missing": missing})

    def _cel_error(self, alloc: Any, rd: RequestData, cand: CandidateDevice, *, owner: str, index: int,
                   expression: str, error: str) -> Refusal:
        seen = attribute_values(expression, cand)
        missing = [k for k, v in seen.items() if v == "missing"]
        text = f"{owner} selector #{index} failed with a CEL runtime error: {error}: {expression}"
        if missing:
            text += f" (missing attribute{'s' if len(missing) > 1 else ''}: {', '.join(missing)})"
        return Refusal("cel-error", text, {"owner": owner, "index": index, "expression": expression, "error": error,
                                           "attributes": seen, "missing": missing})

    def _node_selection(self, alloc: Any, rd: RequestData, cand: CandidateDevice) -> Refusal:
        d = cand.device
        want = d.node_name or ("all nodes" if d.all_nodes else "a node selector" if d.node_selector else "no node")
        return Refusal("node-selection", f"the device is for {want}, not node {alloc._node.name}",
                       {"nodeName": d.node_name, "allNodes": d.all_nodes,
                        "nodeSelector": d.node_selector.to_wire() if d.node_selector else None})

    def _capacity_shape(self, alloc: Any, rd: RequestData, cand: CandidateDevice) -> Refusal:
        asked = {k: str(v) for k, v in (rd.spec.capacity or {}).items()}
        has = {k: str(c.value) for k, c in cand.device.capacity.items()}
        lacks = [k for k in asked if k not in has]
        why = f"the device has no capacity {', '.join(lacks)}" if lacks else "the device's request policy refuses the amount"
        return Refusal("capacity-shape", f"capacity request {asked} does not fit the device's shape: {why}",
                       {"requested": asked, "capacity": has, "lacking": lacks})

    def _capacity(self, alloc: Any, rd: RequestData, cand: CandidateDevice, *, consumed: Mapping[str, Quantity],
                  committed: Mapping[str, Quantity] | None = None,
                  allocating: Mapping[str, Quantity] | None = None) -> Refusal:
        short: dict[str, dict[str, str]] = {}
        for name, c in cand.device.capacity.items():
            used = (committed or {}).get(name)
            mine = (allocating or {}).get(name)
            total = c.value.value
            left = total - (used.value if used is not None else 0) - (mine.value if mine is not None else 0)
            if consumed[name].value > left:
                short[name] = {"requested": str(consumed[name]), "remaining": str(Quantity.from_number(left)),
                               "capacity": str(c.value), "committed": _q(used), "inThisAttempt": _q(mine)}
        text = "; ".join(f"capacity {k}: needs {v['requested']} (after the policy's rounding), {v['remaining']} of "
                         f"{v['capacity']} left" for k, v in short.items())
        return Refusal("capacity", text or "capacity short", {"short": short})

    def _skip_node_operations(self, alloc: Any, rd: RequestData, cand: CandidateDevice) -> Refusal:
        return Refusal("skip-node-operations", f"its slice skips node operations {list(cand.slice.skip_node_operations)} "
                                               f"and node {alloc._node.name} does not declare DRAOptionalNodeOperations "
                                               f"(or the gate is off)", {"skipNodeOperations": list(cand.slice.skip_node_operations)})

    def _partitionable_off(self, alloc: Any, rd: RequestData, cand: CandidateDevice) -> Refusal:
        return Refusal("partitionable-off", "consumes shared counters, and DRAPartitionableDevices is off", {})

    def _compatibility_group(self, alloc: Any, rd: RequestData, cand: CandidateDevice, *, pool: Pool) -> Refusal:
        mine = {c.counter_set: sorted(c.compatibility_groups) for c in cand.device.consumes_counters}
        return Refusal("compatibility-group", f"its compatibility groups {mine} conflict with the devices already "
                                              f"drawing on the same counter set in pool {pool.driver}/{pool.name}",
                       {"groups": mine})

    def _counters(self, alloc: Any, rd: RequestData, cand: CandidateDevice, *, pool: Pool) -> Refusal:
        avail = alloc._book.available(pool)
        used = alloc._st.counters.get(pool.key, {})
        short: list[dict[str, Any]] = []
        for c in cand.device.consumes_counters:
            for name, q in c.counters.items():
                have = avail.get(c.counter_set, {}).get(name)
                taken = used.get(c.counter_set, {}).get(name)
                left = (have.value if have is not None else 0) - (taken.value if taken is not None else 0)
                if q.value > left:
                    by = [(pool.driver, pool.name, d.name) for s in pool.slices + pool.other_slices
                          for d in s.devices if d.name != cand.device.name
                          and alloc._book._committed((pool.driver, pool.name, d.name))
                          and any(x.counter_set == c.counter_set and name in x.counters for x in d.consumes_counters)]
                    short.append({"counterSet": c.counter_set, "counter": name, "needs": str(q),
                                  "remaining": str(Quantity.from_number(max(left, 0))),
                                  "consumedBy": [device_id_str(b) for b in by],
                                  "claims": sorted({h for b in by for h in self.holders.get(b, ())})})
        text = "; ".join(f"counter set {s['counterSet']} counter {s['counter']}: needs {s['needs']}, {s['remaining']} "
                         f"left" + (f" (consumed by {', '.join(s['consumedBy'])})" if s["consumedBy"] else "")
                         for s in short)
        return Refusal("counters", text or "shared counters exhausted", {"short": short})

    def _taint(self, alloc: Any, rd: RequestData, cand: CandidateDevice) -> Refusal:
        bad = [t for t in cand.device.taints if t.effect in ("NoSchedule", "NoExecute")
               and not any(tolerates(x, t) for x in rd.spec.tolerations)]
        items = []
        for t in bad:
            origin = self.taint_origin(cand, t) if self.taint_origin else "the slice"
            items.append({"key": t.key, "value": t.value, "effect": t.effect, "from": origin})
        text = "; ".join(f"untolerated taint {i['key']}" + (f"={i['value']}" if i["value"] else "") + f":{i['effect']} "
                         f"(from {i['from']})" for i in items)
        return Refusal("taint", text, {"taints": items})

    def _constraint(self, alloc: Any, rd: RequestData, cand: CandidateDevice, *, tracker: ConstraintTracker,
                    value: AttributeValue | None) -> Refusal:
        what = "distinctAttribute" if tracker.distinct else "matchAttribute"
        held = {device_id_str(d): show(v) for d, v in tracker.held}
        text = (f"{what} {tracker.attribute}: its value {show(value)} does not go with "
                f"{', '.join(f'{k} = {v}' for k, v in held.items()) or 'the devices already picked'}")
        return Refusal("constraint", text, {"constraint": what, "attribute": tracker.attribute, "value": show(value),
                                            "held": held})


def attribute_values(expression: str, cand: CandidateDevice) -> dict[str, str]:
    """The device's values of the attributes (and capacities) a selector reads, by name;
    "missing" for one the device lacks. Read from the compiled selector where it says what it
    reads; else every attribute whose name appears in the expression's text."""
    try:
        reads = compile_selector(expression).reads
    except Exception:
        reads = None
    driver = cand.slice.driver
    out: dict[str, str] = {}
    if reads is not None:
        for r in reads:
            if r[0] == "attributes":
                name = f"{r[1]}/{r[2]}"
                out[name] = show(lookup_attribute(cand.device, driver, name))
            elif r[0] == "capacity":
                name = f"{r[1]}/{r[2]}"
                c = cand.device.capacity.get(name) or (cand.device.capacity.get(r[2]) if r[1] == driver else None)
                out[f"capacity {name}"] = str(c.value) if c is not None else "missing"
            elif r[0] == "driver":
                out["driver"] = repr(driver)
        return out
    for dom, ident in _NAMED.findall(expression) + [(d, i) for i, d in _IN.findall(expression)]:
        name = f"{dom}/{ident}"
        out[name] = show(lookup_attribute(cand.device, driver, name))
    for name, v in cand.device.attributes.items():
        full = name if "/" in name else f"{driver}/{name}"
        if full not in out and name.rpartition("/")[2] in expression:
            out[full] = show(v)
    return out


# device.attributes["domain"].name, .?name, ["name"] or [?"name"]: what a selector names
_NAMED = re.compile(r"""attributes\[\s*['"]([^'"]+)['"]\s*\]\s*(?:\.\??\s*|\[\??\s*['"])([A-Za-z_][A-Za-z0-9_]*)""")
_IN = re.compile(r"""['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s+in\s+device\.attributes\[\s*['"]([^'"]+)['"]\s*\]""")


class Probe(Allocator):
    """An allocator that takes back every device it accepts (see the module docstring); with an
    ``All`` request it keeps them, so the rest of the node's devices are checked as upstream
    would, and it goes on past a device the checks refuse (where upstream's search stops), so
    that every device of the request gets its first failing check, not only the first device
    refused. Its ``allocate`` returns None unless the claims are all ``All`` (and then not an
    allocation upstream would make)."""

    def _allocate_device(self, rd: RequestData, ri: int, si: int, cand: CandidateDevice,
                         *, must: bool) -> Callable[[], None] | None:
        undo = super()._allocate_device(rd, ri, si, cand, must=must)
        if undo is not None and self._trace is not None and hasattr(self._trace, "accept"):
            self._trace.accept(rd, cand)
        if undo is not None and not must:
            undo()
            return None
        if undo is None and must:
            return _nothing_to_undo  # refused (the tracer has it): on to the next device
        return undo


def _nothing_to_undo() -> None:
    return None
