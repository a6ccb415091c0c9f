"""A NUL character in a device's attribute and in a selector, through a whole run (issue 25: the
engine cut the attribute at the NUL, so ``'a\\x00b'`` matched a device whose model is ``'a'``).
The selector picks the device whose model is the whole string; a string function whose result
would hold the NUL is the case's error saying so (the divergence left, see conformance/cel/_nul.py),
never a wrong device; the valid case beside them passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .inputs import POD_USING_C, VALID

CASE = """\
id: hostile/nul-SELECTOR_NAME
title: a NUL in an attribute and in a selector
features: [core]
hardware:
  nodes:
    - {name: n1}
  classes: false
steps:
  - apply:
      - apiVersion: resource.k8s.io/v1
        kind: DeviceClass
        metadata: {name: nul.drakit.example}
        spec: {selectors: [{cel: {expression: "device.driver == 'nul.drakit.example'"}}]}
      - apiVersion: resource.k8s.io/v1
        kind: ResourceSlice
        metadata: {name: nul-n1}
        spec:
          driver: nul.drakit.example
          nodeName: n1
          pool: {name: n1, generation: 1, resourceSliceCount: 1}
          devices:
            - {name: cut, attributes: {model: {string: "a"}}}
            - {name: whole, attributes: {model: {string: "a\\0b"}}}
      - apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: c}
        spec: {devices: {requests: [{name: r, exactly: {deviceClassName: nul.drakit.example, selectors: [{cel: {expression: "SELECTOR"}}]}}]}}
""" + POD_USING_C + """\
  - expect:
      - allocated: {claim: c, count: 1, devices: [whole], node: n1}
"""
MODEL = "device.attributes['nul.drakit.example'].model"
SELECTORS = {
    "equal": f"{MODEL} == 'a\\\\x00b'",
    "size": f"{MODEL}.size() == 3",
    "lower": f"{MODEL}.lowerAscii() == 'a\\\\x00b'",
}


def test_a_nul_in_an_attribute_in_a_run(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "valid.case.yaml").write_text(VALID)
    for name, selector in SELECTORS.items():
        (cases / f"{name}.case.yaml").write_text(CASE.replace("SELECTOR_NAME", name).replace("SELECTOR", selector))
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(cases), "--out", str(tmp_path / "out"),
                          "--plain", "-n", "0"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "NO_COLOR": "1", "HOME": str(tmp_path)})
    text = res.stdout + res.stderr
    assert "Traceback" not in text and "drakit bug" not in text, text[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    by = {c["id"]: c for c in results["cases"]}
    assert {k: v["status"] for k, v in by.items()} == {"hostile/valid": "passed", "hostile/nul-equal": "passed",
                                                       "hostile/nul-size": "passed", "hostile/nul-lower": "failed"}, text[-3000:]
    lower = by["hostile/nul-lower"]["failure"]
    assert "lowerAscii: the result holds a NUL character (\\x00)" in lower["summary"] + lower["detail"], lower
    assert res.returncode == 1
