"""drakit's reference allocator against the upstream allocator (the Go oracle), same workloads.

Each workload is a scheduler-shaped loop run once in Python and once inside the Go oracle
(``conformance/oracle``, k8s.io/dynamic-resource-allocation v0.37.2): claims one at a time, a
fresh allocator per claim built from the committed state, nodes tried from a rotating start
index until one fits, the result committed before the next claim. Both sides time only that
loop: no process start, no JSON, no parsing of the slices, classes or claims (Python keeps its
slice index and CEL cache across claims, as drakit's reference scheduler does; Go passes the
same slices and one CEL cache to every NewAllocator, as the kube-scheduler does). Feature gates
are drakit's 1.37 defaults, so upstream runs its ``incubating`` implementation.

Workloads (defaults: 500 nodes of 8 GPUs, 5,000 claims):

* ``gpu``: one whole GPU per claim, selected by model and memory (4,000 fit, 1,000 do not).
* ``numa``: two GPUs per claim with ``matchAttribute`` on the GPU driver's NUMA attribute
  (2,000 fit, 3,000 do not).
* ``partitionable``: GPUs published whole and as partitions sharing per-GPU counters; claims
  cycle through the 1g.10gb, 2g.20gb and 3g.40gb profiles (all fit).
* ``gpu-5000-nodes``: the ``gpu`` workload on 5,000 nodes (ten times the nodes; all fit).
* ``mixed``: nodes with Acme GPUs (whole and partitions) and Nova GPUs on two sockets and four
  Swift NICs (one with virtual functions); claims cycle through five shapes: a Nova GPU and a
  NIC on the same PCIe root (``matchAttribute`` across two requests), a prioritized list (an
  Acme 3g.40gb partition, else a whole Nova GPU), two whole Acme GPUs on one NUMA node, two
  1g.10gb partitions with ``distinctAttribute`` on the parent GPU, and any GPU plus two NIC
  virtual functions (some fit, the rest do not once the nodes fill up).

    python benchmarks/bench_vs_upstream.py [--nodes 500] [--claims 5000] [--workloads gpu,numa,...]

Prints, per workload, both throughputs in claims per second (claims processed, whether they fit
or not), the ratio ours/upstream, and whether both put every claim on the same node. drakit
reuses per-node pool views and CEL results across claims (slices and attributes do not change
during a run); upstream gathers pools and evaluates CEL afresh in every Allocate call. ``--fresh``
adds a row per workload with that reuse switched off (a new slice index and CEL cache per claim).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any, Callable

from drakit.conformance.allocator import AllocatedState, Allocator, Features, NodeInfo, SelectorCache
from drakit.conformance.allocator.pools import SliceIndex
from drakit.conformance.features import DEFAULT_GATES
from drakit.conformance.model import parse_object
from drakit.conformance.oracle import Oracle
from drakit.conformance.oracle.compare import with_api_defaults
from drakit.fake_driver.classes import device_classes
from drakit.fake_driver.profile import load_profile
from drakit.fake_driver.slices import publish_slices
from drakit.fake_hw.inventory import build_inventory
from drakit.fake_hw.shapes import shape_from_text

SHAPE = """\
name: bench-8gpu
sockets: 2
partitioning: {partitioning}
gpus:
  - {{vendor: acme, model: acme-a100, count: 4, numa: 0}}
  - {{vendor: acme, model: acme-a100, count: 4, numa: 1}}
"""


@dataclass
class Workload:
    name: str
    partitionable: bool
    claim: Callable[[int, dict[str, str]], dict[str, Any]]
    nodes: int | None = None   # instead of --nodes
    shape: str = SHAPE


def _claim(i: int, requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"pod-{i}-gpu", "namespace": "bench"}, "spec": {"devices": devices}}


def _gpu_claim(i: int, p: dict[str, str]) -> dict[str, Any]:
    selector = (f"{p['cel.gpu.model']} == '{p['value.gpu.model']}' && "
                f"{p['cel.gpu.memory']}.compareTo(quantity('40Gi')) >= 0")
    return _claim(i, [{"name": "gpu", "exactly": {"deviceClassName": p["class.gpu"],
                                                  "selectors": [{"cel": {"expression": selector}}]}}])


def _numa_claim(i: int, p: dict[str, str]) -> dict[str, Any]:
    return _claim(i, [{"name": "gpus", "exactly": {"deviceClassName": p["class.gpu"], "count": 2}}],
                  [{"matchAttribute": p["attr.gpu.numa"]}])


PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb")


def _partition_claim(i: int, p: dict[str, str]) -> dict[str, Any]:
    selector = f"{p['cel.gpu.profile']} == '{PROFILES[i % len(PROFILES)]}'"
    return _claim(i, [{"name": "part", "exactly": {"deviceClassName": p["class.partition"],
                                                   "selectors": [{"cel": {"expression": selector}}]}}])


MIXED_SHAPE = """\
name: bench-mixed
sockets: 2
partitioning: {partitioning}
gpus:
  - {{vendor: acme, model: acme-a100, count: 2, numa: 0, pcieRoot: 0}}
  - {{vendor: acme, model: acme-a100, count: 2, numa: 0, pcieRoot: 1}}
  - {{vendor: nova, model: nova-x1, count: 2, numa: 1, pcieRoot: 2}}
  - {{vendor: nova, model: nova-x1, count: 2, numa: 1, pcieRoot: 3}}
nics:
  - {{vendor: swift, model: swift-cx100, numa: 0, pcieRoot: 0, vfs: 4}}
  - {{vendor: swift, model: swift-cx100, numa: 0, pcieRoot: 1}}
  - {{vendor: swift, model: swift-cx100, numa: 1, pcieRoot: 2, vfs: 4}}
  - {{vendor: swift, model: swift-cx100, numa: 1, pcieRoot: 3}}
"""


def _mixed_claim(i: int, p: dict[str, str]) -> dict[str, Any]:
    kind = i % 5
    whole = f"{p['cel.gpu.type']} == 'gpu'"
    if kind == 0:  # a Nova GPU and a NIC behind the same PCIe root
        return _claim(i, [{"name": "gpu", "exactly": {"deviceClassName": p["class.gpu2"]}},
                          {"name": "nic", "exactly": {"deviceClassName": p["class.nic"]}}],
                      [{"matchAttribute": p["attr.gpu.pcieRoot"]}])
    if kind == 1:  # an Acme 3g.40gb partition, else a whole Nova GPU
        return _claim(i, [{"name": "gpu", "firstAvailable": [
            {"name": "part", "deviceClassName": p["class.partition"],
             "selectors": [{"cel": {"expression": f"{p['cel.gpu.profile']} == '3g.40gb'"}}]},
            {"name": "nova", "deviceClassName": p["class.gpu2"]}]}])
    if kind == 2:  # two whole Acme GPUs on one NUMA node
        return _claim(i, [{"name": "gpus", "exactly": {"deviceClassName": p["class.gpu"], "count": 2,
                                                       "selectors": [{"cel": {"expression": whole}}]}}],
                      [{"matchAttribute": p["attr.gpu.numa"]}])
    if kind == 3:  # two 1g.10gb partitions of different GPUs
        return _claim(i, [{"name": "parts", "exactly": {"deviceClassName": p["class.partition"], "count": 2,
                                                        "selectors": [{"cel": {"expression":
                                                                               f"{p['cel.gpu.profile']} == '1g.10gb'"}}]}}],
                      [{"distinctAttribute": p["attr.gpu.parentUUID"]}])
    return _claim(i, [{"name": "gpu", "exactly": {"deviceClassName": p["class.anygpu"]}},  # any GPU and two VFs
                      {"name": "vfs", "exactly": {"deviceClassName": p["class.nic"], "count": 2,
                                                  "selectors": [{"cel": {"expression": f"has({p['cel.nic.physicalFunction']})"}}]}}])


WORKLOADS = {
    "gpu": Workload("gpu", False, _gpu_claim),
    "numa": Workload("numa", False, _numa_claim),
    "partitionable": Workload("partitionable", True, _partition_claim),
    "gpu-5000-nodes": Workload("gpu-5000-nodes", False, _gpu_claim, nodes=5000),
    "mixed": Workload("mixed", True, _mixed_claim, shape=MIXED_SHAPE),
}


def build(w: Workload, nodes: int, claims: int) -> dict[str, Any]:
    shape = shape_from_text(w.shape.format(partitioning="partitionable" if w.partitionable else "none"), "bench")
    node_specs, slices = [], []
    for i in range(nodes):
        inv = build_inventory(shape, f"node-{i:04d}")
        node_specs.append({"name": inv.node_name, "labels": inv.node_labels()})
        slices.extend(publish_slices(inv))
    p = load_profile()
    return {"features": dict(DEFAULT_GATES), "nodes": node_specs, "slices": slices, "classes": device_classes(),
            "claims": [w.claim(i, p) for i in range(claims)]}


def run_python(inp: dict[str, Any], *, fresh: bool = False) -> tuple[float, list[str]]:
    features = Features.from_gates(inp["features"])
    parsed = [parse_object(s) for s in inp["slices"]]
    index = SliceIndex(parsed)
    classes = {c["metadata"]["name"]: parse_object(c) for c in inp["classes"]}
    claims = [parse_object(c) for c in inp["claims"]]
    infos = [NodeInfo(n["name"], n["labels"]) for n in inp["nodes"]]
    state, cel = AllocatedState(), SelectorCache()
    placements = [""] * len(claims)
    start = 0
    t0 = time.perf_counter()
    for ci, claim in enumerate(claims):
        if fresh:  # nothing carried over from earlier claims, like upstream's per-cycle allocator
            index, cel = SliceIndex(parsed), SelectorCache()
        alloc = Allocator(features, classes, index, state, cel_cache=cel)
        for k in range(len(infos)):
            node = infos[(start + k) % len(infos)]
            result = alloc.allocate(node, [claim])
            if result is None:
                continue
            for d in result[0].devices:
                if d.share_id is None:
                    state.devices.add(d.id)
                else:
                    state.shares.add((d.id, d.share_id))
                    if d.consumed_capacity:
                        have = state.capacity.setdefault(d.id, {})
                        for name, q in d.consumed_capacity.items():
                            have[name] = have[name] + q if name in have else q
            placements[ci] = node.name
            start = (start + k + 1) % len(infos)
            break
    return time.perf_counter() - t0, placements


def run_go(oracle: Oracle, inp: dict[str, Any]) -> tuple[float, list[str], str]:
    answer = oracle.run({"op": "workload", **inp, "claims": [with_api_defaults(c) for c in inp["claims"]],
                         "allocators": ["incubating", "experimental"]})
    for key in ("inputError", "error", "panic"):
        if answer.get(key):
            raise SystemExit(f"oracle {key}: {answer[key]}")
    return answer["nanos"] / 1e9, answer["placements"], answer.get("channel", "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--claims", type=int, default=5000)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--fresh", action="store_true",
                    help="also time drakit with a fresh slice index and CEL cache per claim (no reuse across claims)")
    args = ap.parse_args()
    print(f"{args.claims} claims, {args.nodes} nodes of 8 GPUs (unless the workload says otherwise); ours = drakit "
          f"(Python), upstream = "
          f"k8s.io/dynamic-resource-allocation v0.37.2 (Go); timing covers the allocation loop only")
    print(f"{'workload':<22} {'fit':>5} {'ours s':>8} {'ours c/s':>9} {'upstr s':>8} {'upstr c/s':>9} "
          f"{'ours/upstream':>13}  same nodes  (upstream channel)")
    with Oracle() as oracle:
        for name in args.workloads.split(","):
            w = WORKLOADS[name]
            inp = build(w, w.nodes or args.nodes, args.claims)
            ours_s, ours_at = run_python(inp)
            go_s, go_at, channel = run_go(oracle, inp)
            fit_ours = sum(1 for n in ours_at if n)
            fit_go = sum(1 for n in go_at if n)
            ours_cps, go_cps = args.claims / ours_s, args.claims / go_s
            same = "yes" if ours_at == go_at else f"NO ({sum(a != b for a, b in zip(ours_at, go_at))} differ)"
            fit = f"{fit_ours}" if fit_ours == fit_go else f"{fit_ours}/{fit_go}"
            print(f"{name:<22} {fit:>5} {ours_s:>8.2f} {ours_cps:>9,.0f} {go_s:>8.2f} {go_cps:>9,.0f} "
                  f"{ours_cps / go_cps:>13.3f}  {same:<10}  ({channel})", flush=True)
            if args.fresh:
                fresh_s, fresh_at = run_python(inp, fresh=True)
                fresh_cps = args.claims / fresh_s
                same = "yes" if fresh_at == go_at else "NO"
                print(f"{name + ' (fresh)':<22} {fit:>5} {fresh_s:>8.2f} {fresh_cps:>9,.0f} {go_s:>8.2f} {go_cps:>9,.0f} "
                      f"{fresh_cps / go_cps:>13.3f}  {same:<10}  ({channel})", flush=True)


if __name__ == "__main__":
    main()
