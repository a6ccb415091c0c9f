"""scheduler_perf-shaped allocator benchmark (a script, not a test).

Workload: N nodes, each with 8 fake Acme A100 GPUs published by the fake driver; C pods, each
with one claim from the same template asking for one GPU with a selector on model and memory.
Pods are scheduled one at a time as the scheduler does: a fresh allocator per scheduling cycle,
nodes tried from a rotating start index until one fits, the allocation committed before the
next pod. Prints claims allocated per second and peak memory.

    python benchmarks/bench_allocator.py [--nodes 500] [--claims 5000] [--mode allocator|cluster]

``--mode cluster`` runs the same workload through the whole reference control plane (object
store, claim controller, scheduler) instead of the bare allocator.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

from drakit.fake_driver.classes import device_classes
from drakit.fake_driver.profile import load_profile
from drakit.fake_driver.slices import publish_slices
from drakit.fake_hw.inventory import build_inventory
from drakit.fake_hw.shapes import shape_from_text

from drakit.conformance.allocator import AllocatedState, Allocator, Features, NodeInfo, SelectorCache
from drakit.conformance.allocator.pools import SliceIndex
from drakit.conformance.model import parse_object

SHAPE = """\
name: bench-8gpu
sockets: 2
gpus:
  - {vendor: acme, model: acme-a100, count: 4, numa: 0}
  - {vendor: acme, model: acme-a100, count: 4, numa: 1}
"""


def workload(nodes: int) -> tuple[list[dict], list[dict], dict]:
    shape = shape_from_text(SHAPE, "bench")
    node_objs, slices = [], []
    for i in range(nodes):
        inv = build_inventory(shape, f"node-{i:04d}")
        node_objs.append({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": inv.node_name, "labels": inv.node_labels()}})
        slices.extend(publish_slices(inv))
    p = load_profile()
    selector = (f"{p['cel.gpu.model']} == '{p['value.gpu.model']}' && "
                f"{p['cel.gpu.memory']}.compareTo(quantity('40Gi')) >= 0")
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": "bench"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": p["class.gpu"], "selectors": [{"cel": {"expression": selector}}]}}]}}}}
    return node_objs, slices, template


def bench_allocator(nodes: int, claims: int) -> tuple[int, float]:
    node_objs, slice_objs, template = workload(nodes)
    slices = SliceIndex([parse_object(s) for s in slice_objs])
    classes = {c["metadata"]["name"]: parse_object(c) for c in device_classes()}
    spec = template["spec"]["spec"]
    infos = [NodeInfo(n["metadata"]["name"], n["metadata"]["labels"]) for n in node_objs]
    state = AllocatedState()
    cel = SelectorCache()
    features = Features()
    start_node = 0
    allocated = 0
    t0 = time.perf_counter()
    for i in range(claims):
        claim = parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                              "metadata": {"name": f"pod-{i}-gpu", "namespace": "bench"}, "spec": spec})
        alloc = Allocator(features, classes, slices, state, cel_cache=cel)
        for k in range(len(infos)):
            node = infos[(start_node + k) % len(infos)]
            result = alloc.allocate(node, [claim])
            if result is not None:
                for d in result[0].devices:
                    state.devices.add(d.id)
                allocated += 1
                start_node = (start_node + k + 1) % len(infos)
                break
    return allocated, time.perf_counter() - t0


def bench_cluster(nodes: int, claims: int) -> tuple[int, float]:
    from drakit.conformance.reference.cluster import ReferenceCluster
    node_objs, slice_objs, template = workload(nodes)
    cluster = ReferenceCluster()
    for obj in device_classes() + node_objs + slice_objs + [template]:
        cluster.apply(obj)
    t0 = time.perf_counter()
    for i in range(claims):
        cluster.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i}", "namespace": "bench"},
                       "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                                "containers": [{"name": "c", "image": "pause"}]}})
    elapsed = time.perf_counter() - t0
    allocated = sum(1 for c in cluster.store.list("ResourceClaim") if (c.get("status") or {}).get("allocation"))
    return allocated, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--claims", type=int, default=5000)
    ap.add_argument("--mode", choices=("allocator", "cluster"), default="allocator")
    ap.add_argument("--tracemalloc", action="store_true", help="also report the Python heap peak (slower)")
    args = ap.parse_args()
    if args.tracemalloc:
        tracemalloc.start()
    run = bench_allocator if args.mode == "allocator" else bench_cluster
    allocated, elapsed = run(args.nodes, args.claims)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"mode={args.mode} nodes={args.nodes} gpus={args.nodes * 8} claims={args.claims}")
    print(f"allocated={allocated} in {elapsed:.2f} s -> {allocated / elapsed:,.0f} claims/s")
    print(f"peak RSS {rss_mib:,.0f} MiB")
    if args.tracemalloc:
        _, peak = tracemalloc.get_traced_memory()
        print(f"peak Python heap {peak / 2**20:,.1f} MiB")


if __name__ == "__main__":
    main()
