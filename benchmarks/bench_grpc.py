"""NodePrepareResources round trips against the fake kubelet plugin over a Unix socket.

Usage: ``python benchmarks/bench_grpc.py [--calls N] [--warmup N] [--placement thread|process|sync|all]``

Three measurements per placement (plugin in a thread of this process; in a subprocess started
with ``drakit driver serve``, as in production: checkpoint snapshots fsynced, journal records
written; ``sync``: the same with ``--sync-journal``, every journal record fsynced before the
answer), each ``--calls`` sequential calls with one claim of one device:

- ``prepare (new claim)``: a claim never seen before: claim lookup, the checkpoint's intent
  record, CDI spec written, the commit record (all claims stay prepared, so this also shows
  whether a new claim costs more as more are prepared);
- ``prepare (prepared)``: the same claim again (answered from the checkpointed state);
- ``prepare+unprepare``: a full cycle for a fresh claim, as a pod start and stop would cause.

Prints p50 / p99 / mean in microseconds and calls per second. Bounded: it stops by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402

from drakit.fake_driver._gen import dra_v1_pb2 as pb, dra_v1_pb2_grpc as pbg  # noqa: E402
from drakit.fake_driver.sampleclaims import allocated_claim  # noqa: E402

DRIVER, NODE = "gpu.acme.example.com", "node-a"


def claims_for(n: int) -> list[dict[str, Any]]:
    return [allocated_claim(f"bench-{i}", "bench", f"00000000-0000-4000-8000-{i:012d}", NODE,
                            # admin access: many claims may hold gpu0 at once, so no prepare is refused
                            [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu0", "adminAccess": True}])
            for i in range(n)]


def msg(claim: dict[str, Any]) -> Any:
    m = claim["metadata"]
    return pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace=m["namespace"], name=m["name"], uid=m["uid"])])


def unmsg(claim: dict[str, Any]) -> Any:
    m = claim["metadata"]
    return pb.NodeUnprepareResourcesRequest(claims=[pb.Claim(namespace=m["namespace"], name=m["name"], uid=m["uid"])])


def batch_msg(claims: list[dict[str, Any]], prepare: bool) -> Any:
    refs = [pb.Claim(namespace=c["metadata"]["namespace"], name=c["metadata"]["name"], uid=c["metadata"]["uid"])
            for c in claims]
    return pb.NodePrepareResourcesRequest(claims=refs) if prepare else pb.NodeUnprepareResourcesRequest(claims=refs)


def measure_batches(socket: Path, claims: list[dict[str, Any]], calls: int, per_call: int) -> None:
    """Prepare+unprepare cycles of ``per_call`` claims in one request each; every answer checked."""
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        stub = pbg.DRAPluginStub(channel)
        errors = 0

        def cycle(i: int) -> None:
            nonlocal errors
            batch = claims[(i * per_call) % (len(claims) - per_call):][:per_call]
            got = stub.NodePrepareResources(batch_msg(batch, True), timeout=30)
            errors += sum(1 for r in got.claims.values() if r.error)
            stub.NodeUnprepareResources(batch_msg(batch, False), timeout=30)

        samples = timed(calls, cycle)
    report(f"{per_call} claims per call", samples)
    print(f"  {'':24} {calls * per_call / sum(samples):8.0f} claims/s prepared and unprepared, {errors} per-claim errors")


def timed(n: int, call: Callable[[int], None]) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - t0)
    return out


def report(label: str, samples: list[float]) -> None:
    us = sorted(s * 1e6 for s in samples)
    p50 = us[len(us) // 2]
    p99 = us[min(len(us) - 1, int(len(us) * 0.99))]
    print(f"  {label:24} p50 {p50:8.0f} us   p99 {p99:8.0f} us   mean {statistics.fmean(us):8.0f} us"
          f"   {len(us) / sum(samples):8.0f} calls/s")


def measure(socket: Path, claims: list[dict[str, Any]], calls: int, warmup: int) -> None:
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        stub = pbg.DRAPluginStub(channel)
        t0 = time.perf_counter()
        stub.NodeUnprepareResources(unmsg(claims[0]), timeout=10, wait_for_ready=True)
        print(f"  {'first call (connect)':24} {(time.perf_counter() - t0) * 1e6:8.0f} us")
        for i in range(warmup):  # warm up on claims used only here
            stub.NodePrepareResources(msg(claims[i]), timeout=10)
            stub.NodeUnprepareResources(unmsg(claims[i]), timeout=10)
        fresh = claims[warmup:warmup + calls]
        new = timed(calls, lambda i: stub.NodePrepareResources(msg(fresh[i]), timeout=10))
        for claim in fresh:
            stub.NodeUnprepareResources(unmsg(claim), timeout=10)
        stub.NodePrepareResources(msg(fresh[0]), timeout=10)
        again = timed(calls, lambda i: stub.NodePrepareResources(msg(fresh[0]), timeout=10))
        stub.NodeUnprepareResources(unmsg(fresh[0]), timeout=10)
        cycle_claims = claims[warmup + calls:]

        def cycle(i: int) -> None:
            stub.NodePrepareResources(msg(cycle_claims[i]), timeout=10)
            stub.NodeUnprepareResources(unmsg(cycle_claims[i]), timeout=10)

        cycles = timed(calls, cycle)
    report("prepare (new claim)", new)
    report("prepare (prepared)", again)
    report("prepare+unprepare", cycles)
    measure_batches(socket, claims, max(1, calls // 32), 32)


def in_thread(root: Path, claims: list[dict[str, Any]], calls: int, warmup: int, *extra: str) -> None:
    from drakit.fake_driver.plugin import FakePlugin, MemoryClaimSource, PluginConfig
    from drakit.fake_hw.inventory import build_inventory
    config = PluginConfig(driver=DRIVER, node=NODE, plugin_dir=root / "plugins", registry_dir=root / "registry",
                          cdi_dir=root / "cdi", durable=False)
    plugin = FakePlugin(config, build_inventory("server-8gpu", NODE), MemoryClaimSource(claims), health=False)
    plugin.start()
    try:
        measure(plugin.dra_socket, claims, calls, warmup)
    finally:
        plugin.stop(grace=0)


def in_process(root: Path, claims: list[dict[str, Any]], calls: int, warmup: int, *extra: str) -> None:
    claims_file = root / "claims.json"
    claims_file.write_text(json.dumps(claims))
    cmd = [sys.executable, "-m", "drakit.fake_driver.cli", "driver", "serve", "--driver", DRIVER, "--node", NODE,
           "--plugin-dir", str(root / "plugins"), "--registry-dir", str(root / "registry"),
           "--cdi-dir", str(root / "cdi"), "--claims", str(claims_file), "--no-health", *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        if not ready or b"serving" not in proc.stdout.readline():
            raise SystemExit("the plugin subprocess did not start")
        measure(root / "plugins" / DRIVER / "dra.sock", claims, calls, warmup)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--placement", choices=("thread", "process", "sync", "all"), default="all")
    args = parser.parse_args()
    claims = claims_for(args.warmup + 2 * args.calls)
    print(f"NodePrepareResources over a Unix socket, {args.calls} sequential calls, one claim of one device")
    placements: dict[str, tuple[str, Callable[..., None], tuple[str, ...]]] = {
        "thread": ("a thread of this process (no fsync)", in_thread, ()),
        "process": ("a subprocess (snapshots fsynced, journal records written)", in_process, ()),
        "sync": ("a subprocess with --sync-journal (every journal record fsynced)", in_process, ("--sync-journal",)),
    }
    for name, (label, run, extra) in placements.items():
        if args.placement not in (name, "all"):
            continue
        root = Path(tempfile.mkdtemp(prefix="dkb", dir="/tmp"))
        try:
            print(f"plugin in {label}:")
            run(root, claims, args.calls, args.warmup, *extra)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
