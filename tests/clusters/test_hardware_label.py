"""``drakit driver serve --hardware-label``: a DaemonSet gives every node the same arguments, so a
node's label picks the fake hardware it emulates (the driver suite wants two shapes). Served
against the local control plane with the admin's kubeconfig; the published slices tell which
shape was taken."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drakit.clusters.local.launcher import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
ACME = "gpu.acme.example.com"
LABEL = "drakit.dev/fake-hardware"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dkhw", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _serve(local_cluster: LocalCluster, tmp: Path, node: str) -> tuple[int, str, list[dict[str, Any]]]:
    out = tmp / f"{node}.json"
    cmd = [sys.executable, "-m", "drakit.fake_driver.cli", "driver", "serve", "--driver", ACME, "--node", node,
           "--plugin-dir", str(tmp / node / "plugins"), "--registry-dir", str(tmp / node / "registry"),
           "--cdi-dir", str(tmp / node / "cdi"), "--kubeconfig", str(local_cluster.kubeconfig),
           "--hardware", "server-8gpu", "--hardware-label", LABEL, "--slices-out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
    assert proc.stdout is not None and proc.stderr is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline().decode() if ready else ""
        if "serving" not in line:
            proc.wait(30)
            return proc.returncode, proc.stderr.read().decode(), []
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        return 0, line, json.loads(out.read_text())
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)


def test_the_node_label_picks_the_shape(local_cluster: LocalCluster, short_tmp: Path) -> None:
    from kubernetes import client as k8s, config as kconfig

    api = k8s.CoreV1Api(kconfig.new_client_from_config(str(local_cluster.kubeconfig)))
    nodes = {"hwlabel-a": {LABEL: "acme-partitionable"}, "hwlabel-b": {}, "hwlabel-c": {LABEL: "no-such-shape"}}
    for name, labels in nodes.items():
        api.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name=name, labels=labels)))
    try:
        code, _, labelled = _serve(local_cluster, short_tmp, "hwlabel-a")
        assert code == 0 and labelled
        code, _, plain = _serve(local_cluster, short_tmp, "hwlabel-b")
        assert code == 0 and plain

        def devices(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [d for s in slices for d in s["spec"].get("devices", [])]

        assert any("consumesCounters" in d for d in devices(labelled))  # acme-partitionable's partitions
        assert devices(plain) and not any("consumesCounters" in d for d in devices(plain))  # server-8gpu's whole GPUs
        code, err, _ = _serve(local_cluster, short_tmp, "hwlabel-c")
        assert code == 2 and err.count("\n") == 1 and "no-such-shape" in err, err
    finally:
        for name in nodes:
            api.delete_node(name)
