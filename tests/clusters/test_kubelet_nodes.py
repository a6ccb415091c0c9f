"""Real kubelet nodes on the local cluster: kubelet v1.37.2 over drakit's fake CRI, the fake
drivers registered through the kubelet's plugins_registry, and a clean host afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from drakit.clusters.local import kubeletnode, procs
from drakit.clusters.local.kubeletnode import NodePaths, containers_of, kubelet_config, namespace_script, read_cri_record
from drakit.clusters.local.procs import stop_order
from drakit.fake_driver.kube import Kube, load_api_client

from .waiting import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


# ------------------------------------------------------------------ pure parts
def test_kubelet_config_states_cgroup_v1_only_there(tmp_path):
    paths = NodePaths(tmp_path / "n")
    common = dict(port=1, healthz_port=2, ca_file=tmp_path / "ca", tls_cert=tmp_path / "c", tls_key=tmp_path / "k")
    v1 = kubelet_config(paths, v1=True, **common)
    v2 = kubelet_config(paths, v1=False, **common)
    assert v1["failCgroupV1"] is False and "failCgroupV1" not in v2
    for cfg in (v1, v2):
        assert cfg["cgroupDriver"] == "cgroupfs" and cfg["cgroupsPerQOS"] is False
        assert cfg["enforceNodeAllocatable"] == [] and cfg["failSwapOn"] is False
        assert cfg["containerRuntimeEndpoint"] == f"unix://{paths.cri_socket}"
        # a kubelet in the host's network namespace must not touch the host's firewall
        assert cfg["makeIPTablesUtilChains"] is False
        # every folder the kubelet writes to is the node's own
        for key in ("podLogsDir", "volumePluginDir"):
            assert cfg[key].startswith(str(paths.dir))


def test_namespace_script_shadows_every_sysctl_then_execs_the_kubelet(tmp_path):
    paths = NodePaths(tmp_path / "n")
    script = namespace_script(paths, Path("/bin/kubelet"), ["--v=2"])
    lines = script.splitlines()
    for name in kubeletnode.SYSCTLS:
        assert any(f"/proc/sys/{name}" in ln and ln.startswith("mount --bind") for ln in lines), name
    for d in kubeletnode.PRIVATE_TMPFS:
        assert any(ln.startswith("mount -t tmpfs") and ln.endswith(d) for ln in lines), d
    assert lines[0] == "set -eu" and lines[-1].startswith("exec /bin/kubelet")
    assert f"cd {paths.cwd}" in lines


def test_stop_order_drivers_then_kubelets_then_runtimes_then_control_plane():
    names = ["etcd", "kube-apiserver", "fakecri/n1", "kwok", "kubelet/n1", "driver/n1/gpu.acme.example.com"]
    infos = [procs.ProcInfo(n, i, 0, "x", "y") for i, n in enumerate(names)]
    assert [p.name for p in stop_order(infos)] == [
        "driver/n1/gpu.acme.example.com", "kubelet/n1", "fakecri/n1", "kwok", "kube-apiserver", "etcd"]


def test_cri_record_ignores_a_torn_last_line(tmp_path):
    rec = tmp_path / "cri.jsonl"
    good = {"event": "CreateContainer", "pod": {"namespace": "ns", "name": "p"}, "container": "c"}
    rec.write_text(json.dumps(good) + "\n" + '{"event": "Create')
    assert read_cri_record(rec) == [good]
    assert containers_of(read_cri_record(rec), "ns", "p", "c") == [good]
    assert containers_of(read_cri_record(rec), "ns", "other") == []


# ------------------------------------------------------- on a real kubelet node
def _kube(cluster) -> Kube:
    return Kube(load_api_client(cluster.kubeconfig))


def _pod_with_claim(kube: Kube, ns: str, name: str) -> None:
    kube.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.acme.example.com"}}]}}})
    kube.request("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "registry.example/app:1",
                                 "resources": {"claims": [{"name": "gpu"}]}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}})


def test_node_is_a_real_v1_37_2_kubelet_and_runs_a_pod_with_the_drivers_cdi_devices(kubelet_cluster):
    kube = _kube(kubelet_cluster)
    node = kube.get("/api/v1/nodes/node-1")
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.2"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("drakit-fakecri://")
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    kube.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kn1"}})
    _pod_with_claim(kube, "kn1", "p1")
    t0 = time.monotonic()
    wait_for("pod p1 Running", lambda: (kube.get("/api/v1/namespaces/kn1/pods/p1") or {}).get("status", {}).get("phase") == "Running", 30)
    assert time.monotonic() - t0 < 20
    kn = kubelet_cluster.kubelet_node("node-1")
    [created] = containers_of(read_cri_record(kn.paths.cri_record), "kn1", "p1", "c")
    claim = kube.get("/apis/resource.k8s.io/v1/namespaces/kn1/resourceclaims/p1")
    uid = claim["metadata"]["uid"]
    [result] = claim["status"]["allocation"]["devices"]["results"]
    # the driver's CDI device for the allocated device, passed by the kubelet, resolved by the runtime
    assert f"k8s.gpu.acme.example.com/gpu={uid}-{result['device']}" in created["cdiDevices"]
    assert any(e.startswith(f"DRAKIT_{result['device'].upper()}_DEVICE=") for e in created["effective"]["env"])
    assert not any(e.startswith("DRAKIT_") for e in created["requested"]["env"])
    # delete: the kubelet unprepares, the driver removes the claim's CDI spec
    kube.request("DELETE", "/api/v1/namespaces/kn1/pods/p1")
    wait_for("pod p1 gone", lambda: kube.get("/api/v1/namespaces/kn1/pods/p1") is None, 60)
    assert not [p for p in kn.paths.cdi_dir.iterdir() if uid in p.name]


def test_slices_the_kubelet_or_anyone_deletes_come_back_at_once(kubelet_cluster):
    kube = _kube(kubelet_cluster)
    selector = {"fieldSelector": "spec.nodeName=node-1,spec.driver=gpu.acme.example.com"}
    [before] = kube.request("GET", SLICES, query=selector)["items"]
    kube.request("DELETE", f"{SLICES}/{before['metadata']['name']}")
    t0 = time.monotonic()
    wait_for("the slice republished", lambda: kube.request("GET", SLICES, query=selector)["items"], 10, poll=0.05)
    assert time.monotonic() - t0 < 5  # not the 30 s resync


def test_host_sysctls_and_mounts_stay_untouched(kubelet_cluster):
    kn = kubelet_cluster.kubelet_node("node-1")
    host = kubeletnode.read_sysctls()
    pid = kn.procs["kubelet"].pid
    inside = Path(f"/proc/{pid}/mountinfo").read_text()
    assert " /var/lib " in inside and " /var/log " in inside  # private tmpfs, in the kubelet's namespace only
    mine = Path("/proc/self/mountinfo").read_text()
    assert str(kn.paths.dir) not in mine and "drakit-node" not in mine
    for name, value in host.items():
        shadow = (kn.paths.sysctl_dir / name.replace("/", ".")).read_text().strip()
        assert Path("/proc/sys", name).read_text().strip() == value
        # the kubelet wrote its wish into the shadow file (it sets overcommit_memory=1, panic=10)
        if name == "kernel/panic":
            assert shadow == "10"


# ------------------------------------------------------------ teardown leaves nothing
_OWNER = textwrap.dedent("""
    import sys, time
    from drakit.clusters.local.launcher import LocalCluster, install_sigterm_as_exit
    from drakit.clusters.local.fakedrivers import deploy
    install_sigterm_as_exit()
    c = LocalCluster(sys.argv[1], kubelet_nodes=[("node-1", {})])
    c.up()
    deploy(c, [("node-1", "small-1gpu")])
    print("UP", flush=True)
    time.sleep(600)
""")


def _held_by_us(port: int, run_dir: Path) -> bool:
    """Whether the process listening on *port* is one of this cluster's (its command line names
    the run dir), or cannot be found: once the cluster's processes are gone, another cluster on
    the machine (a parallel test worker's) may be given the same port by the kernel."""
    inodes = {f"socket:[{inode}]" for inode in procs.listening_sockets().get(port, ())}
    holders = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                holders.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return not holders or any(str(run_dir) in cmd for cmd in holders)


def _leftovers(run_dir: Path, state: dict, sysctls: dict[str, str]) -> list[str]:
    found = []
    for p in procs.procs_from_state(state):
        if procs.info_alive(p):
            found.append(f"process {p.name} ({p.pid})")
    for extra in [run_dir, *map(Path, state.get("extra_dirs", []))]:
        if extra.exists():
            found.append(f"folder {extra}")
    listening = procs.listening_ports()
    found += [f"port {n}={port}" for n, port in state.get("ports", {}).items()
              if port in listening and _held_by_us(port, run_dir)]
    if str(run_dir) in Path("/proc/self/mountinfo").read_text():
        found.append("a mount below the run dir")
    if kubeletnode.read_sysctls() != sysctls:
        found.append(f"sysctls changed: {kubeletnode.read_sysctls()} != {sysctls}")
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_owner_leaves_no_process_folder_port_mount_or_sysctl(tmp_path, sig):
    from drakit.clusters.local.pytest_fixture import kubelet_skip_reason, skip_or_fail

    reason = kubelet_skip_reason()
    if reason:
        skip_or_fail(reason)
    sysctls = kubeletnode.read_sysctls()
    run_dir = tmp_path / "rd"
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, str(run_dir)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "UP", "the cluster did not come up"
        state = procs.read_state(run_dir)
        assert state is not None and any(p["name"].startswith("kubelet/") for p in state["processes"])
        owner.send_signal(sig)
        owner.wait(30)
    finally:
        if owner.poll() is None:
            owner.kill()
    # SIGTERM: the owner's teardown does it all; SIGKILL: every child dies with its parent
    # (PR_SET_PDEATHSIG), and 'drakit cluster down --run-dir' removes the folders.
    wait_for("the kubelet node's processes gone", lambda: not any(
        procs.info_alive(p) for p in procs.procs_from_state(state)), 30)
    if sig == signal.SIGKILL:
        from drakit.clusters.local.launcher import LocalCluster
        LocalCluster.attach(run_dir).down()
    assert _leftovers(run_dir, state, sysctls) == []


def test_an_init_container_completes_and_the_pod_runs(kubelet_cluster):
    kube = _kube(kubelet_cluster)
    kube.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kn2"}})
    kube.request("POST", "/api/v1/namespaces/kn2/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "init"},
        "spec": {"nodeName": "node-1", "initContainers": [{"name": "setup", "image": "registry.example/setup:1"}],
                 "containers": [{"name": "main", "image": "registry.example/app:1"}]}})
    pod = wait_for("pod init Running", lambda: (p := kube.get("/api/v1/namespaces/kn2/pods/init"))
                   and p.get("status", {}).get("phase") == "Running" and p, 30)
    [init] = pod["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0 and init["state"]["terminated"]["reason"] == "Completed"
    record = read_cri_record(kubelet_cluster.kubelet_node("node-1").paths.cri_record)
    assert [e["container"] for e in containers_of(record, "kn2", "init")] == ["setup", "main"]


OWN_IMAGE = "example.com/vendor/tool:1.0"


def _retagged_busybox(tmp: Path, ref: str) -> Path:
    """drakit's busybox archive under another name: an image of a user's own."""
    import io
    import tarfile
    from drakit.clusters.images import ensure_images
    (source,) = ensure_images(which=("busybox",))
    dest = tmp / "tool.tar"
    with tarfile.open(source) as src, tarfile.open(dest, "w") as out:
        for member in src:
            data = src.extractfile(member) if member.isfile() else None
            if member.name == "index.json" and data is not None:
                index = json.loads(data.read())
                index["manifests"][0]["annotations"] = {"io.containerd.image.name": ref}
                raw = json.dumps(index).encode()
                member.size = len(raw)
                data = io.BytesIO(raw)
            out.addfile(member, data)
    return dest


def _run_pod_of(kube: Kube, image: str) -> None:
    kube.request("POST", "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "own-image"},
        "spec": {"nodeName": "node-1", "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never", "command": ["true"]}]}})
    wait_for("pod own-image Succeeded", lambda: (kube.get("/api/v1/namespaces/default/pods/own-image") or {})
             .get("status", {}).get("phase") == "Succeeded", 60)


def test_cluster_up_lists_ready_v1_37_2_kubelet_nodes_with_slices_and_down_leaves_nothing(tmp_path):
    from drakit.clusters.local.pytest_fixture import kubelet_skip_reason, skip_or_fail

    reason = kubelet_skip_reason()
    if reason:
        skip_or_fail(reason)
    sysctls = kubeletnode.read_sysctls()
    parent = Path(tempfile.mkdtemp(prefix="dk-up-"))  # short: node sockets live below it
    run_dir = parent / "rd"  # 'up' makes it, so 'down' removes it
    drakit = [sys.executable, "-m", "drakit.conformance.cli", "cluster"]
    containerd = (os.environ.get("DRAKIT_RUNTIME") or kubeletnode.CONTAINERD) == kubeletnode.CONTAINERD
    own = ["--load-image", str(_retagged_busybox(tmp_path, OWN_IMAGE))] if containerd else []
    try:
        up = subprocess.run([*drakit, "up", "--run-dir", str(run_dir), "--nodes", "1", "--hardware", "small-1gpu", *own],
                            capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        assert "node node-1 (kubelet v1.37.2, hardware small-1gpu): gpu.acme.example.com, nic.swift.example.com" in up.stdout
        if own:  # a user's image, loaded with --load-image, runs in a pod that may not pull it
            assert f"cluster: every node imports {OWN_IMAGE}" in up.stdout, up.stdout[-2000:]
            _run_pod_of(Kube(load_api_client(run_dir / "kubeconfig")), OWN_IMAGE)
        state = procs.read_state(run_dir)
        kube = Kube(load_api_client(run_dir / "kubeconfig"))
        node = kube.get("/api/v1/nodes/node-1")
        assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.2"
        drivers = {s["spec"]["driver"] for s in kube.request("GET", SLICES, query={"fieldSelector": "spec.nodeName=node-1"})["items"]}
        assert drivers == {"gpu.acme.example.com", "nic.swift.example.com"}
        assert kube.get("/apis/resource.k8s.io/v1/deviceclasses/gpu.acme.example.com") is not None
    finally:
        down = subprocess.run([*drakit, "down", "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert _leftovers(run_dir, state, sysctls) == []
    parent.rmdir()



def test_the_driver_suite_through_the_kubeconfig_alone_passes_and_says_what_it_cannot_see(kubelet_cluster, tmp_path):
    """A CI job with only the kubeconfig of a correct cluster (drakit's own here, whose runtime runs
    no process): no case of the driver suite fails; the cases that read what a container printed
    are skipped as no-node-side naming the runtime, never failed on the empty log. The node's one
    GPU cannot hold driver/several-pods' three devices: that skip (inventory) alone makes the
    verdict incomplete (as `drakit cluster up`'s eight GPUs do not: PASS)."""
    out = tmp_path / "out"
    suite = Path(__file__).resolve().parents[2] / "conformance" / "suites" / "driver"
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(suite), "--backend", "cluster",
                          "--kubeconfig", str(kubelet_cluster.kubeconfig), "--out", str(out), "--plain"],
                         capture_output=True, text=True, timeout=900)
    results = json.loads((out / "results.json").read_text())
    cases = {c["id"]: c for c in results["cases"]}
    bad = {cid: c["status"] for cid, c in cases.items() if c["status"] not in ("passed", "skipped")}
    assert not bad, (bad, res.stdout[-3000:] + res.stderr[-2000:])
    reasons = results["verdict"]["reasons"]
    assert results["verdict"]["result"] == "incomplete" and [r["code"] for r in reasons] == ["required-skipped"], reasons
    assert [c["id"] for c in reasons[0]["cases"]] == ["driver/several-pods"], reasons
    assert cases["driver/several-pods"]["skip"]["category"] == "inventory"
    env = cases["driver/pod-env"]
    assert env["status"] == "skipped" and env["skip"]["category"] == "no-node-side", env
    assert "drakit-fakecri" in env["skip"]["message"] and "node-1" in env["skip"]["message"]
    assert cases["driver/prepare"]["status"] == "passed", cases["driver/prepare"]
