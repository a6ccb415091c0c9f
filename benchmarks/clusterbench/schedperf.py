"""Upstream scheduler_perf's ``SchedulingWithResourceClaimTemplate`` (workload
``5000pods_500nodes``, test/integration/scheduler_perf/dra/performance-config.yaml of
k8s.io/kubernetes v1.37.2) on the local control plane.

The shape, as upstream's config has it: ``nodes`` nodes, each with one ResourceSlice of 10 devices
(a dozen attributes and two capacities each, two PCI roots); one DeviceClass selecting the
driver by CEL; ``init`` ResourceClaims in namespace ``init``, allocated directly (written to their
status, each on a node picked at random, as upstream's ``allocResourceClaims`` does) so half the
devices are in use; then ``pods`` pods in namespace ``test``, each with one claim from a
ResourceClaimTemplate, created at once.  The resource claim controller creates each pod's claim;
until then the pod waits in the scheduler's queue (the DRA plugin's PreEnqueue), and every claim
event asks the queue which waiting pods it may help: all of them with the
``SchedulerPreQueueingHints`` gate off, only the pods referencing the claim with it on.

What is measured is upstream's ``SchedulingThroughput`` of the measured pods: a sample every
second of the pods newly seen bound (from a watch) over the time since the last sample, the first
sample skipped and intervals with no binding merged into the next, ``Average`` their mean.

``create``: ``live`` creates the measured pods while the scheduler and the controller manager run
(as upstream does; the measurement starts when creation starts).  ``paused`` stops both with
SIGSTOP while the pods are created and resumes them together (the measurement starts there), so
how fast this script can create pods does not enter the figure.

``components``: ``default`` is the launcher's cluster (every controller, kwok starts bound pods)
with the controller manager's and scheduler's client rate limits raised to 5,000 QPS as
scheduler_perf's are.  ``upstream`` runs what scheduler_perf runs besides the scheduler: the
controller manager with only the resource claim, garbage collector and namespace
controllers; the API server without the ServiceAccount, TaintNodesByCondition and Priority
admission plugins; kwok keeping the nodes Ready (renewing their leases once an hour, since no
node lifecycle controller reads them) but starting no pod.  ``claim_workers``: the
resource claim controller's workers (scheduler_perf runs 5; the controller manager's default is 50).

Feature gates are the binaries' defaults plus the one under test, as in scheduler_perf (whose
test case turns on only DynamicResourceAllocation, on by default in 1.37); ``all_dra_gates``
turns every DRA gate on as the launcher does by default, which makes the scheduler pick the
experimental allocator and run the alpha features' extra checks.
"""

from __future__ import annotations

import json
import os
import random
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from clusterbench.kube import BoundWatch, Kube, Obj, path_of, progress
from clusterbench.metrics import GATE, cpu_delta, cpu_seconds, explain, gate_enabled, load_average, pending, scrape
from clusterbench.workloads import manifests, wait_nodes_ready

from drakit.clusters.local import kwokconfig
from drakit.clusters.local.launcher import LocalCluster

DRIVER, CLASS, TEMPLATE = "perf.drakit.dev", "perf-class", "perf-claim-template"
DEVICES_PER_NODE, PCI_ROOTS = 10, 2
INIT_NS, TEST_NS = "init", "test"
LABEL = "drakit.dev/schedperf"
QPS = 5000  # scheduler_perf's client QPS and burst
#: The API versions served with the default gates (the scheduling.k8s.io beta needs GenericWorkload).
DEFAULT_GATES_APIS = "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"


PROFILED = {"kube-apiserver": "apiserver", "kube-scheduler": "scheduler", "kube-controller-manager": "controller-manager"}


def component_args(components: str, claim_workers: int = 5, profiling: bool = False) -> dict[str, list[str]]:
    qps = [f"--kube-api-qps={QPS}", f"--kube-api-burst={QPS}"]
    workers = f"--concurrent-resourceclaim-syncs={claim_workers}"
    if components == "default":
        out = {"kube-controller-manager": [*qps, workers], "kube-scheduler": qps}
    else:
        out = {"kube-controller-manager": [*qps, "--controllers=resourceclaim-controller,garbage-collector-controller,"
                                           "namespace-controller", workers],
               "kube-scheduler": qps,
               "kube-apiserver": ["--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,Priority"],
               # Nothing watches node leases without the node lifecycle controller: renewing 500
               # of them every 10 s (kwok's default for the launcher's 40 s) cost the API server
               # about 0.2 cores while idle.
               "kwok": ["--node-lease-duration-seconds=3600"]}
    if profiling:
        for name in PROFILED:
            out[name] = [*out.get(name, []), "--profiling=true"]
    return out


def start_profiles(c: LocalCluster, out_dir: Path, label: str, seconds: int) -> list[threading.Thread]:
    """Go CPU profiles (``/debug/pprof/profile``) of the API server, scheduler and controller manager
    over the next ``seconds``, written to ``out_dir/<label>-<component>.pprof`` (read them with
    ``go tool pprof -top``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = c._api_ctx()  # the admin client certificate: /debug/pprof needs an authorised user

    def fetch(port: str, name: str) -> None:
        try:
            code, body = c._get(port, f"/debug/pprof/profile?seconds={seconds}", ctx, seconds + 60.0)
            if code == 200:
                (out_dir / f"{label}-{name}.pprof").write_bytes(body)
            else:
                progress(f"  profile of {name}: HTTP {code}")
        except OSError as exc:
            progress(f"  profile of {name} failed: {exc}")

    threads = [threading.Thread(target=fetch, args=(port, n.removeprefix("kube-")), daemon=True) for n, port in PROFILED.items()]
    for t in threads:
        t.start()
    return threads


# ------------------------------------------------------------------------------ objects
def node(i: int) -> Obj:
    return kwokconfig.fake_node(f"perf-node-{i:04d}", {LABEL: "true"}, allocatable={"cpu": "4", "memory": "32Gi"})


def device(i: int) -> Obj:
    root = i % PCI_ROOTS
    s = {"model": "perf-b60", "family": "perf accelerators", "health": "Healthy", "type": "gpu",
         "driver": "perf", "pciId": "0x0e21", "pciAddress": f"0000:0{i}:00.0", "pciRoot": f"0{root}",
         "resource.kubernetes.io/pciBusID": f"0000:0{i}:00.0", "resource.kubernetes.io/pcieRoot": f"pci0000:0{root}"}
    attrs: Obj = {k: {"string": v} for k, v in s.items()}
    attrs["driverVersion"] = {"version": "1.2.3"}
    attrs["sriov"] = {"bool": True}
    return {"name": f"dev-{i}", "attributes": attrs,
            "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}}}


def resource_slice(i: int) -> Obj:
    name = f"perf-node-{i:04d}"
    return manifests("ResourceSlice", f"perf-slice-{i:04d}", {
        "driver": DRIVER, "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
        "devices": [device(d) for d in range(DEVICES_PER_NODE)]})


def request_spec() -> Obj:
    return {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": CLASS}}]}}


def init_claims(n_init: int, n_nodes: int, seed: int) -> tuple[list[Obj], list[tuple[str, bytes]]]:
    """The init claims and, for each, its ``/status`` merge patch: a free device of a random node."""
    rng, free = random.Random(seed), {i: list(range(DEVICES_PER_NODE)) for i in range(n_nodes)}
    claims, patches = [], []
    for k in range(n_init):
        i = rng.choice(sorted(n for n, f in free.items() if f))
        d = free[i].pop(0)
        c = manifests("ResourceClaim", f"init-claim-{k:05d}", request_spec(), INIT_NS)
        name = f"perf-node-{i:04d}"
        alloc = {"devices": {"results": [{"request": "req-0", "driver": DRIVER, "pool": name, "device": f"dev-{d}"}]},
                 "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                     {"key": "metadata.name", "operator": "In", "values": [name]}]}]}}
        claims.append(c)
        patches.append((path_of(c, f"/{c['metadata']['name']}/status"), json.dumps({"status": {"allocation": alloc}}).encode()))
    return claims, patches


def pod(i: int) -> Obj:
    return manifests("Pod", f"perf-{i:05d}", {
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1", "resources": {"claims": [{"name": "resource"}]}}],
        "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": TEMPLATE}]}, TEST_NS)


# ----------------------------------------------------------------------------- measuring
def throughput(bound_at: list[float], start: float) -> Obj:
    """Upstream's SchedulingThroughput from the times pods were first seen bound (see the docstring)."""
    if not bound_at:
        return {}
    bound_at, samples = sorted(bound_at), []
    tick, seen, last_count, last_time, started, skipped = start, 0, 0, start, False, 0
    while seen < len(bound_at):
        tick += 1.0
        while seen < len(bound_at) and bound_at[seen] <= tick:
            seen += 1
        if seen == 0:
            continue
        if not started:
            started, last_count, last_time = True, seen, tick
            continue
        if seen == last_count:
            skipped += 1
            continue
        samples += [(seen - last_count) / (tick - last_time)] * (skipped + 1)
        last_count, last_time, skipped = seen, tick, 0
    if not samples:
        return {}
    samples.sort()

    def pct(p: int) -> float:
        return samples[max(0, -(-len(samples) * p // 100) - 1)]

    return {"Average": sum(samples) / len(samples), "Perc50": pct(50), "Perc90": pct(90), "Perc99": pct(99),
            "samples": len(samples)}


class QueueSampler(threading.Thread):
    """Once a second: how many measured pods are bound and the scheduler's pending pods by queue."""

    def __init__(self, c: LocalCluster, watch: BoundWatch, start: float) -> None:
        super().__init__(daemon=True)
        self.c, self.watch, self.start_time, self.stopping = c, watch, start, threading.Event()
        self.samples: list[Obj] = []

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            try:
                q = pending(scrape(self.c))
            except OSError:
                continue
            self.samples.append({"t": round(time.monotonic() - self.start_time, 1), "bound": len(self.watch.bound),
                                 **{k: int(v) for k, v in q.items()}})


def _signal(c: LocalCluster, names: tuple[str, ...], sig: signal.Signals) -> None:
    for name, p in c.status()["processes"].items():
        if name in names:
            os.kill(p["pid"], sig)


def run_once(hints: bool, *, nodes: int, init: int, pods: int, create: str, components: str, seed: int,
             claim_workers: int = 5, all_dra_gates: bool = False, profile_dir: Path | None = None, profile_seconds: int = 20) -> Obj:
    load0 = load_average()
    progress(f"{GATE}={str(hints).lower()}: starting a cluster (load average {load0})")
    stage_set = kwokconfig.NODES_ONLY if components == "upstream" else kwokconfig.ON_BIND
    with tempfile.TemporaryDirectory(prefix="bench-prequeue-") as tmp, \
            LocalCluster(Path(tmp) / "cluster", gates={GATE: hints}, dra_gates=all_dra_gates, real_nodes=False,
                         stage_set=stage_set, **({} if all_dra_gates else {"runtime_config": DEFAULT_GATES_APIS}),
                         component_args=component_args(components, claim_workers, profile_dir is not None)) as c:
        if gate_enabled(scrape(c)) is not hints:
            raise RuntimeError(f"the scheduler does not report {GATE}={hints}")
        kube, t0 = Kube(c.kubeconfig), time.monotonic()
        kube.create_all([node(i) for i in range(nodes)])
        wait_nodes_ready(kube, nodes, f"{LABEL}=true")
        kube.create_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in (INIT_NS, TEST_NS)])
        kube.create_all([resource_slice(i) for i in range(nodes)])
        kube.create_all([manifests("DeviceClass", CLASS, {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]})])
        claims, patches = init_claims(init, nodes, seed)
        kube.create_all(claims)
        kube.send_all([("PATCH", p, b, "application/merge-patch+json") for p, b in patches])
        kube.create_all([manifests("ResourceClaimTemplate", TEMPLATE, {"spec": request_spec()}, TEST_NS)])
        progress(f"  {nodes} nodes, {nodes} slices, {init} allocated claims: set up in {time.monotonic() - t0:.1f} s")
        watch = BoundWatch(kube, TEST_NS)
        watch.start()
        cpu0 = cpu_seconds(c)
        time.sleep(5)  # what the cluster costs while nothing happens
        idle = {k: v / 5 for k, v in cpu_delta(cpu0, cpu_seconds(c)).items()}
        measured = [pod(i) for i in range(pods)]
        names = {p["metadata"]["name"] for p in measured}
        m0 = scrape(c)
        try:
            if create == "paused":
                _signal(c, ("kube-scheduler", "kube-controller-manager"), signal.SIGSTOP)
                try:
                    created = kube.create_all(measured)
                finally:
                    cpu0, start = cpu_seconds(c), time.monotonic()
                    _signal(c, ("kube-scheduler", "kube-controller-manager"), signal.SIGCONT)
            else:
                cpu0, start = cpu_seconds(c), time.monotonic()
                created = kube.create_all(measured)
            sampler = QueueSampler(c, watch, start)
            sampler.start()
            profiles = [] if profile_dir is None else start_profiles(c, profile_dir, f"gate-{'on' if hints else 'off'}",
                                                                     profile_seconds)
            bound, last = watch.wait_for(names, 600, "measured pods")
            cpu = cpu_delta(cpu0, cpu_seconds(c))
            sampler.stopping.set()
            time.sleep(2)  # the scheduler flushes some counters once a second
            for th in profiles:
                th.join(profile_seconds + 60)
            m1 = scrape(c)
            allocated = sum(1 for x in kube.items(kube.custom.list_namespaced_custom_object, "resource.k8s.io", "v1",
                                                  TEST_NS, "resourceclaims") if x.get("status", {}).get("allocation"))
        finally:
            watch.stopping = True
        times = [watch.bound[n] for n in names if n in watch.bound]
    out: Obj = {"gate": hints, "pods": pods, "bound": bound, "claimsAllocated": allocated, "createSeconds": created,
                "seconds": (last - start) if last else None, "throughput": throughput(times, start),
                **explain(m0, m1), "cpuSeconds": cpu, "idleCpuPerSecond": idle,
                "loadAverage": {"start": load0, "end": load_average()},
                "queue": sampler.samples}
    tp: Any = out["throughput"].get("Average", 0.0)
    progress(f"  {bound}/{pods} bound in {out['seconds'] or 0:.1f} s (creation {created:.1f} s): SchedulingThroughput "
             f"Average {tp:.1f} pods/s; CPU s: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])))
    return out
