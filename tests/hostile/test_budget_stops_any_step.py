"""A case's time budget stops any step, whatever it is doing (issue 32).

Before: the budget was one alarm. A step that spun in Python inside a CEL function (a
backtracking regex was the example) had the alarm turned into a CEL evaluation error by the
engine, spun on, and only SIGTERM stopped it. ``timeBudget: 0s`` was accepted and not enforced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from drakit.conformance.cases.loader import load_text
from drakit.fake_driver.profile import load_profile

from .inputs import VALID

SPINNING = """\
id: hostile/spinning
title: a step that spins in a CEL function past its budget
features: [core]
timeBudget: 2s
hardware:
  nodes:
    - {name: node-a, shape: small-1gpu}
steps:
  - advance: 1s
  - apply:
      - apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: c}
        spec:
          devices:
            requests:
              - name: gpu
                exactly:
                  deviceClassName: "${class.gpu}"
                  selectors: [{cel: {expression: "device.driver.find('x') == ''"}}]
      - apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          resourceClaims: [{name: gpu, resourceClaimName: c}]
          containers: [{name: main, image: registry.k8s.io/pause:3.10, resources: {claims: [{name: gpu}]}}]
"""

# find() spins in Python, and swallows what it can, as the CEL engine and broad excepts do
RUN = """\
import sys
import drakit.conformance.cel._functions as functions

def spin(text, pattern):
    for _ in range(3):
        try:
            while True:
                pass
        except BaseException:
            pass
    while True:
        pass

functions._find = spin
from drakit.conformance.cli import main
raise SystemExit(main(["run", sys.argv[1], "--out", sys.argv[2], "--plain"]))
"""


def test_a_step_spinning_in_python_ends_at_its_budget(tmp_path: Path) -> None:
    case = tmp_path / "spinning.case.yaml"
    case.write_text(SPINNING)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", RUN, str(case), str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={**os.environ, "NO_COLOR": "1", "HOME": str(tmp_path)})
    took = time.monotonic() - t0
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (result,) = json.loads((tmp_path / "out" / "results.json").read_text())["cases"]
    assert result["status"] == "error", result["failure"]["summary"]
    assert result["failure"]["summary"] == (
        "timeout: timeBudget exceeded in step 2 (line 10): the case ran over its time budget of 2 s (the case's "
        "timeBudget); raise it with 'timeBudget:' in the case or 'drakit run --case-timeout'")
    assert [s["status"] for s in result["steps"]] == ["passed", "error"]
    assert 2 <= result["steps"][1]["durationSeconds"] < 6, result["steps"]
    assert took < 60, f"{took:.0f} s (the machine is shared: generous)"


def test_a_time_budget_of_nothing_is_a_load_error() -> None:
    for zero in ("0s", "0ms", "0m", "00h"):
        loaded = load_text(VALID.replace("features: [core]\n", f"features: [core]\ntimeBudget: {zero}\n"),
                           "x.case.yaml", load_profile())
        assert [str(e) for e in loaded.errors] == [
            f"x.case.yaml:4: timeBudget: {zero} is not a time budget: it must be more than 0 (e.g. 90s, 5m; at most 24h)"]
    assert load_text(VALID.replace("features: [core]\n", "features: [core]\ntimeBudget: 1ms\n"), "x.case.yaml",
                     load_profile()).cases[0].time_budget == 0.001
