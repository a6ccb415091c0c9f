"""Figures on the real local control plane (upstream 1.37.2 binaries, kwok nodes, stage set on-bind).

Usage: ``python benchmarks/bench_cluster.py [--nodes 500] [--pods 1000] [--backlog N] [--repeat 3]
[--client-qps 1000] [--workloads plain,requeue] [--skip-updown] [--skip-cases] [--skip-throughput] [--json]``

1. **up / down**: ``LocalCluster.up()`` until every component is healthy, then ``down()``,
   ``--repeat`` times.  After each down the process table is scanned for any process whose
   command line names the run dir (every component's does) and the component ports are probed.
2. **cases**: ``drakit run <core cases> --backend cluster --cluster local -n 0`` as a subprocess;
   per-case durations from its results.json and the wall time (with its own cluster up/down).
3. **scheduling throughput**, ``SchedulerPreQueueingHints`` off and on, a fresh cluster for each
   setting and workload.  ``--nodes`` kwok nodes of shape server-8gpu publish their two GPU pools
   (4 Acme + 4 Nova GPUs: 8 devices a node; NICs left out).  Each pod has one claim from a
   ResourceClaimTemplate whose DeviceClass selects GPUs by a CEL selector on the standard
   ``pcieRoot`` attribute.  Pods are created in bulk (threads); a pod counts when a watch sees
   it bound (the scheduler writes the allocation before binding; claims are checked allocated at
   the end).  Rate = pods / (last bind - start of creation).

   - ``plain``: every device published, ``--pods`` pods.
   - ``requeue``: only the Acme pools are published.  ``--backlog`` pods whose class wants a Nova
     GPU come first: none exists, so DynamicResources parks each as unschedulable.  Then
     (``fill``) ``--pods`` pods that fit the Acme GPUs are created while the backlog waits.
     Every ResourceClaim event of theirs (created from the template, allocated, reserved) makes
     the queue ask whether a parked pod became schedulable: without pre-queueing hints the
     plugin's queueing hint runs for every parked pod (O(backlog) per event, under the queue
     lock); with them the plugin names the pods that reference the claim, none of the backlog.
     Last (``requeue``) the Nova pools are published; the slice events re-queue the backlog.

   The scheduler's /metrics (secure port, the run dir's CA; /metrics is always allowed) explain
   the figure: ``scheduler_schedule_attempts_total`` by result, ResourceClaim events and the time
   spent handling them (``scheduler_event_handling_duration_seconds``, recorded synchronously),
   pre-hint evaluations, and queueing hint calls.  The scheduler records hint calls through a
   buffer of 1,000 a second and drops the rest, so hint counts are floors.  The CPU seconds each
   component (and this script) used during a phase show where the time went.

   The controller manager's and scheduler's client QPS are raised to ``--client-qps``: at their
   defaults (20 and 50) the claim controller (a claim and a pod status write per pod) caps any
   run near 10 pods/s; scheduler_perf does not throttle either.

Progress goes to stderr, figures (or JSON with ``--json``) to stdout.  Ctrl-C or SIGTERM stops
every cluster and subprocess it started.  Exit code 1 when a part failed, a process was left
behind or a throughput phase did not finish.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]

from drakit.clusters.local import procs  # noqa: E402
from drakit.clusters.local.kwokconfig import fake_node  # noqa: E402
from drakit.clusters.local.launcher import ClusterError, LocalCluster, install_sigterm_as_exit  # noqa: E402
from drakit.fake_driver.slices import publish_slices  # noqa: E402
from drakit.fake_hw.inventory import build_inventory  # noqa: E402

GATE = "SchedulerPreQueueingHints"
SHAPE, GPUS_PER_POOL = "server-8gpu", 4  # 4 Acme and 4 Nova GPUs a node
ACME, NOVA = "gpu.acme.example.com", "gpu.nova.example.com"
NS, THREADS = "bench", 16
CASE_FILES = ("conformance/suites/core/standalone-claims.case.yaml",
              "conformance/suites/core/template-claims.case.yaml")
T0 = time.monotonic()
Obj = dict[str, Any]


def progress(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    p90 = statistics.quantiles(values, n=10, method="inclusive")[8] if len(values) > 1 else values[0]
    return {"n": len(values), "median": statistics.median(values), "p90": p90, "min": min(values), "max": max(values)}


# ------------------------------------------------------------------------ 1. up / down
def leftovers(run_dir: Path) -> list[str]:
    """Processes (other than this one) whose command line names ``run_dir``."""
    needle, found = str(run_dir).encode(), []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(needle in a for a in argv):
                found.append(f"pid {d.name}: {argv[0].decode(errors='replace')}")
    return found


def bench_updown(repeat: int) -> Obj:
    ups: list[float] = []
    downs: list[float] = []
    phases: dict[str, list[float]] = {}
    left: list[str] = []
    for i in range(repeat):
        c = LocalCluster()
        try:
            t = time.monotonic()
            c.up()
            ups.append(time.monotonic() - t)
            alive = sum(1 for p in c.status()["processes"].values() if p["alive"])
        finally:
            t = time.monotonic()
            c.down()
            downs.append(time.monotonic() - t)
        for k in ("etcd", "kube-apiserver", "controllers"):
            phases.setdefault(k, []).append(c.timings.get(k, 0.0))
        stray = leftovers(c.run_dir) + [f"port {p} open" for p in c.ports.values() if procs.port_listening(p)]
        left += stray
        progress(f"up/down {i + 1}/{repeat}: up {ups[-1]:.1f} s ({alive} processes), down {downs[-1]:.1f} s, "
                 f"left behind: {', '.join(stray) or 'nothing'}")
    return {"up": stats(ups), "down": stats(downs), "upPhases": {k: stats(v) for k, v in phases.items()},
            "leftBehind": left}


# ---------------------------------------------------------------------------- 2. cases
def bench_cases(paths: tuple[str, ...], out: Path) -> Obj:
    cmd = [sys.executable, "-m", "drakit.conformance.cli", "run", *paths, "--backend", "cluster", "--cluster", "local",
           "-n", "0", "--out", str(out), "--plain"]
    progress("running: drakit " + " ".join(cmd[4:]))
    t = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    try:
        for line in proc.stdout or ():
            tail = [*tail[-19:], line.rstrip()]
            if line.startswith("[") or "FAILED" in line:
                progress("  drakit: " + line.rstrip())
        rc = proc.wait()
    finally:
        if proc.poll() is None:  # interrupted: let drakit tear its cluster down, then insist
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    wall = time.monotonic() - t
    if not (out / "results.json").is_file():
        raise RuntimeError(f"drakit run (exit code {rc}) wrote no results.json; its last lines:\n" + "\n".join(tail))
    results = json.loads((out / "results.json").read_text())
    cases = [c for c in results["cases"] if c["backend"] == "cluster"]
    return {"files": list(paths), "exitCode": rc, "wallSeconds": wall, "runWallSeconds": results["run"]["wallSeconds"],
            "statuses": dict(Counter(c["status"] for c in cases)), "verdict": results["verdict"]["result"],
            "skipped": {c["id"]: (c.get("skip") or {}).get("category") for c in cases if c["status"] == "skipped"},
            "perCase": stats([c["durationSeconds"] for c in cases if c["status"] != "skipped"])}


# ---------------------------------------------------------------- 3. scheduling throughput
class Kube:
    """The kubernetes client; answers are left unparsed (bulk creation is the point)."""

    PLURALS = {"DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices",
               "ResourceClaimTemplate": "resourceclaimtemplates"}

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(str(kubeconfig), client_configuration=cfg)
        cfg.connection_pool_maxsize = THREADS + 4
        api = client.ApiClient(cfg)
        self.core: Any = client.CoreV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)

    def create(self, obj: Obj) -> None:
        kind, ns, raw = obj["kind"], obj["metadata"].get("namespace"), {"_preload_content": False}
        r: Any
        if kind == "Node":
            r = self.core.create_node(obj, **raw)
        elif kind == "Namespace":
            r = self.core.create_namespace(obj, **raw)
        elif kind == "Pod":
            r = self.core.create_namespaced_pod(ns, obj, **raw)
        elif ns:
            r = self.custom.create_namespaced_custom_object("resource.k8s.io", "v1", ns, self.PLURALS[kind], obj, **raw)
        else:
            r = self.custom.create_cluster_custom_object("resource.k8s.io", "v1", self.PLURALS[kind], obj, **raw)
        r.read()
        r.release_conn()

    def create_all(self, objs: list[Obj]) -> float:
        t, ex = time.monotonic(), ThreadPoolExecutor(THREADS)
        try:
            for f in [ex.submit(self.create, o) for o in objs]:
                f.result()
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
        return time.monotonic() - t

    def items(self, list_fn: Callable[..., Any], *args: Any, **kw: Any) -> list[Obj]:
        return list(json.loads(list_fn(*args, _preload_content=False, **kw).data)["items"])


class BoundWatch(threading.Thread):
    """Watches the namespace's bound pods and records when each was first seen bound."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(daemon=True)
        self.kube, self.cond, self.stopping = kube, threading.Condition(), False
        self.bound: dict[str, float] = {}

    def run(self) -> None:
        from kubernetes.watch.watch import iter_resp_lines

        while not self.stopping:
            try:
                resp = self.kube.core.list_namespaced_pod(NS, watch=True, field_selector="spec.nodeName!=",
                                                          timeout_seconds=900, _preload_content=False)
                for line in iter_resp_lines(resp):
                    ev = json.loads(line)
                    name = ev.get("object", {}).get("metadata", {}).get("name")
                    if ev.get("type") in ("ADDED", "MODIFIED") and name:
                        with self.cond:
                            self.bound.setdefault(name, time.monotonic())
                            self.cond.notify_all()
            except Exception:  # noqa: BLE001 - the watch broke or the cluster went away: retry or end
                time.sleep(0.5)

    def wait_for(self, names: set[str], timeout: float, label: str) -> tuple[int, float | None]:
        """How many of ``names`` got bound within ``timeout``, and when the last one did."""
        deadline, reported = time.monotonic() + timeout, time.monotonic()
        with self.cond:
            while len(done := names.intersection(self.bound)) < len(names) and time.monotonic() < deadline:
                if time.monotonic() - reported > 10:
                    progress(f"  {label}: {len(done)}/{len(names)} pods bound")
                    reported = time.monotonic()
                self.cond.wait(1.0)
        return len(done), max((self.bound[n] for n in done), default=None)


_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_WANTED = ("scheduler_schedule_attempts_total", "scheduler_queueing_hint_execution_duration_seconds_count",
           "scheduler_event_handling_duration_seconds_", "scheduler_pre_queueing_hint_evaluations_total",
           "kubernetes_feature_enabled")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(c: BenchCluster) -> Samples:
    """The scheduler's /metrics (its secure port, served with the run dir's CA)."""
    if c.ssl_ctx is None:
        c.ssl_ctx = ssl.create_default_context(cafile=str(c.run_dir / "pki" / "ca.crt"))
    with urllib.request.urlopen(f"https://127.0.0.1:{c.ports['scheduler']}/metrics", context=c.ssl_ctx,  # noqa: S310
                                timeout=30) as r:
        text = r.read().decode()
    out: Samples = {}
    for m in map(_SAMPLE.match, text.splitlines()):
        if m and m.group(1).startswith(_WANTED):
            out[(m.group(1), tuple(sorted(_LABEL.findall(m.group(2) or ""))))] = float(m.group(3))
    return out


def explain(before: Samples, after: Samples) -> Obj:
    """Scheduler counters between two scrapes (see the module docstring)."""
    d = {k: v - before.get(k, 0.0) for k, v in after.items()}

    def by(name: str, label: str, keep: Callable[[dict[str, str]], bool] = lambda _: True) -> dict[str, float]:
        out: dict[str, float] = {}
        for (n, labels), v in d.items():
            if n == name and keep(dict(labels)):
                key = dict(labels).get(label, "")
                out[key] = out.get(key, 0.0) + v
        return {k: v for k, v in sorted(out.items()) if v}

    def claim(lab: dict[str, str]) -> bool:
        return lab.get("event", "").startswith("resource.k8s.io/ResourceClaim")

    ev = "scheduler_event_handling_duration_seconds_"
    return {"attempts": by("scheduler_schedule_attempts_total", "result"),
            "claimEvents": sum(by(ev + "count", "event", claim).values()),
            "claimEventSeconds": sum(by(ev + "sum", "event", claim).values()),
            "preHint": by("scheduler_pre_queueing_hint_evaluations_total", "result"),
            "hintCallsAtLeast": sum(by("scheduler_queueing_hint_execution_duration_seconds_count", "plugin",
                                       lambda lab: lab.get("plugin") == "DynamicResources").values())}


def cpu_seconds(c: LocalCluster) -> dict[str, float]:
    """CPU time (user + system) of each component so far, and of this process."""
    out: dict[str, float] = {}
    for name, p in c.status()["processes"].items():
        try:
            f = Path(f"/proc/{p['pid']}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = int(f[11]) + int(f[12])  # utime + stime
        out[name.removeprefix("kube-").replace("controller-manager", "kcm")] = ticks / os.sysconf("SC_CLK_TCK")
    t = os.times()
    return {**out, "bench": t.user + t.system}


def gate_enabled(samples: Samples) -> bool | None:
    for (n, labels), v in samples.items():
        if n == "kubernetes_feature_enabled" and dict(labels).get("name") == GATE:
            return v == 1.0
    return None


def manifests(kind: str, name: str, spec: Obj, ns: str | None = None) -> Obj:
    api = "v1" if kind in ("Pod", "Namespace") else "resource.k8s.io/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, **({"namespace": ns} if ns else {})}, "spec": spec}


def pod(name: str, template: str) -> Obj:
    return manifests("Pod", name, {
        "terminationGracePeriodSeconds": 0, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}]},
        NS)


def setup_objects() -> list[Obj]:
    """Two DeviceClasses (any GPU / Nova GPUs, CEL on the standard pcieRoot attribute) and their templates."""
    on_pcie = 'device.attributes["resource.kubernetes.io"].pcieRoot.startsWith("pci")'
    classes = {"bench-gpu": f'device.driver in ["{ACME}", "{NOVA}"] && {on_pcie}',
               "bench-gpu-nova": f'device.driver == "{NOVA}" && {on_pcie}'}
    out = [manifests("DeviceClass", n, {"selectors": [{"cel": {"expression": e}}]}) for n, e in classes.items()]
    out += [manifests("ResourceClaimTemplate", t, {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": c}}]}}}, NS) for t, c in (("gpu", "bench-gpu"),
                                                                                   ("gpu-nova", "bench-gpu-nova"))]
    return out


class BenchCluster(LocalCluster):
    """A local cluster whose controller manager and scheduler send up to ``client_qps`` requests a second."""

    def __init__(self, client_qps: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.client_qps = client_qps
        self.ssl_ctx: ssl.SSLContext | None = None

    def __enter__(self) -> BenchCluster:
        self.up()
        return self

    def _qps(self) -> list[str]:
        return [f"--kube-api-qps={self.client_qps}", f"--kube-api-burst={self.client_qps}"] if self.client_qps else []

    def _kcm_args(self, controllers: str) -> list[str]:
        return [*super()._kcm_args(controllers), *self._qps()]

    def _scheduler_args(self) -> list[str]:
        return [*super()._scheduler_args(), *self._qps()]


class Hardware:
    """The kwok nodes and their GPU slices (built once; the same for every cluster)."""

    def __init__(self, n: int) -> None:
        self.nodes: list[Obj] = []
        self.slices: dict[str, list[Obj]] = {ACME: [], NOVA: []}
        for i in range(n):
            inv = build_inventory(SHAPE, f"bench-node-{i:04d}")
            self.nodes.append(fake_node(inv.node_name, {**inv.node_labels(), "drakit.dev/bench": "true"}))
            for s in publish_slices(inv):
                self.slices.get(s["spec"]["driver"], []).append(s)
        self.devices = {d: sum(len(s["spec"]["devices"]) for s in v) for d, v in self.slices.items()}


def prepare(kube: Kube, hw: Hardware, drivers: tuple[str, ...]) -> None:
    t = kube.create_all(hw.nodes)
    progress(f"  {len(hw.nodes)} nodes created in {t:.1f} s; waiting until Ready and untainted")
    deadline = time.monotonic() + 300
    while (ready := sum(1 for n in kube.items(kube.core.list_node, label_selector="drakit.dev/bench=true")
                        if not n["spec"].get("taints") and any(x["type"] == "Ready" and x["status"] == "True"
                                                               for x in n.get("status", {}).get("conditions", [])))
           ) < len(hw.nodes):
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {ready}/{len(hw.nodes)} kwok nodes became Ready and untainted in 300 s")
        time.sleep(1)
    kube.create_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    kube.create_all(setup_objects())
    slices = [s for d in drivers for s in hw.slices[d]]
    progress(f"  {len(slices)} slices ({', '.join(drivers)}) published in {kube.create_all(slices):.1f} s")


def phase(c: BenchCluster, watch: BoundWatch, label: str, names: set[str], start: Callable[[], object],
          timeout: float) -> Obj:
    m0, cpu0, t0 = scrape(c), cpu_seconds(c), time.monotonic()
    start()
    created = time.monotonic() - t0
    bound, last = watch.wait_for(names, timeout, label)
    took = (last - t0) if last else None
    time.sleep(2)  # the scheduler flushes some counters once a second
    cpu = {k: v - cpu0.get(k, 0.0) for k, v in cpu_seconds(c).items()}
    out = {"pods": len(names), "bound": bound, "createSeconds": created, "seconds": took,
           "podsPerSecond": bound / took if took else 0.0, **explain(m0, scrape(c)), "cpuSeconds": cpu}
    progress(f"  {label}: {bound}/{len(names)} bound in {took or 0:.1f} s ({out['podsPerSecond']:.1f} pods/s; "
             f"creation {created:.1f} s); {counters(out)}")
    return out


def throughput_run(hw: Hardware, hints: bool, workload: str, pods: int, backlog: int, qps: int) -> Obj:
    progress(f"throughput: workload {workload}, {GATE}={str(hints).lower()}: starting a cluster")
    # The run dir sits in a directory of this script's own, out of the way of any tidying of
    # the launcher's default temp dirs (drakit-local-*) by other processes.
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp, \
            BenchCluster(qps, run_dir=Path(tmp) / "cluster", gates={GATE: hints}) as c:
        if gate_enabled(scrape(c)) is not hints:
            raise RuntimeError(f"the scheduler does not report {GATE}={hints}")
        kube = Kube(c.kubeconfig)
        prepare(kube, hw, (ACME, NOVA) if workload == "plain" else (ACME,))
        watch = BoundWatch(kube)
        watch.start()
        main = [pod(f"p-{i:05d}", "gpu") for i in range(pods)]
        names = {p["metadata"]["name"] for p in main}
        out: Obj = {"gate": hints}
        try:
            if workload == "plain":
                out["all"] = phase(c, watch, "plain", names, lambda: kube.create_all(main), 120 + pods / 4)
            else:
                parked = [pod(f"b-{i:05d}", "gpu-nova") for i in range(backlog)]
                m0, t = scrape(c), kube.create_all(parked)
                deadline = time.monotonic() + 120 + backlog / 4
                while explain(m0, scrape(c))["attempts"].get("unschedulable", 0) < backlog:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the backlog pods were not all tried by the scheduler in time")
                    time.sleep(1)
                progress(f"  backlog: {backlog} pods created in {t:.1f} s and parked as unschedulable")
                out["fill"] = f = phase(c, watch, "fill", names, lambda: kube.create_all(main), 120 + pods / 4)
                out["requeue"] = r = phase(c, watch, "requeue", {p["metadata"]["name"] for p in parked},
                                           lambda: kube.create_all(hw.slices[NOVA]), 120 + backlog / 4)
                if f["seconds"] and r["seconds"]:
                    out["overall"] = {"pods": pods + backlog, "bound": f["bound"] + r["bound"],
                                      "podsPerSecond": (f["bound"] + r["bound"]) / (f["seconds"] + r["seconds"])}
            claims = kube.items(kube.custom.list_namespaced_custom_object, "resource.k8s.io", "v1", NS, "resourceclaims")
            out["claimsAllocated"] = sum(1 for x in claims if x.get("status", {}).get("allocation"))
        finally:
            watch.stopping = True
    return out


def bench_throughput(n_nodes: int, pods: int, backlog: int, qps: int, workloads: list[str]) -> Obj:
    progress(f"building {n_nodes} node inventories ({SHAPE})")
    hw = Hardware(n_nodes)
    runs = {w: {s: throughput_run(hw, s == "on", w, pods, backlog, qps) for s in ("off", "on")} for w in workloads}
    return {"nodes": n_nodes, "devicesPerNode": sum(hw.devices.values()) // n_nodes, "pods": pods,
            "backlog": backlog, "clientQps": qps, "runs": runs}


# ------------------------------------------------------------------------------ output
def fmt(s: dict[str, float]) -> str:
    return f"median {s['median']:.2f} s  p90 {s['p90']:.2f} s  min {s['min']:.2f} s  max {s['max']:.2f} s (n={s['n']})"


def counters(x: Obj) -> str:
    a = ", ".join(f"{k} {v:.0f}" for k, v in x["attempts"].items())
    pre = ", ".join(f"{k} {v:.0f}" for k, v in x["preHint"].items()) or "none"
    cpu = ", ".join(f"{k} {v:.1f}" for k, v in sorted(x["cpuSeconds"].items(), key=lambda kv: -kv[1]))
    return (f"attempts: {a}; {x['claimEvents']:.0f} claim events handled in {x['claimEventSeconds']:.2f} s; "
            f"pre-hints: {pre}; DRA hint calls >= {x['hintCallsAtLeast']:.0f}; CPU s: {cpu}")


def print_text(res: Obj) -> None:
    for key, value in res.items():
        if "error" in value:
            print(f"== {key}: FAILED: {value['error']}")
    res = {k: v for k, v in res.items() if "error" not in v}
    if u := res.get("upDown"):
        print(f"== local cluster up / down\nup to ready   {fmt(u['up'])}")
        print("  of which     " + ", ".join(f"{k} {v['median']:.2f} s" for k, v in u["upPhases"].items()) + " (medians)")
        print(f"down          {fmt(u['down'])}\nleft behind   "
              f"{'; '.join(u['leftBehind']) or 'nothing (process table and ports checked after each down)'}")
    if k := res.get("cases"):
        print(f"== cases on the cluster backend ({', '.join(Path(f).name for f in k['files'])})")
        print(f"per case      {fmt(k['perCase'])}" if k["perCase"] else "per case      no case ran")
        print(f"outcomes      {k['statuses']}, verdict {k['verdict']}, exit code {k['exitCode']}"
              + "".join(f"; skipped {i} ({why})" for i, why in k["skipped"].items()))
        print(f"wall time     {k['wallSeconds']:.1f} s (the run {k['runWallSeconds']:.1f} s, with its cluster up/down)")
    if t := res.get("throughput"):
        print(f"== scheduling throughput: {t['nodes']} kwok nodes x {t['devicesPerNode']} GPUs, {t['pods']} pods, "
              f"backlog {t['backlog']}, client QPS {t['clientQps'] or 'default'}; {GATE} off / on")
        print(f"{'workload':9} {'phase':8} {'pods':>5} {'off pods/s':>11} {'on pods/s':>10} {'on/off':>7}")
        for w, by in t["runs"].items():
            for ph in (p for p in ("all", "fill", "requeue", "overall") if p in by["off"] and p in by["on"]):
                off, on = by["off"][ph]["podsPerSecond"], by["on"][ph]["podsPerSecond"]
                ratio = f"{on / off:6.2f}x" if off else "    n/a"
                print(f"{w:9} {ph:8} {by['on'][ph]['pods']:>5} {off:>11.1f} {on:>10.1f} {ratio:>7}")
        for w, by in t["runs"].items():
            for ph in (p for p in ("all", "fill", "requeue") if p in by["off"]):
                for gate in ("off", "on"):
                    print(f"  {w}/{ph} hints {gate}: {counters(by[gate][ph])}")
            print(f"  {w}: claims allocated: off {by['off']['claimsAllocated']}, on {by['on']['claimsAllocated']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=500, help="kwok nodes (8 GPUs each) for the throughput runs")
    ap.add_argument("--pods", type=int, default=1000, help="pods measured per throughput run")
    ap.add_argument("--backlog", type=int, default=None, help="parked pods of the requeue workload (default pods/2)")
    ap.add_argument("--repeat", type=int, default=3, help="cluster up/down repetitions")
    ap.add_argument("--client-qps", type=int, default=1000, help="client QPS and burst of the controller manager "
                    "and scheduler in throughput runs (0: their defaults, 20 and 50)")
    ap.add_argument("--workloads", default="plain,requeue", help="throughput workloads (plain, requeue)")
    for part in ("updown", "cases", "throughput"):
        ap.add_argument(f"--skip-{part}", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    backlog = a.backlog if a.backlog is not None else max(1, a.pods // 2)
    if min(a.nodes, a.pods, a.repeat, backlog, a.client_qps + 1) < 1:
        ap.error("--nodes, --pods, --backlog and --repeat must be at least 1, --client-qps at least 0")
    workloads = [w for w in a.workloads.split(",") if w]
    if not workloads or set(workloads) - {"plain", "requeue"}:
        ap.error(f"--workloads: expected plain and/or requeue, got {a.workloads!r}")
    if max(a.pods, backlog) > GPUS_PER_POOL * a.nodes:
        ap.error(f"--pods and --backlog must be at most {GPUS_PER_POOL * a.nodes} for {a.nodes} nodes (the requeue "
                 "workload fills the Acme GPUs, its backlog waits for the Nova ones)")
    install_sigterm_as_exit()

    def cases() -> Obj:
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
            return bench_cases(CASE_FILES, Path(tmp) / "out")

    parts: dict[str, tuple[bool, Callable[[], Obj]]] = {
        "upDown": (a.skip_updown, lambda: bench_updown(a.repeat)), "cases": (a.skip_cases, cases),
        "throughput": (a.skip_throughput, lambda: bench_throughput(a.nodes, a.pods, backlog, a.client_qps, workloads))}
    res: Obj = {}
    try:
        for key, (skip, run) in parts.items():
            try:
                res.update({} if skip else {key: run()})
            except (RuntimeError, OSError, ClusterError) as exc:  # one part failing does not hide the others
                progress(f"{key} failed: {type(exc).__name__}: {exc}")
                res[key] = {"error": f"{type(exc).__name__}: {exc}"}
    except KeyboardInterrupt:
        progress("interrupted; everything started here has been stopped")
        return 130
    print(json.dumps(res, indent=2)) if a.json else print_text(res)
    unfinished = any(ph.get("bound", 0) < ph.get("pods", 0) for r in res.get("throughput", {}).get("runs", {}).values()
                     for s in r.values() for ph in s.values() if isinstance(ph, dict))
    failed = any("error" in v for v in res.values())
    return 1 if res.get("upDown", {}).get("leftBehind") or unfinished or failed else 0


if __name__ == "__main__":
    sys.exit(main())
