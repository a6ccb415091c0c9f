"""Wall time of the corpus on the local cluster with real containers (containerd + runc) against
drakit's fake CRI, in the same sitting.

Usage: ``python benchmarks/bench_runtime.py [--workers N] [--repeat K] [--json] [PATH ...]``

Runs ``drakit run --backend cluster --cluster local --runtime R -n N [PATH ...]`` for R = fake,
then containerd, ``--repeat`` times alternately, each in a fresh out folder, and prints each
run's wall time, verdict and counts, the median per runtime and the ratio containerd / fake.
PATH defaults to the whole bundled corpus. Progress to stderr, figures to stdout; exit 1 when a
run's verdict is not PASS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNTIMES = ("fake", "containerd")


def one_run(runtime: str, workers: str, paths: list[str], out: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "drakit.conformance.cli", "run", "--backend", "cluster", "--cluster", "local",
            "--runtime", runtime, "-n", workers, "--out", str(out), "-q", *paths]
    t0 = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    try:
        results = json.loads((out / "results.json").read_text())
    except (OSError, ValueError):
        return {"runtime": runtime, "wallSeconds": wall, "verdict": "none", "exit": res.returncode,
                "tail": (res.stdout + res.stderr)[-1500:]}
    return {"runtime": runtime, "wallSeconds": wall, "verdict": results["verdict"]["result"], "exit": res.returncode,
            "summary": results.get("summary"),
            "notPassed": [f"{c['id']} [{c.get('backend')}] {c['status']}: "
                          f"{((c.get('failure') or {}).get('summary') or '')[:300]}"
                          for c in results.get("cases") or [] if c.get("status") in ("failed", "error")],
            "nodeSide": ((results["environment"]["backends"].get("cluster") or {}).get("nodeSide") or {})
            .get("containerRuntime"),
            "caseSeconds": {f"{c['id']} [{c.get('backend')}]": float(c.get("durationSeconds") or 0.0)
                            for c in results.get("cases") or []}}


def slowest_differences(runs: list[dict[str, Any]], top: int = 12) -> list[tuple[str, float, float]]:
    """The cases whose median duration grew most from the fake CRI to containerd: (case, fake,
    containerd) seconds, largest difference first."""
    per: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for case, secs in (run.get("caseSeconds") or {}).items():
            per.setdefault(case, {}).setdefault(run["runtime"], []).append(secs)
    rows = [(case, statistics.median(d["fake"]), statistics.median(d["containerd"]))
            for case, d in per.items() if "fake" in d and "containerd" in d]
    return sorted(rows, key=lambda r: r[1] - r[2])[:top]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("-n", "--workers", default="0")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-runtime-") as tmp:
        for i in range(args.repeat):
            for runtime in RUNTIMES:
                print(f"[bench] run {i + 1}/{args.repeat} on {runtime} ...", file=sys.stderr, flush=True)
                run = one_run(runtime, args.workers, args.paths, Path(tmp) / f"{runtime}-{i}")
                print(f"[bench]   {run['wallSeconds']:.1f} s, {run['verdict']}", file=sys.stderr, flush=True)
                for line in run.get("notPassed") or []:
                    print(f"[bench]     {line}", file=sys.stderr, flush=True)
                runs.append(run)
    med = {r: statistics.median(x["wallSeconds"] for x in runs if x["runtime"] == r) for r in RUNTIMES}
    figures = {"runs": runs, "medianWallSeconds": med, "ratioContainerdOverFake": med["containerd"] / med["fake"],
               "load": os.getloadavg()}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for run in runs:
            print(f"{run['runtime']:10} {run['wallSeconds']:7.1f} s  {run['verdict']:10} {run.get('summary')}  "
                  f"({run.get('nodeSide')})")
        print(f"median: fake {med['fake']:.1f} s, containerd {med['containerd']:.1f} s; "
              f"ratio containerd / fake {figures['ratioContainerdOverFake']:.2f}")
        rows = slowest_differences(runs)
        if rows:
            print("cases that took longer on containerd than on the fake CRI (median seconds, set-up to clean-up):")
            for case, fake, ctrd in rows:
                print(f"  {ctrd - fake:+6.2f} s  fake {fake:6.2f} s, containerd {ctrd:6.2f} s  {case}")
    return 0 if all(r["verdict"] == "pass" for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
