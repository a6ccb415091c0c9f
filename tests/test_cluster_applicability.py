"""What a cluster drakit does not own lets a case observe: device metadata files need a node side
drakit runs (else no-node-side), and counting every pool of a driver needs the driver's pools to
be the case's own (else not-applicable); an installed fake driver's controller leaves the claims
of a case alone (the case plays the controller)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from drakit.conformance.backends.nodeside import (agent_nodes_unmet, node_side_unmet, shared_driver_unmet,
                                                  silent_runtime_unmet)
from drakit.conformance.spec.case import Step

GPU = "gpu.acme.example.com"


class Api:
    def __init__(self, nodes: list[dict[str, Any]], slices: list[dict[str, Any]]) -> None:
        self.objects = {"Node": nodes, "ResourceSlice": slices}

    def list(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        return self.objects[kind]


def _case(*steps: Step) -> Any:
    return SimpleNamespace(steps=list(steps))


READY = {"metadata": {"name": "node-1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
OWN_SLICE = {"metadata": {"labels": {"drakit.dev/run": "r1"}}, "spec": {"driver": GPU, "nodeName": "node-a", "pool": {"name": "node-a"}}}
CLUSTER_SLICE = {"metadata": {}, "spec": {"driver": GPU, "nodeName": "node-1", "pool": {"name": "node-1"}}}


def test_device_metadata_needs_a_node_side_drakit_runs() -> None:
    case = _case(Step(index=0, name="s", line=3, kind="expect", assertions=((3, "deviceMetadata", {"claim": "c", "request": "r", "driver": GPU}),)))
    unmet = node_side_unmet(case, SimpleNamespace(node_side=None), Api([READY], [CLUSTER_SLICE]))
    assert unmet is not None and unmet[0] == "no-node-side"
    assert f"1 Ready node(s) publish ResourceSlices of {GPU}" in unmet[1]
    assert "the device metadata files the driver writes on the node" in unmet[1]
    restart = _case(Step(index=0, name="s", line=3, kind="restart"),
                    Step(index=1, name="t", line=4, kind="expect", assertions=((5, "container", {"pod": "p"}),)))
    got = node_side_unmet(restart, SimpleNamespace(node_side=None), Api([], []))
    assert got is not None and got[0] == "no-node-side" and "restarts" in got[1] and "container runtime" in got[1]
    health = _case(Step(index=0, name="s", line=3, kind="expect", assertions=((5, "object", {
        "kind": "Pod", "name": "p", "match": {"status": {"containerStatuses": [{"name": "main"}]}}}),)))
    got = node_side_unmet(health, SimpleNamespace(node_side=None), Api([], []))
    assert got is not None and "the container statuses a kubelet writes" in got[1]
    assert node_side_unmet(case, SimpleNamespace(node_side=object()), Api([], [])) is None
    plain = _case(Step(index=0, name="s", line=3, kind="expect", assertions=((3, "podRunning", {"pod": "p"}),)))
    assert node_side_unmet(plain, SimpleNamespace(node_side=None), Api([], [])) is None


def _node(name: str, runtime: str, ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"nodeInfo": {"containerRuntimeVersion": runtime},
                                                   "conditions": [{"type": "Ready", "status": str(ready)}]}}


def test_what_a_container_printed_needs_a_runtime_that_runs_it() -> None:
    env = _case(Step(index=0, name="s", line=3, kind="expect",
                     assertions=((3, "containerEnv", {"pod": "p", "container": "main", "claim": "c"}),)))
    fake = Api([_node("node-1", "drakit-fakecri://0.1.0")], [CLUSTER_SLICE])
    unmet = silent_runtime_unmet(env, fake, GPU)
    assert unmet is not None and unmet[0] == "no-node-side"
    assert "node(s) serving gpu.acme.example.com (node-1) run drakit-fakecri" in unmet[1]
    # a real runtime prints: the case runs and its check reads the pod's log
    assert silent_runtime_unmet(env, Api([_node("node-1", "containerd://2.1.4")], [CLUSTER_SLICE]), GPU) is None
    mixed = Api([_node("node-1", "drakit-fakecri://0.1.0"), _node("node-2", "cri-o://1.37.0")],
                [CLUSTER_SLICE, {"spec": {"driver": GPU, "nodeName": "node-2"}}])
    assert silent_runtime_unmet(env, mixed, GPU) is None
    # only the Ready nodes that serve the driver count; none: the case runs and says what it sees
    assert silent_runtime_unmet(env, Api([_node("node-1", "drakit-fakecri://0.1.0", ready=False)], [CLUSTER_SLICE]), GPU) is None
    assert silent_runtime_unmet(env, fake, "nic.swift.example.com") is None
    plain = _case(Step(index=0, name="s", line=3, kind="expect", assertions=((3, "podRunning", {"pod": "p"}),)))
    assert silent_runtime_unmet(plain, fake, GPU) is None


def test_counting_every_pool_of_a_driver_needs_the_pools_to_be_the_case_s_own() -> None:
    request = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest",
               "metadata": {"name": "x"}, "spec": {"driver": GPU}}
    case = _case(Step(index=0, name="s", line=3, kind="apply", manifests=(request,)))
    unmet = shared_driver_unmet(case, Api([], [OWN_SLICE, CLUSTER_SLICE]), "drakit.dev/run")
    assert unmet == ("not-applicable", f"the case counts every pool of {GPU}, and the cluster has 1 pool(s) of it "
                                       f"the case did not publish ({GPU}/node-1)")
    assert shared_driver_unmet(case, Api([], [OWN_SLICE]), "drakit.dev/run") is None
    by_pool = _case(Step(index=0, name="s", line=3, kind="apply", manifests=({**request, "spec": {"driver": GPU, "poolName": "node-a"}},)))
    assert shared_driver_unmet(by_pool, Api([], [CLUSTER_SLICE]), "drakit.dev/run") is None
    refused = _case(Step(index=0, name="s", line=3, kind="apply", manifests=(request,), expect_error="must be"))
    assert shared_driver_unmet(refused, Api([], [CLUSTER_SLICE]), "drakit.dev/run") is None  # the API refuses it: no count


def test_the_fake_driver_s_controller_leaves_a_case_s_claims_alone() -> None:
    from drakit.conformance.backends.cluster import _mark_harness_driven
    from drakit.conformance.backends.kubeapi import RUN_LABEL
    from drakit.fake_driver.kube import HARNESS_LABEL, BindingConditionsController
    assert HARNESS_LABEL == RUN_LABEL
    claim: dict[str, Any] = {"kind": "ResourceClaim", "metadata": {"name": "c"}}
    template: dict[str, Any] = {"kind": "ResourceClaimTemplate", "metadata": {"name": "t"}, "spec": {"spec": {}}}
    _mark_harness_driven(claim, "r1")
    _mark_harness_driven(template, "r1")
    assert claim["metadata"]["labels"] == {RUN_LABEL: "r1"}
    assert template["spec"]["metadata"]["labels"] == {RUN_LABEL: "r1"}
    seen: list[str] = []
    controller = SimpleNamespace(controllers=[SimpleNamespace(driver=GPU, reconcile=lambda c: seen.append("x"))])
    BindingConditionsController.handle(controller, "ADDED", claim)  # type: ignore[arg-type]
    assert seen == []
    BindingConditionsController.handle(controller, "ADDED", {"metadata": {"name": "other", "namespace": "n"}})  # type: ignore[arg-type]
    assert seen == ["x"]


def test_metadata_mounts_and_device_health_need_kubelet_driver_nodes() -> None:
    """On the driver's kwok nodes with drakit's node agent no container runs and kwok writes the
    pods' status: a case reading mounted metadata files or device health is no-node-side there,
    and runs on real kubelet nodes, on a cluster drakit did not start, and before nodes started."""
    meta = _case(Step(index=0, name="s", line=3, kind="expect", assertions=(
        (3, "podRunning", {"pod": "p"}), (4, "containerMetadata", {"pod": "p", "container": "main", "claim": "c"}),
        (5, "containerMetadata", {"pod": "p", "container": "plain", "claim": "c", "absent": True}))))
    health = _case(Step(index=0, name="s", line=3, kind="expect", assertions=(
        (4, "deviceHealth", {"pod": "p", "container": "main", "claim": "c"}),)))
    agent = SimpleNamespace(real=False)
    got = agent_nodes_unmet(meta, agent)
    assert got is not None and got[0] == "no-node-side" and got[1].count("metadata files mounted") == 1, got
    assert "kwok nodes with drakit's node agent" in got[1]
    got = agent_nodes_unmet(health, agent)
    assert got is not None and got[0] == "no-node-side" and "device health in pod status" in got[1], got
    for nodes in (SimpleNamespace(real=True), None, SimpleNamespace()):
        assert agent_nodes_unmet(meta, nodes) is None and agent_nodes_unmet(health, nodes) is None
    plain = _case(Step(index=0, name="s", line=3, kind="expect", assertions=((3, "podRunning", {"pod": "p"}),)))
    assert agent_nodes_unmet(plain, agent) is None
