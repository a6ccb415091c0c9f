"""NodePrepareResources round trips against the fake kubelet plugin over a Unix socket.

Usage: ``python benchmarks/bench_grpc.py [--calls N] [--callers 1,4,8] [--prepared 0,500,5000]
[--repeat N] [--only ROW,...] [--baseline-python PYTHON] [--pin-cpu N] [--cdi-on tmpfs|disk]
[--caller auto|go|python]``

The plugin runs as in production, ``drakit driver serve`` in a process of its own (checkpoint
snapshots fsynced, journal records written before each answer: ``serve``; ``sync``: the same
with ``--sync-journal``, the journal fdatasynced once before each answer, concurrent calls
sharing one fdatasync). The caller is another process, as the kubelet is. With ``drakit cluster
build`` done, it is ``dracaller`` (Go, ``clusters/local/dracaller``): the kubelet's own client
code (``k8s.io/kubelet``'s DRA v1 API on gRPC-Go), one connection, sequential calls (one pod's
worker), then N goroutines calling at once over that connection (N pods' workers: the kubelet
calls sequentially per pod, concurrently across pods); it costs the two shared cores little, so
the figures are the server's. Without it (or ``--caller python``) the caller is Python:
sequential calls, then N caller processes. The report names the caller used. Claims have one
device each; the plugin's state folder (the checkpoint) is on disk under the temporary folder,
its CDI folder on tmpfs (``/dev/shm``) as ``/var/run/cdi`` is on a node (``--cdi-on disk`` puts
it beside the checkpoint).

Rows (``--only``, in this order within each of ``--repeat`` runs, so that rows compared with
each other ran under the same load):

- ``noop``, ``noop-grpcio``: the plugin's gRPC server (``LoopServer``) and grpcio's thread-pool
  server answering each claim with an empty result and doing nothing else: what the transport
  alone costs; every row prints its ratio to the no-op row of its server, callers and run;
- ``serve`` (the default server), ``serve-grpcio`` (``--grpc-server grpcio``), ``sync``;
- ``base``: ``--baseline-python PYTHON``'s ``drakit driver serve`` (a venv with an earlier commit
  installed), the A/B against the code before a change;
- ``noop-pinned``, ``serve-pinned``, ``serve-grpcio-pinned``, ``base-pinned``: the same under
  ``taskset -c N`` (the last CPU unless ``--pin-cpu``), the caller left to the kernel; pinning is
  a deployment choice (``taskset``, a cpuset), not something the plugin does by itself;
- ``thread``: the plugin in a thread of the calling process (no fsync), the placement this
  script measured first.

Printed per row: p50 / p99 of one prepare+unprepare cycle in microseconds, cycles per second,
the server process's CPU per cycle, and whether the row meets 1,500 cycles/s with p99 under
5 ms; then the A/B, run by run (the default server against grpcio's and against the baseline,
and in how many runs each met the target); then a new claim's prepare latency with 0, 500 and
5,000 claims already prepared (``--prepared``, first run only), and the ratio to the first.
Bounded: it stops by itself; ``uptime`` is printed before and after (figures on a loaded 2-core
machine say more about the load than about the plugin).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402

from drakit.fake_driver._gen import dra_v1_pb2 as pb, dra_v1_pb2_grpc as pbg  # noqa: E402
from drakit.fake_driver.sampleclaims import allocated_claim  # noqa: E402
from grpcbench.report import BATCH, SERVERS, Row, report, row_order  # noqa: E402

DRIVER, NODE, NAMESPACE = "gpu.acme.example.com", "node-a", "bench"


def uid(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def claims_for(n: int) -> list[dict[str, Any]]:
    return [allocated_claim(f"bench-{i}", NAMESPACE, uid(i), NODE,
                            # admin access: many claims may hold gpu0 at once, so no prepare is refused
                            [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu0", "adminAccess": True}])
            for i in range(n)]


def ref(i: int) -> Any:
    return pb.Claim(namespace=NAMESPACE, name=f"bench-{i}", uid=uid(i))


# -- the caller (its own process: ``--role client``) ------------------------------------------------

class Caller:
    def __init__(self, socket: str) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.stub = pbg.DRAPluginStub(self.channel)
        self.stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(claims=[ref(0)]), timeout=30,
                                         wait_for_ready=True)
        self.errors = 0

    def prepare(self, i: int) -> None:
        got = self.stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=[ref(i)]), timeout=30)
        self.errors += sum(1 for r in got.claims.values() if r.error)

    def unprepare(self, i: int) -> None:
        got = self.stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(claims=[ref(i)]), timeout=30)
        self.errors += sum(1 for r in got.claims.values() if r.error)

    def cycle(self, i: int) -> None:
        self.prepare(i)
        self.unprepare(i)

    def batch_cycle(self, first: int, size: int) -> None:
        """One prepare and one unprepare call of ``size`` claims (a pod with many claims)."""
        refs = [ref(i) for i in range(first, first + size)]
        got = self.stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=refs), timeout=30)
        self.errors += sum(1 for r in got.claims.values() if r.error)
        self.stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(claims=refs), timeout=30)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(call: Any, items: range) -> list[float]:
    out = []
    for i in items:
        t0 = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - t0)
    return out


def client_main(args: argparse.Namespace) -> int:
    caller = Caller(args.socket)
    out: dict[str, Any] = {}
    nxt = 1
    for i in range(nxt, nxt + args.warmup):  # warm up on claims used only here
        caller.cycle(i)
    nxt += args.warmup
    cpu = cpu_seconds(args.server_pid)
    samples = timed(caller.cycle, range(nxt, nxt + args.calls))
    out["cycle"] = {"samples": samples, "wall": sum(samples), "server_cpu": cpu_seconds(args.server_pid) - cpu}
    nxt += args.calls
    batches = max(1, args.calls // BATCH)
    cpu = cpu_seconds(args.server_pid)
    samples = timed(lambda b: caller.batch_cycle(nxt + b * BATCH, BATCH), range(batches))
    out[f"{BATCH} claims a call"] = {"samples": samples, "wall": sum(samples),
                                     "server_cpu": cpu_seconds(args.server_pid) - cpu}
    nxt += batches * BATCH
    if args.prepared:
        held = 0
        for level in args.prepared:
            for i in range(nxt + held, nxt + level):  # fill up to ``level`` prepared claims
                caller.prepare(i)
            held = max(held, level)
            probe = range(nxt + held, nxt + held + args.probe)
            samples = timed(caller.prepare, probe)
            out[f"new claim @{level}"] = {"samples": samples, "wall": sum(samples)}
            for i in probe:
                caller.unprepare(i)
    out["errors"] = caller.errors
    print(json.dumps(out))
    return 0


def worker_main(args: argparse.Namespace) -> int:
    """One of several concurrent callers: connect, warm up, wait for the start line, cycle."""
    caller = Caller(args.socket)
    first, count = args.first, args.calls
    for i in range(first, first + args.warmup):
        caller.cycle(i)
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()  # CLOCK_MONOTONIC: comparable between processes
    samples = timed(caller.cycle, range(first + args.warmup, first + args.warmup + count))
    print(json.dumps({"samples": samples, "t0": t0, "t1": time.monotonic(), "errors": caller.errors}))
    return 0


def concurrent_cycles(socket: Path, first: int, args: argparse.Namespace, callers: int) -> dict[str, Any]:
    """``callers`` caller processes doing cycles of their own claims at once."""
    share = args.calls // callers
    procs = [subprocess.Popen([sys.executable, __file__, "--role", "worker", "--socket", str(socket),
                               "--first", str(first + k * (share + args.warmup)), "--calls", str(share),
                               "--warmup", str(min(args.warmup, 50))],
                              cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for k in range(callers)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit("a caller process did not start")
        cpu = cpu_seconds(args.server_pid)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        got = [json.loads(proc.communicate(timeout=1800)[0]) for proc in procs]
        cpu = cpu_seconds(args.server_pid) - cpu
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return {"samples": [s for g in got for s in g["samples"]], "errors": sum(g["errors"] for g in got),
            "wall": max(g["t1"] for g in got) - min(g["t0"] for g in got), "server_cpu": cpu}


# -- the no-op server (``--role noop``) ----------------------------------------------------------

def noop_main(args: argparse.Namespace) -> int:
    class Noop(pbg.DRAPluginServicer):  # type: ignore[misc]
        def NodePrepareResources(self, request: Any, context: Any) -> Any:
            response = pb.NodePrepareResourcesResponse()
            for claim in request.claims:
                response.claims[claim.uid].SetInParent()
            return response

        def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
            response = pb.NodeUnprepareResourcesResponse()
            for claim in request.claims:
                response.claims[claim.uid].SetInParent()
            return response

    from drakit.fake_driver.plugin.rpcserver import LoopServer
    from drakit.fake_driver.plugin.server import PluginServer, grpc_server
    server: Any = (grpc_server(PluginServer.DEFAULT_WORKERS) if args.grpc_server == "grpcio"
                   else LoopServer(PluginServer.DEFAULT_WORKERS))
    pbg.add_DRAPluginServicer_to_server(Noop(), server)
    server.add_insecure_port(f"unix://{args.socket}")
    server.start()
    print("serving", flush=True)
    signal.sigwait({signal.SIGTERM})
    server.stop(0)
    return 0


# -- the parent ----------------------------------------------------------------------------------

def started(cmd: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    if not ready or b"serving" not in proc.stdout.readline():
        proc.kill()
        raise SystemExit(f"the server did not start: {' '.join(cmd)}")
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def go_caller() -> Path | None:
    """The built ``dracaller`` (``drakit cluster build``), or None."""
    from drakit.clusters.local import build
    binary = next(b for g in build.GROUPS for b in g.binaries if b.name == "dracaller")
    path = build.bin_dir() / binary.name
    return path if build.binary_version_ok(path, binary) else None


def run_go_client(caller: Path, socket: Path, args: argparse.Namespace, prepared: list[int]) -> dict[str, Any]:
    """Every row in one ``dracaller`` run: sequential, then goroutines sharing the connection."""
    cmd = [str(caller), "--socket", str(socket), "--namespace", NAMESPACE, "--prefix", "bench-", "--first", "1",
           "--calls", str(args.calls), "--warmup", str(args.warmup), "--callers", ",".join(map(str, args.callers)),
           "--batch", str(BATCH), "--prepared", ",".join(map(str, prepared)), "--probe", str(args.probe),
           "--server-pid", str(args.server_pid)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"dracaller failed: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    if result.get("first_error"):
        print(f"  first per-claim error: {result['first_error']}")
    return {k: v for k, v in result.items() if k not in ("caller", "first_error")}


def go_claims_needed(args: argparse.Namespace) -> int:
    """Claims a ``dracaller`` run numbers (from 1): warm-up, every row, the prepared levels."""
    rows = args.calls * len([c for c in args.callers if c >= 1])
    return 1 + args.warmup + rows + max(1, args.calls // BATCH) * BATCH + max(args.prepared, default=0) + args.probe


def pin_prefix(args: argparse.Namespace) -> list[str]:
    """``taskset -c CPU``: the server's threads on one CPU (the caller is left to the others)."""
    cpu = args.pin_cpu if args.pin_cpu is not None else (os.cpu_count() or 1) - 1
    if (os.cpu_count() or 1) < 2 or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", str(cpu)]


def run_client(socket: Path, args: argparse.Namespace, prepared: list[int]) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--role", "client", "--socket", str(socket), "--calls", str(args.calls),
           "--server-pid", str(args.server_pid),
           "--warmup", str(args.warmup), "--probe", str(args.probe),
           "--callers", ",".join(map(str, args.callers)), "--prepared", ",".join(map(str, prepared))]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the client failed: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def in_thread_client(root: Path, claims: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The earlier configuration: the plugin in a thread of this process, the caller here too."""
    from drakit.fake_driver.plugin import FakePlugin, MemoryClaimSource, PluginConfig
    from drakit.fake_hw.inventory import build_inventory
    config = PluginConfig(driver=DRIVER, node=NODE, plugin_dir=root / "plugins", registry_dir=root / "registry",
                          cdi_dir=root / "cdi", durable=False)
    plugin = FakePlugin(config, build_inventory("server-8gpu", NODE), MemoryClaimSource(claims), health=False)
    plugin.start()
    try:
        caller = Caller(str(plugin.dra_socket))
        for i in range(1, 1 + args.warmup):
            caller.cycle(i)
        samples = timed(caller.cycle, range(1 + args.warmup, 1 + args.warmup + args.calls))
        return {"cycle": {"samples": samples, "wall": sum(samples)}, "errors": caller.errors}
    finally:
        plugin.stop(grace=0)


def uptime() -> str:
    try:
        return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load average unknown"


def parent_main(args: argparse.Namespace) -> int:
    unknown = [n for n in args.only if n not in SERVERS and n != "thread"]
    if unknown:
        raise SystemExit(f"--only: unknown row {unknown[0]!r} (rows: {', '.join(SERVERS)}, thread)")
    if args.repeat < 1:
        raise SystemExit("--repeat: at least 1")
    per_run = args.warmup + args.calls + (max(1, args.calls // BATCH) + 1) * BATCH + 2
    most = max(args.prepared, default=0) + args.probe
    concurrent = sum(args.calls + c * 50 for c in args.callers if c > 1)  # their warm-up claims too
    caller = go_caller() if args.caller != "python" else None
    if args.caller == "go" and caller is None:
        raise SystemExit("--caller go: dracaller is not built; run 'drakit cluster build'")
    claims = claims_for(max(per_run + most + 1 + concurrent, go_claims_needed(args)))
    print(f"NodePrepareResources over a Unix socket, one claim of one device per call, {args.calls} cycles a row; "
          f"{os.cpu_count()} CPUs, {uptime()}")
    if caller is not None:
        print(f"caller: {caller} (Go: k8s.io/kubelet's DRA v1 client, one gRPC connection; concurrent rows are "
              "goroutines sharing it, as the kubelet's pod workers do)")
    else:
        print("caller: Python (grpcio), concurrent rows one process per caller"
              + ("" if args.caller == "python" else "; dracaller is not built ('drakit cluster build' builds it)"))
    root = Path(tempfile.mkdtemp(prefix="dkb", dir="/tmp"))
    shm = Path("/dev/shm")
    cdi_root = Path(tempfile.mkdtemp(prefix="dkb", dir=shm)) if args.cdi_on == "tmpfs" and shm.is_dir() else root
    print(f"state (checkpoint) in {root}, CDI specs in {cdi_root / 'cdi'}")
    rows: list[Row] = []
    scales: dict[str, dict[str, Any]] = {}
    try:
        claims_file = root / "claims.json"
        claims_file.write_text(json.dumps(claims))
        pin = pin_prefix(args)
        if not pin:
            print("no pinned rows: one CPU, or no taskset (util-linux)")
        names = [n for n in SERVERS if n in args.only and not (n.endswith("-pinned") and not pin)
                 and (SERVERS[n][2] != "base" or args.baseline_python)]
        for run in range(1, args.repeat + 1):
            for name in names:  # the servers alternate within each run: an A/B under the same load
                label, noop, server_kind, sync, pinned = SERVERS[name]
                prefix = pin if pinned else []
                run_root = root / f"{name}-{run}"
                if noop:
                    sock = root / "noop.sock"
                    proc = started([*prefix, sys.executable, __file__, "--role", "noop", "--socket", str(sock),
                                    "--grpc-server", server_kind])
                else:
                    sock = run_root / "plugins" / DRIVER / "dra.sock"
                    python = args.baseline_python if server_kind == "base" else sys.executable
                    kind_flag = [] if server_kind == "base" else ["--grpc-server", server_kind]
                    proc = started([*prefix, python, "-m", "drakit.fake_driver.cli", "driver", "serve",
                                    "--driver", DRIVER, "--node", NODE, "--plugin-dir", str(run_root / "plugins"),
                                    "--registry-dir", str(run_root / "registry"),
                                    "--cdi-dir", str(cdi_root / f"{name}-{run}" / "cdi"),
                                    "--claims", str(claims_file), "--no-health", *kind_flag,
                                    *(["--sync-journal"] if sync else [])])
                args.server_pid = proc.pid
                try:
                    levels = args.prepared if not noop and run == 1 else []
                    if caller is not None:
                        result = run_go_client(caller, sock, args, levels)
                    else:
                        result = run_client(sock, args, levels)
                        first = per_run + most + 1
                        for callers in (c for c in args.callers if c > 1):
                            entry = concurrent_cycles(sock, first, args, callers)
                            result["errors"] += entry.pop("errors")
                            result[f"cycle x{callers}"] = entry
                finally:
                    stop(proc)
                if result["errors"]:
                    print(f"  {label}: {result['errors']} per-claim errors (figures not trusted)")
                for key, entry in sorted(result.items(), key=row_order):
                    if key.startswith("cycle") or key.endswith("a call"):
                        rows.append(Row(name, label, run, key, entry))
                    elif key.startswith("new claim"):
                        scales.setdefault(label, {})[key] = entry
        if "thread" in args.only:
            result = in_thread_client(root / "thread", claims, args)
            rows.append(Row("thread", "plugin in the caller's thread (earlier placement)", 1, "cycle", result["cycle"]))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if cdi_root != root:
            shutil.rmtree(cdi_root, ignore_errors=True)
    report(rows, scales, args.repeat)
    print(f"after: {uptime()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="cycles per row")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--probe", type=int, default=200, help="new claims timed at each --prepared level")
    parser.add_argument("--callers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 8])
    parser.add_argument("--prepared", type=lambda s: [int(x) for x in s.split(",") if x], default=[0, 500, 5000])
    parser.add_argument("--only", type=lambda s: s.split(","),
                        default=["noop", "noop-grpcio", "serve", "serve-grpcio", "base", "sync", "serve-pinned",
                                 "serve-grpcio-pinned", "base-pinned"],
                        help=f"rows, comma-separated, of: {', '.join(SERVERS)}, thread")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of every row, the servers alternating within each run (the new-claim levels "
                             "in the first run only)")
    parser.add_argument("--baseline-python", default=None, metavar="PYTHON",
                        help="a Python whose drakit is the code to compare with (a venv with an earlier commit "
                             "installed): adds the rows base and base-pinned, run alternating with the others")
    parser.add_argument("--grpc-server", choices=("loop", "grpcio"), default="loop", help=argparse.SUPPRESS)
    parser.add_argument("--pin-cpu", type=int, default=None,
                        help="the CPU of the -pinned rows (default: the last one)")
    parser.add_argument("--cdi-on", choices=("tmpfs", "disk"), default="tmpfs")
    parser.add_argument("--caller", choices=("auto", "go", "python"), default="auto",
                        help="who calls the server: dracaller (Go) when built (auto), or Python processes")
    parser.add_argument("--role", choices=("parent", "client", "worker", "noop"), default="parent",
                        help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    roles = {"parent": parent_main, "client": client_main, "worker": worker_main, "noop": noop_main}
    return roles[args.role](args)


if __name__ == "__main__":
    raise SystemExit(main())
