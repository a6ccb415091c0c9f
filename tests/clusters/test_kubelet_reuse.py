"""A running real kubelet node serves the next case that names its node, whatever that case's
hardware (conformance/backends/kubeletside.py), and keeps nothing of the case before: labels,
taints, cordon, CDI specs, driver files, plugin calls. Driven through the cluster backend's
node side on a local cluster, as ``drakit run --cluster local`` does, case after case."""

from __future__ import annotations

import sys

import pytest

from drakit.clusters.local.kwokconfig import PREPARED
from drakit.clusters.local.launcher import LocalCluster
from drakit.clusters.local.pytest_fixture import kubelet_skip_reason, skip_or_fail
from drakit.conformance.backends.kubeletside import KubeletNodeSide
from drakit.conformance.backends.reference import hardware_objects
from drakit.conformance.cases.loader import load_text
from drakit.fake_driver.kube import Kube, load_api_client
from drakit.fake_driver.profile import load_profile

from .waiting import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")


def _run_claim_pod(kube, ns: str, device_class: str) -> None:
    """Namespace *ns* with claim ``c`` of one device of *device_class* and pod ``p`` using it, Running."""
    kube.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}})
    kube.request("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"claims": [{"name": "gpu"}]}}]}})
    wait_for(f"pod {ns}/p Running",
             lambda: ((kube.get(f"/api/v1/namespaces/{ns}/pods/p") or {}).get("status") or {}).get("phase") == "Running", 60)


def _case(case_id: str, nodes: str, runs_pod: bool):
    """A case as the loader makes it: its nodes, and a pod among its manifests or none."""
    manifest = ("{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: main, image: x}]}}"
                if runs_pod else "{apiVersion: resource.k8s.io/v1, kind: DeviceClass, metadata: {name: x}, spec: {}}")
    text = (f"id: reuse/{case_id}\ntitle: t\nfeatures: [core]\ndescription: d\n"
            + (f"hardware:\n  nodes: {nodes}\n" if nodes != "[]" else "") + f"steps:\n  - apply:\n      - {manifest}\n")
    loaded = load_text(text, f"{case_id}.case.yaml", {}, vocabulary=frozenset(load_profile()))
    assert not loaded.errors, loaded.errors
    [case] = loaded.cases
    return case


@pytest.fixture(scope="module")
def side(tmp_path_factory: pytest.TempPathFactory):
    reason = kubelet_skip_reason()
    if reason:
        skip_or_fail(reason)
    with LocalCluster(tmp_path_factory.mktemp("reuse"), stage_set=PREPARED) as cluster:
        from drakit.conformance.backends.kubeapi import KubeApi
        api = KubeApi(str(cluster.kubeconfig), None, cache_dir=cluster.run_dir)
        node_side = KubeletNodeSide(cluster, api.api_client, {})
        try:
            yield node_side
        finally:
            node_side.stop()


def _run_case(side: KubeletNodeSide, case, ns: str, device_class: str) -> dict:
    """What the backend does for a case with one pod: nodes, hardware, the pod Running; returns
    the container's CRI record, then deletes everything as the session's cleanup does."""
    kube = Kube(load_api_client(side.cluster.kubeconfig))
    side.prepare(case)
    created = []
    for obj in hardware_objects(case):
        if obj["kind"] == "Node":
            continue
        path = {"DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
                "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices"}[obj["kind"]]
        if obj["kind"] == "DeviceClass" and kube.get(f"{path}/{obj['metadata']['name']}"):
            continue
        kube.request("POST", path, obj)
        created.append(f"{path}/{obj['metadata']['name']}")
    side.open(case, ns)  # the plugins registered, as the backend's open() waits for
    _run_claim_pod(kube, ns, device_class)
    kn = side.cluster.kubelet_node("node-a")
    [record] = kn.containers(ns, "p", "main")
    kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/p", {"gracePeriodSeconds": 1})
    wait_for("the pod gone", lambda: kube.get(f"/api/v1/namespaces/{ns}/pods/p") is None, 60)
    kube.request("DELETE", f"/api/v1/namespaces/{ns}")
    for path in created:
        if "/resourceslices/" in path:
            kube.request("DELETE", path)
    return record


def test_a_running_kubelet_takes_the_next_hardware_and_keeps_nothing_of_the_last(side: KubeletNodeSide) -> None:
    kube = Kube(load_api_client(side.cluster.kubeconfig))
    server = _case("server", "[{name: node-a, shape: server-8gpu}]", True)
    first = _run_case(side, server, "reuse-a", "gpu.nova.example.com")
    assert side.starts == 1 and side.reuses == 0
    kn = side.cluster.kubelet_node("node-a")
    pid = kn.procs["kubelet"].pid
    assert any(d.startswith("k8s.gpu.nova.example.com/") for d in first["cdiDevices"])
    # what a case may leave on its node: a label, a taint, a cordon; a file in the CDI folder
    kube.request("PATCH", "/api/v1/nodes/node-a", {"metadata": {"labels": {"left.example/over": "yes"}},
                                                  "spec": {"unschedulable": True,
                                                           "taints": [{"key": "left.example/t", "effect": "NoSchedule"}]}},
                 content_type="application/merge-patch+json")
    (kn.paths.cdi_dir / "left-over.json").write_text("{}")

    small = _case("small", "[{name: node-a, shape: small-1gpu}]", True)
    second = _run_case(side, small, "reuse-b", "gpu.acme.example.com")
    assert (side.starts, side.reuses) == (1, 1), "the running kubelet took the new hardware"
    assert side.cluster.kubelet_node("node-a").procs["kubelet"].pid == pid
    node = kube.get("/api/v1/nodes/node-a")
    labels = node["metadata"]["labels"]
    assert labels["drakit.dev/shape"] == "small-1gpu" and labels["drakit.dev/gpus"] == "1"
    assert "left.example/over" not in labels and "drakit.dev/driver.gpu.nova.example.com" not in labels
    assert labels["kubernetes.io/hostname"] == "node-a"
    assert not node["spec"].get("unschedulable")
    assert not [t for t in node["spec"].get("taints") or [] if not t["key"].startswith("node.kubernetes.io/")]
    assert not (kn.paths.cdi_dir / "left-over.json").exists()
    # the container saw the new hardware's device only, from drivers that never saw the last case
    assert second["cdiDevices"] and all(d.startswith("k8s.gpu.acme.example.com/") for d in second["cdiDevices"])
    local = side._nodes["node-a"].local
    # every fake driver keeps its plugin; gpu.nova's serves no device on this hardware
    assert sorted(local.plugins) == ["gpu.acme.example.com", "gpu.nova.example.com", "nic.swift.example.com"]
    assert not local.plugins["gpu.nova.example.com"].driver.devices
    assert local.plugins["gpu.acme.example.com"].driver.devices
    assert all(c["claims"] and all("reuse-a" not in str(x) for x in c["claims"]) for c in local.plugin_calls())
    wait_for("nothing prepared", lambda: not kn.prepared_claims(), 30)

    # a case that runs no pod leaves the kubelet running; one that wants a kwok node-a does not
    side.prepare(_case("quiet", "[]", False))
    assert side.cluster.kubelet_node("node-a") is not None and side.starts == 1
    side.prepare(_case("kwok", "[{name: node-a}]", False))
    assert side.cluster.kubelet_node("node-a") is None
    assert kube.get("/api/v1/nodes/node-a") is None


def test_a_hardware_change_keeps_every_plugin_registered(side: KubeletNodeSide) -> None:
    """A driver the new hardware lacks keeps its plugin, registered, serving no device; one it
    adds was registered already: the kubelet never deregisters a driver on a hardware change
    (which would wipe that driver's slices on the node 30 s later, and a plugin it must register
    waits for its once-a-second plugin reconciler)."""
    server = _case("server2", "[{name: node-a, shape: server-8gpu}]", True)
    small = _case("small2", "[{name: node-a, shape: small-1gpu}]", True)
    side.prepare(small)
    side.open(small, "reuse-plugins")
    starts = side.starts
    local = side._nodes["node-a"].local
    before = dict(local.plugins)
    assert sorted(before) == ["gpu.acme.example.com", "gpu.nova.example.com", "nic.swift.example.com"]
    assert not before["gpu.nova.example.com"].driver.devices
    side.prepare(server)  # gpu.nova gets devices
    assert side.starts == starts and side._nodes["node-a"].local is local
    assert local.plugins == before, "the same plugins, on their sockets"
    assert local.plugins["gpu.nova.example.com"].driver.devices
    assert all(p.server.registered.is_set() for p in local.plugins.values())
    side.prepare(small)  # and loses them again
    assert side.starts == starts and local.plugins == before
    assert not local.plugins["gpu.nova.example.com"].driver.devices
    assert all(p.server.registered.is_set() for p in local.plugins.values())
    log = (side.cluster.kubelet_node("node-a").paths.dir / "kubelet.log").read_text(errors="replace")
    assert "Unregistered DRA plugin" not in log  # dra_plugin_manager logs at -v 3 (kubeletnode)
    assert log.count('"Registered DRA plugin"') == 3, "each driver registered once, at the kubelet's start"


def test_a_case_ends_once_the_kubelet_unprepared_its_pods(side: KubeletNodeSide) -> None:
    """The session's cleanup (cleanup.remove_case_objects with the node side's ``released``)
    returns only after the real kubelet called NodeUnprepareResources for the case's claim and
    dropped it from its checkpoint, and with the claim gone, whether or not the kubelet has
    deleted the pod object yet."""
    from drakit.conformance.backends.cleanup import remove_case_objects
    from drakit.conformance.backends.kubeapi import KubeApi

    kube = Kube(load_api_client(side.cluster.kubeconfig))
    api = KubeApi(str(side.cluster.kubeconfig), None, cache_dir=side.cluster.run_dir)
    case = _case("cleanup", "[{name: node-a, shape: small-1gpu}]", True)
    ns = "reuse-cleanup"
    side.prepare(case)
    slices = []
    for obj in hardware_objects(case):
        if obj["kind"] == "ResourceSlice":
            kube.request("POST", "/apis/resource.k8s.io/v1/resourceslices", obj)
            slices.append(obj["metadata"]["name"])
        elif obj["kind"] == "DeviceClass" and not kube.get(f"/apis/resource.k8s.io/v1/deviceclasses/{obj['metadata']['name']}"):
            kube.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", obj)
    nodes = side.open(case, ns)
    _run_claim_pod(kube, ns, "gpu.acme.example.com")
    kn = side.cluster.kubelet_node("node-a")
    assert f"{ns}/c" in kn.prepared_claims()
    try:
        left = remove_case_objects(api, ns, [], lambda pod: True, released=nodes.released)
        assert left == []
        assert f"{ns}/c" not in kn.prepared_claims()
        local = side._nodes["node-a"].local
        assert [c for c in local.plugin_calls() if c["operation"] == "NodeUnprepareResources" and f"{ns}/c" in c["claims"]]
        assert kube.get(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/c") is None
        pod = kube.get(f"/api/v1/namespaces/{ns}/pods/p")
        assert pod is None or pod["status"]["phase"] in ("Succeeded", "Failed")
    finally:
        nodes.close()
        for name in slices:
            kube.request("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{name}")


def test_the_first_cases_kubelets_start_with_the_cluster_and_serve_it(tmp_path) -> None:
    """``LocalCluster(prestart_kubelet_nodes=...)`` starts kubelets as soon as its API server is
    ready; the node side gives the first case the one it names, with that case's labels, as it
    runs (same kubelet process, a pod runs with the driver's device), and stops one it does not."""
    from drakit.conformance.backends.kubeletside import kubelet_nodes_of

    reason = kubelet_skip_reason()
    if reason:
        skip_or_fail(reason)
    case = _case("early", "[{name: node-a, shape: small-1gpu}]", True)
    [(name, labels)] = kubelet_nodes_of(case)
    assert name == "node-a" and labels["drakit.dev/shape"] == "small-1gpu"
    early = {"node-a": labels, "node-b": {"drakit.dev/shape": "server-8gpu"}}
    with LocalCluster(tmp_path / "early", stage_set=PREPARED, prestart_kubelet_nodes=list(early.items())) as cluster:
        assert cluster.kubelet_node("node-a") is not None and cluster.kubelet_node("node-b") is not None
        pid = cluster.kubelet_node("node-a").procs["kubelet"].pid
        from drakit.conformance.backends.kubeapi import KubeApi
        api = KubeApi(str(cluster.kubeconfig), None, cache_dir=cluster.run_dir)
        side = KubeletNodeSide(cluster, api.api_client, {}, started=early)
        try:
            record = _run_case(side, case, "early", "gpu.acme.example.com")
            assert side.starts == 1 and cluster.kubelet_node("node-a").procs["kubelet"].pid == pid
            assert record["cdiDevices"] and all(d.startswith("k8s.gpu.acme.example.com/") for d in record["cdiDevices"])
            assert cluster.kubelet_node("node-b") is None, "a kubelet the case does not name is stopped"
            kube = Kube(load_api_client(cluster.kubeconfig))
            assert kube.get("/api/v1/nodes/node-b") is None
            assert kube.get("/api/v1/nodes/node-a")["metadata"]["labels"]["drakit.dev/shape"] == "small-1gpu"
        finally:
            side.stop()
