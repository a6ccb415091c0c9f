"""A vendor's first hour (issue 35): what lint --vendor says of the driver suite, and what a run
of the driver suite on the reference backend says."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from drakit.conformance.cli import main

ROOT = Path(__file__).resolve().parent.parent
DRIVER_SUITE = ROOT / "conformance" / "suites" / "driver"


def _lines(capsys: pytest.CaptureFixture[str], profile: str) -> dict[str, str]:
    assert main(["lint", "--vendor", str(ROOT / profile), str(DRIVER_SUITE)]) == 0
    out = capsys.readouterr().out
    rows = [ln.split(None, 2) for ln in out.splitlines() if ln.startswith(("  applies", "  skipped"))]
    assert len(rows) == 20, out
    return {cid: f"{verdict} {why}" for verdict, cid, why in rows}


def test_lint_vendor_lists_the_driver_cases_that_apply_and_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _lines(capsys, "examples/vendor-example.yaml")
    assert rows["driver/slices"].startswith("applies the driver contract")
    assert rows["driver/admin-access"] == ("skipped not declared: add admin-access to driverUnderTest.optional "
                                           "if your driver does it")
    assert rows["driver/registration"].startswith("skipped needs drakit's nodes: registration is seen on the nodes")
    assert rows["driver/plugin-restart"].startswith("skipped needs drakit's nodes")
    rows = _lines(capsys, "examples/upstream-test-driver-v2.yaml")
    assert rows["driver/registration"].startswith("applies drakit's local cluster only")
    assert rows["driver/admin-access"].startswith("applies declared under driverUnderTest.optional")
    rows = _lines(capsys, "fake_driver/profile.yaml")
    assert rows["driver/plugin-restart"] == "skipped drakit's fake driver runs inside drakit and cannot be restarted alone"
    assert rows["driver/kubelet-restart"].startswith("applies drakit's local cluster only, on real kubelet nodes")


def test_driver_suite_on_the_reference_backend_says_it_needs_a_cluster(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from drakit.conformance.nomatch import no_cases_line
    args = argparse.Namespace(keyword=None, markexpr=None, backend="reference", vendor=None)
    line = no_cases_line(args, [DRIVER_SUITE])
    assert line.startswith("drakit: the driver suite runs on a cluster only (backends: cluster; this run: reference): ")
    assert f"'drakit run --backend cluster --cluster local {DRIVER_SUITE}'" in line and "\n" not in line
    args.keyword = "x"
    assert no_cases_line(args, [DRIVER_SUITE]) == "drakit: no cases matched -k 'x'"
    args.keyword, args.backend = None, "cluster"  # cases of that backend exist: the plain line
    assert no_cases_line(args, [DRIVER_SUITE]) == "drakit: no cases matched"


def test_failures_recap_keeps_a_long_messages_end() -> None:
    """The closing ``failures:`` list loses a long summary's middle, never its end (where the
    explanation is), as docs/guide/running.md says."""
    import copy
    import json

    from drakit.reports.text import render_summary
    results = json.loads((ROOT / "tests" / "fixtures" / "results" / "mixed.json").read_text())
    results = copy.deepcopy(results)
    case = next(c for c in results["cases"] if c["status"] == "failed")
    case["failure"]["summary"] = "claim gpu: " + "x" * 700 + " THE EXPLANATION AT THE END"
    recap = render_summary(results, color=False).split("\nfailures:\n", 1)[1]
    line = next(ln for ln in recap.splitlines() if case["id"] in ln)
    assert line.endswith("THE EXPLANATION AT THE END") and "characters left out" in line, line


def test_a_claim_made_from_a_template_named_directly_says_how_to_name_it(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys
    case = (ROOT / "docs" / "tutorial" / "from-template.case.yaml").read_text()
    wrong = case.replace("allocated: {claim: {pod: worker-1, claim: gpu}", "allocated: {claim: gpu").replace(
        "id: tutorial/from-template", "id: tutorial/wrong-name")
    assert wrong != case
    (tmp_path / "wrong.case.yaml").write_text(wrong)
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(tmp_path / "wrong.case.yaml"),
                          "--out", str(tmp_path / "out"), "-q"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stdout[-2000:]
    summary = json.loads((tmp_path / "out" / "results.json").read_text())["cases"][0]["failure"]["summary"]
    assert summary == ("claim gpu (gpu) does not exist: pod worker-1's claim 'gpu' is made from ResourceClaimTemplate "
                       "one-gpu under a generated name; name it through the pod: claim: {pod: worker-1, claim: gpu}"), summary
