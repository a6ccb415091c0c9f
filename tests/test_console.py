"""The console summary of ``drakit run``: the verdict's rule only with ``-v``; a message is never
cut before its explanation (its end); a diff of two scalars carries no YAML end marker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from drakit.conformance.cases.runner import _diff
from drakit.reports import load_results, shorten_middle
from drakit.reports.text import render_summary

FIXTURES = Path(__file__).parent / "fixtures" / "results"
TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial" / "select-by-attribute.case.yaml"


def test_the_rule_is_printed_only_when_asked_for() -> None:
    results = load_results(FIXTURES / "mixed.json")
    rule = f"rule: {results['verdict']['rule']}"
    assert rule not in render_summary(results, color=False)
    assert rule not in render_summary(results, color=False, matrix=False)
    assert rule in render_summary(results, color=False, rule=True)


def test_a_long_message_keeps_its_end() -> None:
    text = "where: " + "x" * 2000 + " expecting {'[', IDENTIFIER}"
    short = shorten_middle(text, 500)
    assert short.startswith("where: ") and short.endswith("expecting {'[', IDENTIFIER}")
    assert "characters left out, all in results.json" in short and len(short) < 600
    assert shorten_middle("short", 500) == "short"


def test_a_scalar_diff_has_no_yaml_end_marker() -> None:
    diff = _diff(2, ["gpu0"])
    assert diff is not None and "..." not in diff.splitlines()
    assert diff.splitlines()[-2:] == ["-2", "+- gpu0"]


def test_quiet_run_shows_a_cel_syntax_error_with_what_it_expected(tmp_path: Path) -> None:
    bad = TUTORIAL.read_text().replace('${cel.gpu.model} == "no-such-model"', "${cel.gpu.model} == )")
    assert bad != TUTORIAL.read_text()
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "bad.case.yaml").write_text(bad)
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "cases", "--out", "out", "-q"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 2, res.stdout + res.stderr  # a case file that did not load
    line = next(line for line in res.stdout.splitlines() if "Syntax error" in line)
    assert line.rstrip().endswith("IDENTIFIER}"), line  # the explanation, whole
    assert "rule:" not in res.stdout
    verbose = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "cases", "--out", "out", "-v"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert "\nrule: pass when" in verbose.stdout
