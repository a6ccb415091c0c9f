"""Counterfactual check of ``drakit explain``: for random inputs drakit's allocator cannot satisfy,
the change the explanation names (free the committed devices, tolerate the taint, drop the
selector, turn on the gate) is made to the input and upstream's Go allocator (the oracle) must
then allocate; when the explanation offers no single change, each change it could make from its
blockers alone must leave upstream unsatisfied too.

``DRAKIT_EXPLAIN_EXAMPLES`` sets the number of random inputs (30 here, about 2 minutes; a large count by
``DRAKIT_EXPLAIN_EXAMPLES=N pytest tests/differential/test_explain_counterfactual.py``: about
two thirds of the examples drawn are unsatisfiable ones). Derandomized, like the other differential tests.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from hypothesis import assume, event, given

from drakit.conformance.allocator import AllocatedState, Allocator
from drakit.conformance.allocator.types import device_id_str
from drakit.conformance.explain.run import _Watch
from drakit.conformance.explain.summary import summarise
from drakit.conformance.model import parse_object
from drakit.conformance.oracle.compare import (DEFAULT_ALLOCATORS, _wire, allocated_state, node_info, oracle_request,
                                               outcome_from_oracle, run_ours)
from drakit.conformance.allocator import Features

from .check import differential_settings
from .strategies import inputs

EXAMPLES = int(os.environ.get("DRAKIT_EXPLAIN_EXAMPLES", "30"))


def _explain(inp: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], Any]:
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
        return allocated_state(_release(inp, names)["allocated"])
    return out, summarise(out, watch.inputs, released), (alloc, node, claims, released)


def _release(inp: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    gone = {n.split("/", 1)[1] for n in names}
    new = copy.deepcopy(inp)
    a = new.get("allocated") or {}
    a["devices"] = [d for d in a.get("devices") or () if d not in gone]
    a["shares"] = [s for s in a.get("shares") or () if s["device"] not in gone]
    a["capacity"] = {d: c for d, c in (a.get("capacity") or {}).items() if d not in gone}
    new["allocated"] = a
    return new


def _on_the_wire(inp: dict[str, Any], key: tuple[Any, ...], claim_ref: str, request: str) -> dict[str, Any] | None:
    """The input with the change of ``key`` made (the same change summary._change makes)."""
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
        return _release(inp, tuple(key[1]))
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


def _upstream(oracle: Any, inp: dict[str, Any]) -> str:
    return str(outcome_from_oracle(oracle.run(oracle_request(inp, allocators=DEFAULT_ALLOCATORS))).status)


@differential_settings(EXAMPLES)
@given(inp=inputs())
def test_each_named_change_makes_upstream_allocate(oracle: Any, inp: dict[str, Any]) -> None:
    assume(run_ours(inp).status == "unsatisfiable")
    assume(_upstream(oracle, inp) == "unsatisfiable")
    _, s, _ = _explain(inp)
    if s["singleChange"]:
        event("explained: one change")
        ch = s["change"]
        changed = _on_the_wire(inp, ch["key"], ch["claim"], ch["request"])
        assert changed is not None, f"the change {ch['key']} cannot be made on the wire"
        assert _upstream(oracle, changed) == "ok", f"upstream still cannot allocate after: {s['fix']}"
        return
    event("explained: no single change")
    for ch in s["changes"]:
        changed = _on_the_wire(inp, ch["key"], ch["claim"], ch["request"])
        if changed is None:
            continue
        event(f"blocker checked: {ch['check']}")
        assert _upstream(oracle, changed) != "ok", f"{ch['key']} alone makes it fit, explain said no single change"
