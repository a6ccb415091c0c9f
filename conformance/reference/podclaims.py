"""How the reference finds a pod's claims (generated names, ownership by the pod or its
PodGroup), who a claim is reserved for, and whether its allocation's binding conditions are met."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Mapping

from ..model.meta import NodeSelector, parse_node_selector
from ..model.reader import Reader
from .clock import parse_time
from .store import ObjectStore


FINALIZER = "resource.kubernetes.io/delete-protection"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
SCHEDULING_GROUP = "scheduling.k8s.io"
BINDING_TIMEOUT = timedelta(seconds=600)  # DynamicResourcesArgs.bindingTimeout default
OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"
NOT_AVAILABLE = "resourceclaim not available on the node"



def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for r in obj["metadata"].get("ownerReferences") or []:
        if r.get("controller"):
            return r
    return None


def _owned_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    c = controller_of(obj)
    return c is not None and c.get("uid") == owner["metadata"]["uid"]


def pod_group_name(pod: Mapping[str, Any]) -> str | None:
    return ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")


def resolve_claims(store: ObjectStore, pod: dict[str, Any], gates: Mapping[str, bool] | None = None
                   ) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The pod's claims in spec order (upstream foreachPodResourceClaim), or why not yet."""
    gates = gates or {}
    workload = bool(gates.get("DRAWorkloadResourceClaims"))
    ns = pod["metadata"].get("namespace", "")
    statuses = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    out = []
    for ref in pod["spec"].get("resourceClaims") or []:
        name = ref.get("resourceClaimName")
        if name is None:
            if ref["name"] not in statuses:
                return None, f'pod "{ns}/{pod["metadata"]["name"]}": ResourceClaim not created yet'
            name = statuses[ref["name"]]
            if name is None:
                continue  # intentionally not created
        claim = store.peek("ResourceClaim", name, ns)
        if claim is None:
            return None, f'resourceclaim.resource.k8s.io "{name}" not found'
        if claim["metadata"].get("deletionTimestamp"):
            return None, f'resourceclaim "{name}" is being deleted'
        if ref.get("resourceClaimTemplateName") and not _owned_by(claim, pod):
            group = pod_group_name(pod)
            if workload and group:
                c = controller_of(claim)
                if not (c and c.get("kind") == "PodGroup" and c.get("name") == group
                        and str(c.get("apiVersion", "")).startswith(SCHEDULING_GROUP + "/")):
                    return None, (f"ResourceClaim {ns}/{name} was not created for Pod {ns}/{pod['metadata']['name']} "
                                  f"(neither Pod nor PodGroup {group} is the owner)")
            else:
                return None, f"ResourceClaim {ns}/{name} was not created for Pod {ns}/{pod['metadata']['name']} (Pod is not owner)"
        out.append(claim)
    return out, None


def reserved_for_pod(claim: Mapping[str, Any], pod: Mapping[str, Any], workload: bool) -> bool:
    """Upstream IsReservedForPod (PodGroup reservations count with DRAWorkloadResourceClaims)."""
    group = pod_group_name(pod)
    for r in (claim.get("status") or {}).get("reservedFor") or []:
        if r.get("uid") == pod["metadata"]["uid"]:
            return True
        if workload and group and r.get("apiGroup") == SCHEDULING_GROUP and r.get("resource") == "podgroups" \
                and r.get("name") == group:
            return True
    return False


def binding_for(store: ObjectStore, pod: Mapping[str, Any], claim: Mapping[str, Any], gates: Mapping[str, bool]) -> dict[str, str]:
    """Upstream BindTo: the PodGroup when the pod's claim entry matches one of its group's
    claims exactly (name and claim/template name), else the pod."""
    ns = pod["metadata"].get("namespace", "")
    group = pod_group_name(pod)
    if gates.get("DRAWorkloadResourceClaims") and group:
        pg = store.peek("PodGroup", group, ns)
        if pg is not None:
            statuses = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
            for ref in pod["spec"].get("resourceClaims") or []:
                name = ref.get("resourceClaimName") or statuses.get(ref["name"])
                if name != claim["metadata"]["name"]:
                    continue
                for gc in (pg.get("spec") or {}).get("resourceClaims") or []:
                    if gc.get("name") == ref["name"] and gc.get("resourceClaimName") == ref.get("resourceClaimName") \
                            and gc.get("resourceClaimTemplateName") == ref.get("resourceClaimTemplateName"):
                        return {"apiGroup": SCHEDULING_GROUP, "resource": "podgroups", "name": group,
                                "uid": pg["metadata"]["uid"]}
    return {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}


def node_selector_of(claim: dict[str, Any]) -> NodeSelector | None:
    raw = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
    return parse_node_selector(Reader(raw)) if raw else None


def _condition(conds: list[dict[str, Any]] | None, ctype: str) -> dict[str, Any] | None:
    for c in conds or []:
        if c.get("type") == ctype:
            return c
    return None


def binding_state(claim: Mapping[str, Any], now: Any, features_on: bool) -> tuple[bool, str | None]:
    """(ready, failure) for a claim's binding conditions (isClaimReadyForBinding plus the
    timeout check): failure is the PreBind error text, ready means every condition is True."""
    alloc = (claim.get("status") or {}).get("allocation")
    if not features_on or not alloc:
        return bool(alloc) or not features_on, None
    devices = (claim.get("status") or {}).get("devices") or []
    ready = True
    for r in (alloc.get("devices") or {}).get("results") or []:
        if not r.get("bindingConditions"):
            continue
        st = next((d for d in devices if d.get("driver") == r["driver"] and d.get("pool") == r["pool"]
                   and d.get("device") == r["device"] and d.get("shareID") == r.get("shareID")), None)
        if st is None:
            ready = False
            continue
        for ctype in r.get("bindingFailureConditions") or []:
            c = _condition(st.get("conditions"), ctype)
            if c is not None and c.get("status") == "True":
                return False, (f"device binding failed: claim={claim['metadata']['name']}, reason={c.get('reason', '')}, "
                               f'message="{c.get("message", "")}"')
        if not all((_condition(st.get("conditions"), t) or {}).get("status") == "True" for t in r["bindingConditions"]):
            ready = False
    if not ready and alloc.get("allocationTimestamp") and any(
            r.get("bindingConditions") for r in (alloc.get("devices") or {}).get("results") or []):
        if parse_time(alloc["allocationTimestamp"]) + BINDING_TIMEOUT < now:
            return False, f"device binding timeout: claim={claim['metadata']['name']}"
    return ready, None


# --- extended resources -------------------------------------------------------------------------
