"""-n 2 against one cluster reached through its kubeconfig: the two workers' cases run side by
side with their cluster-scoped objects under each worker's prefix (gw0-, gw1-), cluster-wide
cases alone and with their plain names, and every case passes as it does at -n 0."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"
CASE_FILES = [SUITES / "core" / "template-claims.case.yaml", SUITES / "core" / "constraints.case.yaml",
              SUITES / "admin-access" / "admin-access.case.yaml",
              SUITES / "device-taints" / "scheduling.case.yaml",
              SUITES / "core" / "pools.case.yaml"]  # two cluster-wide cases (all-nodes and node-selector slices)


def _watch_nodes(kubeconfig: Path, seen: list[tuple[float, frozenset[str]]], stop: threading.Event) -> None:
    from kubernetes import client, config
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    while not stop.is_set():
        try:
            seen.append((time.monotonic(), frozenset(n.metadata.name for n in api.list_node().items)))
        except Exception:  # noqa: BLE001 - a missed sample is only a missed sample
            pass
        stop.wait(0.2)


def test_two_workers_share_one_cluster(local_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    seen: list[tuple[float, frozenset[str]]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_nodes, args=(local_cluster.kubeconfig, seen, stop), daemon=True)
    watcher.start()
    try:
        res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", *map(str, CASE_FILES), "--backend",
                              "cluster", "--kubeconfig", str(local_cluster.kubeconfig), "--out", str(out), "-n", "2",
                              "--plain"], capture_output=True, text=True, timeout=1500)
    finally:
        stop.set()
        watcher.join(10)
    results = json.loads((out / "results.json").read_text())
    statuses = {c["id"]: c["status"] for c in results["cases"]}
    bad = {cid: st for cid, st in statuses.items() if st not in ("passed", "skipped")}
    assert not bad and sum(st == "passed" for st in statuses.values()) >= 20, (bad, res.stdout[-3000:], res.stderr[-2000:])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    for c in results["cases"]:  # the case's own names in whatever the results hold
        assert "gw0-" not in json.dumps(c) and "gw1-" not in json.dumps(c), c["id"]
    names = set().union(*(s for _, s in seen))
    assert any(n.startswith("gw0-") for n in names) and any(n.startswith("gw1-") for n in names), sorted(names)
    together = [s for _, s in seen if any(n.startswith("gw0-") for n in s) and any(n.startswith("gw1-") for n in s)]
    assert together, "the two workers' cases never ran side by side"
    # the cluster-wide cases (node n1 of core/pools' all-nodes and node-selector slice cases) run
    # with plain names and alone; the file's other cases have n1 under a worker's prefix
    plain = [s for _, s in seen if "n1" in s]
    assert plain and not any(n.startswith("gw") for s in plain for n in s), plain[:3]
