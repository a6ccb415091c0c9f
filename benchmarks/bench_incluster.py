"""The same corpus from outside and inside the cluster: both wall times, and whether the case
statuses agree.

Usage: ``python benchmarks/bench_incluster.py --kubeconfig FILE [--shards 2] [--image IMG] [--host-network] [--json] [PATHS...]``

1. **outside**: ``drakit run --backend cluster --kubeconfig FILE PATHS`` (one process, one
   case after another), from the start of the command to its end;
2. **in the cluster**: ``drakit run --in-cluster --shards N --kubeconfig FILE PATHS`` (a Job
   per shard on the cluster's nodes, side by side), from the start of the command (creating the
   namespace, RBAC and Jobs, the pods starting) to its end (results merged, everything deleted);
   each shard's own wall time from its results (``run.merged.shards``).

PATHS default to the kubeconfig corpus of ``tests/clusters/test_shared_cluster_workers.py``
(five case files, two of its cases cluster-wide). The cluster needs nodes that run containers
(``drakit cluster up --nodes 2 --load-image drakit``: real kubelets over containerd, drakit's
image imported). Progress goes to stderr, the figures (or
JSON) to stdout. Exit code 1 when a run failed or the statuses differ.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "conformance" / "suites"
CORPUS = [SUITES / "core" / "template-claims.case.yaml", SUITES / "core" / "constraints.case.yaml",
          SUITES / "admin-access" / "admin-access.case.yaml", SUITES / "device-taints" / "scheduling.case.yaml",
          SUITES / "core" / "pools.case.yaml"]


def timed(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    print(f"$ {' '.join(cmd)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return time.monotonic() - started, res


def statuses(path: Path) -> dict[str, str]:
    return {f"{c['id']}[{c['backend']}]": c["status"] for c in json.loads(path.read_text())["cases"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--image", default=None)
    p.add_argument("--host-network", action="store_true", help="drakit run --in-cluster --host-network (the local cluster)")
    p.add_argument("--json", action="store_true")
    p.add_argument("paths", nargs="*")
    args = p.parse_args(argv)
    paths = [str(Path(p).resolve()) for p in args.paths] or [str(f) for f in CORPUS]  # the runs' cwd is a temp dir
    kubeconfig = str(Path(args.kubeconfig).resolve())
    drakit = [sys.executable, "-m", "drakit.conformance.cli", "run", *paths, "--kubeconfig", kubeconfig, "--plain"]
    with tempfile.TemporaryDirectory(prefix="bench-incluster-") as tmp:
        base = Path(tmp)
        out_wall, out = timed([*drakit, "--backend", "cluster", "--out", "outside"], base)
        image = (["--image", args.image] if args.image else []) + (["--host-network"] if args.host_network else [])
        in_wall, inside = timed([*drakit, "--in-cluster", "--shards", str(args.shards), *image, "--out", "inside"], base)
        figures: dict[str, Any] = {"outside": {"wallSeconds": round(out_wall, 1), "exit": out.returncode},
                                   "inCluster": {"wallSeconds": round(in_wall, 1), "exit": inside.returncode,
                                                 "shards": args.shards}}
        ok = out.returncode == 0 and inside.returncode == 0
        try:
            a, b = statuses(base / "outside" / "results.json"), statuses(base / "inside" / "results.json")
            merged = json.loads((base / "inside" / "results.json").read_text())
            figures["inCluster"]["shardWallSeconds"] = [s["wallSeconds"] for s in merged["run"]["merged"]["shards"]]
            figures["cases"] = len(a)
            figures["sameStatuses"] = a == b
            figures["differences"] = {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
            ok = ok and a == b
        except (OSError, KeyError, ValueError) as exc:
            figures["error"] = f"results missing: {exc}"
            print(out.stdout[-2000:] + out.stderr[-2000:] + inside.stdout[-3000:] + inside.stderr[-2000:], file=sys.stderr)
            ok = False
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        o, i = figures["outside"], figures["inCluster"]
        print(f"outside, one process:       {o['wallSeconds']:7.1f} s wall (exit {o['exit']})")
        print(f"in the cluster, {i['shards']} shards:  {i['wallSeconds']:7.1f} s wall (exit {i['exit']}); shards' own "
              f"{', '.join(f'{s:.1f}' for s in i.get('shardWallSeconds', []))} s")
        print(f"cases: {figures.get('cases')}, same statuses: {figures.get('sameStatuses')}"
              + (f", differences: {figures['differences']}" if figures.get("differences") else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
