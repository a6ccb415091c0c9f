"""Device health in a pod's status (KEP-4680, gate ResourceHealthStatus, beta and on in 1.37), as
the kubelet writes it (``pkg/kubelet/cm/dra/manager.go`` ``UpdateAllocatedResourcesStatus``):
for every container that names claims, one ``allocatedResourcesStatus`` entry per claim
reference, named ``claim:<pod claim name>`` or ``claim:<pod claim name>/<request>``, listing
each prepared device of the claim (of that request) once, by its first CDI device ID (else
``<driver>/<pool>/<device>``), with health ``Healthy``, ``Unhealthy`` or ``Unknown``. The
reference backend's kubelet part writes it when a pod starts and when a fault is injected or
cleared; on the cluster the real kubelet does this itself (a v1.37.2 kubelet shows Healthy
before any fault: device-taints/fault-shows-in-pod-device-health).
"""

from __future__ import annotations

from typing import Any, Collection, Mapping


def allocated_resources_status(pod: Mapping[str, Any], result: Any, unhealthy: Collection[str],
                               statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod's ``containerStatuses`` with ``allocatedResourcesStatus`` set from the prepare
    ``result`` (``clusters.nodeagent.PodResult``); ``unhealthy``: device names of the node."""
    spec = pod.get("spec") or {}
    claim_names = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    for ref in spec.get("resourceClaims") or []:
        if ref.get("resourceClaimName"):
            claim_names[ref["name"]] = ref["resourceClaimName"]
    by_name = {c.name: c for c in result.claims}
    current = {s.get("name"): dict(s) for s in statuses}
    out = []
    for container in spec.get("containers") or []:
        status = current.get(container["name"], {"name": container["name"]})
        entries = []
        for claim in (container.get("resources") or {}).get("claims") or []:
            prepared = by_name.get(claim_names.get(claim["name"]) or "")
            if prepared is None:
                continue
            request = claim.get("request")
            name = f"claim:{claim['name']}" + (f"/{request}" if request else "")
            seen: set[str] = set()
            resources = []
            for d in prepared.devices:
                base = request.split("/", 1)[0] if request else None
                if base and d.request_names and base not in d.request_names:
                    continue
                resource_id = d.cdi_ids[0] if d.cdi_ids else f"{d.driver}/{d.pool}/{d.device}"
                if resource_id in seen:
                    continue
                seen.add(resource_id)
                resources.append({"resourceID": resource_id, "health": "Unhealthy" if d.device in unhealthy else "Healthy"})
            entries.append({"name": name, "resources": resources})
        if entries:
            status["allocatedResourcesStatus"] = entries
        out.append(status)
    return out
