"""Allocated ResourceClaims for exercising a driver's node side without a cluster.

``sample_claims(inventory, driver)`` makes claims whose ``status.allocation`` names devices of
``driver`` on the inventory's node, as a scheduler would have written them:

- ``single``: one device, request ``dev``;
- ``multi``: two devices, requests ``first`` and ``second/fast`` (a prioritized-list
  subrequest, so the plugin must answer with the base name ``second``);
- ``concurrent-<i>``: one device each, all different (prepared in parallel by node-check);
- ``unknown-device``: a device the driver does not have, annotated
  ``drakit.dev/node-check-expect: error`` (preparing it must fail for that claim only).

UIDs derive from the node, driver and claim name, so the same call gives the same claims.
``drakit driver serve --claims FILE`` and ``drakit node-check --claims FILE`` read such a file.
"""

from __future__ import annotations

import uuid
from typing import Any

from drakit.fake_hw.inventory import NodeInventory

EXPECT_ANNOTATION = "drakit.dev/node-check-expect"
UNKNOWN_DEVICE = "no-such-device-0"
_NS = uuid.uuid5(uuid.NAMESPACE_DNS, "claims.drakit.dev")


def claim_uid(node: str, driver: str, name: str) -> str:
    return str(uuid.uuid5(_NS, f"{node}/{driver}/{name}"))


def allocated_claim(name: str, namespace: str, uid: str, node: str,
                    results: list[dict[str, Any]],
                    annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if annotations:
        meta["annotations"] = dict(annotations)
    requests = sorted({r["request"].partition("/")[0] for r in results})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": [{"name": r, "exactly": {"deviceClassName": "drakit"}}
                                          for r in requests]}},
        "status": {"allocation": {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        }},
    }


def sample_claims(inventory: NodeInventory, driver: str, *, namespace: str = "node-check",
                  concurrent: int = 4) -> list[dict[str, Any]]:
    node = inventory.node_name
    devices = [d.name for d in inventory.devices(driver)]
    if not devices:
        raise ValueError(f"driver {driver} has no devices on node {node}")

    def result(request: str, device: str) -> dict[str, Any]:
        return {"request": request, "driver": driver, "pool": node, "device": device}

    def claim(name: str, results: list[dict[str, Any]],
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
        return allocated_claim(name, namespace, claim_uid(node, driver, name), node, results,
                               annotations)

    claims = [claim("single", [result("dev", devices[0])])]
    if len(devices) > 1:
        claims.append(claim("multi", [result("first", devices[0]),
                                      result("second/fast", devices[1])]))
    for i, device in enumerate(devices[:concurrent]):
        claims.append(claim(f"concurrent-{i}", [result("dev", device)]))
    claims.append(claim("unknown-device", [result("dev", UNKNOWN_DEVICE)],
                        {EXPECT_ANNOTATION: "error"}))
    return claims
