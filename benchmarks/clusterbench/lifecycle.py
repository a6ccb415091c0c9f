"""Cluster up / down timings (and what a down left behind), and a ``drakit run`` of some case
files on the cluster backend."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from clusterbench.kube import Obj, progress, stats

from drakit.clusters.local import procs
from drakit.clusters.local.launcher import LocalCluster

ROOT = Path(__file__).resolve().parents[2]


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
