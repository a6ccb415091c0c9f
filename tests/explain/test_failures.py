"""A case that fails because a pod stays unschedulable carries the explanation: in the failure's
detail (the console, JUnit and the report show it) and in its diagnostics (results.json)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from drakit.conformance.cli import main

CASE = """\
id: explain/stays-pending
title: A pod asks for nine GPUs of an eight-GPU node (fails on purpose)
features: [core]
hardware:
  nodes:
    - {name: node-a, shape: server-8gpu}
steps:
  - apply:
      - apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: nine}
        spec:
          devices:
            requests:
              - {name: gpus, exactly: {deviceClassName: "${class.gpu}", count: 9}}
      - apiVersion: v1
        kind: Pod
        metadata: {name: greedy}
        spec:
          resourceClaims: [{name: gpus, resourceClaimName: nine}]
          containers: [{name: main, image: registry.k8s.io/pause:3.10, resources: {claims: [{name: gpus}]}}]
  - expect:
      - podRunning: {pod: greedy}
"""


def test_a_pod_left_pending_is_explained_in_results_junit_and_report(tmp_path: Path) -> None:
    (tmp_path / "pending.case.yaml").write_text(CASE)
    out = tmp_path / "out"
    rc = main(["run", str(tmp_path / "pending.case.yaml"), "--out", str(out), "-q"])
    assert rc == 1
    results = json.loads((out / "results.json").read_text())
    (case,) = [c for c in results["cases"] if c["id"] == "explain/stays-pending"]
    failure = case["failure"]
    (e,) = failure["diagnostics"]["explain"]
    assert e["verdict"] == "unschedulable" and e["subject"].endswith("/greedy")
    entry = e["nodes"][0]["claims"][0]["requests"][0]["entries"][0]
    assert (entry["need"], entry["pass"]) == (9, 4)  # server-8gpu: four Acme GPUs, four Nova
    assert e["summary"]["closestNode"] == "node-a" and not e["summary"]["singleChange"]
    assert "why pods wait for a node (drakit explain):" in failure["detail"]
    assert e["summary"]["blockers"] == ["only 4 device(s) of class gpu.acme.example.com on the node, 9 needed"]
    assert "request gpus needs 9 device(s), 4 of 4 of class gpu.acme.example.com pass" in failure["detail"]
    junit = ET.parse(out / "junit.xml").getroot()
    texts = [f.text or "" for f in junit.iter("failure")]
    assert any("request gpus needs 9 device(s), 4 of 4 of class gpu.acme.example.com pass" in t for t in texts)
    assert "request gpus needs 9 device(s), 4 of 4 of class gpu.acme.example.com pass" in (out / "report.html").read_text()
