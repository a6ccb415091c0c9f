"""schedulerFeatureGates (issue 33's scheduler blind spot): a case about a scheduler whose gates
differ from its API server's runs on drakit's local cluster on an alternate cluster whose
kube-scheduler alone gets them (real 1.37.2 binaries), and so does the corpus's case on devices
with their own node selection; on a cluster drakit did not start it is skipped, saying why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from drakit.clusters.local.pytest_fixture import skip_or_fail, skip_reason
from drakit.conformance.backends.localtarget import Alternate, gates_unmet

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"
GATE_CASE = "binding-conditions/scheduler-gate-off-skips-such-devices"
NODE_CASE = "partitionable-devices/per-device-node-selection"


def _alternate() -> Alternate:
    alt = Alternate.__new__(Alternate)
    alt.requested, alt.main_gates, alt.flagged = {}, {"DRADeviceBindingConditions": True}, frozenset()
    alt._accepted, alt.current, alt.bin_dir = {}, None, Path("/nonexistent")
    alt.settable = lambda gate, value, together=None: True  # type: ignore[method-assign]
    return alt


def test_a_case_with_scheduler_gates_needs_an_alternate_with_that_scheduler() -> None:
    case = SimpleNamespace(feature_gates={}, scheduler_gates={"DRADeviceBindingConditions": False})
    assert _alternate().gates_for(case) == ({}, {"DRADeviceBindingConditions": False})
    same = SimpleNamespace(feature_gates={}, scheduler_gates={"DRADeviceBindingConditions": True})
    assert _alternate().gates_for(same) is None  # the main cluster's scheduler has it already
    main = SimpleNamespace(gates={"DRADeviceBindingConditions": True}, discovery=SimpleNamespace(unknown=(), sources={}))
    category, message = gates_unmet(case, main, False, None) or ("", "")  # type: ignore[arg-type]
    assert category == "feature-disabled" and "kube-scheduler with DRADeviceBindingConditions=false" in message
    started = SimpleNamespace(**vars(main), scheduler={"DRADeviceBindingConditions": False})
    assert gates_unmet(case, started, True, None) is None  # type: ignore[arg-type]


def test_scheduler_gate_and_per_device_node_selection_cases_pass_on_real_1_37(tmp_path: Path) -> None:
    reason = skip_reason()
    if reason:
        skip_or_fail(reason)
    tmpdir = Path(tempfile.mkdtemp(prefix="dk-"))  # short: Unix socket paths have a length limit
    try:
        res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "--backend", "cluster", "--cluster",
                              "local", "-n", "0", "--plain", "--out", str(tmp_path / "out"),
                              str(SUITES / "binding-conditions"), str(SUITES / "partitionable-devices"),
                              "-k", "scheduler-gate-off-skips-such-devices or per-device-node-selection"],
                             capture_output=True, text=True, timeout=600, env={**os.environ, "TMPDIR": str(tmpdir)})
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    results: dict[str, Any] = json.loads((tmp_path / "out" / "results.json").read_text())
    status = {c["id"]: (c["status"], (c.get("failure") or {}).get("summary")) for c in results["cases"]}
    assert status == {GATE_CASE: ("passed", None), NODE_CASE: ("passed", None)}, res.stdout[-3000:]
    env = results["environment"]["backends"]["cluster"]
    assert env["featureGates"]["DRADeviceBindingConditions"] is True  # the API server keeps the fields
    assert env["alternateLocalClusters"] == [{"featureGates": {}, "schedulerFeatureGates": {"DRADeviceBindingConditions": False},
                                              "cases": 1}]
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
