"""drakit explain against the real 1.37.2 scheduler on the local cluster: a pod explain says cannot
fit stays unschedulable there, a claim explain says fits on node X is put on X, and the change
the summary names (free the holding claim) really lets the waiting pod in.

Read-only: explain lists objects through the kubeconfig (``drakit explain ... --kubeconfig``);
the test's own writes set the state up. Skips when the binaries are not built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from drakit.clusters.local import kwokconfig
from drakit.clusters.local.pytest_fixture import local_cluster, skip_reason  # noqa: F401
from drakit.conformance.cli import main

from .waiting import wait_for

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")

DRIVER = "explain.drakit.dev"
NS = "drakit-explain"
SCHEMA = Path(__file__).resolve().parents[2] / "conformance" / "explain" / "explain.v1.json"
NODES = ("explain-node-0", "explain-node-1")


def _slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def _claim(name: str, model: str, extra: str = "") -> dict[str, Any]:
    expr = f"device.attributes['{DRIVER}'].model == '{model}'" + extra
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "explain-gpu", "selectors": [{"cel": {"expression": expr}}]}}]}}}


def _pod(name: str, claim: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.invalid/none:0",
                                            "resources": {"claims": [{"name": "gpu"}]}}],
                            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _explain(capsys: Any, kubeconfig: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    rc = main(["explain", *argv, "--kubeconfig", str(kubeconfig), "-o", "json"])
    got = capsys.readouterr()
    assert got.err == "", got.err
    return rc, json.loads(got.out)


def test_explain_agrees_with_the_real_scheduler(local_cluster: Any, tmp_path: Path, capsys: Any) -> None:  # noqa: F811
    from drakit.conformance.backends.kubeapi import KubeApi
    api = KubeApi(str(local_cluster.kubeconfig))
    kc = local_cluster.kubeconfig

    def scheduled(name: str) -> str | None:
        p = api.get("Pod", name, NS) or {}
        return (p.get("spec") or {}).get("nodeName")

    def unschedulable(name: str) -> bool:
        conds = ((api.get("Pod", name, NS) or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
                   for c in conds)

    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for n in NODES:
        api.create(kwokconfig.fake_node(n, {"kubernetes.io/hostname": n}))
    api.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "explain-gpu"},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})
    api.create(_slice(NODES[0], [{"name": "gpu-0", "attributes": {"model": {"string": "a1"}}},
                                 {"name": "gpu-1", "attributes": {"model": {"string": "b2"}},
                                  "taints": [{"key": "explain/broken", "effect": "NoSchedule"}]}]))
    api.create(_slice(NODES[1], [{"name": "gpu-0", "attributes": {"model": {"string": "b2"}}}]))
    try:
        # 1. would a b2 claim fit, and where? explain says node 1 alone; the scheduler puts it there
        f = tmp_path / "b2.yaml"
        f.write_text(yaml.safe_dump(_claim("b2", "b2")))
        rc, e = _explain(capsys, kc, "-f", str(f))
        assert rc == 0 and e["verdict"] == "fits" and e["fitsOn"] == [NODES[1]], e
        n0 = next(n for n in e["nodes"] if n["name"] == NODES[0])
        checks = {d["device"]: d["check"] for d in n0["claims"][0]["requests"][0]["entries"][0]["devices"]}
        assert checks[f"{DRIVER}/{NODES[0]}/gpu-1"] == "taint"
        api.create(_claim("b2", "b2"))
        api.create(_pod("uses-b2", "b2"))
        assert wait_for("uses-b2 bound", lambda: scheduled("uses-b2")) == NODES[1]

        # 2. the holder takes node 0's a1; a second a1 pod cannot fit anywhere: both agree
        api.create(_claim("a1-held", "a1"))
        api.create(_pod("holder", "a1-held"))
        assert wait_for("holder bound", lambda: scheduled("holder")) == NODES[0]
        api.create(_claim("a1-want", "a1"))
        api.create(_pod("waits", "a1-want"))
        wait_for("waits unschedulable", lambda: unschedulable("waits"))
        rc, e = _explain(capsys, kc, "pod", f"{NS}/waits")
        assert rc == 1 and e["verdict"] == "unschedulable"
        assert e["summary"]["closestNode"] == NODES[0] and e["summary"]["checked"]
        assert f"claim {NS}/a1-held" in e["summary"]["fix"]
        # the text a person reads: the verdict, then the reason, within one screen
        assert main(["explain", "pod", f"{NS}/waits", "--kubeconfig", str(kc)]) == 1
        lines = capsys.readouterr().out.splitlines()
        with capsys.disabled():
            print("\n" + "\n".join(lines))
        assert lines[0].startswith(f"pod {NS}/waits: unschedulable: ") and lines[1].startswith(f"reason: node {NODES[0]}")
        assert len(lines) <= 25

        # 3. a b2 pod kept to node 0 meets only the tainted device: both agree it cannot fit
        api.create(_claim("b2-node0", "b2"))
        api.create(_pod("tainted", "b2-node0", NODES[0]))
        wait_for("tainted unschedulable", lambda: unschedulable("tainted"))
        rc, e = _explain(capsys, kc, "pod", f"{NS}/tainted")
        assert rc == 1 and e["verdict"] == "unschedulable" and e["summary"]["fix"].startswith("tolerate explain/broken")

        # 4. the change explain named for "waits" (free a1-held), made for real: the scheduler agrees
        api.delete("Pod", "holder", NS, grace=0)
        wait_for("holder gone", lambda: api.get("Pod", "holder", NS) is None)
        api.delete("ResourceClaim", "a1-held", NS)
        assert wait_for("waits bound", lambda: scheduled("waits"), timeout=90) == NODES[0]
        rc, e = _explain(capsys, kc, "pod", f"{NS}/waits")
        assert rc == 0 and e["verdict"] == "scheduled"
        # and a pod explain says cannot fit stays unschedulable: "tainted" still waits
        assert scheduled("tainted") is None and unschedulable("tainted")
    finally:
        api.delete("Namespace", NS, None)
        for n in NODES:
            api.delete("ResourceSlice", f"{n}-gpus", None)
            api.delete("Node", n, None)
        api.delete("DeviceClass", "explain-gpu", None)


XNS_DRIVER = "xns.explain.drakit.dev"
XNS_NODE = "explain-xns-node"
HOLDER_NS, WAITER_NS = "drakit-explain-holder", "drakit-explain-waiter"


def _namespace_reader(admin: Path, ns: str, dest: Path) -> Path:
    """A kubeconfig for an account that lists the cluster's DRA objects and nodes, but claims and
    pods only in ``ns`` (a ServiceAccount's token; its ClusterRole is removed by the caller)."""
    from kubernetes import client, config
    api = config.new_client_from_config(config_file=str(admin))
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": "reader"}})
    subject = [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}]
    rbac.create_cluster_role({"metadata": {"name": READER}, "rules": [
        {"apiGroups": ["resource.k8s.io"], "resources": ["deviceclasses", "resourceslices", "devicetaintrules"],
         "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}, {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": READER}, "subjects": subject,
                                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER}})
    rbac.create_namespaced_role(ns, {"metadata": {"name": "reader"}, "rules": [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaimtemplates"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    rbac.create_namespaced_role_binding(ns, {"metadata": {"name": "reader"}, "subjects": subject,
                                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}})
    token = core.create_namespaced_service_account_token("reader", ns, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))).status.token
    data = yaml.safe_load(admin.read_text())
    ctx = next(c for c in data["contexts"] if c["name"] == data["current-context"])
    data["users"] = [{"name": "reader", "user": {"token": token}}]
    ctx["context"]["user"] = "reader"
    data["contexts"] = [ctx]
    dest.write_text(yaml.safe_dump(data))
    dest.chmod(0o600)
    return dest


READER = "drakit-explain-namespace-reader"


def test_explain_counts_what_other_namespaces_hold(local_cluster: Any, tmp_path: Path, capsys: Any) -> None:  # noqa: F811
    """The node's only GPU is allocated to a claim of another namespace, and another namespace's
    pod takes all of its CPU: the real scheduler leaves both waiting pods unschedulable, and
    explain (which reads claims and pods of every namespace) says so and names the holder."""
    from drakit.conformance.backends.cluster import ClusterSession
    from drakit.conformance.backends.kubeapi import KubeApi
    from drakit.conformance.explain.failures import explain_failure
    api = KubeApi(str(local_cluster.kubeconfig))
    kc = local_cluster.kubeconfig

    def claim(name: str, ns: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "explain-xns-gpu"}}]}}}

    def pod(name: str, ns: str, claim: str | None = None, cpu: str | None = None) -> dict[str, Any]:
        c: dict[str, Any] = {"name": "main", "image": "registry.invalid/none:0"}
        spec: dict[str, Any] = {"containers": [c], "nodeSelector": {"kubernetes.io/hostname": XNS_NODE}}
        if claim:
            c["resources"] = {"claims": [{"name": "gpu"}]}
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        if cpu:
            c.setdefault("resources", {})["requests"] = {"cpu": cpu}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}

    def node_of(name: str, ns: str) -> str | None:
        return ((api.get("Pod", name, ns) or {}).get("spec") or {}).get("nodeName")

    def unschedulable(name: str, ns: str) -> str | None:
        conds = ((api.get("Pod", name, ns) or {}).get("status") or {}).get("conditions") or []
        return next((c.get("message") or "?" for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"
                     and c.get("reason") == "Unschedulable"), None)

    for ns in (HOLDER_NS, WAITER_NS):
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    api.create(kwokconfig.fake_node(XNS_NODE, {"kubernetes.io/hostname": XNS_NODE}, allocatable={"cpu": "2", "memory": "8Gi"}))
    api.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "explain-xns-gpu"},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{XNS_DRIVER}'"}}]}})
    api.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{XNS_NODE}-gpus"},
                "spec": {"driver": XNS_DRIVER, "nodeName": XNS_NODE,
                         "pool": {"name": XNS_NODE, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "gpu-0"}]}})
    try:
        # the other namespace takes the GPU (through its pod's claim) and all of the CPU
        api.create(claim("held", HOLDER_NS))
        api.create(pod("holder", HOLDER_NS, claim="held"))
        api.create(pod("hog", HOLDER_NS, cpu="2"))
        assert wait_for("holder bound", lambda: node_of("holder", HOLDER_NS)) == XNS_NODE
        assert wait_for("hog bound", lambda: node_of("hog", HOLDER_NS)) == XNS_NODE

        # a GPU pod of the waiter's namespace: the scheduler cannot allocate its claim
        api.create(claim("want", WAITER_NS))
        api.create(pod("waits", WAITER_NS, claim="want"))
        assert "cannot allocate all claims" in wait_for("waits unschedulable", lambda: unschedulable("waits", WAITER_NS))
        rc, e = _explain(capsys, kc, "pod", f"{WAITER_NS}/waits")
        assert (rc, e["verdict"]) == (1, "unschedulable"), e["message"]
        assert e["summary"]["closestNode"] == XNS_NODE and e["summary"]["checked"]
        assert f"claim {HOLDER_NS}/held" in e["summary"]["fix"], e["summary"]
        # a failed case's explanation, read through the cluster backend's session of that namespace
        session = ClusterSession(api, None, WAITER_NS, "explain-test", False)  # type: ignore[arg-type]
        (e,), _ = explain_failure(session)
        assert e["verdict"] == "unschedulable" and f"claim {HOLDER_NS}/held" in e["summary"]["fix"], e["summary"]
        # an account that may list claims and pods of its own namespace only: explain says what it
        # could not read (and so takes the held GPU for free)
        reader = _namespace_reader(kc, WAITER_NS, tmp_path / "reader.kubeconfig")
        rc = main(["explain", "pod", f"{WAITER_NS}/waits", "--kubeconfig", str(reader), "-o", "json"])
        got = capsys.readouterr()
        e = json.loads(got.out)
        jsonschema.validate(e, json.loads(SCHEMA.read_text()))
        assert (rc, e["verdict"]) == (0, "fits") and [w.split(" (")[0] for w in e["warnings"]] == [
            "ResourceClaims of other namespaces not read", "Pods of other namespaces not read"], e.get("warnings")
        assert "drakit explain: warning: ResourceClaims of other namespaces not read" in got.err
        assert 'cannot list resource "pods" in API group "" at the cluster scope' in e["warnings"][1]
        with capsys.disabled():
            print("\n" + got.err)
        (e,), text = explain_failure(ClusterSession(KubeApi(str(reader)), None, WAITER_NS, "explain-test", False))  # type: ignore[arg-type]
        assert len(e["warnings"]) == 2 and "warning: Pods of other namespaces not read (pods is forbidden" in text
        # the same claim as a file: would it fit? no, for the same reason
        rc, e = _explain(capsys, kc, "claim", f"{WAITER_NS}/want")
        assert (rc, e["verdict"]) == (1, "unschedulable") and f"claim {HOLDER_NS}/held" in e["summary"]["fix"]

        # a CPU pod of the waiter's namespace: the node's CPU is the other namespace's
        api.create(pod("wants-cpu", WAITER_NS, cpu="1"))
        assert "Insufficient cpu" in wait_for("wants-cpu unschedulable", lambda: unschedulable("wants-cpu", WAITER_NS))
        rc, e = _explain(capsys, kc, "pod", f"{WAITER_NS}/wants-cpu")
        assert (rc, e["verdict"]) == (1, "unschedulable"), e["message"]
        refusals = [r for n in e["nodes"] if n["name"] == XNS_NODE for r in n["refusals"]]
        assert [r["reason"] for r in refusals] == ["Insufficient cpu"], refusals
    finally:
        for ns in (HOLDER_NS, WAITER_NS):
            api.delete("Namespace", ns, None)
        api.delete("ResourceSlice", f"{XNS_NODE}-gpus", None)
        api.delete("Node", XNS_NODE, None)
        api.delete("DeviceClass", "explain-xns-gpu", None)
        from kubernetes import client, config
        rbac = client.RbacAuthorizationV1Api(config.new_client_from_config(config_file=str(kc)))
        for remove in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
            try:
                remove(READER)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def test_a_case_failing_on_the_cluster_backend_carries_the_explanation(local_cluster: Any, tmp_path: Path) -> None:  # noqa: F811
    """The failing case of ``tests/explain/test_failures.py`` (nine GPUs of an eight-GPU node) run
    on the cluster backend through the kubeconfig: results.json, the failure text and junit.xml
    carry the explanation, as on the reference backend."""
    import subprocess
    import sys
    import xml.etree.ElementTree as ET

    from tests.explain.test_failures import CASE
    (tmp_path / "pending.case.yaml").write_text(CASE)
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(tmp_path / "pending.case.yaml"),
                          "--backend", "cluster", "--kubeconfig", str(local_cluster.kubeconfig), "-n", "0",
                          "--out", str(out), "--plain"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 1 and (out / "results.json").exists(), res.stdout[-3000:] + res.stderr[-2000:]
    (case,) = [c for c in json.loads((out / "results.json").read_text())["cases"] if c["id"] == "explain/stays-pending"]
    (e,) = case["failure"]["diagnostics"]["explain"]
    assert e["verdict"] == "unschedulable" and e["subject"].endswith("/greedy") and "warnings" not in e
    assert e["summary"]["blockers"] == ["only 4 device(s) of class gpu.acme.example.com on the node, 9 needed"]
    line = "request gpus needs 9 device(s), 4 of 4 of class gpu.acme.example.com pass"
    assert "why pods wait for a node (drakit explain):" in case["failure"]["detail"] and line in case["failure"]["detail"]
    assert any(line in (f.text or "") for f in ET.parse(out / "junit.xml").getroot().iter("failure"))
