"""How many xdist workers ``drakit run`` starts (``-n``)."""

from __future__ import annotations

import argparse
import os
import sys


def workers_for(args: argparse.Namespace) -> str:
    """``-n auto`` on the reference backend alone runs serially: its cases take milliseconds,
    and each worker's start (imports, CEL engine, caches built again) costs more than it saves
    (the bundled suites on 2 cores: 7 CPU-seconds serial, 16 with two workers). A number given
    is used as given up to :func:`max_workers`, said in one line when capped."""
    workers = str(args.workers)
    if workers in ("auto", "logical") and [b.strip() for b in args.backend.split(",") if b.strip()] == ["reference"]:
        return "0"
    cap, why = max_workers()
    if workers.isdigit() and int(workers) > cap:
        print(f"drakit run: -n {int(workers):,}: running {cap} workers, the most this machine can run ({why})",
              file=sys.stderr)
        return str(cap)
    return workers


def max_workers() -> tuple[int, str]:
    """The most workers a run starts, and why: 4 per CPU core drakit may use (a worker on a
    shared cluster mostly waits), and no more than 1 per 300 MiB of available memory (a
    worker's interpreter with its caches)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    memory = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            memory = next(int(line.split()[1]) << 10 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        pass
    by_cores = 4 * cores
    by_memory = max(1, memory // (300 << 20)) if memory is not None else by_cores
    if by_memory < by_cores:
        return by_memory, f"1 per 300 MiB of the {memory >> 20:,} MiB of memory available"
    return by_cores, f"4 per CPU core, {cores} core{'s' if cores != 1 else ''}"
