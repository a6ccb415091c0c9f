"""A selector's CEL runtime error is in the failed case's summary (issue 25: ``1/0`` and a
missing attribute domain showed only "claim c is not allocated" and "actual: {}")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .inputs import POD_USING_C, VALID

CASE = VALID.replace("hostile/valid", "hostile/cel-NAME").replace(
    'exactly: {deviceClassName: "${class.gpu}"}', 'exactly: {deviceClassName: "${class.gpu}", selectors: [{cel: {expression: "EXPR"}}]}'
).replace("  - expect:\n      - notAllocated: {claim: c}\n", """\
  - apply:
""" + POD_USING_C + """\
  - expect:
      - allocated: {claim: c, count: 1}
""")
ERRORS = {  # name -> (expression, what the summary must say)
    "division": ("1/0 == 1", "selector #0 failed with a CEL runtime error: division by zero: 1/0 == 1"),
    "no-domain": ("device.attributes['nosuch.example.com'].model == 'x'",
                  "CEL runtime error: no such key: model: device.attributes['nosuch.example.com'].model == 'x' "
                  "(missing attribute: nosuch.example.com/model)"),
}


def test_a_cel_runtime_error_is_in_the_summary(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "valid.case.yaml").write_text(VALID)
    for name, (expr, _) in ERRORS.items():
        (cases / f"{name}.case.yaml").write_text(CASE.replace("NAME", name).replace("EXPR", expr))
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(cases), "--out", str(tmp_path / "out"),
                          "--plain", "-n", "0"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "NO_COLOR": "1", "HOME": str(tmp_path)})
    assert res.returncode == 1, res.stdout[-3000:]
    by = {c["id"]: c for c in json.loads((tmp_path / "out" / "results.json").read_text())["cases"]}
    assert by["hostile/valid"]["status"] == "passed"
    for name, (_, said) in ERRORS.items():
        case = by[f"hostile/cel-{name}"]
        assert case["status"] == "failed" and case["failure"]["summary"].startswith("claim c is not allocated: claim ")
        assert said in case["failure"]["summary"], case["failure"]["summary"]
        assert said in res.stdout  # the console's failures list
