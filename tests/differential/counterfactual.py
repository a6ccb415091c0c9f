"""The counterfactual check of ``drakit explain`` on one random input, shared by the test
(``test_explain_counterfactual.py``, a small count) and the script that runs the large count
(``benchmarks/explain_counterfactual.py``).

For an input both drakit's allocator and upstream's Go allocator (the oracle) cannot satisfy,
the explanation's summary either names one change (free the committed devices, tolerate the
taint, drop the selector, turn on the gate) or says that no single change suffices and names
its blockers. The change it names is made to the input and upstream must then allocate; with no
single change, each blocker's change made alone must leave upstream unsatisfied.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from drakit.conformance.allocator import AllocatedState, Allocator, Features
from drakit.conformance.allocator.types import device_id_str
from drakit.conformance.explain.run import _Watch
from drakit.conformance.explain.summary import summarise
from drakit.conformance.model import parse_object
from drakit.conformance.oracle.compare import (DEFAULT_ALLOCATORS, _wire, allocated_state, node_info, oracle_request,
                                               outcome_from_oracle, run_ours)


@dataclasses.dataclass
class Checked:
    """What one input showed. ``kind``: ``satisfiable`` (not an input for this check; nothing
    checked), ``one-change`` (the change named was made and upstream then allocated, unless
    ``wrong``), ``no-single-change`` (each blocker's change made alone; ``confirmed`` of them
    left upstream unsatisfied, ``unmakeable`` name the blockers no input change expresses)."""
    kind: str
    confirmed: int = 0
    unmakeable: tuple[str, ...] = ()
    wrong: str | None = None
    checks: tuple[str, ...] = ()  # the check of each change made


def explain(inp: dict[str, Any]) -> dict[str, Any]:
    """The summary drakit explain gives for the input's one node."""
    features = Features.from_gates(inp.get("features") or {})
    classes = {c.name: c for c in (parse_object(_wire("DeviceClass", c)) for c in inp.get("classes") or ())}
    slices = [parse_object(_wire("ResourceSlice", s)) for s in inp.get("slices") or ()]
    claims = [parse_object(_wire("ResourceClaim", c)) for c in inp.get("claims") or ()]
    state = allocated_state(inp.get("allocated"))
    node = node_info(inp["node"])
    alloc = Allocator(features, classes, slices, state, channels=DEFAULT_ALLOCATORS, share_ids=lambda: "x")
    # each committed device held by a claim of its own name, so that "free it" is a change
    holders = {d: [f"committed/{device_id_str(d)}"] for d in state.devices | state.shared_devices() | set(state.capacity)}
    watch = _Watch(holders, None)
    alloc.allocate(node, claims)
    watch.dra(node.name, alloc, node, claims)
    out = {"nodes": [{**watch.nodes[node.name], "fits": False, "refusals": [{"plugin": "DynamicResources",
                                                                           "reason": "cannot allocate all claims"}]}]}

    def released(a: Allocator, names: tuple[str, ...]) -> AllocatedState:
        return allocated_state(release(inp, names)["allocated"])
    return summarise(out, watch.inputs, released)


def release(inp: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The input with the devices of the named (pseudo-)claims no longer committed."""
    gone = {n.split("/", 1)[1] for n in names}
    new = copy.deepcopy(inp)
    a = new.get("allocated") or {}
    a["devices"] = [d for d in a.get("devices") or () if d not in gone]
    a["shares"] = [s for s in a.get("shares") or () if s["device"] not in gone]
    a["capacity"] = {d: c for d, c in (a.get("capacity") or {}).items() if d not in gone}
    new["allocated"] = a
    return new


def on_the_wire(inp: dict[str, Any], key: tuple[Any, ...], claim_ref: str, request: str) -> dict[str, Any] | None:
    """The input with the change of ``key`` made (the same change summary._change makes), or
    None when no change to the input expresses it."""
    kind = key[0]
    new = copy.deepcopy(inp)

    def specs() -> list[dict[str, Any]]:
        out = []
        for c in new["claims"]:
            if f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}".lstrip("/") != claim_ref.lstrip("/") \
                    and c["metadata"]["name"] != claim_ref.rsplit("/", 1)[-1]:
                continue
            for r in c["spec"]["devices"]["requests"]:
                if r["name"] == request:
                    out.extend([r["exactly"]] if r.get("exactly") else r.get("firstAvailable") or [])
        return out
    if kind in ("allocated", "counters") and key[1]:
        return release(inp, tuple(key[1]))
    if kind == "taint":
        for s in specs():
            s.setdefault("tolerations", []).extend({"key": k, "operator": "Equal", "value": v or "", "effect": e}
                                                    for k, v, e, _ in key[1])
        return new
    if kind in ("selector", "cel-error") and str(key[1]).startswith("claim "):
        for s in specs():
            s["selectors"] = [x for i, x in enumerate(s.get("selectors") or []) if i != key[2]]
        return new
    if kind in ("selector", "cel-error") and str(key[1]).startswith("class "):
        for c in new["classes"]:
            if c["metadata"]["name"] == str(key[1])[len("class "):]:
                c["spec"]["selectors"] = [x for i, x in enumerate(c["spec"].get("selectors") or []) if i != key[2]]
        return new
    if kind == "binding-conditions":
        new["features"].update(DRADeviceBindingConditions=True, DRAResourceClaimDeviceStatus=True)
        return new
    if kind == "partitionable-off":
        new["features"]["DRAPartitionableDevices"] = True
        return new
    return None


def upstream(oracle: Any, inp: dict[str, Any]) -> str:
    return str(outcome_from_oracle(oracle.run(oracle_request(inp, allocators=DEFAULT_ALLOCATORS))).status)


def check(oracle: Any, inp: dict[str, Any]) -> Checked:
    """The counterfactual check of one input (see the module's text)."""
    if run_ours(inp).status != "unsatisfiable" or upstream(oracle, inp) != "unsatisfiable":
        return Checked("satisfiable")
    s = explain(inp)
    if s["singleChange"]:
        ch = s["change"]
        changed = on_the_wire(inp, ch["key"], ch["claim"], ch["request"])
        if changed is None:
            return Checked("one-change", wrong=f"the change {ch['key']} cannot be made on the wire")
        got = upstream(oracle, changed)
        return Checked("one-change", confirmed=int(got == "ok"), checks=(ch["check"],),
                       wrong=None if got == "ok" else f"upstream still {got} after: {s['fix']}")
    out = Checked("no-single-change")
    made, unmakeable = [], []
    for ch in s["changes"]:
        changed = on_the_wire(inp, ch["key"], ch["claim"], ch["request"])
        if changed is None:
            unmakeable.append(ch["check"])
            continue
        made.append(ch["check"])
        if upstream(oracle, changed) == "ok":
            out.wrong = f"{ch['key']} alone makes it fit, explain said no single change"
            break
        out.confirmed += 1
    out.checks, out.unmakeable = tuple(made), tuple(unmakeable)
    return out
