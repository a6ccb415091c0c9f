"""SchedulerPreQueueingHints off and on at upstream scheduler_perf's shape, on the real local
control plane (kube-apiserver, etcd, kube-controller-manager, kube-scheduler 1.37.2, kwok nodes).

Usage: ``python benchmarks/bench_prequeue.py [--nodes 500] [--init 2500] [--pods 2500] [--repeat 3]
[--create live|paused] [--components upstream|default] [--claim-workers 5] [--all-dra-gates] [--seed 1] [--profile DIR] [--json]``

The workload is ``SchedulingWithResourceClaimTemplate/5000pods_500nodes`` (see
``clusterbench/schedperf.py``): 500 nodes x 10 devices, 2,500 claims allocated before the
measurement, 2,500 measured pods with one claim each from a template.  Each repetition runs the
gate off, then on, each on a fresh cluster.  Printed: upstream's SchedulingThroughput Average of
each run, the median and spread (min-max) per setting, the on/off ratio of the medians beside
upstream's reported one, the same for pods bound per scheduler CPU second (what the gate saves
the scheduler whatever share of a busy machine it got), and what each component cost (CPU seconds during the measurement, and
per second while idle), with the load average at each run's start and end.

Upstream's figure: the KEP of PreQueueingHints (KEP-6132) reports this workload going from about
297 to about 711 pods/s (2.4x) on a CI machine.  Progress goes to stderr, figures to stdout.
Exit code 1 when a run did not bind every pod or allocate every claim.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from clusterbench.kube import Obj, progress
from clusterbench.metrics import GATE, load_average
from clusterbench.schedperf import DEVICES_PER_NODE, run_once

from drakit.clusters.local.launcher import ClusterError, install_sigterm_as_exit

UPSTREAM = (297.0, 711.0)  # KEP-6132: SchedulingWithResourceClaimTemplate, gate off -> on, pods/s


def per_scheduler_cpu(r: Obj) -> float:
    """Measured pods bound per CPU second the scheduler used: what the gate saves the scheduler,
    whatever share of the machine it got."""
    cpu = r["cpuSeconds"].get("scheduler", 0.0)
    return r["bound"] / cpu if cpu else 0.0


def _spread(v: list[float]) -> Obj:
    med = statistics.median(v)
    return {"n": len(v), "median": med, "min": min(v), "max": max(v),
            "spreadPercent": 100 * (max(v) - min(v)) / med if med else 0.0}


def summary(runs: list[Obj]) -> Obj:
    out: Obj = {"upstreamRatio": UPSTREAM[1] / UPSTREAM[0]}
    for key, metric in (("", lambda r: r["throughput"].get("Average", 0.0)), ("perSchedulerCpu", per_scheduler_cpu)):
        by: dict[str, list[float]] = {"off": [], "on": []}
        for r in runs:
            by["on" if r["gate"] else "off"].append(metric(r))
        part: Obj = {k: _spread(v) for k, v in by.items() if v}
        if part.get("off", {}).get("median") and "on" in part:
            part["ratio"] = part["on"]["median"] / part["off"]["median"]
            part["pairRatios"] = [on / off for off, on in zip(by["off"], by["on"]) if off]
        out.update(part) if not key else out.update({key: part})
    return out


def _cpu(d: dict[str, float], fmt: str = "{:.1f}") -> str:
    return ", ".join(f"{k} {fmt.format(v)}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))


def print_text(res: Obj) -> None:
    a = res["args"]
    print(f"== {GATE} at scheduler_perf's shape (SchedulingWithResourceClaimTemplate): {a['nodes']} kwok nodes x "
          f"{DEVICES_PER_NODE} devices, {a['init']} claims allocated first, {a['pods']} measured pods; "
          f"create {a['create']}, components {a['components']}, {a['claim_workers']} claim workers, "
          f"{'every DRA gate on' if a['all_dra_gates'] else 'default gates'}")
    print(f"{'run':>3} {'gate':4} {'Average':>8} {'Perc50':>7} {'Perc90':>7} {'bind s':>7} {'create s':>8} {'/sch-CPU-s':>10}  "
          f"{'load start / end':18} CPU s during the measurement")
    for i, r in enumerate(res["runs"]):
        t = r["throughput"]
        print(f"{i // 2 + 1:>3} {'on' if r['gate'] else 'off':4} {t.get('Average', 0):>8.1f} {t.get('Perc50', 0):>7.1f} "
              f"{t.get('Perc90', 0):>7.1f} {r['seconds'] or 0:>7.1f} {r['createSeconds']:>8.1f} {per_scheduler_cpu(r):>10.1f}  "
              f"{r['loadAverage']['start'].split()[0]:>6} / {r['loadAverage']['end'].split()[0]:<9} {_cpu(r['cpuSeconds'])}")
    for r in res["runs"]:
        pre = ", ".join(f"{k} {v:.0f}" for k, v in r["preHint"].items()) or "none"
        print(f"  gate {'on ' if r['gate'] else 'off'}: attempts {', '.join(f'{k} {v:.0f}' for k, v in r['attempts'].items())}; "
              f"{r['claimEvents']:.0f} claim events handled in {r['claimEventSeconds']:.2f} s; pre-hints {pre}; "
              f"DRA hint calls >= {r['hintCallsAtLeast']:.0f}; claims allocated {r['claimsAllocated']}/{r['pods']}; "
              f"idle CPU s/s: {_cpu(r['idleCpuPerSecond'], '{:.2f}')}")
        peak = {k: max((q.get(k, 0) for q in r["queue"]), default=0) for k in ("active", "backoff", "unschedulable", "gated")}
        print(f"    queue peaks: {', '.join(f'{k} {v}' for k, v in peak.items())}; incoming by queue "
              f"{', '.join(f'{k} {v:.0f}' for k, v in r['incoming'].items())}; top events "
              f"{', '.join(f'{k} {v:.0f}' for k, v in r['incomingByEvent'].items())}")
    s = res["summary"]
    for part, unit in ((s, "pods/s (SchedulingThroughput Average)"),
                       (s.get("perSchedulerCpu", {}), "pods per scheduler CPU second")):
        for k in ("off", "on"):
            if k in part:
                x = part[k]
                print(f"gate {k:3}: median {x['median']:.1f} {unit}, spread {x['min']:.1f}-{x['max']:.1f} "
                      f"({x['spreadPercent']:.0f}% of the median, n={x['n']})")
        if "ratio" in part:
            pairs = ", ".join(f"{p:.2f}" for p in part["pairRatios"])
            print(f"  on / off: {part['ratio']:.2f}x (medians; per repetition {pairs}); upstream reports "
                  f"{UPSTREAM[0]:.0f} -> {UPSTREAM[1]:.0f} pods/s = {s['upstreamRatio']:.2f}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--init", type=int, default=None, help="claims allocated before the measurement (default nodes*5)")
    ap.add_argument("--pods", type=int, default=None, help="measured pods (default nodes*5)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of the off/on pair")
    ap.add_argument("--create", choices=("live", "paused"), default="live",
                    help="create the measured pods while the scheduler runs, or while it and the controller manager are stopped")
    ap.add_argument("--components", choices=("upstream", "default"), default="upstream",
                    help="the components scheduler_perf runs, or the launcher's default cluster")
    ap.add_argument("--claim-workers", type=int, default=5,
                    help="workers of the resource claim controller (scheduler_perf: 5; the controller manager's default: 50)")
    ap.add_argument("--all-dra-gates", action="store_true",
                    help="every DRA gate on (the launcher's default) instead of the binaries' defaults (scheduler_perf's)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the init claims' random nodes")
    ap.add_argument("--profile", type=Path, default=None, metavar="DIR",
                    help="write Go CPU profiles of the API server, scheduler and controller manager (the first "
                    "--profile-seconds of each measurement) to DIR")
    ap.add_argument("--profile-seconds", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    init = a.nodes * DEVICES_PER_NODE // 2 if a.init is None else a.init
    pods = a.nodes * DEVICES_PER_NODE // 2 if a.pods is None else a.pods
    if min(a.nodes, pods, a.repeat, a.claim_workers) < 1 or init < 0 or init + pods > a.nodes * DEVICES_PER_NODE:
        ap.error(f"need --nodes, --pods, --repeat, --claim-workers >= 1 and --init + --pods <= {DEVICES_PER_NODE} x --nodes")
    install_sigterm_as_exit()
    args = {"nodes": a.nodes, "init": init, "pods": pods, "create": a.create, "components": a.components,
            "claim_workers": a.claim_workers, "all_dra_gates": a.all_dra_gates}
    runs: list[Obj] = []
    try:
        for i in range(a.repeat):
            for hints in (False, True):
                progress(f"repetition {i + 1}/{a.repeat}")
                runs.append(run_once(hints, seed=a.seed, profile_dir=a.profile and a.profile / f"run-{i + 1}",
                                     profile_seconds=a.profile_seconds, **args))
    except KeyboardInterrupt:
        progress("interrupted; everything started here has been stopped")
        return 130
    except (RuntimeError, OSError, ClusterError) as exc:
        progress(f"a run failed: {type(exc).__name__}: {exc}")
        if not runs:
            return 1
    res: dict[str, Any] = {"args": args, "runs": runs, "summary": summary(runs), "loadAverageAtEnd": load_average()}
    print(json.dumps(res, indent=2)) if a.json else print_text(res)
    complete = len(runs) == 2 * a.repeat and all(r["bound"] == r["pods"] == r["claimsAllocated"] for r in runs)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
