"""Figures of the real kubelet nodes on the local cluster (kubelet 1.37.2 over containerd + runc,
and over drakit's fake CRI).

Usage: ``python benchmarks/bench_kubelet.py [--runtimes containerd,fake] [--nodes 3] [--pods 50] [--batch 1,5]
[--node-authorizer-only] [--skip-suites] [--json]``

Parts 1-3 run once per runtime of ``--runtimes`` (a column each); part 4 on the fake CRI.

1. **node Ready**: on a running local control plane, ``--nodes`` kubelet nodes (shape
   server-8gpu) are started one after the other; for each, the seconds from starting its fake
   CRI and kubelet until the Node is Ready, untainted and the kubelet's start-up wipe of its
   slices is done (what ``LocalCluster.add_kubelet_node`` waits for).
2. **pod create -> Running**: the fake drivers run on node-1 as ``drakit cluster up`` starts
   them (processes, registered through the kubelet's plugins_registry). ``--pods`` pods, each
   with one GPU claim from a template, are created ``--batch`` at a time (a figure set for each
   size given: one at a time is a pod's own latency; five at a time on 2 cores is bound by the
   CPU the five need together); a pod's figure is from
   its create call returning to a watch seeing ``status.phase: Running`` (scheduling,
   allocation, NodePrepareResources by the kubelet, sandbox and container in the runtime).
   Each batch is deleted (gracefully) before the next. p50 / p90 / max, and how many pods waited
   for the kubelet's retry of a failed prepare (with ``--node-authorizer-only`` the kubelets
   race the Node authorizer's graph: realnodes.CLAIM_READ_ROLE). Where the time goes: p50 / p90
   of each phase (:data:`PHASES`: the claim made from the template, the scheduler's binding,
   the kubelet's watch, admission and prepare up to the sandbox, the container, the status
   that says Running), from this script's watches, the kubelet's log and the runtime's (the
   fake CRI's record, containerd's info-level log);
   and the CPU milliseconds each component spent per pod over the whole create/delete cycle
   (a figure the machine's load does not change much, unlike the latencies).
3. **RSS per node**: VmRSS of each node's kubelet plus its runtime (containerd, or the fake CRI)
   after the pods ran; the pods' runc shims and containers are not counted.
4. **node-side suites**: wall time of ``drakit run --backend cluster --cluster local`` on the
   node-side suites (device-metadata, device-status, device-taints with its hardware faults)
   with kwok nodes plus drakit's node agent (``DRAKIT_NODE_SIDE=agent``) and with real
   kubelets, in the same sitting; the ratio kubelet / agent. Cases that need a real kubelet
   (the ``container`` assertion, device health in pod status) are left out of both, so both run
   the same cases.

Progress goes to stderr, figures (or JSON) to stdout. Exit code 1 when a part failed.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from drakit.clusters.local.fakedrivers import deploy  # noqa: E402
from drakit.clusters.local.kubeletnode import read_cri_record  # noqa: E402
from drakit.clusters.local.launcher import LocalCluster, install_sigterm_as_exit  # noqa: E402
from drakit.fake_driver.kube import Informer, Kube, load_api_client  # noqa: E402
from drakit.fake_hw.inventory import build_inventory  # noqa: E402

SHAPE = "server-8gpu"
SUITES = ["conformance/suites/device-metadata", "conformance/suites/device-status", "conformance/suites/device-taints"]
KUBELET_ONLY = "not container-gets-the-metadata-mount and not fault-shows-in-pod-device-health"


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


#: The phases of a pod's create -> Running, each from the end of the one before it.
PHASES = (
    ("claim", "create call returned -> the watch sees the pod's ResourceClaim (kube-controller-manager)"),
    ("scheduled", "-> the watch sees spec.nodeName (scheduler: allocation, binding)"),
    ("kubelet", "-> the kubelet's SyncLoop ADD (its pod watch)"),
    ("prepared", "-> RunPodSandbox in the runtime (admission, the claim read, NodePrepareResources)"),
    ("container", "-> CreateContainer in the runtime (the sandbox: shim, runc, CNI; image, container config with CDI IDs)"),
    ("running", "-> the watch sees phase Running (start, PLEG relist, status PATCH)"),
)
KLOG_ADD = re.compile(r'^I(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}\.\d+) .*"SyncLoop ADD" source="api" pods=\["([^"]+)"\]')


def _klog_time(month: str, day: str, clock: str) -> float:
    year = time.gmtime().tm_year
    return calendar.timegm(time.strptime(f"{year}-{month}-{day} {clock.split('.')[0]}", "%Y-%m-%d %H:%M:%S")) + float(
        "0." + clock.split(".")[1])


def _rfc3339(value: str) -> float:
    stamp, _, frac = value.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


CTRD_LINE = re.compile(r'^time="([^"]+)" level=\w+ msg="(.*)"')
CTRD_SANDBOX = re.compile(r'^RunPodSandbox for name:\\"([^\\]+)\\".* namespace:\\"([^\\]+)\\"(?: .*returns sandbox id \\"(\w+)\\")?')
CTRD_CREATE = re.compile(r'^CreateContainer within sandbox \\"(\w+)\\" for container')


def containerd_calls(path: Path, ns: str) -> tuple[dict[str, float], dict[str, float]]:
    """Per pod of ``ns``: when containerd's CRI plugin was asked for its sandbox and for its first
    container (its info-level log lines ``RunPodSandbox for ...`` and ``CreateContainer within
    sandbox ...``, stamped in UTC)."""
    sandbox: dict[str, float] = {}
    container: dict[str, float] = {}
    pod_of: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        m = CTRD_LINE.match(line)
        if not m:
            continue
        s = CTRD_SANDBOX.match(m.group(2))
        if s and s.group(2) == ns:
            if s.group(3):
                pod_of[s.group(3)] = s.group(1)
            else:
                sandbox.setdefault(s.group(1), _rfc3339(m.group(1)))
            continue
        c = CTRD_CREATE.match(m.group(2))
        if c and c.group(1) in pod_of:
            container.setdefault(pod_of[c.group(1)], _rfc3339(m.group(1)))
    return sandbox, container


def phases(created: dict[str, float], claimed: dict[str, float], bound: dict[str, float], running: dict[str, float], node: Any,
           ns: str) -> dict[str, dict[str, float]]:
    """p50/p90 of each of :data:`PHASES` over the pods (wall clock: the kubelet's log and the fake
    CRI's record stamp in UTC on this machine's clock)."""
    added: dict[str, float] = {}
    for line in (node.paths.dir / "kubelet.log").read_text(errors="replace").splitlines():
        m = KLOG_ADD.match(line)
        if m and m.group(4).startswith(ns + "/"):
            added.setdefault(m.group(4).split("/", 1)[1], _klog_time(m.group(1), m.group(2), m.group(3)))
    sandbox: dict[str, float] = {}
    container: dict[str, float] = {}
    if (node.paths.dir / "containerd.log").exists():
        sandbox, container = containerd_calls(node.paths.dir / "containerd.log", ns)
    else:
        for e in read_cri_record(node.paths.cri_record):
            pod = (e.get("pod") or {}).get("name")
            if (e.get("pod") or {}).get("namespace") != ns or e.get("error") or not pod:
                continue
            if e.get("event") == "RunPodSandbox":
                sandbox.setdefault(pod, _rfc3339(e["time"]))
            elif e.get("event") == "CreateContainer":
                container.setdefault(pod, _rfc3339(e["time"]))
    stamps = [created, claimed, bound, added, sandbox, container, running]
    out: dict[str, dict[str, float]] = {}
    for i, (phase, _why) in enumerate(PHASES):
        d = [stamps[i + 1][n] - stamps[i][n] for n in created if n in stamps[i] and n in stamps[i + 1]]
        if d:
            out[phase] = {"n": len(d), "p50": pct(d, 50), "p90": pct(d, 90)}
    return out


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants, with the children each has reaped: a containerd
    node's process is the namespace's wrapper, containerd, its shims and the kubelet below it."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        kids = [int(k) for t in Path(f"/proc/{pid}/task").iterdir() for k in (t / "children").read_text().split()]
    except OSError:
        return 0.0
    own = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    return own + sum(tree_cpu_seconds(k) for k in kids)


def cpu_by_component(cluster: Any) -> dict[str, float]:
    """CPU seconds so far of each of the cluster's processes (with their descendants), summed by
    component (the part of the process name before the first ``/``), and of this process
    (``bench``: its watches)."""
    out: dict[str, float] = {"bench": cpu_seconds(os.getpid())}
    for info in cluster._procs:
        role = info.name.split("/", 1)[0]
        out[role] = out.get(role, 0.0) + tree_cpu_seconds(info.pid)
    return out


def tree_rss_mib(pid: int, skip: str = "containerd-shim") -> float:
    """VmRSS of ``pid`` and its descendants, leaving out processes named ``skip`` and theirs."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        kids = [int(k) for t in Path(f"/proc/{pid}/task").iterdir()
                for k in (t / "children").read_text().split()]
    except OSError:
        return 0.0
    if comm.startswith(skip[:15]):
        return 0.0
    return rss_mib(pid) + sum(tree_rss_mib(k, skip) for k in kids)


def pods_at(cluster: Any, kube: Kube, ns: str, batch: int, count: int) -> dict[str, Any]:
    """``count`` pods with a GPU claim each, created ``batch`` at a time in namespace ``ns``, each
    batch deleted before the next: their create -> Running latencies, phases and CPU."""
    res: dict[str, Any] = {}
    kube.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})
    running: dict[str, float] = {}
    bound: dict[str, float] = {}
    claimed: dict[str, float] = {}
    seen = threading.Condition()

    def on_pod(event: str, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if (pod.get("spec") or {}).get("nodeName"):
            bound.setdefault(name, time.time())
        if (pod.get("status") or {}).get("phase") == "Running":
            with seen:
                running.setdefault(name, time.time())
                seen.notify_all()

    def on_claim(event: str, claim: dict[str, Any]) -> None:
        for owner in claim["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == "Pod":
                claimed.setdefault(owner["name"], time.time())

    claims = Informer(kube, f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", on_claim,
                      name="bench-claims").start()
    informer = Informer(kube, f"/api/v1/namespaces/{ns}/pods", on_pod, name="bench-pods").start()
    informer.synced.wait(10)
    claims.synced.wait(10)
    created: dict[str, float] = {}
    cpu0 = cpu_by_component(cluster)
    t0 = time.monotonic()
    try:
        for b in range(0, count, batch):
            names = [f"p{i}" for i in range(b, min(count, b + batch))]
            for name in names:
                body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                 "resources": {"claims": [{"name": "gpu"}]}}]}}
                kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body)
                created[name] = time.time()
            deadline = time.monotonic() + 60
            with seen:
                while not all(n in running for n in names):
                    if not seen.wait(max(0.0, deadline - time.monotonic())):
                        raise SystemExit(f"pods not Running after 60 s: {[n for n in names if n not in running]}")
            for name in names:
                # graceful: the kubelet unprepares before the pod (and its claim) goes
                kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 1})
            # the next batch needs the GPUs back: wait until the claims are gone
            deadline = time.monotonic() + 60
            while kube.request("GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")["items"]:
                if time.monotonic() > deadline:
                    raise SystemExit("claims of deleted pods still there after 60 s")
                time.sleep(0.05)
    finally:
        wall = time.monotonic() - t0
        cpu1 = cpu_by_component(cluster)
        informer.stop()
        claims.stop()
    res["cpuMillisecondsPerPod"] = {k: round(1000 * (cpu1[k] - cpu0.get(k, 0.0)) / count, 1) for k in cpu1}
    res["podsWallSeconds"] = wall
    lat = [running[n] - created[n] for n in created]
    res["podRunningSeconds"] = {"n": len(lat), "p50": pct(lat, 50), "p90": pct(lat, 90), "max": max(lat)}
    res["podPhasesSeconds"] = phases(created, claimed, bound, running, cluster.real.nodes["node-1"], ns)
    # the kubelet retries a failed prepare after its pod-worker backoff: say how often and why
    failed = [e for e in kube.request("GET", f"/api/v1/namespaces/{ns}/events")["items"]
              if e.get("reason") == "FailedPrepareDynamicResources"]
    res["failedPrepareEvents"] = {"pods": len({(e.get("involvedObject") or {}).get("name") for e in failed}),
                                  "first": (failed[0].get("message") or "")[:300] if failed else None}
    return res


def bench_nodes_and_pods(args: argparse.Namespace, runtime: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with LocalCluster(progress=log, kubelet_claim_read=not args.node_authorizer_only, runtime=runtime) as cluster:
        if cluster.real is None:
            raise SystemExit(f"no real kubelet nodes here: {cluster.real_nodes_reason}")
        ready = []
        for i in range(1, args.nodes + 1):
            name = f"node-{i}"
            t0 = time.monotonic()
            cluster.add_kubelet_node(name, build_inventory(SHAPE, name).node_labels())
            ready.append(time.monotonic() - t0)
            log(f"{name} Ready in {ready[-1]:.2f} s")
        out["nodeReadySeconds"] = ready
        deploy(cluster, [("node-1", SHAPE)], progress=log)
        kube = Kube(load_api_client(cluster.kubeconfig))
        ns = "bench"
        for batch in args.batch:
            log(f"{args.pods} pods, {batch} at a time ...")
            out.setdefault("pods", {})[str(batch)] = pods_at(cluster, kube, f"{ns}-{batch}", batch, args.pods)
        rss = {}
        for name in sorted(cluster.real.nodes):
            node = cluster.real.nodes[name]
            rss[name] = round(sum(tree_rss_mib(p.pid) for p in node.procs.values()), 1)
        out["rssMiBPerNode"] = rss
    return out


KLOG_DELETE = re.compile(r'^I(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}\.\d+) .*"SyncLoop DELETE" source="api" pods=\["([^"]+)"\]')


def deletion_waits(logs: Path) -> dict[str, list[float]]:
    """Per namespace, for each pod a kubelet was told was deleted: the seconds from its
    ``SyncLoop DELETE`` (the kubelet saw the deletion) to the fake CRI's StopPodSandbox of the pod
    (its containers stopped; ``SyncTerminatingPod`` calls NodeUnprepareResources right after).
    What the pod worker waits for meanwhile is the PLEG's next periodic relist (pod_workers.go)."""
    out: dict[str, list[float]] = {}
    for klog in sorted(logs.glob("*-kubelet.log")):
        deleted: dict[str, float] = {}
        for line in klog.read_text(errors="replace").splitlines():
            m = KLOG_DELETE.match(line)
            if m:
                deleted.setdefault(m.group(4), _klog_time(m.group(1), m.group(2), m.group(3)))
        sandboxes: dict[str, str] = {}
        stopped: dict[str, float] = {}
        for e in read_cri_record(klog.with_name(klog.name.replace("-kubelet.log", "-cri.jsonl"))):
            pod = e.get("pod") or {}
            if e.get("event") == "RunPodSandbox" and e.get("podSandboxId") and pod.get("name"):
                sandboxes[e["podSandboxId"]] = f"{pod.get('namespace')}/{pod['name']}"
            elif e.get("event") == "StopPodSandbox" and e.get("podSandboxId") in sandboxes and not e.get("error"):
                stopped.setdefault(sandboxes[e["podSandboxId"]], _rfc3339(e["time"]))
        for pod, t in deleted.items():
            if pod in stopped and stopped[pod] >= t:
                out.setdefault(pod.split("/", 1)[0], []).append(stopped[pod] - t)
    return out


def run_suites(mode: str) -> dict[str, Any]:
    from drakit.conformance.backends.reference import case_namespace

    with tempfile.TemporaryDirectory(prefix="bench-kubelet-") as out:
        logs = Path(out) / "node-logs"
        plugins = ",".join(p for p in (os.environ.get("PYTEST_PLUGINS"), "bench_kubelet_nodelogs") if p)
        path = os.pathsep.join(p for p in (str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "DRAKIT_NODE_SIDE": mode, "BENCH_NODE_LOGS": str(logs), "PYTEST_PLUGINS": plugins,
               "PYTHONPATH": path}
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", *SUITES, "--backend", "cluster",
                               "--cluster", "local", "-n", "0", "-k", KUBELET_ONLY, "--out", out, "--plain", "-q"],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        results = json.loads((Path(out) / "results.json").read_text()) if (Path(out) / "results.json").exists() else {}
        waits = deletion_waits(logs)
    cases = results.get("cases") or []
    outcomes: dict[str, int] = {}
    for c in cases:
        key = str(c.get("outcome") or c.get("status"))
        outcomes[key] = outcomes.get(key, 0) + 1
    per_case = {str(c.get("id") or c.get("nodeid")): float(c.get("durationSeconds") or 0.0) for c in cases}
    by_ns = {case_namespace(case): case for case in per_case}
    return {"wallSeconds": wall, "exit": proc.returncode, "outcomes": outcomes, "caseSeconds": per_case,
            "outsideCasesSeconds": wall - sum(per_case.values()),
            "deletionWaitSeconds": {by_ns.get(ns, ns): w for ns, w in waits.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtimes", default="containerd,fake", help="node runtimes to measure, comma-separated")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--pods", type=int, default=50)
    ap.add_argument("--batch", default="1,5", type=lambda v: [int(x) for x in v.split(",") if x],
                    help="pods created at a time, comma-separated: a figure set each (default: 1,5)")
    ap.add_argument("--skip-suites", action="store_true")
    ap.add_argument("--node-authorizer-only", action="store_true",
                    help="no RBAC read of ResourceClaims for kubelets (realnodes.CLAIM_READ_ROLE): kubelets race the "
                         "Node authorizer's graph for freshly bound pods")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    install_sigterm_as_exit()
    runtimes = [r for r in args.runtimes.split(",") if r]
    columns = {}
    for runtime in runtimes:
        log(f"nodes and pods on {runtime} ...")
        columns[runtime] = bench_nodes_and_pods(args, runtime)
    figures: dict[str, Any] = {"runtimes": columns}
    if not args.skip_suites:
        for mode in ("agent", "kubelet"):
            log(f"node-side suites with node side {mode} ...")
            figures[f"suites-{mode}"] = run_suites(mode)
        figures["suitesRatioKubeletOverAgent"] = (figures["suites-kubelet"]["wallSeconds"]
                                                  / figures["suites-agent"]["wallSeconds"])
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0 if args.skip_suites or (figures["suites-agent"]["exit"] == 0
                                         and figures["suites-kubelet"]["exit"] == 0) else 1
    print(f"{'runtime':12} {'node Ready median':>18} {'pods at a time':>15} {'pod p50':>8} {'pod p90':>8} "
          f"{'RSS/node (kubelet+runtime)':>27}")
    for runtime, col in columns.items():
        rss = col["rssMiBPerNode"]
        for batch, figs in col["pods"].items():
            print(f"{runtime:12} {statistics.median(col['nodeReadySeconds']):16.2f} s {batch:>15} "
                  f"{figs['podRunningSeconds']['p50']:6.3f} s {figs['podRunningSeconds']['p90']:6.3f} s "
                  f"{max(rss.values()):20.1f} MiB max")
    for runtime, figures_rt in columns.items():
        print(f"--- {runtime}")
        r = figures_rt["nodeReadySeconds"]
        print(f"node Ready after start: {', '.join(f'{x:.2f}' for x in r)} s (median {statistics.median(r):.2f} s)")
        for batch, figs in figures_rt["pods"].items():
            p = figs["podRunningSeconds"]
            print(f"pod create -> Running over {p['n']} pods ({batch} at a time): p50 {p['p50']:.3f} s, "
                  f"p90 {p['p90']:.3f} s, max {p['max']:.3f} s")
            for phase, why in PHASES:
                q = figs["podPhasesSeconds"].get(phase)
                if q:
                    print(f"  {phase:9} p50 {q['p50']:.3f} s, p90 {q['p90']:.3f} s  ({why})")
            c = figs["cpuMillisecondsPerPod"]
            print(f"  CPU per pod, {sum(c.values()):.0f} ms in all ({figs['podsWallSeconds']:.1f} s wall for the pods): "
                  + ", ".join(f"{k} {v:.0f}" for k, v in sorted(c.items(), key=lambda kv: -kv[1])))
            f = figs["failedPrepareEvents"]
            if f["pods"]:
                print(f"  {f['pods']} of them waited for the kubelet's retry after FailedPrepareDynamicResources: "
                      f"{f['first']}")
        print(f"RSS per node (kubelet + {runtime}): " + ", ".join(f"{n} {v} MiB" for n, v in figures_rt["rssMiBPerNode"].items()))
    if not args.skip_suites:
        a, k = figures["suites-agent"], figures["suites-kubelet"]
        print(f"node-side suites ({', '.join(Path(s).name for s in SUITES)}): kwok + node agent {a['wallSeconds']:.1f} s "
              f"{a['outcomes']}, real kubelets {k['wallSeconds']:.1f} s {k['outcomes']}; "
              f"ratio kubelet/agent {figures['suitesRatioKubeletOverAgent']:.2f}")
        print(f"  outside the cases (start-up, cluster up and down): agent {a['outsideCasesSeconds']:.1f} s, "
              f"kubelets {k['outsideCasesSeconds']:.1f} s")
        both = sorted(set(a["caseSeconds"]) & set(k["caseSeconds"]),
                      key=lambda c: a["caseSeconds"][c] - k["caseSeconds"][c])
        waits = k["deletionWaitSeconds"]
        print("  per case (set-up, steps and clean-up), kubelets minus agent, largest first; and the kubelet's "
              "wait from seeing a pod deleted to stopping it (then NodeUnprepareResources) for each of its pods:")
        for case in both:
            wait = " + ".join(f"{w:.2f}" for w in waits.get(case, []))
            print(f"    {k['caseSeconds'][case] - a['caseSeconds'][case]:+6.2f} s  agent {a['caseSeconds'][case]:5.2f} s, "
                  f"kubelets {k['caseSeconds'][case]:5.2f} s  {case}" + (f"  (deleted pods: {wait} s)" if wait else ""))
        every = [w for ws in waits.values() for w in ws]
        if every:
            print(f"  the kubelet's wait before stopping a deleted pod: {len(every)} pods, {sum(every):.1f} s in all, "
                  f"p50 {pct(every, 50):.2f} s, max {max(every):.2f} s (its pod worker waits for the PLEG's next "
                  f"once-a-second relist)")
    ok = args.skip_suites or (figures["suites-agent"]["exit"] == 0 and figures["suites-kubelet"]["exit"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
