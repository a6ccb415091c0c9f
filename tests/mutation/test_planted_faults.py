"""The mutation suite over the reference allocator: each planted scheduler bug
(tests/mutation/faults.py) fails exactly the cases it names, as failures whose summary
names the cause, and nothing else; with no fault planted the same cases pass. All runs share one
process (python -m tests.mutation.plant_run), the corpus on the reference backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .faults import AGENT_FAULTS, DRIVER_FAULTS, FAULTS

ROOT = Path(__file__).resolve().parents[2]


def test_each_planted_allocator_fault_fails_exactly_its_behaviour(tmp_path: Path) -> None:
    names = ["none", *(f.name for f in (*FAULTS, *DRIVER_FAULTS, *AGENT_FAULTS))]
    done = subprocess.run([sys.executable, "-m", "tests.mutation.plant_run", str(tmp_path), ",".join(names)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stderr)
    clean = json.loads((tmp_path / "none" / "results.json").read_text())
    assert clean["verdict"]["result"] == "pass", [c["id"] for c in clean["cases"] if c["status"] != "passed"]
    wrong = {}
    for fault in (*FAULTS, *DRIVER_FAULTS, *AGENT_FAULTS):
        results = json.loads((tmp_path / fault.name / "results.json").read_text())
        cases = {c["id"]: c for c in results["cases"]}
        assert fault.breaks <= set(cases), f"{fault.name}: its run lacks {sorted(fault.breaks - set(cases))}"
        failed = {cid for cid, c in cases.items() if c["status"] != "passed"}
        if failed != fault.breaks or results["verdict"]["result"] != "fail":
            wrong[fault.name] = sorted(failed ^ fault.breaks)
            continue
        for cid in fault.breaks:  # a failure, never a skip or an error, saying what went wrong
            case = cases[cid]
            summary = (case.get("failure") or {}).get("summary") or ""
            assert case["status"] == "failed" and any(w in summary for w in fault.says), (fault.name, cid, case["status"], summary)
    assert not wrong, f"planted faults whose failures differ from their behaviour (cases named): {wrong}"
