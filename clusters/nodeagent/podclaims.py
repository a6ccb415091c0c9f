"""Which ResourceClaims a pod uses, and whether it may use them: the kubelet's checks, pure.

A pod names its claims in ``spec.resourceClaims`` (directly, or through a template whose
generated claim's name is in ``status.resourceClaimStatuses``), plus the claim the scheduler
made for extended resources (``status.extendedResourceClaimStatus``). Before preparing, the
kubelet checks that a generated claim is controlled by the pod (or by its PodGroup) and that
the claim is reserved for the pod (or its PodGroup). Pods are wire-form dicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

SCHEDULING_GROUP = "scheduling.k8s.io"
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """One claim the pod uses; ``check_owner`` for claims generated from a template."""

    name: str
    check_owner: bool


class NotReady(Exception):
    """The pod cannot be prepared yet (e.g. its generated claim has no name yet)."""


def uses_claims(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims")
                or (pod.get("status") or {}).get("extendedResourceClaimStatus"))


def is_done(pod: Mapping[str, Any]) -> bool:
    """Deleted (graceful deletion started) or terminal: its claims are to be unprepared."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")
                or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES)


def describe(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_claims(pod: Mapping[str, Any]) -> list[ClaimRef]:
    """The claims to prepare, in the pod's order; ``NotReady`` when a generated claim's name is
    not known yet. Template entries whose status says no claim was made are skipped."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    generated = {s.get("name"): s for s in status.get("resourceClaimStatuses") or []}
    out: list[ClaimRef] = []
    for entry in spec.get("resourceClaims") or []:
        if entry.get("resourceClaimName"):
            out.append(ClaimRef(entry["resourceClaimName"], False))
        elif entry.get("resourceClaimTemplateName"):
            if entry.get("name") not in generated:
                raise NotReady(f"pod {describe(pod)}: the claim for {entry.get('name')!r} has not been created yet")
            name = generated[entry["name"]].get("resourceClaimName")
            if name:
                out.append(ClaimRef(name, True))
        else:
            raise NotReady(f"pod {describe(pod)}, spec.resourceClaims {entry.get('name')!r}: "
                           "neither resourceClaimName nor resourceClaimTemplateName is set")
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        out.append(ClaimRef(extended, False))
    return out


def _pod_group(pod: Mapping[str, Any]) -> str | None:
    group = (pod.get("spec") or {}).get("schedulingGroup") or {}
    name = group.get("podGroupName")
    return str(name) if name else None


def claim_error(pod: Mapping[str, Any], ref: ClaimRef, claim: Mapping[str, Any]) -> str | None:
    """Why the pod may not use this claim (owner or reservation), or None."""
    pod_meta, meta = pod.get("metadata") or {}, claim.get("metadata") or {}
    group = _pod_group(pod)
    if ref.check_owner:
        controller = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
        by_pod = controller is not None and controller.get("uid") == pod_meta.get("uid")
        by_group = (controller is not None and group is not None and controller.get("kind") == "PodGroup"
                    and controller.get("name") == group
                    and str(controller.get("apiVersion", "")).startswith(SCHEDULING_GROUP + "/"))
        if not (by_pod or by_group):
            return (f"ResourceClaim {meta.get('namespace')}/{meta.get('name')} was not created for "
                    f"Pod {describe(pod)} (Pod is not owner)")
    for reserved in (claim.get("status") or {}).get("reservedFor") or []:
        if reserved.get("uid") == pod_meta.get("uid"):
            return None
        if (group is not None and reserved.get("apiGroup") == SCHEDULING_GROUP
                and reserved.get("resource") == "podgroups" and reserved.get("name") == group):
            return None
    return (f"pod {pod_meta.get('name')} ({pod_meta.get('uid')}) is not allowed to use "
            f"ResourceClaim {meta.get('name')} ({meta.get('uid')})")


def allocated_drivers(claim: Mapping[str, Any]) -> set[str]:
    results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {})
               .get("results") or [])
    return {str(r.get("driver")) for r in results}
