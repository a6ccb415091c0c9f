"""What the API server does to an object before it is stored: validation (through the typed
model), defaulting, immutability and the admin-access namespace rule."""

from __future__ import annotations

from typing import Any

from ..errors import ApiRejected, FieldError
from ..model import parse_object

ADMIN_LABEL = "resource.kubernetes.io/admin-access"
PLURAL = {"DeviceClass": "deviceclasses.resource.k8s.io", "ResourceClaim": "resourceclaims.resource.k8s.io",
          "ResourceClaimTemplate": "resourceclaimtemplates.resource.k8s.io",
          "ResourceSlice": "resourceslices.resource.k8s.io", "DeviceTaintRule": "devicetaintrules.resource.k8s.io",
          "Pod": "pods", "Node": "nodes", "Namespace": "namespaces"}


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


def _default_request(body: dict[str, Any]) -> None:
    body.setdefault("allocationMode", "ExactCount")
    if body["allocationMode"] == "ExactCount":
        body.setdefault("count", 1)
    for t in body.get("tolerations") or []:
        t.setdefault("operator", "Equal")


def default_claim_spec(spec: dict[str, Any]) -> None:
    for req in (spec.get("devices") or {}).get("requests") or []:
        if req.get("exactly") is not None:
            _default_request(req["exactly"])
        for sub in req.get("firstAvailable") or []:
            _default_request(sub)


def uses_admin_access(spec: dict[str, Any]) -> bool:
    return any((req.get("exactly") or {}).get("adminAccess") for req in (spec.get("devices") or {}).get("requests") or [])


def check_admin_namespace(obj: dict[str, Any], spec: dict[str, Any], namespace: dict[str, Any] | None) -> None:
    if not uses_admin_access(spec):
        return
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(ADMIN_LABEL) != "true":
        raise rejected(obj, f"spec.devices.requests: Forbidden: admin access to devices requires the "
                            f"`{ADMIN_LABEL}: true` label on the containing namespace")
