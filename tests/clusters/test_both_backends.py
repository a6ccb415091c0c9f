"""The same cases on both backends: the reference allocator and the real 1.37.2 control plane
(local cluster from upstream binaries, kwok nodes). Any difference fails the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drakit.clusters.local.pytest_fixture import skip_reason

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"
CASE_FILES = [SUITES / "core" / "template-claims.case.yaml", SUITES / "core" / "constraints.case.yaml",
              SUITES / "prioritized-list" / "alternatives.case.yaml", SUITES / "admin-access" / "admin-access.case.yaml",
              # the pod must go to the node the DRA score prefers (a case that once looked like a
              # divergence: the harness created the pod before the second node was Ready)
              SUITES / "prioritized-list" / "node-score.case.yaml",
              # the tutorial's cases (docs/tutorial/first-case.md says they pass on both)
              *sorted((SUITES.parents[1] / "docs" / "tutorial").glob("*.case.yaml"))]


def test_same_outcome_on_reference_and_local_cluster(tmp_path: Path) -> None:
    reason = skip_reason()
    if reason:
        if os.environ.get("DRAKIT_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"DRAKIT_REQUIRE_CLUSTER=1 but {reason}")
        pytest.skip(reason)
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", *map(str, CASE_FILES), "--backend",
                          "reference,cluster", "--cluster", "local", "--out", str(out), "-n", "0", "--plain"],
                         capture_output=True, text=True, timeout=1200)
    results = json.loads((out / "results.json").read_text())
    by_case: dict[str, dict[str, str]] = {}
    for c in results["cases"]:
        by_case.setdefault(c["id"], {})[c["backend"]] = c["status"]
    assert len(by_case) >= 20, res.stdout[-2000:]
    diverging = {cid: st for cid, st in by_case.items() if len(set(st.values())) != 1 or len(st) != 2}
    assert not diverging, f"backends disagree: {diverging}\n{res.stdout[-3000:]}"
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
