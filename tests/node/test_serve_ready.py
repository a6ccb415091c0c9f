"""``drakit driver serve`` as a DaemonSet's container: ready (``--ready-file``, the readiness
probe's ``test -f``) only once the kubelet has registered it, and idle rather than crashing on a
node whose hardware has no device of its driver (``--idle-without-devices``)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc

from drakit.fake_driver._gen import pluginregistration_v1_pb2 as rpb, pluginregistration_v1_pb2_grpc as rpg

from .conftest import GPU, NODE

ROOT = Path(__file__).resolve().parents[2]


def _serve(tmp: Path, driver: str, hardware: str, *extra: str) -> subprocess.Popen[bytes]:
    (tmp / "claims.json").write_text("[]")
    cmd = [sys.executable, "-m", "drakit.fake_driver.cli", "driver", "serve", "--driver", driver, "--node", NODE,
           "--hardware", hardware, "--plugin-dir", str(tmp / "plugins"), "--registry-dir", str(tmp / "registry"),
           "--cdi-dir", str(tmp / "cdi"), "--claims", str(tmp / "claims.json"), "--ready-file", str(tmp / "ready"),
           *extra]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "GRPC_VERBOSITY": "ERROR"})


def _first_line(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    return proc.stdout.readline().decode() if ready else ""


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(20)


def test_ready_only_once_the_kubelet_registered_it(short_tmp: Path) -> None:
    proc = _serve(short_tmp, GPU, "server-8gpu")
    try:
        assert "serving" in _first_line(proc)
        time.sleep(1.5)  # the main loop looks twice a second
        assert not (short_tmp / "ready").exists()
        with grpc.insecure_channel(f"unix://{short_tmp / 'registry' / f'{GPU}-reg.sock'}") as channel:
            stub = rpg.RegistrationStub(channel)
            stub.GetInfo(rpb.InfoRequest(), timeout=5)
            stub.NotifyRegistrationStatus(rpb.RegistrationStatus(plugin_registered=True), timeout=5)
        deadline = time.monotonic() + 10
        while not (short_tmp / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (short_tmp / "ready").exists()
    finally:
        code = _stop(proc)
    assert code == 0 and not (short_tmp / "ready").exists()


def test_idle_on_a_node_without_the_drivers_hardware(short_tmp: Path) -> None:
    nic = "nic.swift.example.com"  # acme-partitionable has acme GPUs only
    proc = _serve(short_tmp, nic, "acme-partitionable", "--idle-without-devices")
    try:
        line = _first_line(proc)
        assert f"{nic} has no devices on node {NODE}" in line and "idle until stopped" in line, line
        deadline = time.monotonic() + 10
        while not (short_tmp / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (short_tmp / "ready").exists() and proc.poll() is None
        assert not (short_tmp / "registry").exists()  # nothing registered with the kubelet
    finally:
        code = _stop(proc)
    assert code == 0 and not (short_tmp / "ready").exists()
    proc = _serve(short_tmp, nic, "acme-partitionable")  # without the flag: one line, exit 2
    assert proc.wait(30) == 2
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert err.count("\n") == 1 and f"driver {nic} has no devices on node {NODE}" in err
