"""The mini scheduler: the DynamicResources plugin's view of one pod, node by node.

It resolves the pod's claims (PreEnqueue/PreFilter), runs the reference allocator on each node
(Filter), binds to the first feasible node in name order and writes allocation and
``reservedFor`` (PreBind), or records why the pod is unschedulable in the pod's
``PodScheduled`` condition and a ``FailedScheduling`` event, with upstream's reason texts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

from ..allocator import Allocator, AllocationError, Features, NodeAllocationError, NodeInfo, SelectorCache
from ..model.meta import selector_matches
from ..model.meta import NodeSelector
from ..model.reader import Reader
from ..model.meta import parse_node_selector
from .state import ParsedCache, allocated_state, classes, slices_with_taint_rules
from .store import ObjectStore

FINALIZER = "resource.kubernetes.io/delete-protection"


@dataclass
class Outcome:
    node: str | None
    reason: str | None = None  # condition reason: Unschedulable | SchedulerError
    message: str | None = None


def resolve_claims(store: ObjectStore, pod: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, str | None]:
    ns = pod["metadata"].get("namespace", "")
    statuses = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    out = []
    for ref in pod["spec"].get("resourceClaims") or []:
        name = ref.get("resourceClaimName")
        if name is None:
            name = statuses.get(ref["name"])
            if name is None:
                return None, f'pod "{ns}/{pod["metadata"]["name"]}": ResourceClaim not created yet'
        claim = store.peek("ResourceClaim", name, ns)
        if claim is None:
            return None, f'resourceclaim.resource.k8s.io "{name}" not found'
        if claim["metadata"].get("deletionTimestamp"):
            return None, f'resourceclaim "{name}" is being deleted'
        if ref.get("resourceClaimTemplateName") and not _owned_by(claim, pod):
            return None, f"ResourceClaim {ns}/{name} was not created for Pod {ns}/{pod['metadata']['name']} (Pod is not owner)"
        out.append(claim)
    return out, None


def _owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> bool:
    return any(r.get("uid") == owner["metadata"]["uid"] for r in obj["metadata"].get("ownerReferences") or [])


def _node_selector_of(claim: dict[str, Any]) -> NodeSelector | None:
    raw = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
    return parse_node_selector(Reader(raw)) if raw else None


def schedule(store: ObjectStore, cache: ParsedCache, pod: dict[str, Any], gates: Mapping[str, bool],
             cel_cache: SelectorCache, share_ids: Any) -> Outcome:
    claims, problem = resolve_claims(store, pod)
    if claims is None:
        return Outcome(None, "Unschedulable", problem)
    nodes = sorted(store.list("Node"), key=lambda n: n["metadata"]["name"])
    if not nodes:
        return Outcome(None, "Unschedulable", "0/0 nodes are available: no nodes available to schedule pods.")
    features = Features.from_gates(gates)
    pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
    allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
    device_classes = classes(store, cache)
    pending_models = [cache.get(c) for c in pending]
    for m in pending_models:
        for req in m.spec.requests:
            for spec in ([req.exactly] if req.exactly else list(req.first_available)):
                if spec.device_class_name not in device_classes:
                    name = f"{req.name}/{spec.name}" if req.first_available else req.name
                    return Outcome(None, "Unschedulable", f"request {name}: device class {spec.device_class_name} does not exist")
    allocator = None
    if pending:
        in_flight = {c["metadata"]["uid"] for c in pending}
        state = allocated_state(store.list("ResourceClaim"), features, in_flight)
        allocator = Allocator(features, device_classes, slices_with_taint_rules(store, cache, gates), state,
                              share_ids=share_ids, cel_cache=cel_cache)
    reasons: Counter[str] = Counter()
    pod_selector = pod["spec"].get("nodeSelector") or {}
    for node in nodes:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in pod_selector.items()):
            reasons["node(s) didn't match Pod's node affinity/selector"] += 1
            continue
        if any((sel := _node_selector_of(c)) is not None and not selector_matches(sel, name, labels) for c in allocated):
            reasons["resourceclaim not available on the node"] += 1
            continue
        results = None
        if allocator is not None:
            try:
                declared = tuple((node.get("status") or {}).get("declaredFeatures") or ())
                results = allocator.allocate(NodeInfo(name, labels, declared), pending_models)
            except NodeAllocationError as exc:
                reasons[str(exc)] += 1
                continue
            except AllocationError as exc:
                return Outcome(None, "SchedulerError", str(exc))
            if results is None:
                reasons["cannot allocate all claims"] += 1
                continue
        _bind(store, pod, name, pending, results or [], allocated)
        return Outcome(name)
    detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda x: x[0]))
    return Outcome(None, "Unschedulable", f"0/{len(nodes)} nodes are available: {detail}.")


def _bind(store: ObjectStore, pod: dict[str, Any], node: str, pending: list[dict[str, Any]], results: list[Any],
          allocated: list[dict[str, Any]]) -> None:
    ref = {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
    for claim, result in zip(pending, results):
        c = store.get("ResourceClaim", claim["metadata"]["name"], claim["metadata"].get("namespace"))
        assert c is not None
        c.setdefault("status", {})["allocation"] = result.to_wire()
        _reserve(c, ref)
        store.update(c)
    for claim in allocated:
        c = store.get("ResourceClaim", claim["metadata"]["name"], claim["metadata"].get("namespace"))
        assert c is not None
        if _reserve(c, ref):
            store.update(c)
    p = store.get("Pod", pod["metadata"]["name"], pod["metadata"].get("namespace"))
    assert p is not None
    p["spec"]["nodeName"] = node
    set_condition(p, "PodScheduled", "True", None, None)
    store.update(p)
    store.record("Normal", "Scheduled", p, f"Successfully assigned {p['metadata'].get('namespace')}/{p['metadata']['name']} to {node}")


def _reserve(claim: dict[str, Any], ref: dict[str, str]) -> bool:
    st = claim.setdefault("status", {})
    reserved = st.setdefault("reservedFor", [])
    fins = claim["metadata"].setdefault("finalizers", [])
    if FINALIZER not in fins:
        fins.append(FINALIZER)
    if any(r.get("uid") == ref["uid"] for r in reserved):
        return False
    reserved.append(dict(ref))
    return True


def set_condition(pod: dict[str, Any], ctype: str, status: str, reason: str | None, message: str | None) -> bool:
    conds = pod.setdefault("status", {}).setdefault("conditions", [])
    new = {"type": ctype, "status": status}
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    for i, c in enumerate(conds):
        if c.get("type") == ctype:
            if c == new:
                return False
            conds[i] = new
            return True
    conds.append(new)
    return True
