"""How long ``drakit explain`` takes on a large cluster (a script, not a test).

State: N nodes with a node-local slice of D GPUs each (attributes model and index); on every
node all GPUs but the last are allocated to claims of their own, and the last one carries an
untolerated NoSchedule taint. The pod explained asks for one GPU of that model, so it fits
nowhere: every node is tried, every device of every node gets its first failing check, the
summary picks a node and checks a change (tolerate the taint) with the allocator.

    python benchmarks/bench_explain.py [--nodes 500] [--devices 10] [--repeat 3]

Prints, per repeat, the time to build the store from the objects and to explain the pod (the
state is read once: what ``drakit explain pod NS/NAME --state FILE`` does after parsing the
file), with the CPU seconds of the process beside, and the best of the repeats against the 2 s
target.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from drakit.conformance.explain.run import explain_pod
from drakit.conformance.explain.state import load_store
from drakit.conformance.features import DEFAULT_GATES

DRIVER = "gpu.bench.example.com"
NS = "bench"


def objects(nodes: int, devices: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}}]
    for n in range(nodes):
        node = f"node-{n:04d}"
        out.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
                    "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}})
        devs = []
        for d in range(devices):
            dev: dict[str, Any] = {"name": f"gpu-{d}", "attributes": {"model": {"string": "a100"}, "index": {"int": d}}}
            if d == devices - 1:
                dev["taints"] = [{"key": "bench/maintenance", "effect": "NoSchedule"}]
            devs.append(dev)
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
                    "spec": {"driver": DRIVER, "nodeName": node,
                             "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devs}})
        for d in range(devices - 1):
            out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": f"{node}-c{d}", "namespace": NS, "uid": f"{node}-c{d}"},
                        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
                        "status": {"allocation": {"devices": {"results": [
                            {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{d}"}]}}}})
    sel = [{"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'a100'"}}]
    out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "want", "namespace": NS},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "selectors": sel}}]}}})
    out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waits", "namespace": NS, "uid": "waits"},
                "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "want"}],
                         "containers": [{"name": "main", "image": "pause", "resources": {"claims": [{"name": "gpu"}]}}]}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--devices", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    objs = objects(args.nodes, args.devices)
    best = float("inf")
    for i in range(args.repeat):
        c0 = time.process_time()
        t0 = time.perf_counter()
        store = load_store(objs)
        t1 = time.perf_counter()
        pod = store.get("Pod", "waits", NS)
        assert pod is not None
        out = explain_pod(store, pod, DEFAULT_GATES)
        t2 = time.perf_counter()
        cpu = time.process_time() - c0
        assert out["verdict"] == "unschedulable" and len(out["nodes"]) == args.nodes, out["message"]
        s = out["summary"]
        best = min(best, t2 - t0)
        print(f"run {i + 1}: store {t1 - t0:.2f} s, explain {t2 - t1:.2f} s, total {t2 - t0:.2f} s ({cpu:.2f} CPU-s); "
              f"closest {s['closestNode']}, fix: {s['fix']}")
    target = 2.0
    print(f"{args.nodes} nodes x {args.devices} devices: best {best:.2f} s "
          f"({'within' if best <= target else 'over'} the {target:.0f} s target)")


if __name__ == "__main__":
    main()
