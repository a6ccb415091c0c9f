"""The part a person reads first: the closest node and the one thing that would make the pod fit.

Per node, a refused request is as far from fitting as the devices it still lacks (needed minus
those passing every check). The closest node is the one with the fewest requests refused and
devices lacking (a node the node filters already refused comes after every node the allocator
looked at). On it, the refused devices are grouped by what would lift their first failing check
(the claim holding them, the taint, the selector, ...); a group at least as large as what is
lacking is a candidate single change. Each candidate is checked: the change is made to the
allocator's inputs (claims released, a toleration added, a selector dropped, a gate turned on)
and the allocator runs again on that node. Only a change the allocator confirms is offered as
"would fit"; otherwise the summary says that no single change suffices, and names the blockers.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from ..allocator import AllocatedState, AllocationError, Allocator, NodeInfo
from ..model.claim import DeviceRequest, DeviceRequestSpec, ResourceClaim, Toleration

Inputs = Mapping[str, tuple[Allocator, NodeInfo, list[ResourceClaim]]]
MAX_TRIES = 12  # changes checked at most (a few nodes, a few changes each)
GATES = {"binding-conditions": "DRADeviceBindingConditions and DRAResourceClaimDeviceStatus",
         "partitionable-off": "DRAPartitionableDevices"}


# Which changes are tried first: freeing devices, then the pod's own request, then gates.
PREFERENCE = {"allocated": 0, "counters": 1, "taint": 2, "selector": 3, "cel-error": 3, "binding-conditions": 4,
              "partitionable-off": 4}


LEAD = {"allocated": 1, "selector": 2}  # lower leads; the rest 0 (min keeps the device order within a rank)


def _seen_check(d: Mapping[str, Any]) -> str:
    """A device's check, or for one in use whose selectors are false too, the selector."""
    also = (d.get("values") or {}).get("alsoRefusedBy")
    return str(also["check"]) if d["check"] == "allocated" and also else str(d["check"])


def _other_class(d: Mapping[str, Any]) -> bool:
    return d["check"] == "selector" and str((d.get("values") or {}).get("owner", "")).startswith("class ")


def fix_key(d: Mapping[str, Any]) -> tuple[Any, ...]:
    """What would lift a device's first failing check: refusals with equal keys share a fix."""
    kind, v = d["check"], d.get("values") or {}
    if kind == "allocated":
        return (kind, tuple(v.get("claims") or ()))
    if kind == "taint":
        return (kind, tuple((t["key"], t["value"], t["effect"], t["from"]) for t in v.get("taints") or ()))
    if kind in ("selector", "cel-error"):
        return (kind, v.get("owner"), v.get("index"), v.get("expression"))
    if kind == "counters":
        return (kind, tuple(sorted({h for s in v.get("short") or () for h in s.get("claims") or ()})))
    return (kind,)


def _covers(change: tuple[Any, ...], refused: tuple[Any, ...]) -> bool:
    """Whether the change of key ``change`` also lifts the refusals of key ``refused``: freeing
    claims frees every device held by some of them, tolerating taints tolerates every device
    with some of them."""
    if change == refused:
        return True
    return change[0] == refused[0] and change[0] in ("allocated", "counters", "taint") \
        and bool(refused[1]) and set(refused[1]) <= set(change[1])


def fix_text(key: tuple[Any, ...], where: str) -> str:
    kind = key[0]
    if kind == "allocated":
        return f"free the device(s) held by claim {', '.join(key[1]) or '(unknown)'} (delete it, or end the pods using it)"
    if kind == "taint":
        shown = ", ".join(f"{k}" + (f"={v}" if v else "") + f":{e} (from {o})" for k, v, e, o in key[1])
        return f"tolerate {shown} in {where}, or remove the taint"
    if kind in ("selector", "cel-error"):
        return f"change or drop {key[1]} selector #{key[2]}: {key[3]}"
    if kind == "counters":
        return f"free the shared counters held by claim {', '.join(key[1]) or '(none committed)'} (delete it, or end the pods using it)"
    if kind in GATES:
        return f"turn on {GATES[kind]}"
    return {"allocating": "the pod's requests compete for the same devices: ask for fewer, or add devices",
            "node-selection": "the devices are not for this node", "capacity": "ask for less capacity",
            "capacity-shape": "change the capacity request to one the device's policy accepts",
            "compatibility-group": "pick devices whose compatibility groups go together",
            "skip-node-operations": "run on a node that declares DRAOptionalNodeOperations",
            "cel-error": "fix the selector"}.get(kind, kind)


def _change(key: tuple[Any, ...], alloc: Allocator, claims: list[ResourceClaim], claim_ref: str, request: str,
            released: Callable[[Allocator, tuple[str, ...]], AllocatedState] | None) -> tuple[Allocator, list[ResourceClaim]] | None:
    """The allocator's inputs with the change made, or None when drakit cannot make it."""
    kind = key[0]
    features, classes, state = alloc.features, dict(alloc.classes), alloc.allocated
    new_claims = list(claims)

    def edit_spec(fn: Callable[[DeviceRequestSpec], DeviceRequestSpec]) -> None:
        for i, c in enumerate(new_claims):
            if c.ref != claim_ref:
                continue
            reqs = []
            for r in c.spec.requests:
                if r.name == request:
                    r = DeviceRequest(r.name, fn(r.exactly) if r.exactly else None,
                                      tuple(fn(s) for s in r.first_available))
                reqs.append(r)
            new_claims[i] = dataclasses.replace(c, spec=dataclasses.replace(c.spec, requests=tuple(reqs)))

    if kind in ("allocated", "counters") and released is not None and key[1]:
        state = released(alloc, tuple(key[1]))
    elif kind == "taint":
        extra = tuple(Toleration(key=k, operator="Equal", value=v or "", effect=e) for k, v, e, _ in key[1])
        edit_spec(lambda s: dataclasses.replace(s, tolerations=s.tolerations + extra))
    elif kind in ("selector", "cel-error") and str(key[1]).startswith("claim "):
        edit_spec(lambda s: dataclasses.replace(s, selectors=tuple(x for i, x in enumerate(s.selectors) if i != key[2])))
    elif kind in ("selector", "cel-error") and str(key[1]).startswith("class "):
        name = str(key[1])[len("class "):]
        cls = classes[name]
        classes[name] = dataclasses.replace(cls, selectors=tuple(x for i, x in enumerate(cls.selectors) if i != key[2]))
    elif kind == "binding-conditions":
        features = dataclasses.replace(features, device_binding_and_status=True)
    elif kind == "partitionable-off":
        features = dataclasses.replace(features, partitionable_devices=True)
    else:
        return None
    return Allocator(features, classes, alloc.index, state, cel_cache=alloc.cel, channels=alloc.channels,
                     share_ids=lambda: "explain"), new_claims


def _fits(alloc: Allocator, node: NodeInfo, claims: list[ResourceClaim]) -> bool:
    try:
        return alloc.allocate(node, claims) is not None
    except AllocationError:
        return False


def _node_distance(n: Mapping[str, Any]) -> tuple[int, int, int, list[tuple[str, str, Mapping[str, Any], int]]]:
    """(refused by the node filters, requests refused, devices lacking, the refused requests as
    (claim, request, best entry, lacking))."""
    if not n["claims"]:
        return (1, len(n["refusals"]), 0, [])
    short = []
    for c in n["claims"]:
        for r in c["requests"]:
            if not r["entries"]:
                short.append((c["claim"], r["request"], {"devices": [], "need": 0, "pass": 0}, 1))
                continue
            best = min(r["entries"], key=lambda e: max(e["need"] - e["pass"], 0))
            # An All request with no device at all, like any request with too few, lacks some.
            lack = max(best["need"] - best["pass"], 0) or (1 if best["mode"] == "All" and not best["need"] else 0)
            if lack or r["error"] or r["pools"]:
                short.append((c["claim"], r["request"], dict(best, pools=r["pools"]), max(lack, 1)))
    return (0, len(short), sum(s[3] for s in short), short)


def summarise(out: Mapping[str, Any], inputs: Inputs,
              released: Callable[[Allocator, tuple[str, ...]], AllocatedState] | None = None) -> dict[str, Any]:
    nodes = [n for n in out["nodes"] if not n["fits"]]
    if not nodes:
        return {"closestNode": None, "check": "no-node", "reason": out.get("message") or "", "fix": None,
                "checked": False, "singleChange": False, "blockers": [], "changes": [], "change": None}
    ranked = sorted(nodes, key=lambda n: (_node_distance(n)[:3], n["name"]))
    tries = 0
    first: dict[str, Any] | None = None
    for n in ranked:
        node_level, _, _, short = _node_distance(n)
        if node_level:
            reason = "; ".join(r["reason"] for r in n["refusals"])
            s = {"closestNode": n["name"], "check": "node:" + n["refusals"][0]["plugin"],
                 "reason": f"node {n['name']}: {reason}", "fix": None, "checked": False,
                 "singleChange": False, "blockers": [r["reason"] for r in n["refusals"]], "changes": [], "change": None}
            first = first or s
            continue
        if not short:  # every request has devices alone: a combination fails
            combo = n.get("combination") or {}
            texts = [f"claim {k['claim']}: no combination meets the constraint on {k['attribute']} (values seen: "
                     + ", ".join(f"{d} = {v}" for d, v in k["valuesSeen"].items()) + ")" for k in combo.get("constraints", ())]
            found = [k for k in combo.get("checks", {}) if k in ("compatibility-group", "counters", "capacity")]
            if found:
                texts.append(f"together the devices fail the {found[0]} check (the search met it "
                             f"{combo['checks'][found[0]]} time(s))")
            if combo.get("competing"):
                texts.append(f"the requests of {', '.join(combo['competing'])} compete for the same devices")
            check = "constraint" if combo.get("constraints") else found[0] if found else \
                "allocating" if combo.get("competing") else "combination"
            s = {"closestNode": n["name"], "check": check,
                 "reason": f"node {n['name']}: " + ("; ".join(texts) or "cannot allocate all claims"),
                 "fix": None, "checked": False, "singleChange": False, "blockers": texts, "changes": [], "change": None}
            first = first or s
            continue
        claim, request, entry, lack = short[0]
        # Devices a class selector refuses are not of the class: no change to the pod helps there.
        refused = [d for d in entry["devices"] if d["check"] != "ok" and not _other_class(d)]
        in_class = len(refused) + entry["pass"]
        groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
        for d in refused:
            groups.setdefault(fix_key(d), []).append(d)
        name = request + (f"/{entry['subrequest']}" if entry.get("subrequest") else "")
        head = (f"node {n['name']}: claim {claim}, request {name} needs {entry['need']} device(s), "
                f"{entry['pass']} of {in_class} of class {entry.get('class', '?')} pass")
        # The reason first: a pool left out, else the first device the request would take but for
        # a check past its selectors (a taint, counters, capacity ...), else the first in use
        # that its selectors accept, else the first whose selectors are false (in use or not).
        lead = min(refused, key=lambda d: LEAD.get(_seen_check(d), 0), default=None)
        pools = entry.get("pools") or []
        if pools:
            head += "; " + "; ".join(f"pool {p['pool']} is {p['problem']}" for p in pools)
        if lead is not None:
            head += f"; {lead['device']}: {lead['message']}"
        check = ("pool-" + pools[0]["problem"].split(":")[0]) if pools else _seen_check(lead) if lead else "too-few-devices"
        s = {"closestNode": n["name"], "check": check,
             "reason": head, "fix": None, "checked": False, "singleChange": False,
             "blockers": [fix_text(k, f"claim {claim} request {name}") + f" ({len(v)} device(s))"
                          for k, v in sorted(groups.items(), key=lambda kv: -len(kv[1]))],
             "changes": [{"check": k[0], "claim": claim, "request": request, "key": k}
                         for k, v in sorted(groups.items(), key=lambda kv: -len(kv[1]))], "change": None}
        if lack > len(refused):
            s["blockers"].append(f"only {in_class} device(s) of class {entry.get('class', '?')} on the node, "
                                 f"{entry['need']} needed")
        first = first or s
        if n["name"] not in inputs:
            continue
        alloc, node, claims = inputs[n["name"]]
        for key, _ in sorted(groups.items(), key=lambda kv: (kv[0][0] != check, PREFERENCE.get(kv[0][0], 9),
                                                                -len(kv[1]))):
            # A gate may also show devices the node's view left out; otherwise the change must
            # lift the checks of at least as many devices as are lacking.
            covered = sum(len(v) for k, v in groups.items() if _covers(key, k))
            if (covered < lack and key[0] not in GATES) or tries >= MAX_TRIES:
                continue
            tries += 1
            changed = _change(key, alloc, claims, claim, request, released)
            if changed is not None and _fits(changed[0], node, changed[1]):
                s.update(fix=fix_text(key, f"claim {claim} request {name}"), checked=True, singleChange=True,
                         change={"check": key[0], "claim": claim, "request": request, "key": key})
                return s
    assert first is not None
    return first
