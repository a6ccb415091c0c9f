"""Why an expectation failed, from what the cluster, the kubelet and the driver said.

Asked once, when an expect step has failed for good (not on every poll): :func:`cause` returns a
short clause the runner adds to the failure's summary, or None when nothing more is known.

- a pod that is not Running (``podRunning``): the kubelet's FailedPrepareDynamicResources event
  (the driver's own message), else, while it waits for a node, the binding conditions of its
  claims' devices that are not met (device and condition) and drakit's explanation of why it
  waits (the scheduler's reason), else the reason its container waits;
- a pod that is still there (``object`` with ``kind: Pod, absent: true``): the kubelet's failed
  NodeUnprepareResources (its FailedUnprepareDynamicResources event, or its log on drakit's
  nodes: kubelet 1.37.2 records no event) with the driver's error.
"""

from __future__ import annotations

from typing import Any

from .checks import _unresolvable_cdi, claim_name

MAX = 400  # characters of a message quoted from an event or a log


def cause(s: Any, check: str, body: dict[str, Any], explained: list[dict[str, Any]]) -> str | None:
    try:
        if check == "podRunning":
            return pending_cause(s, body["pod"], explained)
        if check == "object" and body.get("kind") == "Pod" and body.get("absent") and body.get("name"):
            return terminating_cause(s, body["name"])
    except Exception:  # noqa: BLE001 - a cause is a help: it never hides the failure itself
        return None
    return None


def _last_event(s: Any, reason: str, pod: str) -> str | None:
    found = [e for e in s.events() if e.get("reason") == reason
             and (e.get("involvedObject") or {}).get("name") == pod
             and (e.get("involvedObject") or {}).get("kind", "Pod") == "Pod"]
    found.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return _short(str(found[-1].get("message") or "")) if found else None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX else text[:MAX] + "..."


def pending_cause(s: Any, pod_name: str, explained: list[dict[str, Any]]) -> str | None:
    pod = s.get("Pod", pod_name)
    if pod is None:
        return None
    failed = _last_event(s, "FailedPrepareDynamicResources", pod_name)
    if failed:
        return f"the kubelet could not prepare its claims (FailedPrepareDynamicResources): {failed}"
    if not (pod.get("spec") or {}).get("nodeName"):
        parts = binding_waits(s, pod)
        mine = next((e for e in explained if str(e.get("subject", "")).endswith(f"/{pod_name}")), None)
        if mine is not None:
            reason = (mine.get("summary") or {}).get("reason") or (mine.get("refusal") or {}).get("message")
            parts.append(f"drakit explain: {mine.get('verdict')}: {mine.get('message')}"
                         + (f"; reason: {reason}" if reason else ""))
        return "; ".join(parts) or None
    if _unresolvable_cdi(pod):  # podRunning says it already
        return None
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("message"):
            return f"container {cs.get('name')} waits: {waiting.get('reason')}: {_short(str(waiting['message']))}"
    return None


def binding_waits(s: Any, pod: dict[str, Any]) -> list[str]:
    """For each allocated device of the pod's claims with binding conditions: those not True in
    the claim's device status, or a binding failure condition that is True."""
    out = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        try:
            name = claim_name(s, {"pod": pod["metadata"]["name"], "claim": ref["name"]})
        except AssertionError:
            continue
        claim = s.get("ResourceClaim", name) or {}
        status = claim.get("status") or {}
        for r in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []:
            if not r.get("bindingConditions") and not r.get("bindingFailureConditions"):
                continue
            entry = next((e for e in status.get("devices") or [] if (e.get("driver"), e.get("pool"), e.get("device"))
                          == (r.get("driver"), r.get("pool"), r.get("device"))), {})
            true = {c.get("type") for c in entry.get("conditions") or [] if c.get("status") == "True"}
            device = f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"
            failures = sorted(set(r.get("bindingFailureConditions") or ()) & true)
            if failures:
                out.append(f"binding failure condition {', '.join(failures)} of device {device} (claim {name}) is True")
            unmet = [c for c in r.get("bindingConditions") or () if c not in true]
            if unmet:
                out.append(f"the scheduler waits for binding condition {', '.join(unmet)} of device {device} "
                           f"(claim {name}): not True in the claim's device status (set by the driver)")
    return out


def terminating_cause(s: Any, pod_name: str) -> str | None:
    failed = _last_event(s, "FailedUnprepareDynamicResources", pod_name)
    if failed:
        return f"the kubelet's NodeUnprepareResources failed (FailedUnprepareDynamicResources): {failed}"
    from .checks import unprepare_refused
    return unprepare_refused(s, pod_name)  # the kubelet's log on drakit's nodes (1.37.2 records no event)
