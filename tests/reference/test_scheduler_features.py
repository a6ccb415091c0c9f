"""The mini scheduler's DRA features: the queue and its hints, binding conditions, extended
resources, node-allocatable accounting, PodGroup claims and optional node operations."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.errors import ApiRejected
from drakit.conformance.reference.extended import extended_requests_and_mappings

from .helpers import DRIVER, NS, claim, cluster, condition, device_class, node, pod, results, running, slice_, standard, template


# --- queue ---------------------------------------------------------------------------------------

def _waiting_pods(c: Any, n: int) -> None:
    for i in range(n):
        c.apply(pod(f"w{i}", claim_name=f"c{i}"))


@pytest.mark.parametrize("hints,examined", [(True, 1), (False, 4)])
def test_claim_event_examines_pods(hints: bool, examined: int) -> None:
    c = standard(cluster(SchedulerPreQueueingHints=hints))
    _waiting_pods(c, 4)
    assert c.metrics["unschedulablePods"] == 4
    c.apply(claim("c2"))
    m = c.metrics
    assert m["maxClaimEventPodsExamined"] == examined
    assert (m["preQueueingHintNarrowed"] > 0) == hints
    assert running(c, "w2") and m["unschedulablePods"] == 3


def test_deallocation_is_all_pods_and_requeues_the_waiter() -> None:
    c = standard(cluster(SchedulerPreQueueingHints=True))
    c.apply(template("t"))
    c.apply(pod("holder", template_name="t"))
    c.apply(pod("next", template_name="t"))
    assert running(c, "holder") and not running(c, "next")
    attempts = c.metrics["scheduleAttempts"]
    c.delete("Pod", "holder", NS)
    assert running(c, "next")
    assert c.metrics["preQueueingHintAllPods"] >= 1
    assert c.metrics["scheduleAttempts"] == attempts + 1


def test_unrelated_claim_update_does_not_requeue() -> None:
    c = standard(cluster())
    c.apply(claim("mine"))
    c.apply(pod("p", claim_name="mine", nodeSelector={"zone": "nowhere"}))
    attempts = c.metrics["scheduleAttempts"]
    c.apply(claim("other"))
    assert c.metrics["scheduleAttempts"] == attempts  # the hint said QueueSkip
    c.apply(node("node-a") | {"metadata": {"name": "node-a", "labels": {"zone": "nowhere"}}})
    assert running(c, "p")  # a node label change requeues NodeAffinity rejections


def test_flush_after_five_minutes() -> None:
    c = standard(cluster())
    c.apply(pod("p", claim_name="missing"))
    c.advance(299)
    assert c.metrics["unschedulableFlushes"] == 0
    c.advance(1)
    assert c.metrics["unschedulableFlushes"] == 1 and c.metrics["scheduleAttempts"] == 2


# --- binding conditions ---------------------------------------------------------------------

BC = {"bindsToNode": True, "bindingConditions": ["x.example.com/ready"], "bindingFailureConditions": ["x.example.com/failed"]}


def _status(c: Any, name: str, ctype: str, status: str = "True") -> None:
    cl = c.get("ResourceClaim", name, NS)
    st = dict(cl["status"])
    r = st["allocation"]["devices"]["results"][0]
    st["devices"] = [{"driver": r["driver"], "pool": r["pool"], "device": r["device"],
                      "conditions": [{"type": ctype, "status": status, "reason": "R", "message": "",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]
    c.update_status("ResourceClaim", name, NS, st)


def test_binding_waits_then_binds() -> None:
    c = cluster()
    c.apply(node())
    c.apply(device_class())
    c.apply(slice_("fabric", [{"name": "r0", **BC}], node_name=None))
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c"))
    p = c.get("Pod", "p", NS)
    assert p is not None and not p["spec"].get("nodeName")
    alloc = c.get("ResourceClaim", "c", NS)["status"]["allocation"]  # type: ignore[index]
    assert alloc["allocationTimestamp"] == "2026-01-01T00:00:00Z"
    assert alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-a"]
    _status(c, "c", "x.example.com/ready", "False")
    assert not running(c, "p")
    _status(c, "c", "x.example.com/ready")
    assert running(c, "p")


def test_binding_failure_unreserves_and_reallocates() -> None:
    c = cluster()
    c.apply(node())
    c.apply(device_class())
    c.apply(slice_("fabric", [{"name": "r0", **BC}], node_name=None))
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c"))
    _status(c, "c", "x.example.com/failed")
    p = c.get("Pod", "p", NS)
    assert condition(p, "PodScheduled")["reason"] == "SchedulerError"  # type: ignore[index]
    assert "device binding failed: claim=c, reason=R" in condition(p, "PodScheduled")["message"]  # type: ignore[index]
    cl = c.get("ResourceClaim", "c", NS)
    assert cl["status"]["reservedFor"][0]["name"] == "p" and "devices" not in cl["status"]  # type: ignore[index]


def test_binding_timeout() -> None:
    c = cluster()
    c.apply(node())
    c.apply(device_class())
    c.apply(slice_("fabric", [{"name": "r0", **BC}], node_name=None))
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c"))
    c.advance(599)
    assert condition(c.get("Pod", "p", NS), "PodScheduled") is None
    c.advance(1)  # the PreBind poll gives up after bindingTimeout (600 s)
    assert "device binding timeout" in condition(c.get("Pod", "p", NS), "PodScheduled")["message"]  # type: ignore[index]


def test_binding_timeout_of_an_older_allocation_names_the_claim() -> None:
    c = cluster()
    c.apply(node())
    c.apply(device_class())
    c.apply(slice_("fabric", [{"name": "r0", **BC}], node_name=None))
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c"))
    c.advance(300)
    c.apply(pod("q", claim_name="c"))  # waits on the same allocation, made 300 s earlier
    c.advance(301)
    assert "device binding timeout: claim=c" in condition(c.get("Pod", "q", NS), "PodScheduled")["message"]  # type: ignore[index]


def test_no_allocation_timestamp_without_the_gate() -> None:
    c = standard(cluster(DRADeviceBindingConditions=False))
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c"))
    assert "allocationTimestamp" not in c.get("ResourceClaim", "c", NS)["status"]["allocation"]  # type: ignore[index]


# --- extended resources ---------------------------------------------------------------------

def _ext_pod(name: str, init: list[int], regular: list[int], res: str = "example.com/gpu") -> dict[str, Any]:
    def cont(prefix: str, n: int, i: int, **extra: Any) -> dict[str, Any]:
        return {"name": f"{prefix}{i}", "image": "pause", "resources": {"limits": {res: str(n)}}, **extra}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"initContainers": [cont("init", n, i) for i, n in enumerate(init)],
                     "containers": [cont("c", n, i) for i, n in enumerate(regular)]}}


def test_request_naming_and_init_reuse() -> None:
    p = _ext_pod("p", [3, 1], [2])
    reqs, maps = extended_requests_and_mappings(p, ["example.com/gpu"], {"example.com/gpu": "gpu"})
    # init0 needs 3 but c0 (index 2) gives 2: shortfall 1 → its own request; init1 reuses c0
    assert [(r["name"], r["exactly"]["count"]) for r in reqs] == [("container-0-request-0", 1), ("container-2-request-0", 2)]
    assert {(m["containerName"], m["requestName"]) for m in maps} == {
        ("c0", "container-2-request-0"), ("init0", "container-2-request-0"), ("init0", "container-0-request-0"),
        ("init1", "container-2-request-0")}


def test_largest_init_shortfall_is_kept() -> None:
    p = _ext_pod("p", [2, 3], [])
    reqs, maps = extended_requests_and_mappings(p, ["example.com/gpu"], {"example.com/gpu": "gpu"})
    assert [(r["name"], r["exactly"]["count"]) for r in reqs] == [("container-1-request-0", 3)]
    assert {m["requestName"] for m in maps} == {"container-1-request-0"}


def test_extended_claim_lifecycle() -> None:
    c = standard(cluster(), devices=[{"name": "d0"}, {"name": "d1"}])
    c.apply(device_class("gpu", extendedResourceName="example.com/gpu"))
    c.apply(_ext_pod("p", [], [2]))
    assert running(c, "p")
    name = c.get("Pod", "p", NS)["status"]["extendedResourceClaimStatus"]["resourceClaimName"]  # type: ignore[index]
    assert name.startswith("p-extended-resources-")
    assert len(results(c, name)) == 2
    c.delete("Pod", "p", NS)
    assert c.get("ResourceClaim", name, NS) is None


def test_device_plugin_allocatable_wins() -> None:
    c = cluster()
    c.apply(node(allocatable={"example.com/gpu": "1"}))
    c.apply(device_class("gpu", extendedResourceName="example.com/gpu"))
    c.apply(slice_("s", [{"name": "d0"}, {"name": "d1"}]))
    c.apply(_ext_pod("p", [], [1]))
    assert running(c, "p") and not c.get("Pod", "p", NS)["status"].get("extendedResourceClaimStatus")  # type: ignore[index]
    c.apply(_ext_pod("q", [], [1]))
    assert "Insufficient example.com/gpu" in condition(c.get("Pod", "q", NS), "PodScheduled")["message"]  # type: ignore[index]


def test_unbacked_extended_resource_cannot_fit() -> None:
    c = standard(cluster())
    c.apply(device_class("gpu", extendedResourceName="example.com/gpu"))
    p = _ext_pod("p", [], [1])
    p["spec"]["containers"][0]["resources"]["limits"]["example.com/other"] = "1"
    c.apply(p)
    assert "cannot fit resource" in condition(c.get("Pod", "p", NS), "PodScheduled")["message"]  # type: ignore[index]


# --- node-allocatable -------------------------------------------------------------------------

def test_node_allocatable_footprint_and_sharing() -> None:
    c = cluster(DRANodeAllocatableResources=True)
    c.apply(node(allocatable={"cpu": "8", "memory": "2Gi"}))
    c.apply(device_class())
    c.apply(slice_("s", [{"name": "d0", "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "2"}},
                                                                     "memory": {"overhead": {"perPod": "1Gi"}}}}]))
    c.apply(claim("c"))
    two = [{"name": n, "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "dev"}]}} for n in ("a", "b")]
    c.apply(pod("p", claim_name="c", containers=two))
    st = c.get("Pod", "p", NS)["status"]["nodeAllocatableResourceClaimStatuses"]  # type: ignore[index]
    assert st == [{"resourceClaimName": "c", "containers": ["a", "b"], "mapping": [{"name": "cpu", "quantity": "2"}],
                   "overhead": [{"name": "memory", "perPod": "1Gi"}]}]
    c.apply(pod("q", claim_name="c"))
    assert "has a mapped device and cannot be shared" in condition(c.get("Pod", "q", NS), "PodScheduled")["message"]  # type: ignore[index]


def test_node_allocatable_gate_off_is_plain() -> None:
    c = cluster()
    c.apply(node(allocatable={"cpu": "1"}))
    c.apply(device_class())
    c.apply(slice_("s", [{"name": "d0", "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "8"}}}}]))
    assert "nodeAllocatableResources" not in c.get("ResourceSlice", "s")["spec"]["devices"][0]  # type: ignore[index]
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c", containers=[{"name": "a", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "dev"}]}}]))
    assert running(c, "p")


# --- PodGroups ---------------------------------------------------------------------------------

def _pg(name: str, **claim_ref: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "dev", **claim_ref}]}}


def test_pod_group_claim_is_reserved_once() -> None:
    c = standard(cluster(GenericWorkload=True, DRAWorkloadResourceClaims=True))
    c.apply(template("t"))
    c.apply(_pg("g", resourceClaimTemplateName="t"))
    name = c.get("PodGroup", "g", NS)["status"]["resourceClaimStatuses"][0]["resourceClaimName"]  # type: ignore[index]
    assert not results(c, name)
    for i in range(3):
        c.apply(pod(f"p{i}", template_name="t", schedulingGroup={"podGroupName": "g"}))
    assert all(running(c, f"p{i}") for i in range(3))
    reserved = c.get("ResourceClaim", name, NS)["status"]["reservedFor"]  # type: ignore[index]
    assert [(r["apiGroup"], r["resource"], r["name"]) for r in reserved] == [("scheduling.k8s.io", "podgroups", "g")]
    for i in range(3):
        c.delete("Pod", f"p{i}", NS)
    assert results(c, name)
    c.delete("PodGroup", "g", NS)
    assert c.get("ResourceClaim", name, NS) is None


def test_pod_waits_for_its_pod_group() -> None:
    c = standard(cluster(GenericWorkload=True, DRAWorkloadResourceClaims=True))
    c.apply(template("t"))
    c.apply(pod("p", template_name="t", schedulingGroup={"podGroupName": "g"}))
    assert not c.get("Pod", "p", NS).get("status", {}).get("resourceClaimStatuses")  # type: ignore[union-attr]
    c.apply(_pg("g", resourceClaimTemplateName="t"))
    assert running(c, "p")


def test_pod_group_api_and_immutability() -> None:
    with pytest.raises(ApiRejected, match="could not find the requested resource"):
        cluster().apply(_pg("g", resourceClaimName="x"))
    c = cluster(GenericWorkload=True, DRAWorkloadResourceClaims=True)
    c.apply(_pg("g", resourceClaimName="x"))
    with pytest.raises(ApiRejected, match="spec.resourceClaims: Invalid value: field is immutable"):
        c.apply(_pg("g", resourceClaimName="y"))


# --- optional node operations ---------------------------------------------------------------

def test_node_operations_are_skipped_per_driver() -> None:
    c = cluster(DRAOptionalNodeOperations=True)
    c.apply(node())
    c.apply(device_class())
    c.apply(slice_("s", [{"name": "d0"}], skipNodeOperations=["*"]))
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c"))
    assert running(c, "p")
    assert results(c, "c")[0]["skipNodeOperations"] == ["*"]
    c.delete("Pod", "p", NS)
    ops = [(o["operation"], o["skipped"]) for o in c.node_operations]
    assert ops == [("NodePrepareResources", True), ("NodeUnprepareResources", True)]
    assert c.metrics["nodePrepareSkips"] == 1 and c.metrics["nodePrepareCalls"] == 0


def test_kubelet_without_the_gate_refuses_skipping_allocations() -> None:
    # An allocation asking to skip (made while the gate was on) on a kubelet with the gate off.
    c = cluster(DRAOptionalNodeOperations=True)
    c.kubelet_gates = {**c.gates, "DRAOptionalNodeOperations": False}
    c.apply(node(declaredFeatures=["DRAOptionalNodeOperations"]))  # declared by an earlier kubelet
    c.apply(device_class())
    c.apply(slice_("s", [{"name": "d0"}], skipNodeOperations=["*"]))
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c"))
    assert results(c, "c")[0]["skipNodeOperations"] == ["*"]
    assert not running(c, "p")
    assert any(e["reason"] == "FailedPrepareDynamicResources" for e in c.events(NS))
    assert DRIVER  # keep the import honest
