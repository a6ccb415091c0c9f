"""Shrink an allocator input that shows a divergence to a small one that still shows it.

Hypothesis shrinks the random choices behind an input, which gets stuck on structured data (to
drop the third pool it would have to regenerate the first). This works on the input itself:
it tries to delete one thing at a time (a claim, a request, a firstAvailable entry, a constraint,
a config, a slice, a device, a device field, a request field, a committed allocation, a class,
a feature gate) and keeps every deletion after which the input still passes drakit's validation
and ``still_fails`` says the divergence is still there, until no deletion is kept.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable, Iterator

Input = dict[str, Any]

DEVICE_FIELDS = ("attributes", "capacity", "taints", "consumesCounters", "bindingConditions", "bindsToNode",
                 "allowMultipleAllocations")
BODY_FIELDS = ("selectors", "tolerations", "capacity", "adminAccess", "derivedAttributes")


def _bodies(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [request["exactly"]] if request.get("exactly") else list(request.get("firstAvailable") or ())


def _drop_references(devices: dict[str, Any], names: set[str]) -> None:
    """Remove constraint/config references to deleted request names (drop entries left empty)."""
    for key in ("constraints", "config"):
        kept = []
        for entry in devices.get(key) or ():
            refs = entry.get("requests")
            if refs:
                refs = [r for r in refs if r.split("/", 1)[0] not in names and r not in names]
                if not refs:
                    continue
                entry["requests"] = refs
            kept.append(entry)
        if kept:
            devices[key] = kept
        else:
            devices.pop(key, None)


def candidates(inp: Input) -> Iterator[tuple[str, Input]]:
    """Every input one deletion away from ``inp``, biggest deletions first."""
    def variant(change: Callable[[Input], None], what: str) -> tuple[str, Input]:
        out = copy.deepcopy(inp)
        change(out)
        return what, out

    claims = inp.get("claims") or []
    for i in range(len(claims)):
        if len(claims) > 1:
            yield variant(lambda o, i=i: o["claims"].pop(i), f"claim #{i}")
    for i, s in enumerate(inp.get("slices") or []):
        yield variant(lambda o, i=i: o["slices"].pop(i), f"slice {s.get('metadata', {}).get('name')}")
    for ci, c in enumerate(claims):
        devs = c["spec"]["devices"]
        reqs = devs.get("requests") or []
        for ri, r in enumerate(reqs):
            if len(reqs) > 1:
                def drop_req(o: Input, ci: int = ci, ri: int = ri) -> None:
                    d = o["claims"][ci]["spec"]["devices"]
                    name = d["requests"].pop(ri)["name"]
                    _drop_references(d, {name})
                yield variant(drop_req, f"claim #{ci} request {r['name']}")
            subs = r.get("firstAvailable") or []
            for si in range(len(subs)):
                if len(subs) > 1:
                    def drop_sub(o: Input, ci: int = ci, ri: int = ri, si: int = si) -> None:
                        d = o["claims"][ci]["spec"]["devices"]
                        req = d["requests"][ri]
                        sub = req["firstAvailable"].pop(si)
                        _drop_references(d, {f"{req['name']}/{sub['name']}"})
                    yield variant(drop_sub, f"claim #{ci} subrequest {r['name']}/{subs[si]['name']}")
        for key in ("constraints", "config"):
            for k in range(len(devs.get(key) or [])):
                def drop_entry(o: Input, ci: int = ci, key: str = key, k: int = k) -> None:
                    d = o["claims"][ci]["spec"]["devices"]
                    d[key].pop(k)
                    if not d[key]:
                        d.pop(key)
                yield variant(drop_entry, f"claim #{ci} {key} #{k}")
    for si, s in enumerate(inp.get("slices") or []):
        devices = (s.get("spec") or {}).get("devices") or []
        for di, d in enumerate(devices):
            yield variant(lambda o, si=si, di=di: o["slices"][si]["spec"]["devices"].pop(di), f"device {d.get('name')}")
        for di, d in enumerate(devices):
            for f in DEVICE_FIELDS:
                if f in d:
                    yield variant(lambda o, si=si, di=di, f=f: o["slices"][si]["spec"]["devices"][di].pop(f),
                                  f"device {d.get('name')} {f}")
            for f in ("attributes", "capacity"):
                for k in list((d.get(f) or {}))[1:] if len(d.get(f) or {}) > 1 else []:
                    yield variant(lambda o, si=si, di=di, f=f, k=k: o["slices"][si]["spec"]["devices"][di][f].pop(k),
                                  f"device {d.get('name')} {f} {k}")
        if (s.get("spec") or {}).get("skipNodeOperations"):
            yield variant(lambda o, si=si: o["slices"][si]["spec"].pop("skipNodeOperations"), "skipNodeOperations")
    for ci, c in enumerate(claims):
        for ri, r in enumerate(c["spec"]["devices"].get("requests") or []):
            for bi, b in enumerate(_bodies(r)):
                for f in BODY_FIELDS:
                    if f in b:
                        def drop_field(o: Input, ci: int = ci, ri: int = ri, bi: int = bi, f: str = f) -> None:
                            _bodies(o["claims"][ci]["spec"]["devices"]["requests"][ri])[bi].pop(f)
                        yield variant(drop_field, f"claim #{ci} request {r['name']} #{bi} {f}")
                reqs = (b.get("capacity") or {}).get("requests") or {}
                for k in list(reqs)[1:] if len(reqs) > 1 else []:
                    def drop_cap(o: Input, ci: int = ci, ri: int = ri, bi: int = bi, k: str = k) -> None:
                        _bodies(o["claims"][ci]["spec"]["devices"]["requests"][ri])[bi]["capacity"]["requests"].pop(k)
                    yield variant(drop_cap, f"claim #{ci} request {r['name']} #{bi} capacity {k}")
                if b.get("allocationMode") == "ExactCount" and (b.get("count") or 1) > 1:
                    def one(o: Input, ci: int = ci, ri: int = ri, bi: int = bi) -> None:
                        _bodies(o["claims"][ci]["spec"]["devices"]["requests"][ri])[bi]["count"] = 1
                    yield variant(one, f"claim #{ci} request {r['name']} #{bi} count")
    alloc = inp.get("allocated") or {}
    for key in ("devices", "shares"):
        for k in range(len(alloc.get(key) or [])):
            yield variant(lambda o, key=key, k=k: o["allocated"][key].pop(k), f"allocated {key} #{k}")
    for d in list(alloc.get("capacity") or {}):
        yield variant(lambda o, d=d: o["allocated"]["capacity"].pop(d), f"allocated capacity {d}")
    used = {b.get("deviceClassName") for c in claims for r in c["spec"]["devices"].get("requests") or ()
            for b in _bodies(r)}
    for cls in inp.get("classes") or []:
        if cls.get("metadata", {}).get("name") not in used:
            yield variant(lambda o, n=cls["metadata"]["name"]: o.__setitem__(
                "classes", [x for x in o["classes"] if x["metadata"]["name"] != n]), f"class {cls['metadata']['name']}")
    for g in (inp.get("features") or {}):
        yield variant(lambda o, g=g: o["features"].pop(g), f"gate {g}")
    node = inp.get("node") or {}
    if node.get("declaredFeatures"):
        yield variant(lambda o: o["node"].pop("declaredFeatures"), "node declaredFeatures")
    for k in node.get("labels") or {}:
        yield variant(lambda o, k=k: o["node"]["labels"].pop(k), f"node label {k}")


def tidy(inp: Input) -> Input:
    """Drop empty containers the deletions left behind."""
    out = copy.deepcopy(inp)
    alloc = out.get("allocated") or {}
    for key in [k for k, v in alloc.items() if not v]:
        alloc.pop(key)
    if "allocated" in out and not alloc:
        out.pop("allocated")
    node = out.get("node") or {}
    if "labels" in node and not node["labels"]:
        node.pop("labels")
    return out


def size(inp: Input) -> int:
    return len(json.dumps(inp, separators=(",", ":")))


def minimise(inp: Input, still_fails: Callable[[Input], bool], *, valid: Callable[[Input], bool] = lambda _: True,
             max_tries: int = 5000) -> Input:
    """Greedy one-deletion-at-a-time reduction; ``still_fails`` must be true for ``inp``.

    A candidate for which ``valid`` is false (an input the reference refuses outright) is never
    taken, so the result stays a well-formed input."""
    current = copy.deepcopy(inp)
    tries = 0
    progress = True
    while progress and tries < max_tries:
        progress = False
        for _, cand in candidates(current):
            tries += 1
            if tries >= max_tries:
                break
            if not valid(cand):
                continue
            if still_fails(cand):
                current = cand
                progress = True
                break
    tidied = tidy(current)
    return tidied if still_fails(tidied) else current
