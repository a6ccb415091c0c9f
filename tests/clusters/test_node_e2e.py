"""The node side on the local control plane (kwok stage set "prepared"), end to end.

A pod with a claim: the real kube-scheduler allocates it, a node runtime prepares it over the
fake driver's real socket (CDI spec, metadata file, agent checkpoint), only then does kwok run
the pod; deleting the pod unprepares the claim before kwok lets the pod go, and the real
resourceclaim controller deallocates it. The driver runs as ``drakit driver serve --kubeconfig``
with its own ServiceAccount (narrow RBAC): it publishes the node's ResourceSlices and writes
the claim's device status itself. A refusal by the driver keeps the pod from running with a
reason the user can see. And ``drakit driver controller`` reports binding conditions, which is
what lets the scheduler bind a pod waiting for them. Skips when the binaries are not built.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drakit.clusters.local import kwokconfig
from drakit.clusters.local.pytest_fixture import skip_reason
from drakit.clusters.nodeagent import LocalNode
from drakit.clusters.nodeagent.checkpoint import AgentCheckpoint
from drakit.clusters.nodeagent.kube import PREPARE_FAILED, KubeNodeRuntime
from drakit.clusters.nodeagent.localnode import read_json_stream
from drakit.fake_driver.identity import driver_api_client, write_kubeconfig
from drakit.fake_driver.binding import ATTACH_FAILED, ATTACHED
from drakit.fake_driver.classes import device_classes
from drakit.fake_driver.kube import Kube, KubeClaimSource, controller_rules, load_api_client
from drakit.fake_driver.plugin import metadata
from drakit.fake_driver.slices import publish_slices
from drakit.fake_hw.inventory import build_inventory

from .waiting import wait_for

_SKIP = skip_reason()
if _SKIP is not None and os.environ.get("DRAKIT_REQUIRE_CLUSTER") == "1":
    raise RuntimeError(f"DRAKIT_REQUIRE_CLUSTER=1 but {_SKIP}")
pytestmark = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
pytest.importorskip("kubernetes", reason="the kubernetes Python client is needed")

NIC = "nic.swift.example.com"
SHAPE = "small-1gpu"
NS = "drakit-node-e2e"
ROOT = Path(__file__).resolve().parents[2]




@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """Unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="dk", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _setup(cluster: Any, node: str) -> Kube:
    admin = Kube(load_api_client(cluster.kubeconfig))
    inv = build_inventory(SHAPE, node)
    admin.request("POST", "/api/v1/nodes", kwokconfig.fake_node(node, inv.node_labels()))
    for dc in device_classes():
        admin.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", dc)
    admin.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return admin


def _claim_and_pod(admin: Kube, claim: str, pod: str, device_class: str = NIC) -> None:
    admin.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": claim},
        "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": device_class}}]}}})
    admin.request("POST", f"/api/v1/namespaces/{NS}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod},
        "spec": {"resourceClaims": [{"name": "nic", "resourceClaimName": claim}],
                 "containers": [{"name": "main", "image": "registry.invalid/none:0",
                                 "resources": {"claims": [{"name": "nic"}]}}]}})


def _get(admin: Kube, kind: str, name: str) -> dict[str, Any] | None:
    path = {"claim": f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/{name}",
            "pod": f"/api/v1/namespaces/{NS}/pods/{name}"}[kind]
    return admin.get(path)


def _allocated(admin: Kube, name: str) -> dict[str, Any] | None:
    claim = _get(admin, "claim", name) or {}
    status = claim.get("status") or {}
    return claim if status.get("allocation") and status.get("reservedFor") else None


def _events(admin: Kube, pod: str, reason: str) -> list[dict[str, Any]]:
    items = admin.request("GET", f"/api/v1/namespaces/{NS}/events")["items"]
    return [e for e in items if e["involvedObject"].get("name") == pod and e.get("reason") == reason]


class _Proc:
    """A drakit command in its own process, its output in a file."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        self.out = log.open("wb")
        env = {**os.environ, "GRPC_VERBOSITY": "ERROR", "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", *argv], stdout=self.out, stderr=subprocess.STDOUT,
                                     cwd=ROOT, env=env)

    def tail(self) -> str:
        return f"\n--- {self.log.name} ---\n" + "\n".join(self.log.read_text(errors="replace").splitlines()[-25:])

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()
        return self.proc.returncode


def test_claim_prepared_before_the_pod_runs_and_unprepared_before_it_goes(local_cluster_factory, short_tmp):
    cluster = local_cluster_factory(stage_set=kwokconfig.PREPARED)
    node = "kwok-node-e2e"
    admin = _setup(cluster, node)
    driver_kubeconfig = short_tmp / "driver.kubeconfig"
    write_kubeconfig(driver_api_client(admin, [NIC]), driver_kubeconfig)
    assert driver_kubeconfig.stat().st_mode & 0o777 == 0o600
    plugins, registry, cdi_dir, agent_state = (short_tmp / d for d in ("plugins", "registry", "cdi", "agent"))
    procs = [
        _Proc(["drakit.fake_driver.cli", "driver", "serve", "--driver", NIC, "--node", node, "--hardware", SHAPE,
               "--plugin-dir", str(plugins), "--registry-dir", str(registry), "--cdi-dir", str(cdi_dir),
               "--state-dir", str(short_tmp / "driver-state"), "--device-metadata",
               "--kubeconfig", str(driver_kubeconfig)], short_tmp / "driver.log"),
        _Proc(["drakit.clusters.nodeagent.cli", "node-agent", "--registry-dir", str(registry), "--node", node,
               "--state-dir", str(agent_state), "--kubeconfig", str(cluster.kubeconfig), "--namespace", NS],
              short_tmp / "agent.log"),
    ]

    def logs() -> str:
        return "".join(p.tail() for p in procs)

    try:
        # the driver publishes its node's slices itself, owned by the Node
        node_uid = admin.get(f"/api/v1/nodes/{node}")["metadata"]["uid"]  # type: ignore[index]
        slices = wait_for("the driver's ResourceSlices", lambda: admin.request(
            "GET", "/apis/resource.k8s.io/v1/resourceslices", query={"fieldSelector": f"spec.nodeName={node}"})["items"],
            logs=logs)
        assert {s["spec"]["driver"] for s in slices} == {NIC}
        assert all(s["metadata"]["ownerReferences"][0]["uid"] == node_uid for s in slices)

        t0 = time.monotonic()
        _claim_and_pod(admin, "net", "user")
        claim = wait_for("claim allocated by kube-scheduler and reserved", lambda: _allocated(admin, "net"), logs=logs)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"]) == (NIC, node)
        uid = claim["metadata"]["uid"]
        pod = wait_for("pod Running", lambda: (p if ((p := _get(admin, "pod", "user")) or {}).get("status", {})
                                            .get("phase") == "Running" else None), logs=logs)
        print(f"\npod Running {time.monotonic() - t0:.1f} s after it was created")
        assert pod["metadata"]["annotations"][kwokconfig.PREPARED_ANNOTATION] == "true"

        # prepared over the socket: CDI spec, the agent's checkpoint, the metadata file
        specs = list(cdi_dir.glob(f"*_{uid}.json"))
        assert specs, f"no CDI spec for claim {uid} in {sorted(p.name for p in cdi_dir.iterdir())}"
        info = AgentCheckpoint(agent_state).load()[uid]
        assert info.pod_uids == {pod["metadata"]["uid"]} and (info.namespace, info.name) == (NS, "net")
        cdi_ids = [i for d in info.drivers[NIC] for i in d.cdi_ids]
        assert cdi_ids and any(json.loads(s.read_text())["kind"] in cdi_ids[0] for s in specs)
        host_file = metadata.host_file(plugins / NIC, NS, "net", "nic")
        assert host_file.stat().st_mode & 0o777 == 0o644
        (doc,) = read_json_stream(host_file.read_text())
        assert (doc["kind"], doc["apiVersion"]) == ("DeviceMetadata", "metadata.resource.k8s.io/v1beta1")
        assert doc["metadata"]["uid"] == uid and doc["requests"][0]["name"] == "nic"
        (device,) = doc["requests"][0]["devices"]
        assert device["name"] == result["device"] and device["networkData"]["interfaceName"] == "net1"

        # the driver wrote the device status itself (server-side apply, its name as field manager)
        claim = _get(admin, "claim", "net") or {}
        (entry,) = claim["status"]["devices"]
        assert (entry["driver"], entry["device"], entry["networkData"]["interfaceName"]) == (NIC, result["device"], "net1")
        assert any(m["manager"] == NIC and m["operation"] == "Apply" and m.get("subresource") == "status"
                   for m in claim["metadata"]["managedFields"])

        # delete: unprepared before kwok lets the pod go, then deallocated by the claim controller
        t1 = time.monotonic()
        admin.request("DELETE", f"/api/v1/namespaces/{NS}/pods/user")
        wait_for("pod gone", lambda: _get(admin, "pod", "user") is None, logs=logs)
        assert not list(cdi_dir.glob(f"*{uid}*")), "unprepare left a CDI spec behind"
        assert not host_file.exists() and not host_file.parent.exists(), "unprepare left the metadata file"
        assert uid not in AgentCheckpoint(agent_state).load()
        wait_for("claim deallocated by the resourceclaim controller",
              lambda: not ((_get(admin, "claim", "net") or {}).get("status") or {}).get("allocation"), logs=logs)
        print(f"pod gone and claim deallocated {time.monotonic() - t1:.1f} s after the delete")
    finally:
        codes = [p.stop() for p in procs]
    assert codes == [0, 0], f"exit codes {codes}{logs()}"


def test_a_driver_refusal_keeps_the_pod_pending_with_a_visible_reason(local_cluster_factory):
    cluster = local_cluster_factory(stage_set=kwokconfig.PREPARED)
    node = "kwok-node-refuse"
    admin = _setup(cluster, node)
    inv = build_inventory(SHAPE, node)
    # the published NIC is one the hardware does not have: the scheduler allocates it, the driver
    # refuses to prepare it
    slices = publish_slices(inv)
    for s in slices:
        for dev in s["spec"].get("devices", []):
            if s["spec"]["driver"] == NIC:
                dev["name"] = "nic-gone"
        admin.request("POST", "/apis/resource.k8s.io/v1/resourceslices", s)
    claims = KubeClaimSource(Kube(driver_api_client(admin, inv.drivers)))
    with LocalNode(inv, claims.get_claim, write_status=claims.write_device_status, check_reserved=False) as local, \
            KubeNodeRuntime(admin, {node: local}, namespace=NS, min_retry=0.2) as runtime:
        _claim_and_pod(admin, "net", "user")
        claim = wait_for("claim allocated", lambda: _allocated(admin, "net"))
        assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "nic-gone"
        (event,) = wait_for("a FailedPrepareDynamicResources event", lambda: _events(admin, "user", PREPARE_FAILED))
        assert event["type"] == "Warning"
        assert "device" in event["message"] and "nic-gone" in event["message"]
        assert "is not a device of driver nic.swift.example.com" in event["message"]
        time.sleep(3)  # several retries later: still refused, still one event, never Running
        pod = _get(admin, "pod", "user") or {}
        assert pod["status"]["phase"] == "Pending"
        assert kwokconfig.PREPARED_ANNOTATION not in (pod["metadata"].get("annotations") or {})
        assert len(_events(admin, "user", PREPARE_FAILED)) == 1
        assert "nic-gone" in runtime.errors()[f"{NS}/user"]
        assert not runtime.prepared() and not local.agent.claim_infos()[claim["metadata"]["uid"]].prepared  # type: ignore[union-attr]
        assert not list(local.cdi_dir.glob("*.json"))
        # nothing was prepared, so kwok lets the deleted pod go at once
        admin.request("DELETE", f"/api/v1/namespaces/{NS}/pods/user")
        wait_for("pod gone", lambda: _get(admin, "pod", "user") is None)
        wait_for("claim deallocated", lambda: not ((_get(admin, "claim", "net") or {}).get("status") or {}).get("allocation"))
        wait_for("the agent forgot the claim", lambda: not local.agent.claim_infos())  # type: ignore[union-attr]
    assert not runtime.errors()


def test_the_controller_reports_binding_conditions_and_the_scheduler_binds(local_cluster_factory, short_tmp):
    cluster = local_cluster_factory(stage_set=kwokconfig.PREPARED)
    node, gpu = "kwok-node-attach", "gpu.acme.example.com"
    admin = _setup(cluster, node)
    admin.request("POST", "/apis/resource.k8s.io/v1/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric"},
        "spec": {"driver": gpu, "allNodes": True, "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "remote-0", "bindsToNode": True, "bindingConditions": [ATTACHED],
                              "bindingFailureConditions": [ATTACH_FAILED]}]}})
    _claim_and_pod(admin, "remote", "waiting", device_class=gpu)
    wait_for("claim allocated and reserved", lambda: _allocated(admin, "remote"))
    time.sleep(2)
    assert not (_get(admin, "pod", "waiting") or {})["spec"].get("nodeName"), "bound before the device was attached"
    kubeconfig = short_tmp / "controller.kubeconfig"
    write_kubeconfig(driver_api_client(admin, [gpu], service_account="drakit-fake-driver-controller",
                                       role="drakit:fake-driver-controller", rules=controller_rules), kubeconfig)
    proc = _Proc(["drakit.fake_driver.cli", "driver", "controller", "--kubeconfig", str(kubeconfig), "--driver", gpu],
                 short_tmp / "controller.log")
    try:
        pod = wait_for("pod bound once the binding condition is True",
                    lambda: p if ((p := _get(admin, "pod", "waiting")) or {}).get("spec", {}).get("nodeName") else None,
                    timeout=90, logs=proc.tail)
        assert pod["spec"]["nodeName"] == node
        claim = _get(admin, "claim", "remote") or {}
        (entry,) = claim["status"]["devices"]
        conditions = {c["type"]: c["status"] for c in entry["conditions"]}
        assert (entry["driver"], entry["device"], conditions) == (gpu, "remote-0", {ATTACHED: "True", ATTACH_FAILED: "False"})
        assert any(m["manager"] == f"{gpu}/controller" for m in claim["metadata"]["managedFields"])
    finally:
        code = proc.stop()
    assert code == 0, f"exit code {code}{proc.tail()}"
