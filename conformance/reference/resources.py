"""Pod resource arithmetic for the mini scheduler: what a pod requests (upstream
``resourcehelper.PodRequests``), what a node has left, and the NodeResourcesFit verdict.

Quantities are kept as exact fractions (cpu in cores, memory in bytes). A node without
``status.allocatable`` is treated as unbounded (reference nodes made from fake hardware carry
no allocatable unless a case gives them one); a node that lists allocatable is checked
exactly, and a resource it does not list counts as zero.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable, Mapping

from ..model.pod import is_extended_resource_name
from ..quantity import Quantity

POD_LEVEL_RESOURCES = ("cpu", "memory")  # upstream SupportedPodLevelResources (+ hugepages-*)


def q(text: Any) -> Fraction:
    return Quantity.parse(str(text)).value


def _container_requests(c: Mapping[str, Any]) -> dict[str, Fraction]:
    res = c.get("resources") or {}
    reqs = {k: q(v) for k, v in (res.get("requests") or {}).items()}
    for k, v in (res.get("limits") or {}).items():
        reqs.setdefault(k, q(v))  # the API server defaults requests from limits
    return reqs


def _add(into: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, Fraction(0)) + v


def _max(into: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for k, v in other.items():
        if v > into.get(k, Fraction(0)):
            into[k] = v


def pod_requests(pod: Mapping[str, Any], *, dra_statuses: Iterable[Mapping[str, Any]] | None = None) -> dict[str, Fraction]:
    """Regular containers and sidecars add up; a plain init container needs its own requests plus
    the sidecars started before it; the pod needs the maximum. Pod-level requests replace the
    container sum for the resources they name; overhead and DRA node-allocatable amounts add on."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        _add(total, _container_requests(c))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for c in spec.get("initContainers") or []:
        reqs = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            _add(total, reqs)
            _add(sidecars, reqs)
            continue
        need = dict(reqs)
        _add(need, sidecars)
        _max(init_peak, need)
    _max(total, init_peak)
    pod_level = (spec.get("resources") or {}).get("requests") or {}
    for k, v in pod_level.items():
        if k in POD_LEVEL_RESOURCES or k.startswith("hugepages-"):
            total[k] = q(v)
    _add(total, {k: q(v) for k, v in (spec.get("overhead") or {}).items()})
    for st in dra_statuses or ():
        for m in st.get("mapping") or []:
            _add(total, {m["name"]: q(m["quantity"])})
        n = len(st.get("containers") or [])
        for o in st.get("overhead") or []:
            amount = Fraction(0)
            if o.get("perPod") is not None:
                amount += q(o["perPod"])
            if o.get("perContainer") is not None and n:
                amount += q(o["perContainer"]) * n
            _add(total, {o["name"]: amount})
    return total


def node_requested(pods: Iterable[Mapping[str, Any]], node: str, *, exclude_uid: str | None = None) -> dict[str, Fraction]:
    """What the pods bound to ``node`` already request (DRA node-allocatable amounts included,
    from their ``status.nodeAllocatableResourceClaimStatuses``)."""
    total: dict[str, Fraction] = {}
    for p in pods:
        if (p.get("spec") or {}).get("nodeName") != node or p["metadata"].get("uid") == exclude_uid:
            continue
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        _add(total, pod_requests(p, dra_statuses=(p.get("status") or {}).get("nodeAllocatableResourceClaimStatuses")))
    return total


def allocatable(node: Mapping[str, Any]) -> dict[str, Fraction] | None:
    raw = (node.get("status") or {}).get("allocatable")
    if raw is None:
        return None
    return {k: q(v) for k, v in raw.items()}


def insufficient(request: Mapping[str, Fraction], alloc: Mapping[str, Fraction] | None,
                 used: Mapping[str, Fraction], *, skip: Iterable[str] = (),
                 only: Iterable[str] | None = None) -> list[str]:
    """NodeResourcesFit reasons (``Insufficient <name>``) in upstream order: cpu, memory,
    ephemeral-storage, then scalar resources sorted by name. ``skip`` lists extended resources
    that DRA backs on this node; ``only`` restricts the check (the DRA plugin checks only
    node-allocatable resources)."""
    if alloc is None:
        return []
    skipped = set(skip)
    names = [n for n in request if request[n] > 0 and n not in skipped and (only is None or n in set(only))]
    order = {"cpu": 0, "memory": 1, "ephemeral-storage": 2}
    out = []
    for n in sorted(names, key=lambda x: (order.get(x, 3), x)):
        if n == "pods":
            continue
        if n not in order and not (n.startswith("hugepages-") or is_extended_resource_name(n)):
            continue  # other names are not scheduled on
        if request[n] > alloc.get(n, Fraction(0)) - used.get(n, Fraction(0)):
            out.append(f"Insufficient {n}")
    return out
