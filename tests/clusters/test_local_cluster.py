"""End to end on the local control plane: the real 1.37 scheduler allocates a DRA claim for a
pod on a kwok node, and kwok runs the pod.  Skips when the binaries are not built."""

from __future__ import annotations

import time
from typing import Any

import os

import pytest

from drakit.clusters.local import kwokconfig, procs
from drakit.clusters.local.launcher import LocalCluster
from drakit.clusters.local.pytest_fixture import skip_reason

from .waiting import wait_for

_SKIP = skip_reason()
if _SKIP is not None and os.environ.get("DRAKIT_REQUIRE_CLUSTER") == "1":
    raise RuntimeError(f"DRAKIT_REQUIRE_CLUSTER=1 but {_SKIP}")
pytestmark = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")

kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes Python client is needed")

DRIVER = "gpu.drakit.dev"
NS = "drakit-e2e"


def _dyn(cluster: LocalCluster) -> Any:
    from kubernetes import config, dynamic
    from kubernetes.client import api_client

    client = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    return dynamic.DynamicClient(client if isinstance(client, api_client.ApiClient) else api_client.ApiClient())




def _manifests(node: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "drakit-gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{i}",
                        "attributes": {"model": {"string": "drakit-a1"}, "index": {"int": i}},
                        "capacity": {"memory": {"value": "16Gi"}},
                    }
                    for i in range(2)
                ],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "one-gpu", "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "drakit-gpu"}}]}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "uses-gpu", "namespace": NS},
            "spec": {
                "containers": [
                    {"name": "main", "image": "registry.invalid/none:0", "resources": {"claims": [{"name": "gpu"}]}}
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "one-gpu"}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "no-claims", "namespace": NS},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/none:0"}]},
        },
    ]


def _apply_all(dyn: Any, objs: list[dict[str, Any]]) -> None:
    for obj in objs:
        api = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        ns = obj["metadata"].get("namespace")
        api.create(body=obj, namespace=ns) if ns else api.create(body=obj)


def _get(dyn: Any, api_version: str, kind: str, name: str, ns: str | None = None) -> Any:
    api = dyn.resources.get(api_version=api_version, kind=kind)
    return api.get(name=name, namespace=ns) if ns else api.get(name=name)


def test_scheduler_allocates_claim_and_kwok_runs_pod(local_cluster_factory):
    t0 = time.monotonic()
    cluster = local_cluster_factory(stage_set=kwokconfig.PREPARED)
    startup = time.monotonic() - t0
    ports = dict(cluster.ports)
    pids = [p.pid for p in cluster._procs]
    print(f"\nlocal cluster up in {startup:.1f} s: {cluster.timings}")

    # every DRA gate the binaries list is on, and the alpha/beta resource APIs are served
    gates = cluster.gates["kube-apiserver"]
    assert gates.get("DRAResourcePoolStatus") is True
    assert all(v for n, v in gates.items() if n.startswith("DRA"))

    dyn = _dyn(cluster)
    node = "kwok-node-0"
    dyn.resources.get(api_version="v1", kind="Node").create(body=kwokconfig.fake_node(node))
    wait_for(
        "node Ready",
        lambda: any(
            c.type == "Ready" and c.status == "True"
            for c in (_get(dyn, "v1", "Node", node).status.conditions or [])
        ),
    )
    _apply_all(dyn, _manifests(node))

    # the real scheduler allocates the claim and reserves it for the pod
    claim = wait_for(
        "claim allocated and reserved",
        lambda: (
            c
            if (c := _get(dyn, "resource.k8s.io/v1", "ResourceClaim", "one-gpu", NS)).status
            and c.status.allocation
            and c.status.reservedFor
            else None
        ),
    )
    results = claim.status.allocation.devices.results
    assert len(results) == 1 and results[0].driver == DRIVER and results[0].pool == node
    assert results[0].device in ("gpu-0", "gpu-1")
    assert [r.name for r in claim.status.reservedFor] == ["uses-gpu"]
    pod = wait_for("pod bound", lambda: (p if (p := _get(dyn, "v1", "Pod", "uses-gpu", NS)).spec.nodeName else None))
    assert pod.spec.nodeName == node

    # stage set "prepared": no-claims pod runs on bind, the claim pod waits for the node agent
    wait_for("no-claims pod Running", lambda: _get(dyn, "v1", "Pod", "no-claims", NS).status.phase == "Running")
    time.sleep(2)
    assert _get(dyn, "v1", "Pod", "uses-gpu", NS).status.phase == "Pending"
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    pods.patch(
        name="uses-gpu",
        namespace=NS,
        body={"metadata": {"annotations": {kwokconfig.PREPARED_ANNOTATION: "true"}}},
        content_type="application/merge-patch+json",
    )
    running = wait_for("claim pod Running", lambda: (p if (p := pods.get(name="uses-gpu", namespace=NS)).status.phase == "Running" else None))
    assert any(c.type == "Ready" and c.status == "True" for c in running.status.conditions)

    # delete: kwok removes the pod once the node agent has unprepared (annotation gone)
    pods.delete(name="uses-gpu", namespace=NS)
    time.sleep(1)
    assert pods.get(name="uses-gpu", namespace=NS).metadata.deletionTimestamp
    pods.patch(
        name="uses-gpu",
        namespace=NS,
        body={"metadata": {"annotations": {kwokconfig.PREPARED_ANNOTATION: None}}},
        content_type="application/merge-patch+json",
    )

    def gone() -> bool:
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            pods.get(name="uses-gpu", namespace=NS)
        except NotFoundError:
            return True
        return False

    wait_for("pod deleted", gone)
    wait_for(
        "claim released",
        lambda: not _get(dyn, "resource.k8s.io/v1", "ResourceClaim", "one-gpu", NS).status.reservedFor,
    )

    # teardown leaves no process, port or file
    run_dir = cluster.run_dir
    t1 = time.monotonic()
    cluster.down()
    print(f"local cluster down in {time.monotonic() - t1:.1f} s")
    assert not any(procs.is_alive(pid) for pid in pids)
    assert not set(ports.values()) & procs.listening_ports()
    assert not run_dir.exists() or not any(run_dir.iterdir())


def test_wrong_gate_name_is_a_clear_error(tmp_path):
    from drakit.clusters.local.launcher import ClusterError

    with pytest.raises(ClusterError, match=r"DRAPartitionableDevice\b.*did you mean DRAPartitionableDevices"):
        LocalCluster(tmp_path / "run", {"DRAPartitionableDevice": True}).up()
    assert not (tmp_path / "run").exists()


def test_session_cluster_template_claim_pod_runs_on_bind(local_cluster):
    """Stage set "on-bind": the claim comes from a template (resource claim controller), the
    scheduler allocates it, and kwok runs the pod at once."""
    dyn = _dyn(local_cluster)
    node, ns = "kwok-bind-0", "drakit-on-bind"
    dyn.resources.get(api_version="v1", kind="Node").create(body=kwokconfig.fake_node(node))
    objs = [o for o in _manifests(node) if o["kind"] in ("DeviceClass", "ResourceSlice")]
    for o in objs:
        o["metadata"]["name"] += "-b"
    objs[0]["spec"]["selectors"][0]["cel"]["expression"] = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "drakit-a1"'
    objs[1]["metadata"]["name"] = f"{node}-gpus"
    objs += [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu-tmpl", "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "drakit-gpu-b"}}]}}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "tmpl-pod", "namespace": ns},
            "spec": {
                "containers": [{"name": "main", "image": "registry.invalid/none:0", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-tmpl"}],
            },
        },
    ]
    _apply_all(dyn, objs)
    pod = wait_for(
        "template pod Running",
        lambda: p if (p := _get(dyn, "v1", "Pod", "tmpl-pod", ns)).status.phase == "Running" else None,
    )
    claim_name = pod.status.resourceClaimStatuses[0].resourceClaimName
    claim = _get(dyn, "resource.k8s.io/v1", "ResourceClaim", claim_name, ns)
    assert claim.status.allocation.devices.results[0].pool == node
    assert [r.name for r in claim.status.reservedFor] == ["tmpl-pod"]


_KILLED_OWNER = """
import sys
from drakit.clusters.local.launcher import LocalCluster
c = LocalCluster(sys.argv[1]).up()
print(" ".join(str(p.pid) for p in c._procs), flush=True)
sys.stdin.read()
"""


def test_killed_owner_leaves_nothing_running_and_next_up_cleans(tmp_path):
    import subprocess
    import sys

    run_dir = tmp_path / "run"
    owner = subprocess.Popen(
        [sys.executable, "-c", _KILLED_OWNER, str(run_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    pids = [int(x) for x in owner.stdout.readline().split()]
    assert len(pids) == 5
    owner.kill()  # SIGKILL: no atexit, no finally
    owner.wait()
    wait_for("children gone with their owner", lambda: not any(procs.is_alive(p) for p in pids), timeout=15)
    assert (run_dir / "state.json").exists()  # stale run dir left behind
    with LocalCluster(run_dir) as again:  # detects the stale dir, cleans, starts
        assert again.status()["apiserver_ready"]
    assert not run_dir.exists()
