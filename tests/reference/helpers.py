"""Small builders for driving a ReferenceCluster directly in unit tests."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from drakit.conformance.features import DEFAULT_GATES
from drakit.conformance.reference.cluster import ReferenceCluster

NS = "demo"
DRIVER = "gpu.example.com"
CLASS = "gpu"


def cluster(**gates: bool) -> ReferenceCluster:
    return ReferenceCluster({**DEFAULT_GATES, **gates})


def node(name: str = "node-a", **status: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    if status:
        out["status"] = status
    return out


def device_class(name: str = CLASS, driver: str = DRIVER, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}], **spec}}


def slice_(name: str, devices: Iterable[Mapping[str, Any]], *, node_name: str | None = "node-a", driver: str = DRIVER,
           pool: str | None = None, generation: int = 1, **spec: Any) -> dict[str, Any]:
    sel: dict[str, Any] = {"nodeName": node_name} if node_name else {"allNodes": True}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, **sel, "pool": {"name": pool or name, "generation": generation, "resourceSliceCount": 1},
                     "devices": [dict(d) for d in devices], **spec}}


def claim(name: str, *, cls: str = CLASS, count: int | None = None, tolerations: list[dict[str, Any]] | None = None,
          **exactly: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, **exactly}
    if count is not None:
        body["count"] = count
    if tolerations is not None:
        body["tolerations"] = tolerations
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": body}]}}}


def template(name: str, *, cls: str = CLASS) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": NS},
            "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": cls}}]}}}}


def pod(name: str, *, claim_name: str | None = None, template_name: str | None = None, entry: str = "dev",
        containers: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    refs = []
    if claim_name:
        refs.append({"name": entry, "resourceClaimName": claim_name})
    if template_name:
        refs.append({"name": entry, "resourceClaimTemplateName": template_name})
    cs = containers or [{"name": "main", "resources": {"claims": [{"name": entry}]} if refs else {}}]
    for c in cs:
        c.setdefault("image", "pause")  # the API server requires one
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"resourceClaims": refs, "containers": cs, **spec}}


def standard(c: ReferenceCluster, devices: Iterable[Mapping[str, Any]] = ({"name": "d0"},), **slice_spec: Any) -> ReferenceCluster:
    """One node, the class, and one slice with the given devices."""
    c.apply(node())
    c.apply(device_class())
    c.apply(slice_("s", devices, **slice_spec))
    return c


def running(c: ReferenceCluster, name: str) -> bool:
    p = c.get("Pod", name, NS)
    return p is not None and (p.get("status") or {}).get("phase") == "Running"


def condition(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def results(c: ReferenceCluster, claim_name: str) -> list[dict[str, Any]]:
    cl = c.get("ResourceClaim", claim_name, NS) or {}
    return list(((((cl.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or [])
