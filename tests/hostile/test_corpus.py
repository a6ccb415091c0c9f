"""Hostile and broken input (issue 15): every input of the corpus gets its exit code and its one
clear line, no traceback, under a 1 GiB address-space limit; the valid case beside the bad files
still runs and is reported.

The corpus goes through drakit once per test session (two shared processes, see
``corpus.py``); with pytest-xdist the first worker to need it runs it and the others read its
outcome. Each row of the table is then one test.
"""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import re
from pathlib import Path

import pytest

from . import corpus, inputs

TRACEBACK = "Traceback (most recent call last)"


def _shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's temporary folder, the same for every xdist worker."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> corpus.Outcome:
    shared = _shared(tmp_path_factory)
    root = shared / "hostile-corpus"
    with open(shared / "hostile-corpus.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "hostile-corpus.pickle"
        if not done.exists():
            done.write_bytes(pickle.dumps(corpus.run_corpus(root)))
        return pickle.loads(done.read_bytes())


def _root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _shared(tmp_path_factory) / "hostile-corpus"


def _text(result: dict) -> str:
    return result["out"] + result["err"]


@pytest.mark.parametrize("entry", inputs.CASE_FILES, ids=lambda e: e.name)
def test_case_file(entry: inputs.CaseFile, outcome: corpus.Outcome, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = _root(tmp_path_factory)
    result = outcome.lint[entry.name]
    text = _text(result)
    assert TRACEBACK not in text
    file = str(corpus.case_path(root, entry))
    want = entry.line.replace("{file}", re.escape(file)).replace("{dir}", re.escape(str(root / "cases")))
    lines = [line for line in text.splitlines() if re.search(want, line)]
    assert len(lines) == 1, f"expected one line like {want!r} in:\n{text[:3000]}"
    assert result["code"] == entry.code, text[:3000]
    if entry.errors is not None:
        assert f"{entry.errors} errors" in text.splitlines()[-1], text[-500:]
    if not entry.in_run or entry.with_valid and entry.name == "duplicate-id-across-files":
        return
    # the same line in the shared run's results, for the file as that run names it
    shown = {c["file"]: c for c in (outcome.results or {}).get("cases", []) if c["backend"] == "-"}
    name = corpus.case_path(root, entry).name
    assert name in shown, f"{name} is not reported as a load error of the shared run"
    run_want = entry.line.replace("{file}", re.escape(name)).replace("{dir}/", "")
    failure = shown[name]["failure"]
    assert re.search(run_want, failure["summary"] + "\n" + failure["detail"]), failure["summary"]


def test_the_duplicate_across_files_is_an_error_of_the_second_file_in_the_run(outcome: corpus.Outcome) -> None:
    cases = {(c["id"], c["backend"]): c for c in outcome.results["cases"]}
    entry = cases[("duplicate-id-across-files.case.yaml", "-")]
    assert entry["failure"]["summary"] == ("a-valid.case.yaml:1 and duplicate-id-across-files.case.yaml:1: "
                                           "id 'hostile/valid' defined twice")


@pytest.mark.parametrize("entry", inputs.COMMANDS, ids=lambda e: e.name)
def test_command(entry: inputs.Command, outcome: corpus.Outcome, tmp_path_factory: pytest.TempPathFactory) -> None:
    result = outcome.commands[entry.name]
    text = _text(result)
    assert TRACEBACK not in text and "this is a drakit bug" not in text, text[:3000]
    d = str(corpus.command_dir(_root(tmp_path_factory), entry))
    want = entry.line.replace("{d}", re.escape(d))
    assert re.search(want, text), f"expected a line like {want!r} in:\n{text[:3000]}"
    assert result["code"] == entry.code, text[:3000]


def test_the_valid_case_runs_beside_every_bad_file(outcome: corpus.Outcome) -> None:
    run = outcome.run
    text = _text(run)
    assert TRACEBACK not in text and "this is a drakit bug" not in text, text[-3000:]
    assert run["code"] == 2  # files did not load; the rest ran and was reported
    results = outcome.results
    assert results is not None, "the shared run wrote no results.json"
    valid = [c for c in results["cases"] if c["id"] == "hostile/valid"]
    assert [c["status"] for c in valid] == ["passed"]
    errors = {c["file"] for c in results["cases"] if c["backend"] == "-"}
    expected = {corpus.case_path(Path("."), e).name for e in inputs.CASE_FILES if e.in_run}
    assert errors == expected
    assert results["verdict"]["result"] == "fail"
    assert json.dumps(results).count("hostile/valid") >= 1


def test_memory_stays_bounded(outcome: corpus.Outcome) -> None:
    """Both processes ran to the end under the 1 GiB address-space limit (a MemoryError would
    have been a drakit-bug line, caught above); their peak RSS is what they report."""
    assert 0 < outcome.peak_rss["batch"] < corpus.LIMIT_BYTES >> 10
    assert 0 < outcome.peak_rss["run"] < corpus.LIMIT_BYTES >> 10


def test_one_lint_of_the_whole_folder_reports_every_file(outcome: corpus.Outcome) -> None:
    text = _text(outcome.lint_all)
    assert TRACEBACK not in text
    assert outcome.lint_all["code"] == 2
    for entry in inputs.CASE_FILES:
        assert f"{entry.name}.case.yaml:" in text or f"{entry.name}.case.yaml: " in text, entry.name
    assert text.splitlines()[-1].startswith(f"{len(inputs.CASE_FILES) + 1} files, ")
