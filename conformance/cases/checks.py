"""The named DRA assertions, written against a backend session only."""

from __future__ import annotations

from typing import Any, Callable

from ..backends.base import Session
from .matching import mismatches


class ExpectationFailed(AssertionError):
    """The target did not behave as the case says (a product failure)."""

    def __init__(self, summary: str, *, expected: Any = None, actual: Any = None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.expected = expected
        self.actual = actual


def claim_name(s: Session, ref: Any) -> str:
    if isinstance(ref, str):
        return ref
    pod = s.get("Pod", ref["pod"])
    if pod is None:
        raise ExpectationFailed(f"pod {ref['pod']} does not exist")
    for entry in pod["spec"].get("resourceClaims") or []:
        if entry["name"] == ref["claim"] and entry.get("resourceClaimName"):
            return str(entry["resourceClaimName"])
    for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if st.get("name") == ref["claim"] and st.get("resourceClaimName"):
            return str(st["resourceClaimName"])
    raise ExpectationFailed(f"pod {ref['pod']} has no generated claim for entry {ref['claim']!r} yet",
                            actual=(pod.get("status") or {}).get("resourceClaimStatuses"))


def _describe(ref: Any) -> str:
    return ref if isinstance(ref, str) else f"{ref['pod']}/{ref['claim']}"


def _claim(s: Session, ref: Any) -> dict[str, Any]:
    name = claim_name(s, ref)
    c = s.get("ResourceClaim", name)
    if c is None:
        raise ExpectationFailed(f"claim {_describe(ref)} ({name}) does not exist")
    return c


def _results(s: Session, ref: Any) -> list[dict[str, Any]]:
    c = _claim(s, ref)
    alloc = (c.get("status") or {}).get("allocation")
    if not alloc:
        raise ExpectationFailed(f"claim {_describe(ref)} is not allocated", expected="status.allocation set",
                                actual=c.get("status") or {})
    return list((alloc.get("devices") or {}).get("results") or [])


def _ids(results: list[dict[str, Any]]) -> list[str]:
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for r in results]


def check_object(s: Session, body: dict[str, Any]) -> None:
    kind = body["kind"]
    name = body.get("name") or claim_name(s, body["claim"])
    obj = s.get(kind, name)
    if body.get("absent"):
        if obj is not None:
            raise ExpectationFailed(f"{kind} {name} still exists", expected="absent", actual=obj.get("metadata"))
        return
    if obj is None:
        raise ExpectationFailed(f"{kind} {name} does not exist")
    problems = mismatches(body.get("match") or {}, obj, body.get("lists", "subset"))
    if problems:
        raise ExpectationFailed(f"{kind} {name}: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                                expected=body.get("match"), actual=obj)


def check_allocated(s: Session, body: dict[str, Any]) -> None:
    ref = body["claim"]
    results = _results(s, ref)
    what = f"claim {_describe(ref)}"
    if "count" in body and len(results) != body["count"]:
        raise ExpectationFailed(f"{what}: expected {body['count']} allocated devices, got {len(results)}",
                                expected=body["count"], actual=_ids(results))
    if "driver" in body:
        other = [r for r in results if r["driver"] != body["driver"]]
        if other or not results:
            raise ExpectationFailed(f"{what}: expected every device from driver {body['driver']}", expected=body["driver"],
                                    actual=_ids(results))
    if "devices" in body and sorted(r["device"] for r in results) != sorted(body["devices"]):
        raise ExpectationFailed(f"{what}: expected devices {sorted(body['devices'])}, got {sorted(r['device'] for r in results)}",
                                expected=sorted(body["devices"]), actual=_ids(results))
    for req, n in (body.get("requests") or {}).items():
        got = sum(1 for r in results if r["request"] == req)
        if got != n:
            raise ExpectationFailed(f"{what}: expected {n} device(s) for request {req!r}, got {got}",
                                    expected={req: n}, actual=[r["request"] for r in results])
    if "node" in body:
        sel = ((_claim(s, ref).get("status") or {}).get("allocation") or {}).get("nodeSelector")
        want = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [body["node"]]}]}]}
        if sel != want:
            raise ExpectationFailed(f"{what}: expected the allocation to be pinned to node {body['node']}", expected=want, actual=sel)
    if "reservedFor" in body:
        got_names = sorted(r.get("name") for r in (_claim(s, ref).get("status") or {}).get("reservedFor") or [])
        if got_names != sorted(body["reservedFor"]):
            raise ExpectationFailed(f"{what}: expected reservedFor {sorted(body['reservedFor'])}, got {got_names}",
                                    expected=sorted(body["reservedFor"]), actual=got_names)


def check_not_allocated(s: Session, body: dict[str, Any]) -> None:
    c = _claim(s, body["claim"])
    alloc = (c.get("status") or {}).get("allocation")
    if alloc:
        raise ExpectationFailed(f"claim {_describe(body['claim'])} is allocated, expected it not to be",
                                expected=None, actual=_ids(alloc["devices"]["results"]))


def _pod(s: Session, name: str) -> dict[str, Any]:
    pod = s.get("Pod", name)
    if pod is None:
        raise ExpectationFailed(f"pod {name} does not exist")
    return pod


def _scheduled_condition(pod: dict[str, Any]) -> dict[str, Any]:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c
    return {}


def check_pod_scheduled(s: Session, body: dict[str, Any]) -> None:
    pod = _pod(s, body["pod"])
    node = pod["spec"].get("nodeName")
    if not node:
        cond = _scheduled_condition(pod)
        raise ExpectationFailed(f"pod {body['pod']} is not scheduled: {cond.get('message') or cond.get('reason') or 'no condition yet'}",
                                expected="spec.nodeName set", actual=cond or None)
    if body.get("node") and node != body["node"]:
        raise ExpectationFailed(f"pod {body['pod']} is on node {node}, expected {body['node']}", expected=body["node"], actual=node)


def check_pod_running(s: Session, body: dict[str, Any]) -> None:
    pod = _pod(s, body["pod"])
    phase = (pod.get("status") or {}).get("phase")
    if phase != "Running":
        cond = _scheduled_condition(pod)
        raise ExpectationFailed(f"pod {body['pod']} is {phase or 'not started'}, expected Running"
                                + (f": {cond['message']}" if cond.get("message") else ""), expected="Running", actual=phase)


def check_pod_unschedulable(s: Session, body: dict[str, Any]) -> None:
    pod = _pod(s, body["pod"])
    if pod["spec"].get("nodeName"):
        raise ExpectationFailed(f"pod {body['pod']} was scheduled to {pod['spec']['nodeName']}, expected it to stay pending",
                                expected="unschedulable", actual=pod["spec"]["nodeName"])
    cond = _scheduled_condition(pod)
    if cond.get("status") != "False":
        raise ExpectationFailed(f"pod {body['pod']} has no PodScheduled=False condition yet", actual=cond or None)
    want = body.get("reasonContains")
    text = f"{cond.get('reason', '')}: {cond.get('message', '')}"
    if want and want not in text:
        raise ExpectationFailed(f"pod {body['pod']} is unschedulable for another reason: {text}", expected=want, actual=text)


def check_devices_distinct(s: Session, body: dict[str, Any]) -> None:
    seen: dict[str, str] = {}
    for ref in body["claims"]:
        for r in _results(s, ref):
            if r.get("adminAccess"):
                continue
            key = f"{r['driver']}/{r['pool']}/{r['device']}"
            if key in seen and r.get("shareID") is None:
                raise ExpectationFailed(f"device {key} is allocated to both {seen[key]} and {_describe(ref)}",
                                        expected="distinct devices", actual=key)
            seen[key] = _describe(ref)


def check_devices_shared(s: Session, body: dict[str, Any]) -> None:
    sets = {_describe(ref): sorted(set(_ids(_results(s, ref)))) for ref in body["claims"]}
    first = next(iter(sets.values()))
    if any(v != first for v in sets.values()):
        raise ExpectationFailed("the claims were not given the same devices", expected="same devices", actual=sets)


def _attribute_values(s: Session, refs: list[Any], attribute: str) -> dict[str, Any]:
    index: dict[tuple[str, str, str], dict[str, Any]] = {}
    for sl in s.list("ResourceSlice"):
        spec = sl["spec"]
        for d in spec.get("devices") or []:
            index[(spec["driver"], spec["pool"]["name"], d["name"])] = d.get("attributes") or {}
    out: dict[str, Any] = {}
    for ref in refs:
        for r in _results(s, ref):
            attrs = index.get((r["driver"], r["pool"], r["device"]), {})
            dom, _, ident = attribute.partition("/")
            value = attrs.get(attribute) or (attrs.get(ident) if dom == r["driver"] else None)
            key = f"{r['driver']}/{r['pool']}/{r['device']}"
            if value is None:
                raise ExpectationFailed(f"device {key} has no attribute {attribute}", actual=attrs)
            out[key] = next(iter(value.values()))
    return out


def check_attribute_equal(s: Session, body: dict[str, Any]) -> None:
    values = _attribute_values(s, body["claims"], body["attribute"])
    if len({repr(v) for v in values.values()}) > 1:
        raise ExpectationFailed(f"allocated devices differ in {body['attribute']}", expected="one value", actual=values)


def check_attribute_distinct(s: Session, body: dict[str, Any]) -> None:
    values = _attribute_values(s, body["claims"], body["attribute"])
    if len({repr(v) for v in values.values()}) != len(values):
        raise ExpectationFailed(f"allocated devices share a value of {body['attribute']}", expected="distinct values",
                                actual=values)


CHECKS: dict[str, Callable[[Session, dict[str, Any]], None]] = {
    "object": check_object,
    "allocated": check_allocated,
    "notAllocated": check_not_allocated,
    "podScheduled": check_pod_scheduled,
    "podRunning": check_pod_running,
    "podUnschedulable": check_pod_unschedulable,
    "devicesDistinct": check_devices_distinct,
    "devicesShared": check_devices_shared,
    "attributeEqual": check_attribute_equal,
    "attributeDistinct": check_attribute_distinct,
}
