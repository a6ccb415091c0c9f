"""The named DRA assertions, written against a backend session only."""

from __future__ import annotations

from typing import Any, Callable, cast

from ..backends.base import Session
from .matching import mismatches


class ExpectationFailed(AssertionError):
    """The target did not behave as the case says (a product failure)."""

    def __init__(self, summary: str, *, expected: Any = None, actual: Any = None, final: bool = False) -> None:
        super().__init__(summary)
        self.summary = summary
        self.expected = expected
        self.actual = actual
        self.final = final  # the state cannot change any more: the expect step stops waiting


def claim_name(s: Session, ref: Any) -> str:
    if isinstance(ref, str):
        return ref
    pod = s.get("Pod", ref["pod"])
    if pod is None:
        raise ExpectationFailed(f"pod {ref['pod']} does not exist")
    if ref.get("extendedResources"):
        ext = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if not ext:
            raise ExpectationFailed(f"pod {ref['pod']} has no extended-resource claim (status.extendedResourceClaimStatus)",
                                    actual=(pod.get("status") or {}).get("extendedResourceClaimStatus"))
        return str(ext)
    for entry in pod["spec"].get("resourceClaims") or []:
        if entry["name"] == ref["claim"] and entry.get("resourceClaimName"):
            return str(entry["resourceClaimName"])
    for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if st.get("name") == ref["claim"] and st.get("resourceClaimName"):
            return str(st["resourceClaimName"])
    raise ExpectationFailed(f"pod {ref['pod']} has no generated claim for entry {ref['claim']!r} yet",
                            actual=(pod.get("status") or {}).get("resourceClaimStatuses"))


def _describe(ref: Any) -> str:
    if isinstance(ref, str):
        return ref
    return f"{ref['pod']}/" + ("extended-resources" if ref.get("extendedResources") else ref["claim"])


def _claim(s: Session, ref: Any) -> dict[str, Any]:
    name = claim_name(s, ref)
    c = s.get("ResourceClaim", name)
    if c is None:
        raise ExpectationFailed(f"claim {_describe(ref)} ({name}) does not exist" + (missing_claim_hint(s, name) if isinstance(ref, str) else ""))
    return c


def missing_claim_hint(s: Session, name: str) -> str:
    """How to name a claim made from a ResourceClaimTemplate, when a claim named directly does not
    exist: through its pod's resourceClaims entry (the claim's own name is generated)."""
    for pod in s.list("Pod") if hasattr(s, "list") else ():
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            if entry.get("resourceClaimTemplateName") and entry.get("name") == name:
                return (f": pod {pod['metadata']['name']}'s claim {name!r} is made from ResourceClaimTemplate "
                        f"{entry['resourceClaimTemplateName']} under a generated name; name it through the pod: "
                        f"claim: {{pod: {pod['metadata']['name']}, claim: {name}}}")
    return ("; a claim made from a ResourceClaimTemplate has a generated name: name it through its pod, "
            "claim: {pod: POD, claim: ENTRY} (ENTRY: the pod's spec.resourceClaims name)")


def _results(s: Session, ref: Any) -> list[dict[str, Any]]:
    c = _claim(s, ref)
    alloc = (c.get("status") or {}).get("allocation")
    if not alloc:
        raise ExpectationFailed(f"claim {_describe(ref)} is not allocated", expected="status.allocation set",
                                actual=c.get("status") or {})
    return list((alloc.get("devices") or {}).get("results") or [])


def _ids(results: list[dict[str, Any]]) -> list[str]:
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for r in results]


def unprepare_refused(s: Session, pod: str) -> str | None:
    """Why a deleted pod stays, when the kubelet of the driver suite's node said so: its failed
    NodeUnprepareResources call (the claim and the driver's error), or None."""
    nodes = getattr(s, "driver_nodes", None)
    refusals = getattr(nodes, "unprepare_refusals", None)
    if refusals is None:
        return None
    found = refusals(s.namespace, getattr(s, "log_marks", None) or {}, pod)
    if not found:
        return None
    node, _, error = found[0]
    return (f"the kubelet on {node} failed to unprepare its claims: {error} (it keeps the pod Terminating and "
            f"retries every 10-15 s; {len(found)} refusal(s) so far)")


def check_object(s: Session, body: dict[str, Any]) -> None:
    kind = body["kind"]
    name = body.get("name") or claim_name(s, body["claim"])
    obj = s.get(kind, name)
    if body.get("absent"):
        if obj is not None:
            stuck = unprepare_refused(s, name) if kind == "Pod" else None
            if stuck:  # the kubelet keeps the pod until the driver unprepares: waiting tells no more
                raise ExpectationFailed(f"pod {name} cannot go: {stuck}", expected="absent", actual=obj.get("metadata"),
                                        final=True)
            raise ExpectationFailed(f"{kind} {name} still exists", expected="absent", actual=obj.get("metadata"))
        return
    if obj is None:
        raise ExpectationFailed(f"{kind} {name} does not exist" + (missing_claim_hint(s, name) if kind == "ResourceClaim" and body.get("name") else ""))
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
        cdi = _unresolvable_cdi(pod)
        if cdi:  # prepare succeeded, yet the runtime cannot find the CDI devices it answered: never runs
            raise ExpectationFailed(f"pod {body['pod']} cannot run: {cdi}", expected="Running", actual=cdi, final=True)
        cond = _scheduled_condition(pod)
        raise ExpectationFailed(f"pod {body['pod']} is {phase or 'not started'}, expected Running"
                                + (f": {cond['message']}" if cond.get("message") else ""), expected="Running", actual=phase)


def _unresolvable_cdi(pod: dict[str, Any]) -> str | None:
    """The runtime's error (the CDI library's words, as containerd, CRI-O and the fake CRI pass
    them on) for CDI devices it cannot resolve, after the driver's prepare said they exist."""
    status = pod.get("status") or {}
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if "unresolvable CDI devices" in str(waiting.get("message") or ""):
            return f"container {cs.get('name')}: {waiting.get('reason')}: {str(waiting['message'])[:300]}"
    return None


def check_pod_pending(s: Session, body: dict[str, Any]) -> None:
    pod = _pod(s, body["pod"])
    if pod["spec"].get("nodeName"):
        raise ExpectationFailed(f"pod {body['pod']} was scheduled to {pod['spec']['nodeName']}, expected it to stay pending",
                                expected="pending", actual=pod["spec"]["nodeName"])


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


def _events(s: Session) -> "list[dict[str, Any]]":
    return cast("list[dict[str, Any]]", s.events())


def _optional(s: Session, method: str, what: str) -> Any:
    fn = getattr(s, method, None)
    if fn is None:
        from ..backends.base import HarnessError
        raise HarnessError(f"this backend cannot observe {what}; the case should list backends: [reference]")
    return fn


def check_pod_evicted(s: Session, body: dict[str, Any]) -> None:
    name = body["pod"]
    events = [e for e in _events(s) if e.get("reason") == "DeviceTaintManagerEviction"
              and (e.get("involvedObject") or {}).get("kind") == "Pod" and (e.get("involvedObject") or {}).get("name") == name
              and e.get("message") == "Marking for deletion"]
    if not events:
        raise ExpectationFailed(f"pod {name} was not evicted: no DeviceTaintManagerEviction event 'Marking for deletion'",
                                expected="eviction event", actual=[f"{e.get('reason')}: {e.get('message')}" for e in _events(s)
                                                                   if (e.get("involvedObject") or {}).get("name") == name])
    pod = s.get("Pod", name)
    last = pod
    if pod is None:
        seen = getattr(s, "last_seen", None)
        last = seen("Pod", name) if seen is not None else None
    elif not pod["metadata"].get("deletionTimestamp"):
        raise ExpectationFailed(f"pod {name} still exists and is not terminating", expected="deleted", actual=pod["metadata"])
    if last is not None:
        cond = next((c for c in (last.get("status") or {}).get("conditions") or [] if c.get("type") == "DisruptionTarget"), None)
        want = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager"}
        if cond is None or any(cond.get(k) != v for k, v in want.items()):
            raise ExpectationFailed(f"pod {name} was deleted without the DisruptionTarget condition of the eviction controller",
                                    expected=want, actual=cond)


def check_event(s: Session, body: dict[str, Any]) -> None:
    found = []
    for e in _events(s):
        obj = e.get("involvedObject") or {}
        if e.get("reason") != body["reason"] or ("type" in body and e.get("type") != body["type"]):
            continue
        if "kind" in body and obj.get("kind") != body["kind"]:
            continue
        if "name" in body and obj.get("name") != body["name"]:
            continue
        if "messageContains" in body and body["messageContains"] not in (e.get("message") or ""):
            continue
        found.append(e)
    what = f"event {body['reason']}" + (f" of {body.get('kind', '')} {body['name']}" if "name" in body else "")
    if body.get("absent"):
        if found:
            raise ExpectationFailed(f"{what} exists, expected none", expected="absent", actual=[e.get("message") for e in found])
        return
    if not found:
        raise ExpectationFailed(f"no {what}" + (f" containing {body['messageContains']!r}" if "messageContains" in body else ""),
                                expected=body, actual=[f"{e.get('reason')} {(e.get('involvedObject') or {}).get('name')}: "
                                                       f"{e.get('message')}" for e in _events(s)])
    if "count" in body and len(found) != body["count"]:
        raise ExpectationFailed(f"{what}: expected {body['count']} events, got {len(found)}", expected=body["count"],
                                actual=[e.get("message") for e in found])


_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b,
            "<": lambda a, b: a < b, ">": lambda a, b: a > b}


def check_scheduler_metrics(s: Session, body: dict[str, Any]) -> None:
    metrics = _optional(s, "scheduler_metrics", "scheduler queue metrics")()
    for key, want in body.items():
        if key not in metrics:
            raise ExpectationFailed(f"unknown scheduler metric {key!r}; known: {', '.join(sorted(metrics))}")
        have = metrics[key]
        if isinstance(want, int):
            op, n = "==", want
        else:
            op = want[:2] if want[:2] in _COMPARE else want[:1]
            n = int(want[len(op):].strip())
        if not _COMPARE[op](have, n):
            raise ExpectationFailed(f"scheduler metric {key} is {have}, expected {op} {n}", expected={key: want},
                                    actual={k: v for k, v in metrics.items() if not isinstance(v, (list, dict))})


CHECKS: dict[str, Callable[[Session, dict[str, Any]], None]] = {
    "object": check_object,
    "allocated": check_allocated,
    "notAllocated": check_not_allocated,
    "podScheduled": check_pod_scheduled,
    "podRunning": check_pod_running,
    "podPending": check_pod_pending,
    "podUnschedulable": check_pod_unschedulable,
    "devicesDistinct": check_devices_distinct,
    "devicesShared": check_devices_shared,
    "attributeEqual": check_attribute_equal,
    "attributeDistinct": check_attribute_distinct,
    "podEvicted": check_pod_evicted,
    "event": check_event,
    "schedulerMetrics": check_scheduler_metrics,
}
