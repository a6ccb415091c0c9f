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

   The scheduler's /metrics explain the figure (``clusterbench/metrics.py``), and the CPU
   seconds each component (and this script) used during a phase show where the time went.

   The controller manager's and scheduler's client QPS are raised to ``--client-qps``: at their
   defaults (20 and 50) the claim controller (a claim and a pod status write per pod) caps any
   run near 10 pods/s; scheduler_perf does not throttle either.  Upstream scheduler_perf's own
   shape (``SchedulingWithResourceClaimTemplate``) is ``bench_prequeue.py``.

Progress goes to stderr, figures (or JSON with ``--json``) to stdout.  Ctrl-C or SIGTERM stops
every cluster and subprocess it started.  Exit code 1 when a part failed, a process was left
behind or a throughput phase did not finish.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Callable

from clusterbench.kube import Obj, progress
from clusterbench.lifecycle import bench_cases, bench_updown
from clusterbench.metrics import GATE, counters
from clusterbench.workloads import GPUS_PER_POOL, bench_throughput

from drakit.clusters.local.launcher import ClusterError, install_sigterm_as_exit

CASE_FILES = ("conformance/suites/core/standalone-claims.case.yaml",
              "conformance/suites/core/template-claims.case.yaml")


# ------------------------------------------------------------------------------ output
def fmt(s: dict[str, float]) -> str:
    return f"median {s['median']:.2f} s  p90 {s['p90']:.2f} s  min {s['min']:.2f} s  max {s['max']:.2f} s (n={s['n']})"


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
