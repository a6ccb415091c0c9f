"""bench_grpc's rows and report: which servers run, the table, the A/B and the target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TARGET_CYCLES, TARGET_P99_US = 1500, 5000
BATCH = 32  # claims in one call, for the batched row

PINNED = ", pinned to one CPU"
# name -> (label, no-op, --grpc-server, --sync-journal, pinned); run in this order
SERVERS: dict[str, tuple[str, bool, str, bool, bool]] = {
    "noop": ("no-op server (transport alone)", True, "loop", False, False),
    "noop-grpcio": ("no-op server, grpcio thread pool", True, "grpcio", False, False),
    "serve": ("drakit driver serve", False, "loop", False, False),
    "serve-grpcio": ("drakit driver serve --grpc-server grpcio", False, "grpcio", False, False),
    "sync": ("drakit driver serve --sync-journal", False, "loop", True, False),
    "noop-pinned": (f"no-op server{PINNED}", True, "loop", False, True),
    "serve-pinned": (f"drakit driver serve{PINNED}", False, "loop", False, True),
    "serve-grpcio-pinned": (f"serve --grpc-server grpcio{PINNED}", False, "grpcio", False, True),
    # --baseline-python: the same serve command run by another install (the code before a change)
    "base": ("baseline: drakit driver serve", False, "base", False, False),
    "base-pinned": (f"baseline: serve{PINNED}", False, "base", False, True),
}


@dataclass(frozen=True)
class Row:
    name: str   # a key of SERVERS, or "thread"
    label: str
    run: int
    key: str    # "cycle", "cycle x4", "32 claims a call"
    entry: dict[str, Any]


def figures(entry: dict[str, Any]) -> tuple[float, float, float]:
    us = sorted(s * 1e6 for s in entry["samples"])
    return us[len(us) // 2], us[min(len(us) - 1, int(len(us) * 0.99))], len(us) / entry["wall"]


def row_order(item: tuple[str, Any]) -> tuple[int, int, str]:
    """Sequential cycles, then by concurrent callers, then the batched row, then the new-claim levels."""
    key = item[0]
    if key.startswith("cycle"):
        return 0, int(key.partition(" x")[2] or 1), key
    if key.startswith("new claim @"):
        return 2, int(key.rpartition("@")[2]), key
    return 1, 0, key


def meets(rate: float, p99: float) -> bool:
    return rate >= TARGET_CYCLES and p99 < TARGET_P99_US


def report(rows: list[Row], scales: dict[str, dict[str, Any]], repeat: int) -> None:
    # each row against the no-op row of the same run, callers, gRPC server and placement
    noop = {(SERVERS[r.name][2], SERVERS[r.name][4], r.run, r.key): figures(r.entry)
            for r in rows if r.name in SERVERS and SERVERS[r.name][1]}
    print(f"\n{'server':48} {'run':>3} {'callers':>7} {'p50 us':>7} {'p99 us':>7} {'cycles/s':>8} {'vs no-op':>8} "
          f"{'server CPU us/cycle':>19}  target")
    for r in rows:
        p50, p99, rate = figures(r.entry)
        callers = r.key.partition(" x")[2] or "1"
        if r.key.endswith("a call"):
            print(f"{r.label:48} {r.run:3} {callers:>7} {p50:7.0f} {p99:7.0f} {rate:8.0f} calls/s of {BATCH} claims = "
                  f"{rate * BATCH:,.0f} claims/s prepared and unprepared")
            continue
        spec = SERVERS.get(r.name)
        base = noop.get((spec[2], spec[4], r.run, r.key)) if spec and not spec[1] else None
        ratio = f"{rate / base[2]:7.2f}x" if base else f"{'':8}"
        cpu = f"{r.entry['server_cpu'] / len(r.entry['samples']) * 1e6:19.0f}" if "server_cpu" in r.entry else f"{'':19}"
        print(f"{r.label:48} {r.run:3} {callers:>7} {p50:7.0f} {p99:7.0f} {rate:8.0f} {ratio} {cpu}  "
              f"{'meets' if meets(rate, p99) else 'misses'} ({TARGET_CYCLES:,}/s, p99 < {TARGET_P99_US / 1000:.0f} ms)")
    # the A/B: each server kind against grpcio's of the same placement and sync, run by run
    pairs = [(a, b) for a, spec in SERVERS.items() for b, other in SERVERS.items()
             if spec[2] == "loop" and other[2] in ("grpcio", "base") and spec[1:2] + spec[3:] == other[1:2] + other[3:]]
    by = {(r.name, r.run, r.key): figures(r.entry) for r in rows}
    printed = False
    for a, b in pairs:
        for key in sorted({r.key for r in rows if r.name == a and r.key.startswith("cycle")},
                          key=lambda k: int(k.partition(" x")[2] or 1)):
            got = [(by[(a, run, key)], by[(b, run, key)]) for run in range(1, repeat + 1)
                   if (a, run, key) in by and (b, run, key) in by]
            if not got:
                continue
            if not printed:
                print("\nA/B in the same run: cycles/s of this code (LoopServer) / of the other row, run by run; "
                      "runs meeting the target, this code vs the other:")
                printed = True
            callers = key.partition(" x")[2] or "1"
            ratios = " ".join(f"{x[2] / y[2]:.2f}x" for x, y in got)
            versus = "grpcio server" if SERVERS[b][2] == "grpcio" else "baseline"
            print(f"  {SERVERS[a][0]:38} vs {versus:13} {callers:>2} callers: {ratios:24} target met "
                  f"{sum(meets(x[2], x[1]) for x, _ in got)}/{len(got)} vs {sum(meets(y[2], y[1]) for _, y in got)}/{len(got)}")
    for label, levels in scales.items():
        print(f"\na new claim's prepare, {label} (p50 / p99 us, ratio of p50 to the first):")
        first = None
        for key, entry in levels.items():
            p50, p99, _ = figures(entry)
            first = first or p50
            print(f"  {key.removeprefix('new claim @'):>6} prepared: p50 {p50:7.0f}  p99 {p99:7.0f}  {p50 / first:5.2f}x")
