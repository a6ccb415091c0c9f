"""Negative amounts in what a case applies (issue 25: ``cpu: -5`` was accepted in silence).

A negative amount in a pod's resources is refused by the API server, so it is a load error of
the case naming the file, the line and the field (rows ``pod-*`` of the corpus in ``inputs.py``;
the words are upstream's, checked in tests/differential/test_pod_quantities.py). A negative
*capacity request* in a claim is admitted upstream; its allocation then fails with upstream's
"capacity value is negative", which is what the run shows, in one line, while the valid case
beside it passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .inputs import POD_USING_C, VALID

NEGATIVE_REQUEST = VALID.replace("hostile/valid", "hostile/negative-capacity-request").replace(
    'exactly: {deviceClassName: "${class.gpu}"}', 'exactly: {deviceClassName: "${class.gpu}", capacity: {requests: {memory: -5}}}'
).replace("  - expect:\n      - notAllocated: {claim: c}\n", """\
  - apply:
""" + POD_USING_C + """\
  - expect:
      - podScheduled: {pod: p, node: node-a}
""")
NEGATIVE_CPU = VALID.replace("hostile/valid", "hostile/negative-cpu") + """\
  - apply:
      - apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec: {containers: [{name: m, image: x, resources: {requests: {cpu: -5}}}]}
"""


def test_negative_amounts_in_a_run(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "valid.case.yaml").write_text(VALID)
    (cases / "request.case.yaml").write_text(NEGATIVE_REQUEST)
    (cases / "cpu.case.yaml").write_text(NEGATIVE_CPU)
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(cases), "--out", str(tmp_path / "out"),
                          "--plain", "-n", "0"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "NO_COLOR": "1", "HOME": str(tmp_path)})
    text = res.stdout + res.stderr
    assert "Traceback" not in text and "drakit bug" not in text, text[-3000:]
    assert res.returncode == 2, text[-3000:]  # a file did not load
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    by = {c["id"]: c for c in results["cases"]}
    assert by["hostile/valid"]["status"] == "passed"
    assert by["hostile/negative-capacity-request"]["status"] == "failed"
    assert "capacity value is negative" in by["hostile/negative-capacity-request"]["failure"]["summary"]
    load = [c for c in results["cases"] if c["backend"] == "-"]
    assert [c["failure"]["summary"] for c in load] == [
        'cpu.case.yaml:19: steps[2].apply[0].spec.containers[0].resources.requests.cpu: Invalid value: "-5": '
        "must be greater than or equal to 0"]
    assert results["verdict"]["result"] == "fail"
