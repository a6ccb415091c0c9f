"""What the API server does to an object before it is stored: validation (through the typed
model), defaulting, immutability and the admin-access namespace rule."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import ApiRejected, FieldError
from ..model import parse_object

ADMIN_LABEL = "resource.kubernetes.io/admin-access"
PLURAL = {"DeviceClass": "deviceclasses.resource.k8s.io", "ResourceClaim": "resourceclaims.resource.k8s.io",
          "ResourceClaimTemplate": "resourceclaimtemplates.resource.k8s.io",
          "ResourceSlice": "resourceslices.resource.k8s.io", "DeviceTaintRule": "devicetaintrules.resource.k8s.io",
          "Pod": "pods", "Node": "nodes", "Namespace": "namespaces",
          "ResourcePoolStatusRequest": "resourcepoolstatusrequests.resource.k8s.io",
          "PodGroup": "podgroups.scheduling.k8s.io", "Workload": "workloads.scheduling.k8s.io"}

# Kinds the reference serves only with a gate on (the API version is assumed enabled in the
# runtime config whenever its feature is: resource.k8s.io/v1alpha3 for pool status requests,
# scheduling.k8s.io/v1beta1 for PodGroup and Workload, whose storage also needs GenericWorkload).
SERVED_BY_GATE = {"ResourcePoolStatusRequest": "DRAResourcePoolStatus", "PodGroup": "GenericWorkload",
                  "Workload": "GenericWorkload"}


def rejected(obj: dict[str, Any], detail: str) -> ApiRejected:
    kind = obj.get("kind", "object")
    name = (obj.get("metadata") or {}).get("name") or (obj.get("metadata") or {}).get("generateName", "")
    return ApiRejected(f'{PLURAL.get(kind, kind)} "{name}" is invalid: {detail}')


def validate(obj: dict[str, Any]) -> Any:
    if obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1":
        return None
    try:
        return parse_object(obj)
    except FieldError as exc:
        raise rejected(obj, str(exc)) from None


def check_served(obj: dict[str, Any], gates: Mapping[str, bool]) -> None:
    gate = SERVED_BY_GATE.get(obj.get("kind", ""))
    if gate and not gates.get(gate):
        group = PLURAL[obj["kind"]]
        raise ApiRejected(f"the server could not find the requested resource (post {group})")


def default_pod(spec: dict[str, Any]) -> None:
    """SetDefaults_Pod: a container's requests default to its limits."""
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            res = c.get("resources") or {}
            limits = res.get("limits") or {}
            if limits:
                reqs = res.setdefault("requests", {})
                for k, v in limits.items():
                    reqs.setdefault(k, v)


def default_taint_times(obj: dict[str, Any], old: dict[str, Any] | None, stamp: str) -> None:
    """SetDefaults_DeviceTaint: ``timeAdded`` is set when missing. A re-applied manifest keeps the
    stored time of an unchanged taint (as kubectl apply merges it)."""
    if obj.get("kind") == "ResourceSlice":
        old_devices = {d.get("name"): d for d in ((old or {}).get("spec") or {}).get("devices") or []}
        for d in (obj.get("spec") or {}).get("devices") or []:
            before = old_devices.get(d.get("name")) or {}
            for t in d.get("taints") or []:
                if t.get("timeAdded"):
                    continue
                same = next((o for o in before.get("taints") or [] if o.get("key") == t.get("key")
                             and o.get("value") == t.get("value") and o.get("effect") == t.get("effect")), None)
                t["timeAdded"] = (same or {}).get("timeAdded") or stamp
    elif obj.get("kind") == "DeviceTaintRule":
        taint = (obj.get("spec") or {}).get("taint")
        if not isinstance(taint, dict):
            return
        old_taint = ((old or {}).get("spec") or {}).get("taint") or {}
        if not taint.get("timeAdded"):
            taint["timeAdded"] = old_taint.get("timeAdded") or stamp
        if old is not None and taint.get("effect") != old_taint.get("effect") and taint.get("timeAdded") == old_taint.get("timeAdded"):
            taint["timeAdded"] = stamp  # the effect changed: TimeAdded tracks when this effect was added
