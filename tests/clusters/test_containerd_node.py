"""Real containers on the local cluster: containerd + runc under kubelet v1.37.2, CDI applied by
containerd's own CDI library, NRI's socket in the node's namespace, and a clean host afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from drakit.clusters.local import containerd as ctd
from drakit.clusters.local import procs
from drakit.fake_driver.kube import Kube, load_api_client

from . import hostsnap
from .waiting import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

BUSYBOX = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
METADATA_DIR = "/var/run/kubernetes.io/dra-device-attributes/resourceclaims"


def _kube(cluster) -> Kube:
    return Kube(load_api_client(cluster.kubeconfig))


def _claim_pod(kube: Kube, ns: str, name: str, command: str) -> None:
    kube.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu-claim"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.acme.example.com"}}]}}})
    kube.request("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
                 "containers": [{"name": "main", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent",
                                 "command": ["sh", "-c", command], "resources": {"claims": [{"name": "gpu"}]}}]}})


def _log(kube: Kube, ns: str, pod: str) -> str:
    from kubernetes.client import CoreV1Api
    try:
        return str(CoreV1Api(kube.api_client).read_namespaced_pod_log(pod, ns, container="main"))
    except Exception:  # noqa: BLE001 - not running yet
        return ""


def test_node_runs_containerd_2_and_a_claims_container_sees_cdi_env_and_metadata(containerd_cluster):
    kube = _kube(containerd_cluster)
    node = kube.get("/api/v1/nodes/node-1")
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://2.")
    meta = f"{METADATA_DIR}/gpu-claim/gpu/gpu.acme.example.com-metadata.json"
    _claim_pod(kube, "ctd1", "user", f"env; echo META-BEGIN; cat {meta}; echo; echo META-END; sleep 3600")
    wait_for("pod user Running", lambda: (kube.get("/api/v1/namespaces/ctd1/pods/user") or {})
             .get("status", {}).get("phase") == "Running", 90,
             logs=lambda: "\n" + (containerd_cluster.kubelet_node("node-1").paths.dir / "kubelet.log").read_text()[-3000:])
    log = wait_for("the container's log through the API server", lambda: (t := _log(kube, "ctd1", "user"))
                   and "META-END" in t and t, 30)
    env = dict(ln.partition("=")[::2] for ln in log.split("META-BEGIN")[0].splitlines() if "=" in ln)
    # the fake driver's CDI edits, applied by containerd's CDI library to a real process
    assert env.get("DRAKIT_GPU0_DEVICE") == "gpu0", log
    metadata = json.loads(log.split("META-BEGIN", 1)[1].split("META-END", 1)[0].strip())
    assert metadata["requests"][0]["devices"][0]["name"] == "gpu0", metadata
    # containerd's own record of what it gave the container: the kubelet's CDI IDs, the same env
    [rec] = containerd_cluster.kubelet_node("node-1").containers("ctd1", "user", "main")
    assert len(rec["cdiDevices"]) >= 1 and any(d.startswith("gpu.acme.example.com/") for d in rec["cdiDevices"])
    assert "DRAKIT_GPU0_DEVICE=gpu0" in rec["effective"]["env"]
    # the node's one GPU goes back for the module's other tests
    kube.request("DELETE", "/api/v1/namespaces/ctd1")
    wait_for("the claim's GPU released", lambda: not kube.get("/apis/resource.k8s.io/v1/namespaces/ctd1/resourceclaims/gpu-claim"), 90)


def test_nri_socket_and_stock_kubelet_folder_are_the_nodes_own(containerd_cluster):
    kn = containerd_cluster.kubelet_node("node-1")
    res = subprocess.run(kn.enter(["/bin/sh", "-c", f"test -S {ctd.NRI_SOCKET} && ls /var/lib/kubelet"]),
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert "plugins_registry" in res.stdout.split()  # /var/lib/kubelet is the node's folder r/
    assert not Path(ctd.NRI_SOCKET).exists() or Path(ctd.NRI_SOCKET).resolve() != kn.paths.dir  # not on the host
    mine = Path("/proc/self/mountinfo").read_text()
    assert "drakit-node" not in mine and str(kn.paths.dir) not in mine


# ------------------------------------------------------------ teardown leaves nothing
_OWNER = textwrap.dedent("""
    import sys, time
    from drakit.clusters.local.launcher import LocalCluster, install_sigterm_as_exit
    from drakit.clusters.local.fakedrivers import deploy
    from drakit.fake_driver.kube import Kube, load_api_client
    install_sigterm_as_exit()
    c = LocalCluster(sys.argv[1], kubelet_nodes=[("node-1", {})], runtime="containerd")
    c.up()
    deploy(c, [("node-1", "small-1gpu")])
    kube = Kube(load_api_client(c.kubeconfig))
    kube.request("POST", "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": sys.argv[2],
                 "command": ["sleep", "3600"]}]}})
    deadline = time.monotonic() + 120
    while (kube.get("/api/v1/namespaces/default/pods/sleeper") or {}).get("status", {}).get("phase") != "Running":
        assert time.monotonic() < deadline, "pod sleeper not Running"
        time.sleep(0.2)
    print("UP", flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("how", ["down", "SIGTERM", "SIGKILL"])
def test_nothing_of_a_containerd_node_outlives_its_run(tmp_path, how):
    """A node with a running pod (a runc container, its shim, a veth pair, cgroups): after
    ``down`` (the owner's SIGTERM teardown) or SIGKILL of the owner and ``drakit cluster down``,
    no process, mount, cgroup, network link, firewall rule, folder or sysctl change is left."""
    from drakit.clusters.local.launcher import LocalCluster
    from drakit.clusters.local.pytest_fixture import kubelet_skip_reason, skip_or_fail

    reason = kubelet_skip_reason()
    if reason:
        skip_or_fail(reason)
    before = hostsnap.snapshot()
    run_dir = tmp_path / "rd"
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, str(run_dir), BUSYBOX], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "UP", "the cluster did not come up"
        state = procs.read_state(run_dir)
        assert state is not None
        cgroup = ctd.cgroup_parent(run_dir, "node-1")
        assert ctd.cgroup_dirs(cgroup), "runc made no cgroup below the node's parent"
        [unshare] = [p for p in procs.procs_from_state(state) if p.name.startswith("containerd/")]
        pid1 = int(Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children").read_text().split()[0])
        shims = [pid for pid in _pids_named("containerd-shim") if _pidns(pid) == _pidns(pid1)]
        assert shims, "no runc shim runs in the node's PID namespace"
        if how == "down":
            LocalCluster.attach(run_dir).down()
            owner.kill()
        else:
            owner.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGKILL)
        owner.wait(60)
    finally:
        if owner.poll() is None:
            owner.kill()
    wait_for("the node's processes gone", lambda: not any(procs.info_alive(p) for p in procs.procs_from_state(state))
             and not (set(_pids_named("containerd-shim")) & set(shims)), 30)
    if how == "SIGKILL":
        LocalCluster.attach(run_dir).down()
    assert not run_dir.exists()
    assert ctd.cgroup_dirs(cgroup) == [] and ctd.cgroup_dirs(ctd.cgroup_parent(run_dir, "")) == []
    # other tests' clusters may come and go meanwhile: their drakit cgroups are theirs
    assert hostsnap.changes(before, hostsnap.snapshot(), ignore=("/drakit-",)) == []


def _pidns(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def _pids_named(prefix: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "comm").read_text().startswith(prefix[:15]):
                    out.append(int(p.name))
            except OSError:
                continue
    return out


def test_the_driver_suite_through_the_kubeconfig_alone_reads_what_containers_printed(containerd_cluster, tmp_path):
    """A CI job with only the kubeconfig of drakit's cluster whose node runs containerd: the cases
    that read what a container printed read its log through the API server and pass; none is
    skipped as no-node-side for it (on the fake CRI they are: test_kubelet_nodes)."""
    out = tmp_path / "out"
    suite = Path(__file__).resolve().parents[2] / "conformance" / "suites" / "driver"
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(suite), "--backend", "cluster",
                          "--kubeconfig", str(containerd_cluster.kubeconfig), "--out", str(out), "--plain"],
                         capture_output=True, text=True, timeout=900)
    results = json.loads((out / "results.json").read_text())
    cases = {c["id"]: c for c in results["cases"]}
    bad = {cid: f"{c['status']}: {((c.get('failure') or {}).get('summary') or '')[:300]}"
           for cid, c in cases.items() if c["status"] not in ("passed", "skipped")}
    assert not bad, "\n".join([*(f"{k}: {v}" for k, v in bad.items()), res.stdout[-2000:], res.stderr[-1000:]])
    unseen = {cid: c["skip"]["message"] for cid, c in cases.items()
              if c["status"] == "skipped" and c["skip"]["category"] == "no-node-side"}
    # through a kubeconfig alone, restarts of a node's kubelet stay out of sight; what a container
    # printed does not
    assert not [m for m in unseen.values() if "printed" in m or "container" in m], unseen
    for cid in ("driver/pod-env", "driver/prepare"):
        assert cases[cid]["status"] == "passed", cases[cid]
    # results.json and the report say what runtime the target's Nodes run, read from the Nodes
    nodes = results["environment"]["backends"]["cluster"]["nodes"]
    assert nodes["count"] >= 1 and all(rt.startswith("containerd://2.") for rt in nodes["containerRuntimes"]), nodes
    assert "containerd://2." in (out / "report.html").read_text()


def test_a_vendor_plugin_runs_inside_the_containerd_node_with_nri_and_the_stock_paths(containerd_cluster, tmp_path):
    """A plugin started as drakit starts a vendor's (``VendorPlugin`` with the node's ``enter``):
    upstream's test driver with only the stock paths (/var/lib/kubelet/..., /var/run/cdi) and,
    first, a check that NRI's socket answers. The node's own kubelet registers it, so its
    registration and DRA sockets were the node's; it dies when stopped."""
    from drakit.clusters.local import build
    from drakit.clusters.local.vendorplugin import NodeFolders, VendorPlugin
    from drakit.clusters.local.pytest_fixture import skip_or_fail
    if not (build.bin_dir() / "dra-test-driver").is_file():
        skip_or_fail("dra-test-driver not built; run 'drakit cluster build'")
    kn = containerd_cluster.kubelet_node("node-1")
    p = kn.paths
    driver = "test-driver.cdi.k8s.io"
    nri = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
           "print('NRI answers at', sys.argv[1], flush=True)")
    command = ["/bin/sh", "-c", '"$0" -c "$1" "$2" && exec "$3" --kubeconfig "$4" kubelet-plugin --node-name node-1 '
               f'--datadir /var/lib/kubelet/plugins --plugin-registration-path /var/lib/kubelet/plugins_registry '
               f'--cdi-dir {ctd.CDI_DIR}', sys.executable, nri, ctd.NRI_SOCKET, "{drakitBin}/dra-test-driver",
               "{kubeconfig}"]
    log = tmp_path / "plugin" / "plugin.log"
    mark = (p.dir / "kubelet.log").stat().st_size
    plugin = VendorPlugin(driver, command, [f"{{pluginsDir}}/{driver}"], "node-1",
                          NodeFolders(p.registry_dir, p.plugins_dir, p.cdi_dir), containerd_cluster.kubeconfig,
                          build.bin_dir(), log, enter=kn.enter)
    try:
        plugin.start(timeout=60)
        assert plugin.info is not None
        child = wait_for("the plugin's process", lambda: _only_child_of(plugin.info.pid), 10)
        # inside the node: its mount and PID namespaces are containerd's, not the host's
        assert os.readlink(f"/proc/{child}/ns/mnt") == os.readlink(f"/proc/{kn._pid1}/ns/mnt")
        assert _pidns(child) == _pidns(kn._pid1) != _pidns(os.getpid())
        registered = wait_for("the kubelet registered the plugin", lambda: any(
            "Registered DRA plugin" in ln and driver in ln
            for ln in (p.dir / "kubelet.log").read_bytes()[mark:].decode(errors="replace").splitlines()), 60,
            logs=lambda: log.read_text()[-2000:])
        assert registered
        assert (p.plugins_dir / driver / "dra.sock").is_socket()  # /var/lib/kubelet/plugins inside
        assert "NRI answers at /var/run/nri/nri.sock" in log.read_text()
    finally:
        plugin.stop()
    assert not plugin.alive() and not procs.is_alive(child)  # a zombie until the node's init reaps it


def _only_child_of(pid: int) -> int | None:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(kids[0]) if len(kids) == 1 else None
