"""Tests for ``reports.compare`` and ``drakit report --compare OLD NEW``.

OLD is ``tests/fixtures/results/mixed.json``; NEW is a copy changed on purpose in each way the
comparison names (newly failing, newly passing, newly skipped, other change, added, removed,
still failing), plus environment changes.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from drakit.reports import compute_summary, compute_verdict, load_results, validate_results
from drakit.reports.compare import (
    CHANGE_GROUPS,
    compare_results,
    gate_exit_code,
    render_compare_html,
    render_compare_text,
)

FIXTURES = Path(__file__).parent / "fixtures" / "results"
HOSTILE = "<script>alert(1)</script>"


def _find(results: dict[str, Any], cid: str, backend: str) -> dict[str, Any]:
    return next(c for c in results["cases"] if c["id"] == cid and c["backend"] == backend)


def _seal(results: dict[str, Any]) -> dict[str, Any]:
    results["summary"] = compute_summary(results["cases"])
    results["verdict"] = compute_verdict(results["cases"])
    validate_results(results)
    return results


@pytest.fixture
def old() -> dict[str, Any]:
    return load_results(FIXTURES / "mixed.json")


@pytest.fixture
def new(old: dict[str, Any]) -> dict[str, Any]:
    r = copy.deepcopy(old)
    r["run"]["id"] = "r-20261130-new"
    r["run"]["kitVersion"] = "0.2.0"
    r["environment"]["backends"]["cluster"]["kubernetesVersion"] = "v1.37.3"
    r["environment"]["backends"]["cluster"]["featureGates"]["DRADerivedAttributes"] = True
    r["environment"]["drivers"].append("gpu.nova.example.com")
    # passed -> failed (newly failing)
    c = _find(r, "core/claim-from-template", "cluster")
    c.update(status="failed", failure={"summary": f"claim {HOSTILE} not allocated", "detail": ""})
    # failed -> passed (newly passing)
    _find(r, "core/match-attribute-constraint", "cluster").update(status="passed", failure=None)
    # passed -> skipped (newly skipped)
    _find(r, "prioritized-list/falls-back-to-second-alternative", "cluster").update(
        status="skipped", skip={"category": "inventory", "message": "needs 2 GPUs, found 1"})
    # passed -> xfail (other change, not a new failure)
    _find(r, "consumable-capacity/shared-capacity", "reference").update(
        status="xfail", failure={"summary": "known: drakit#7", "detail": ""})
    # error -> failed (still failing)
    _find(r, "device-taints/noexecute-evicts-pod", "cluster")["status"] = "failed"
    # removed, and added (one passing, one failing)
    r["cases"] = [c for c in r["cases"] if (c["id"], c["backend"]) != ("numa-node/same-numa-constraint", "reference")]
    added = copy.deepcopy(_find(r, "core/claim-from-template", "reference"))
    added["id"] = "core/new-passing-case"
    failing = copy.deepcopy(added)
    failing.update(id="core/new-failing-case", status="error", failure={"summary": "harness broke", "detail": ""})
    r["cases"] += [added, failing]
    return _seal(r)


def _keys(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["id"], e["backend"]) for e in entries]


def test_compare_sorts_every_change(old: dict[str, Any], new: dict[str, Any]) -> None:
    c = compare_results(old, new)
    assert _keys(c["newlyFailing"]) == [("core/claim-from-template", "cluster"), ("core/new-failing-case", "reference")]
    assert [e["old"] for e in c["newlyFailing"]] == ["passed", None]
    assert _keys(c["newlyPassing"]) == [("core/match-attribute-constraint", "cluster")]
    assert _keys(c["newlySkipped"]) == [("prioritized-list/falls-back-to-second-alternative", "cluster")]
    assert _keys(c["otherChanges"]) == [("consumable-capacity/shared-capacity", "reference")]
    assert ("device-taints/noexecute-evicts-pod", "cluster") in _keys(c["stillFailing"])
    assert _keys(c["added"]) == [("core/new-failing-case", "reference"), ("core/new-passing-case", "reference")]
    assert _keys(c["removed"]) == [("numa-node/same-numa-constraint", "reference")]
    # every case of NEW is counted once (an added failing case is in both added and newlyFailing)
    once = sum(len(c[k]) for k in ("newlyPassing", "newlySkipped", "otherChanges", "stillFailing", "added"))
    once += sum(e["old"] is not None for e in c["newlyFailing"])
    assert c["unchanged"] + once == len(new["cases"])
    assert c["gate"]["result"] == "fail" and gate_exit_code(c) == 1
    fields = {e["field"]: (e["old"], e["new"]) for e in c["environment"]}
    assert fields["run.kitVersion"] == ("0.1.0", "0.2.0")
    assert fields["backend cluster: kubernetesVersion"] == ("v1.37.2", "v1.37.3")
    assert fields["backend cluster: gate DRADerivedAttributes"] == ("False", "True")
    assert "gpu.nova.example.com" in fields["environment.drivers"][1]
    rows = {(f["feature"], f["backend"]): (f["old"], f["new"]) for f in c["features"]}
    assert ("core", "cluster") not in rows  # failed before, failed now (another case)
    assert rows[("core", "reference")] == ("passed", "error")  # the added case errors
    assert rows[("consumable-capacity", "reference")] == ("passed", "xfail")


def test_identical_runs_pass_the_gate(old: dict[str, Any]) -> None:
    c = compare_results(old, copy.deepcopy(old))
    assert c["gate"]["result"] == "pass" and gate_exit_code(c) == 0
    assert not any(c[k] for k, _ in CHANGE_GROUPS if k != "stillFailing")
    assert c["unchanged"] + len(c["stillFailing"]) == len(old["cases"])
    assert c["features"] == [] and c["environment"] == []
    assert "gate: PASS (0 newly failing)" in render_compare_text(c)


def test_compare_is_pure_and_ignores_case_order(old: dict[str, Any], new: dict[str, Any]) -> None:
    before_old, before_new = json.dumps(old), json.dumps(new)
    first = compare_results(old, new)
    shuffled = copy.deepcopy(new)
    shuffled["cases"].reverse()
    assert compare_results(old, shuffled) == first
    assert json.dumps(old) == before_old and json.dumps(new) == before_new


def test_compare_text(old: dict[str, Any], new: dict[str, Any]) -> None:
    text = render_compare_text(compare_results(old, new))
    lines = text.splitlines()
    assert lines[0] == "drakit compare: OLD r-20261129-ab12cd (fail, 30 cases) -> NEW r-20261130-new (fail, 31 cases)"
    assert "newly failing: 2" in lines
    assert f"  failed core/claim-from-template [cluster] (was passed): claim {HOSTILE} not allocated" in lines
    assert "  error core/new-failing-case [reference] (new case): harness broke" in lines
    assert any(line.startswith("  passed core/match-attribute-constraint [cluster] (was failed); before: ")
               for line in lines)
    assert "removed cases: 1" in lines
    assert lines[-1] == "gate: FAIL (2 newly failing, 2 required passing cases gone)"
    assert "\x1b" not in text
    assert "\x1b[1;31mFAIL\x1b[0m" in render_compare_text(compare_results(old, new), color=True)


def test_compare_html_is_self_contained_and_escaped(old: dict[str, Any], new: dict[str, Any]) -> None:
    new["cases"][0]["id"] = f"core/{HOSTILE}\x1b[2J"
    html = render_compare_html(compare_results(old, _seal(new)))
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\x1b" not in html and "\\x1b[2J" in html
    assert "<link" not in html and "<img" not in html and " src=" not in html
    assert "{{" not in html and "{%" not in html
    for key, heading in CHANGE_GROUPS:
        assert f'<section id="{key}">' in html and heading in html
    assert 'data-group="newlyFailing"' in html and "Gate: FAIL: 2 newly failing" in html


def _drakit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_compare_gates_on_new_failures(tmp_path: Path, old: dict[str, Any], new: dict[str, Any]) -> None:
    (tmp_path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    (tmp_path / "new.json").write_text(json.dumps(new), encoding="utf-8")
    res = _drakit("report", "--compare", str(tmp_path / "old.json"), str(tmp_path / "new.json"),
                  "--out", str(tmp_path / "cmp"), cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "gate: FAIL (2 newly failing, 2 required passing cases gone)" in res.stdout
    assert f"wrote {tmp_path / 'cmp' / 'compare.html'}" in res.stdout
    assert "Gate: FAIL" in (tmp_path / "cmp" / "compare.html").read_text(encoding="utf-8")
    # a run against itself: nothing newly fails, exit 0, compare.html next to NEW
    res = _drakit("report", "--compare", str(tmp_path / "old.json"), str(tmp_path / "old.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "gate: PASS (0 newly failing)" in res.stdout
    assert (tmp_path / "compare.html").exists()


def test_cli_compare_usage_errors(tmp_path: Path, old: dict[str, Any]) -> None:
    (tmp_path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    res = _drakit("report", "--compare", str(tmp_path / "old.json"), str(tmp_path / "bad.json"), cwd=tmp_path)
    assert res.returncode == 2 and "bad.json: $.schemaVersion" in res.stderr
    res = _drakit("report", "--compare", str(tmp_path / "old.json"), str(tmp_path / "missing.json"), cwd=tmp_path)
    assert res.returncode == 2 and "missing.json: cannot read" in res.stderr
    res = _drakit("report", str(tmp_path / "old.json"), "--compare", "a", "b", cwd=tmp_path)
    assert res.returncode == 2 and "give RESULTS.json" in res.stderr
    res = _drakit("report", cwd=tmp_path)
    assert res.returncode == 2


def test_required_cases_that_vanished_fail_the_gate_unless_allowed(tmp_path: Path, old: dict[str, Any]) -> None:
    """A required case that passed before and is missing (or skipped) now fails the gate and is
    named, although nothing newly fails; --allow-removed accepts it; `| head` is no traceback."""
    subset = copy.deepcopy(old)
    kept = [c for c in subset["cases"] if not (c["profile"] == "required" and c["status"] == "passed")][:3]
    gone = [(c["id"], c["backend"]) for c in old["cases"] if c["profile"] == "required" and c["status"] == "passed"]
    skipped = copy.deepcopy(next(c for c in old["cases"] if c["profile"] == "required" and c["status"] == "passed"))
    skipped.update(status="skipped", skip={"category": "feature-disabled", "message": "gate off"}, failure=None)
    subset["cases"] = kept + [skipped]
    subset = _seal(subset)
    c = compare_results(old, subset)
    assert c["newlyFailing"] == [] and sorted(_keys(c["vanished"])) == sorted(gone)
    assert c["gate"]["result"] == "fail" and gate_exit_code(c) == 1
    assert gate_exit_code(compare_results(old, subset, allow_removed=True)) == 0
    (tmp_path / "full.json").write_text(json.dumps(old), encoding="utf-8")
    (tmp_path / "subset.json").write_text(json.dumps(subset), encoding="utf-8")
    res = _drakit("report", "--compare", str(tmp_path / "full.json"), str(tmp_path / "subset.json"), cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"required cases that passed, now missing or skipped: {len(gone)}" in res.stdout
    for cid, backend in gone[:5]:
        assert f"{cid} [{backend}]" in res.stdout
    assert f"  skipped {skipped['id']} [{skipped['backend']}] (was passed): [feature-disabled] gate off" in res.stdout
    assert "Required cases that passed, now missing or skipped" in (tmp_path / "compare.html").read_text(encoding="utf-8")
    res = _drakit("report", "--compare", str(tmp_path / "full.json"), str(tmp_path / "subset.json"), "--allow-removed",
                  cwd=tmp_path)
    assert res.returncode == 0 and "(allowed by --allow-removed)" in res.stdout, res.stdout
    # a reader that is gone before drakit writes (``| head`` that has read enough): no BrokenPipeError
    piped = subprocess.run(f"{sys.executable} -m drakit.conformance.cli report --compare full.json subset.json | true; "
                           f"exit ${{PIPESTATUS[0]}}", shell=True, executable="/bin/bash", cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 1 and piped.stderr == "", piped.stderr
