"""drakit's own throughput workloads (``plain``, ``requeue``; see ``bench_cluster.py``'s docstring)
on kwok nodes of shape server-8gpu, with ``SchedulerPreQueueingHints`` off and on."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable

from clusterbench.kube import BoundWatch, Kube, Obj, progress
from clusterbench.metrics import GATE, counters, cpu_delta, cpu_seconds, explain, gate_enabled, scrape

from drakit.clusters.local.kwokconfig import fake_node
from drakit.clusters.local.launcher import LocalCluster
from drakit.fake_driver.slices import publish_slices
from drakit.fake_hw.inventory import build_inventory

SHAPE, GPUS_PER_POOL = "server-8gpu", 4  # 4 Acme and 4 Nova GPUs a node
ACME, NOVA = "gpu.acme.example.com", "gpu.nova.example.com"
NS = "bench"


def client_rate_args(qps: int) -> dict[str, list[str]]:
    """``component_args`` raising the controller manager's and scheduler's client rate limits."""
    flags = [f"--kube-api-qps={qps}", f"--kube-api-burst={qps}"] if qps else []
    return {"kube-controller-manager": flags, "kube-scheduler": flags}


def manifests(kind: str, name: str, spec: Obj, ns: str | None = None) -> Obj:
    api = "v1" if kind in ("Pod", "Namespace", "Node") else "resource.k8s.io/v1"
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


def wait_nodes_ready(kube: Kube, n: int, selector: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while (ready := sum(1 for x in kube.items(kube.core.list_node, label_selector=selector)
                        if not x["spec"].get("taints") and any(c["type"] == "Ready" and c["status"] == "True"
                                                               for c in x.get("status", {}).get("conditions", [])))
           ) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {ready}/{n} nodes became Ready and untainted in {timeout:.0f} s")
        time.sleep(1)


def prepare(kube: Kube, hw: Hardware, drivers: tuple[str, ...]) -> None:
    t = kube.create_all(hw.nodes)
    progress(f"  {len(hw.nodes)} nodes created in {t:.1f} s; waiting until Ready and untainted")
    wait_nodes_ready(kube, len(hw.nodes), "drakit.dev/bench=true")
    kube.create_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    kube.create_all(setup_objects())
    slices = [s for d in drivers for s in hw.slices[d]]
    progress(f"  {len(slices)} slices ({', '.join(drivers)}) published in {kube.create_all(slices):.1f} s")


def phase(c: LocalCluster, watch: BoundWatch, label: str, names: set[str], start: Callable[[], object],
          timeout: float) -> Obj:
    m0, cpu0, t0 = scrape(c), cpu_seconds(c), time.monotonic()
    start()
    created = time.monotonic() - t0
    bound, last = watch.wait_for(names, timeout, label)
    took = (last - t0) if last else None
    time.sleep(2)  # the scheduler flushes some counters once a second
    out = {"pods": len(names), "bound": bound, "createSeconds": created, "seconds": took,
           "podsPerSecond": bound / took if took else 0.0, **explain(m0, scrape(c)),
           "cpuSeconds": cpu_delta(cpu0, cpu_seconds(c))}
    progress(f"  {label}: {bound}/{len(names)} bound in {took or 0:.1f} s ({out['podsPerSecond']:.1f} pods/s; "
             f"creation {created:.1f} s); {counters(out)}")
    return out


def throughput_run(hw: Hardware, hints: bool, workload: str, pods: int, backlog: int, qps: int) -> Obj:
    progress(f"throughput: workload {workload}, {GATE}={str(hints).lower()}: starting a cluster")
    # The run dir sits in a directory of this script's own, out of the way of any tidying of
    # the launcher's default temp dirs (drakit-local-*) by other processes.
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp, \
            LocalCluster(Path(tmp) / "cluster", gates={GATE: hints}, real_nodes=False,
                         component_args=client_rate_args(qps)) as c:
        if gate_enabled(scrape(c)) is not hints:
            raise RuntimeError(f"the scheduler does not report {GATE}={hints}")
        kube = Kube(c.kubeconfig)
        prepare(kube, hw, (ACME, NOVA) if workload == "plain" else (ACME,))
        watch = BoundWatch(kube, NS)
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
