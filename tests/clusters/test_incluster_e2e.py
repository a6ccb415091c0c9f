"""drakit inside the cluster it tests, with real containers: the local cluster with a kubelet
node over containerd + runc, drakit's offline-built image imported into it.

- ``drakit run --in-cluster --shards 2`` over the kubeconfig corpus gives the statuses of the
  same corpus run from outside, merged into one report, and leaves nothing in the cluster;
- a shard pod killed mid-run makes the run INCOMPLETE naming that shard, and leaves nothing;
- the sonobuoy plugin's pod, built the way sonobuoy's Job driver builds it (its default Job pod
  spec, the plugin's container and extra volumes, a ``results`` emptyDir, the environment
  ``sonobuoy gen`` sets), runs to completion writing the tarball and the ``done`` file where
  sonobuoy's worker reads them; a stand-in for sonobuoy's worker container (whose image is not
  built here) waits for ``done`` and lists the tarball.

The pods run in the node's network (``--host-network``): the local cluster's pod network reaches
nothing outside the pod.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.clusters.test_incluster import drakit, statuses
from tests.clusters.test_shared_cluster_workers import CASE_FILES, SUITES

try:  # the containerd node runtime (issue 22); until it is in, these tests skip saying so
    from drakit.clusters.local.pytest_fixture import containerd_cluster  # noqa: F401 - the fixture
except ImportError:
    pytest.skip("the local cluster has no containerd node runtime in this tree (issue 22)", allow_module_level=True)


def _core(cluster: Any) -> Any:
    from kubernetes import client, config
    return client.CoreV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))


@pytest.fixture(scope="module")
def image(containerd_cluster: Any) -> str:  # noqa: F811
    """drakit's image, built (or brought up to date) and imported into every containerd node."""
    from drakit.clusters.images import build_images
    (built,) = build_images(which=("driver",))
    runtimes = [n.containerd for n in containerd_cluster.real.nodes.values() if getattr(n, "containerd", None)]
    assert runtimes, "no containerd node"
    for runtime in runtimes:
        runtime.import_images([built.path])
    return built.ref


def _run_leftovers(cluster: Any) -> list[str]:
    from drakit.conformance.backends.kubeapi import KubeApi
    api = KubeApi(str(cluster.kubeconfig))
    found = [f"Namespace {n['metadata']['name']}" for n in api.list("Namespace", None)
             if "drakit.dev/in-cluster" in (n["metadata"].get("labels") or {})
             or "drakit.dev/run" in (n["metadata"].get("labels") or {})]
    found += [f"Node {n['metadata']['name']}" for n in api.list("Node", None)
              if n["metadata"]["name"].startswith(("s1-", "s2-"))]
    rbac = api.resource("rbac.authorization.k8s.io/v1", "ClusterRole")
    found += [f"ClusterRole {r.metadata.name}" for r in rbac.get(label_selector="drakit.dev/in-cluster").items]
    return found


def test_two_shards_in_the_cluster_equal_the_run_from_outside(containerd_cluster: Any, image: str,  # noqa: F811
                                                              tmp_path: Path) -> None:
    kc = str(containerd_cluster.kubeconfig)
    started = time.monotonic()
    outside = drakit("run", *map(str, CASE_FILES), "--backend", "cluster", "--kubeconfig", kc, "--out", "outside",
                     "--plain", "-q", cwd=tmp_path)
    outside_wall = time.monotonic() - started
    assert (tmp_path / "outside" / "results.json").exists(), outside.stdout[-3000:] + outside.stderr[-2000:]
    started = time.monotonic()
    inside = drakit("run", "--in-cluster", "--shards", "2", "--host-network", "--image", image, *map(str, CASE_FILES),
                    "--kubeconfig", kc, "--out", "inside", cwd=tmp_path)
    inside_wall = time.monotonic() - started
    print(f"\noutside, one process: {outside_wall:.1f} s wall; in the cluster, 2 shards: {inside_wall:.1f} s wall")
    print(inside.stdout[-1500:])
    assert inside.returncode == outside.returncode == 0, inside.stdout[-4000:] + inside.stderr[-2000:]
    merged = json.loads((tmp_path / "inside" / "results.json").read_text())
    assert statuses(tmp_path / "inside" / "results.json") == statuses(tmp_path / "outside" / "results.json")
    assert merged["verdict"]["result"] == "pass" and len(merged["run"]["merged"]["shards"]) == 2
    assert sum(1 for c in merged["cases"] if c["status"] == "passed") >= 20
    assert "shards: 1/2 running" in inside.stdout and "deleted everything the run created" in inside.stdout
    assert (tmp_path / "inside" / "junit.xml").exists() and (tmp_path / "inside" / "report.html").exists()
    assert _run_leftovers(containerd_cluster) == []


def test_a_shard_pod_killed_mid_run_makes_the_run_incomplete_naming_it(containerd_cluster: Any, image: str,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    from drakit.conformance.backends.kubeapi import KubeApi
    from drakit.conformance.incluster.channel import read_progress
    core = _core(containerd_cluster)
    api = KubeApi(str(containerd_cluster.kubeconfig))
    proc = subprocess.Popen([sys.executable, "-m", "drakit.conformance.cli", "run", "--in-cluster", "--shards", "2",
                             "--host-network", "--image", image, *map(str, CASE_FILES), "--kubeconfig",
                             str(containerd_cluster.kubeconfig), "--out", "out"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = None
    deadline = time.monotonic() + 600
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        for ns in [n.metadata.name for n in core.list_namespace().items if n.metadata.name.startswith("drakit-")]:
            for pod in core.list_namespaced_pod(ns, label_selector="drakit.dev/shard=2").items:
                if pod.status.phase != "Running":
                    continue
                progress = read_progress(api, ns, "drakit-shard-2")  # what the run itself follows
                if progress and 1 <= progress[0] < progress[1]:  # mid-run: a case done, more to come
                    core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)
                    killed = pod.metadata.name
        time.sleep(0.5)
    out = proc.communicate(timeout=900)[0]
    assert killed, "shard 2 never ran a case: " + out[-3000:]
    assert proc.returncode == 1, out[-4000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["verdict"]["result"] == "incomplete"
    (missing,) = [r for r in results["verdict"]["reasons"] if r["code"] == "shard-missing"]
    assert missing["shards"] == [2], missing
    if f"shard 2/2 lost: its pod {killed}" in out:  # killed before it could hand back anything
        assert f"2/2 (lost: its pod {killed}" in missing["message"]
        assert [s["index"] for s in results["run"]["merged"]["shards"]] == [1]
    else:  # its SIGTERM handler handed back the cases it had finished, the rest named as not run
        assert f"shard 2/2 (pod {killed})" in out and "interrupted by SIGTERM" in out, out[-3000:]
        assert "(stopped early)" in missing["message"], missing
    assert "deleted everything the run created" in out, out[-3000:]
    assert _run_leftovers(containerd_cluster) == []


def _sonobuoy_pod(definition: dict[str, Any], namespace: str, session: str, api_server: str) -> dict[str, Any]:
    """The pod sonobuoy's Job driver makes of a plugin definition: its default Job pod spec
    (restartPolicy Never, its service account, its tolerations, linux nodes), the plugin's
    container, then the worker's (here a stand-in), the ``results`` emptyDir and the plugin's
    extra volumes; the plugin's environment as ``sonobuoy gen`` sets it."""
    spec = dict(definition["spec"])
    results_dir = "/tmp/sonobuoy/results"
    spec["env"] = [*spec.get("env", []), {"name": "SONOBUOY_RESULTS_DIR", "value": results_dir},
                   {"name": "RESULTS_DIR", "value": results_dir}, {"name": "SONOBUOY", "value": "true"},
                   {"name": "SONOBUOY_K8S_VERSION", "value": "v1.37.2"},
                   {"name": "DRAKIT_API_SERVER", "value": api_server}]  # the local cluster's pods: node network
    # what the ServiceAccount admission plugin mounts on a cluster that runs it (the local one does not)
    from drakit.conformance.incluster.manifests import TOKEN_MOUNT, token_volume
    spec["volumeMounts"] = [*spec["volumeMounts"], {"name": "token", "mountPath": TOKEN_MOUNT, "readOnly": True}]
    spec["terminationMessagePolicy"] = "FallbackToLogsOnError"  # its last lines in the pod's status on an error
    extra = list(definition.get("extra-volumes", []))
    if definition.get("config-map"):  # as sonobuoy gen does: a ConfigMap plugin-NAME-cm at /tmp/sonobuoy/config
        extra.append({"name": "sonobuoy-drakit-vol", "configMap": {"name": "plugin-drakit-cm"}})
        spec["volumeMounts"].append({"name": "sonobuoy-drakit-vol", "mountPath": "/tmp/sonobuoy/config"})
        spec["env"].append({"name": "SONOBUOY_CONFIG_DIR", "value": "/tmp/sonobuoy/config"})
    worker = {"name": "sonobuoy-worker", "image": spec["image"], "imagePullPolicy": "IfNotPresent",
              "command": ["python3", "-c", WORKER], "terminationMessagePolicy": "FallbackToLogsOnError",
              "volumeMounts": [{"name": "results", "mountPath": results_dir}]}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"sonobuoy-drakit-job-{session}", "namespace": namespace,
                         "labels": {"component": "sonobuoy", "sonobuoy-plugin": "drakit", "sonobuoy-run": session}},
            "spec": {"restartPolicy": "Never", "serviceAccountName": "sonobuoy-serviceaccount",
                     "tolerations": [{"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
                                     {"key": "CriticalAddonsOnly", "operator": "Exists"}],
                     "nodeSelector": {"kubernetes.io/os": "linux"},
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}]}}},
                     "hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet",
                     "containers": [spec, worker],
                     "automountServiceAccountToken": False,
                     "volumes": [{"name": "results", "emptyDir": {}}, *extra, token_volume()]}}


# what sonobuoy's worker does with the done file: wait for it, read the path in it; here, list the tarball
WORKER = r"""
import json, os, sys, tarfile, time
done = '/tmp/sonobuoy/results/done'
while not os.path.exists(done):
    time.sleep(1)
time.sleep(1)
path = open(done).read().strip()
lines = ['DONE ' + path]
with tarfile.open(path) as tar:
    lines += ['MEMBER ' + name for name in tar.getnames()]
    junit = tar.extractfile('junit.xml').read().decode()
    lines += ['TESTCASES %d' % junit.count('<testcase '), 'FAILURES %d' % junit.count('<failure')]
    vendor = json.load(tar.extractfile('results.json'))['environment']['vendor']
    lines += ['VENDOR %s %s' % (vendor['name'], vendor['file'])]
print('\n'.join(lines))
open('/dev/termination-log', 'w').write('\n'.join(lines))  # read from the pod's status (no kubelet logs here)
"""


def test_the_sonobuoy_plugin_job_runs_to_completion_with_its_done_file(containerd_cluster: Any, image: str,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    import yaml
    from kubernetes import client
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "sonobuoy-plugin", "--image", image,
                          "--vendor", str(_no_nic_profile(tmp_path)), "--", "-k", "template-claims"],
                         capture_output=True, text=True, timeout=60)
    definition = yaml.safe_load(res.stdout)  # the image's own suites, one file of them; a vendor profile
    core = _core(containerd_cluster)
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    session = uuid.uuid4().hex[:8]
    ns = f"sonobuoy-{session}"
    core.create_namespace({"metadata": {"name": ns}})
    try:
        core.create_namespaced_service_account(ns, {"metadata": {"name": "sonobuoy-serviceaccount"}})
        core.create_namespaced_config_map(ns, {"metadata": {"name": "plugin-drakit-cm"}, "data": definition["config-map"]})
        rbac.create_cluster_role_binding({"metadata": {"name": ns}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "sonobuoy-serviceaccount", "namespace": ns}]})
        server = str(core.api_client.configuration.host)
        pod = _sonobuoy_pod(definition, ns, session, server)
        core.create_namespaced_pod(ns, pod)
        name = pod["metadata"]["name"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            phase = core.read_namespaced_pod(name, ns).status.phase
            if phase in ("Succeeded", "Failed"):
                break
            time.sleep(2)
        ended = {c.name: c.state.terminated for c in core.read_namespaced_pod(name, ns).status.container_statuses}
        plugin_log = f"plugin: {ended['plugin']}\nworker: {ended['sonobuoy-worker']}"
        worker_log = (ended["sonobuoy-worker"].message or "") if ended["sonobuoy-worker"] else ""
        assert phase == "Succeeded", plugin_log[-3000:] + worker_log[-2000:]
        assert "DONE /tmp/sonobuoy/results/drakit-results.tar.gz" in worker_log, worker_log
        members = sorted(line.split()[1] for line in worker_log.splitlines() if line.startswith("MEMBER "))
        assert members == ["junit.xml", "report.html", "results.json"]
        testcases = int(next(line.split()[1] for line in worker_log.splitlines() if line.startswith("TESTCASES ")))
        assert testcases >= 3 and "FAILURES 0" in worker_log
        assert "VENDOR drakit-fake-no-nic no-nic.yaml" in worker_log, worker_log  # the config-map's profile
    finally:
        rbac.delete_cluster_role_binding(ns)
        core.delete_namespace(ns)


def _no_nic_profile(folder: Path) -> Path:
    """The fake drivers' profile under another name and without its ``nic`` role: the cases
    that use it are not-applicable (skipped, naming the profile), the others run as before."""
    import yaml
    from drakit.fake_driver.profile import bundled_profile_path
    data = yaml.safe_load(bundled_profile_path().read_text())
    data["name"] = "drakit-fake-no-nic"
    for section in ("drivers", "classes", "attributes", "capacities", "values"):
        data[section].pop("nic", None)
    path = folder / "no-nic.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_vendor_profile_is_carried_into_the_shards(containerd_cluster: Any, image: str,  # noqa: F811
                                                      tmp_path: Path) -> None:
    kc = str(containerd_cluster.kubeconfig)
    profile = str(_no_nic_profile(tmp_path))
    corpus = str(CASE_FILES[1])  # core/constraints: three of its cases use the nic role
    outside = drakit("run", corpus, "--backend", "cluster", "--kubeconfig", kc, "--vendor", profile, "--out", "outside",
                     "--plain", "-q", cwd=tmp_path)
    assert outside.returncode == 0, outside.stdout[-3000:] + outside.stderr[-2000:]
    inside = drakit("run", "--in-cluster", "--shards", "2", "--host-network", "--image", image, corpus, "--kubeconfig",
                    kc, "--vendor", profile, "--out", "inside", cwd=tmp_path)
    assert inside.returncode == 0, inside.stdout[-4000:] + inside.stderr[-2000:]
    assert statuses(tmp_path / "inside" / "results.json") == statuses(tmp_path / "outside" / "results.json")
    merged = json.loads((tmp_path / "inside" / "results.json").read_text())
    assert merged["environment"]["vendor"] == {"name": "drakit-fake-no-nic", "file": "no-nic.yaml",
                                               "drivers": ["gpu.acme.example.com", "gpu.nova.example.com"],
                                               "fakeDriver": True}
    shards = [json.loads((tmp_path / "inside" / f"shard-{i}.json").read_text()) for i in (1, 2)]
    assert all(s["environment"]["vendor"]["name"] == "drakit-fake-no-nic" for s in shards)  # each pod loaded it
    skipped = [c for c in merged["cases"] if c["status"] == "skipped"]
    assert len(skipped) >= 3 and all("'drakit-fake-no-nic' does not define ${class.nic}" in c["skip"]["message"]
                                     for c in skipped), skipped
    assert sum(1 for c in merged["cases"] if c["status"] == "passed") >= 5
    assert _run_leftovers(containerd_cluster) == []


def test_the_shards_know_and_may_do_what_a_run_from_outside_does(containerd_cluster: Any, image: str,  # noqa: F811
                                                                  tmp_path: Path) -> None:
    """The shards know the scheduler's gates (read by the caller: a pod cannot reach the
    scheduler), so that fractional-capacity's cases run as they do from outside. Device status and binding conditions are written as the claim's driver writes them: with
    DRAResourceClaimGranularStatusAuthorization on (the local cluster's default), the shards'
    ServiceAccount needs ``resourceclaims/driver`` (the API server refused it before: 6 cases
    failed in the cluster that pass from outside). A DeviceClass the cluster had before, which
    the cases' fake hardware applies again, is still there afterwards with its own labels (the
    in-cluster clean-up deleted the cluster's classes once the cases had labelled them)."""
    from drakit.conformance.backends.kubeapi import KubeApi
    from drakit.fake_driver.classes import device_classes
    kc = str(containerd_cluster.kubeconfig)
    api = KubeApi(kc)
    [cls] = [c for c in device_classes() if c["metadata"]["name"] == "gpu.acme.example.com"]
    cls["metadata"]["labels"] = {"example.com/installed-by": "the-cluster"}
    made = api.get("DeviceClass", "gpu.acme.example.com", None) is None
    if made:
        api.create(cls)
    before = (api.get("DeviceClass", "gpu.acme.example.com", None) or {})["metadata"].get("labels")
    try:
        corpus = [str(SUITES / "device-status"), str(SUITES / "binding-conditions"), str(SUITES / "fractional-capacity")]
        outside = drakit("run", *corpus, "--backend", "cluster", "--kubeconfig", kc, "--out", "outside", "--plain", "-q",
                         cwd=tmp_path)
        inside = drakit("run", "--in-cluster", "--shards", "2", "--host-network", "--image", image, *corpus,
                        "--kubeconfig", kc, "--out", "inside", cwd=tmp_path)
        assert inside.returncode == outside.returncode == 0, inside.stdout[-4000:] + inside.stderr[-2000:]
        got = statuses(tmp_path / "inside" / "results.json")
        assert got == statuses(tmp_path / "outside" / "results.json")
        assert sum(1 for st in got.values() if st == "passed") >= 12, got
        fractional = [c for c in json.loads((tmp_path / "inside" / "results.json").read_text())["cases"]
                      if c["id"].startswith("fractional-capacity/")]
        assert fractional and not [c["skip"]["message"] for c in fractional
                                   if c["status"] == "skipped" and "could not observe" in c["skip"]["message"]]
        assert _run_leftovers(containerd_cluster) == []
        after = api.get("DeviceClass", "gpu.acme.example.com", None)
        assert after is not None, "the cluster's DeviceClass was deleted"
        assert after["metadata"].get("labels") == before
    finally:
        if made:
            api.delete("DeviceClass", "gpu.acme.example.com", None)


def test_a_shards_results_in_several_parts_come_back_whole(containerd_cluster: Any, image: str,  # noqa: F811
                                                           tmp_path: Path) -> None:
    """Parts of 2 KiB (``$DRAKIT_RESULTS_PART_BYTES``, carried into the shard pods): each shard's
    results come back in several ConfigMaps, merged into the run's report; they equal what the
    shard's log carries. ``--keep`` leaves them to look at; the test then deletes the run."""
    import os
    import re
    from drakit.conformance.backends.kubeapi import KubeApi
    from drakit.conformance.incluster.frames import find_results
    from drakit.conformance.incluster.orchestrate import InCluster
    kc = str(containerd_cluster.kubeconfig)
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "--in-cluster", "--shards", "2",
                          "--host-network", "--image", image, str(CASE_FILES[1]), "--kubeconfig", kc, "--keep",
                          "--out", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=1800,
                         env={**os.environ, "DRAKIT_RESULTS_PART_BYTES": "2048"})
    (ns,) = re.findall(r"created namespace (drakit-[a-z0-9]+)", res.stdout)
    api = KubeApi(kc)
    run = InCluster(api, ns.removeprefix("drakit-"), 2, image, [], None, say=print)
    try:
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
        core = _core(containerd_cluster)
        for i in (1, 2):
            head = api.get("ConfigMap", f"drakit-shard-{i}", ns)
            assert head is not None and int(head["data"]["parts"]) >= 2, head
            own = json.loads((tmp_path / "out" / f"shard-{i}.json").read_text())
            (pod,) = core.list_namespaced_pod(ns, label_selector=f"drakit.dev/shard={i}").items
            assert find_results(core.read_namespaced_pod_log(pod.metadata.name, ns, container="drakit")) == own
        merged = json.loads((tmp_path / "out" / "results.json").read_text())
        assert merged["verdict"]["result"] == "pass" and len(merged["run"]["merged"]["shards"]) == 2
    finally:
        problems = run.delete(wait=150)
    assert problems == [] and _run_leftovers(containerd_cluster) == []


def test_the_driver_suite_in_the_cluster_reads_what_containers_printed(containerd_cluster: Any, image: str,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    """A vendor's view: the driver suite run in the cluster (the driver under test: the fake gpu
    driver on the containerd node), two shards. The cases that read what a container printed
    read its log with the shards' own ServiceAccount (pods/log) and pass, as from outside
    (test_containerd_node); nothing is refused by the shards' RBAC."""
    suite = Path(__file__).resolve().parents[2] / "conformance" / "suites" / "driver"
    res = drakit("run", "--in-cluster", "--shards", "2", "--host-network", "--image", image, str(suite),
                 "--kubeconfig", str(containerd_cluster.kubeconfig), "--out", "out", cwd=tmp_path)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    cases = {c["id"]: c for c in results["cases"]}
    bad = {cid: f"{c['status']}: {((c.get('failure') or {}).get('summary') or '')[:300]}"
           for cid, c in cases.items() if c["status"] not in ("passed", "skipped")}
    assert not bad, "\n".join([*(f"{k}: {v}" for k, v in bad.items()), res.stdout[-2000:], res.stderr[-1000:]])
    for cid in ("driver/pod-env", "driver/prepare"):
        assert cases[cid]["status"] == "passed", cases[cid]
    unseen = [c["skip"]["message"] for c in cases.values()
              if c["status"] == "skipped" and c["skip"]["category"] == "no-node-side"]
    assert not [m for m in unseen if "printed" in m or "container" in m], unseen
    assert "forbidden" not in json.dumps(results).lower()
    assert len(results["run"]["merged"]["shards"]) == 2 and "deleted everything the run created" in res.stdout
    assert _run_leftovers(containerd_cluster) == []


def test_ctrl_c_stops_the_shards_and_deletes_everything(containerd_cluster: Any, image: str,  # noqa: F811
                                                        tmp_path: Path) -> None:
    """SIGINT to drakit while both shards are in the middle of their cases: the shards are
    stopped, what their cases made and what the run made is deleted, the exit code says SIGINT."""
    import re
    import signal
    from drakit.conformance.backends.kubeapi import KubeApi
    from drakit.conformance.incluster.channel import read_progress
    api = KubeApi(str(containerd_cluster.kubeconfig))
    core = _core(containerd_cluster)
    proc = subprocess.Popen([sys.executable, "-m", "drakit.conformance.cli", "run", "--in-cluster", "--shards", "2",
                             "--host-network", "--image", image, *map(str, CASE_FILES), "--kubeconfig",
                             str(containerd_cluster.kubeconfig), "--out", "out"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sent = False
    deadline = time.monotonic() + 600
    while not sent and time.monotonic() < deadline and proc.poll() is None:
        for ns in [n.metadata.name for n in core.list_namespace().items if n.metadata.name.startswith("drakit-")]:
            progress = [read_progress(api, ns, f"drakit-shard-{i}") for i in (1, 2)]
            if all(p and 1 <= p[0] < p[1] for p in progress):  # both shards mid-run
                proc.send_signal(signal.SIGINT)
                sent = True
                break
        time.sleep(0.5)
    out = proc.communicate(timeout=900)[0]
    assert sent, "the shards were never both mid-run: " + out[-3000:]
    assert proc.returncode == 130, out[-4000:]
    assert "interrupted by SIGINT: stopping the shards" in out and "deleted everything the run created" in out, out[-3000:]
    assert re.search(r"verdict:? INCOMPLETE", out) and "verdict: PASS" not in out, out[-3000:]  # never PASS
    assert _run_leftovers(containerd_cluster) == []
