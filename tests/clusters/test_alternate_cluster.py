"""Gate-off cases on drakit's own local cluster run on an alternate local cluster started with the
case's gates (real 1.37.2 control planes, kwok nodes); on a cluster drakit did not start they are
still skipped with the reason."""

from __future__ import annotations

import json
import os
import subprocess
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any


from drakit.clusters.local.launcher import LocalCluster
from drakit.clusters.local.pytest_fixture import skip_or_fail, skip_reason

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"
CASE_FILE = SUITES / "list-attributes" / "list-attributes.case.yaml"
GATE_OFF = "list-attributes/gate-off-list-values-rejected"
GATE_ON = "list-attributes/cel-sees-lists-as-lists"
SELECT = "gate-off-list-values-rejected or cel-sees-lists-as-lists"


def _run(out: Path, *args: str, tmpdir: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = {**os.environ, "TMPDIR": str(tmpdir)}  # the clusters' run dirs and the fake nodes' sockets
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(CASE_FILE), "--backend", "cluster",
                          "-k", SELECT, "-n", "0", "--out", str(out), "--plain", *args],
                         capture_output=True, text=True, timeout=600, env=env)
    assert (out / "results.json").exists(), res.stdout[-3000:] + res.stderr[-3000:]
    return res, json.loads((out / "results.json").read_text())


def test_gate_off_case_passes_on_an_alternate_local_cluster(tmp_path: Path) -> None:
    reason = skip_reason()
    if reason:
        skip_or_fail(reason)
    tmpdir = Path(tempfile.mkdtemp(prefix="dk-"))  # short: Unix socket paths have a length limit
    try:
        res, results = _run(tmp_path / "out", "--cluster", "local", tmpdir=tmpdir)
        left = [p.name for p in tmpdir.iterdir() if p.name.startswith("drakit-local-")]
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    assert not left, f"local clusters left behind: {left}"  # both clusters went down
    status = {c["id"]: c["status"] for c in results["cases"]}
    assert status == {GATE_OFF: "passed", GATE_ON: "passed"}, res.stdout[-3000:]
    env = results["environment"]["backends"]["cluster"]
    assert env["provider"] == "local"
    assert env["featureGates"]["DRAListTypeAttributes"] is True  # the main cluster keeps the gate on
    assert env["alternateLocalClusters"] == [{"featureGates": {"DRAListTypeAttributes": False}, "cases": 1}]
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]


def test_gate_off_case_is_still_skipped_on_a_cluster_drakit_did_not_start(
        local_cluster: LocalCluster, tmp_path: Path) -> None:
    res, results = _run(tmp_path / "out", "--kubeconfig", str(local_cluster.kubeconfig),
                        tmpdir=Path(tempfile.gettempdir()))
    by_id = {c["id"]: c for c in results["cases"]}
    assert by_id[GATE_OFF]["status"] == "skipped", res.stdout[-3000:]
    skip = by_id[GATE_OFF]["skip"]
    assert skip["category"] == "feature-disabled"
    assert "DRAListTypeAttributes=false" in skip["message"] and "alternate" not in skip["message"]
    assert "alternateLocalClusters" not in results["environment"]["backends"]["cluster"]


def test_gates_depending_on_a_gate_turned_off_are_turned_off_too() -> None:
    from drakit.conformance.backends.localtarget import with_dependents_off
    from drakit.conformance.features import DEFAULT_GATES

    every_gate_on = {g: True for g in DEFAULT_GATES}
    off = with_dependents_off({"DRAPartitionableDevices": False}, every_gate_on, {"DRAPartitionableDevices": False})
    assert off == {"DRAPartitionableDevices": False, "DRADeviceCompatibilityGroups": False,
                   "DRAPartitionableDevicesType": False}
    # the case's own gates are kept even when they depend on a gate that is off
    kept = with_dependents_off({"DRAConsumableCapacity": False, "DRAFractionalCapacityRange": True}, every_gate_on,
                               {"DRAConsumableCapacity": False, "DRAFractionalCapacityRange": True})
    assert kept == {"DRAConsumableCapacity": False, "DRAFractionalCapacityRange": True}
