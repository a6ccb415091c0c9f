"""Tests for the progress display of ``drakit run`` (``conformance.progress.ProgressReporter``),
fed with hand-made pytest reports, as the xdist controller receives them."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from drakit.conformance.progress import ProgressReporter, progress_mode


def report(n: int, status: str, when: str = "call", *, cid: str | None = None,
           longrepr: Any = None, summary: str | None = None) -> pytest.TestReport:
    cid = cid or f"core/case-{n:02d}"
    outcome = {"passed": "passed", "skipped": "skipped"}.get(status, "failed")
    data: dict[str, Any] = {"id": cid, "backend": "reference",
                            "outcome": status if status in ("failed", "error") else None}
    if summary:
        data["failure"] = {"summary": summary}
    if status == "skipped":
        longrepr = longrepr or ("x.case.yaml", 1, "Skipped: [inventory] needs 2 GPUs")
    elif status != "passed":
        longrepr = longrepr or f"{summary or 'boom'}\n  at x.case.yaml:9\n  > 9 | - allocated: {{count: 2}}"
    return pytest.TestReport(f"x.case.yaml::{cid}[reference]", ("x.case.yaml", n, cid), {}, outcome, longrepr,
                             when, user_properties=[("drakit", json.dumps(data))], duration=0.25)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.05
        return self.now


def feed(progress: ProgressReporter, reports: list[pytest.TestReport], total: int | None) -> None:
    progress.total = total
    for rep in reports:
        if rep.when == "call":
            setup = pytest.TestReport(rep.nodeid, rep.location, {}, "passed", None, "setup",
                                      user_properties=rep.user_properties)
            progress.pytest_runtest_logreport(setup)  # a passed setup decides nothing
        progress.pytest_runtest_logreport(rep)
    progress.pytest_sessionfinish(None)  # type: ignore[arg-type]


def test_tty_mode_rewrites_one_line_and_prints_failures_above_it() -> None:
    out = io.StringIO()
    progress = ProgressReporter(out, mode="tty", color=True, clock=Clock())
    feed(progress, [report(1, "passed"), report(2, "failed", summary="claim x: expected 2, got 1"),
                    report(3, "skipped", when="setup")], total=3)
    text = out.getvalue()
    assert text.startswith("\r[1/3]  1 passed  0 failed  0 error  0 skipped\x1b[K")
    assert "\r\x1b[K\x1b[1;31mFAILED\x1b[0m core/case-02 [reference]: claim x: expected 2, got 1\n" in text
    assert "\r[3/3]  1 passed  \x1b[1;31m1 failed\x1b[0m  0 error  1 skipped\x1b[K\n" in text
    assert "failure details (1 of 1):" in text and "  > 9 | - allocated: {count: 2}" in text
    assert progress.counts() == {"passed": 1, "failed": 1, "error": 0, "skipped": 1}


def test_tty_mode_redraws_at_most_ten_times_a_second() -> None:
    out = io.StringIO()
    progress = ProgressReporter(out, mode="tty", clock=lambda: 5.0)  # the clock never moves
    feed(progress, [report(i, "passed") for i in range(50)], total=50)
    assert out.getvalue().count("\r[") == 2  # the first draw and the final one


def test_plain_mode_prints_a_line_per_tenth_and_no_control_codes() -> None:
    out = io.StringIO()
    progress = ProgressReporter(out, mode="plain", color=True)  # colour is never used in plain mode
    reports = [report(i, "passed") for i in range(25)]
    reports[7] = report(7, "error", summary="harness broke")
    feed(progress, reports, total=25)
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    progress_lines = [line for line in lines if line.startswith("[")]
    assert len(progress_lines) == 10
    assert progress_lines[0] == "[ 3/25]  3 passed  0 failed  0 error  0 skipped"
    assert progress_lines[-1] == "[25/25]  24 passed  0 failed  1 error  0 skipped"
    assert "ERROR core/case-07 [reference]: harness broke" in lines
    assert lines.index("ERROR core/case-07 [reference]: harness broke") < lines.index(progress_lines[3])


def test_plain_mode_without_a_known_total() -> None:
    out = io.StringIO()
    feed(ProgressReporter(out, mode="plain"), [report(i, "passed") for i in range(23)], total=None)
    assert [line for line in out.getvalue().splitlines()] == [
        "[10]  10 passed  0 failed  0 error  0 skipped",
        "[20]  20 passed  0 failed  0 error  0 skipped",
        "[23]  23 passed  0 failed  0 error  0 skipped"]


def test_quiet_mode_prints_nothing_while_running() -> None:
    out = io.StringIO()
    feed(ProgressReporter(out, mode="quiet"), [report(1, "passed"), report(2, "failed")], total=2)
    assert out.getvalue() == ""


def test_verbose_prints_a_line_per_case() -> None:
    out = io.StringIO()
    feed(ProgressReporter(out, mode="plain", verbose=True), [report(1, "passed"), report(2, "skipped", "setup")], 2)
    lines = out.getvalue().splitlines()
    assert "PASSED core/case-01 [reference] (0.25 s)" in lines
    assert "SKIPPED core/case-02 [reference] (0.25 s)" in lines


def test_teardown_error_turns_a_pass_into_an_error_without_counting_twice() -> None:
    out = io.StringIO()
    progress = ProgressReporter(out, mode="plain")
    feed(progress, [report(1, "passed"), report(1, "error", when="teardown", longrepr="teardown broke")], total=1)
    assert progress.counts() == {"passed": 0, "failed": 0, "error": 1, "skipped": 0}
    assert out.getvalue().splitlines()[:3] == [
        "[1/1]  1 passed  0 failed  0 error  0 skipped",
        "ERROR core/case-01 [reference]: teardown broke",
        "[1/1]  0 passed  0 failed  1 error  0 skipped"]  # the final line tells the truth


def test_case_text_cannot_drive_the_terminal_and_xdist_headers_are_dropped() -> None:
    out = io.StringIO()
    evil = report(1, "failed", cid="core/\x1b[2Jevil", summary="bell\x07",
                  longrepr="[gw1] linux -- Python 3.11.7 /usr/bin/python\nbell\x07\n  at x:1")
    feed(ProgressReporter(out, mode="tty", clock=Clock()), [evil], total=1)
    text = out.getvalue()
    assert "\x1b[2J" not in text and "\x07" not in text
    assert "FAILED core/\\x1b[2Jevil [reference]: bell\\x07" in text
    assert "[gw1]" not in text


def test_collection_errors_are_printed_even_when_quiet() -> None:
    out = io.StringIO()
    progress = ProgressReporter(out, mode="quiet")
    progress.pytest_collectreport(pytest.CollectReport("suite/x.py", "failed", "ImportError: no module y", []))
    assert out.getvalue() == "ERROR collecting suite/x.py: ImportError: no module y\n"


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("quiet,plain,tty,no_color,expected", [
    (False, False, True, False, ("tty", True)),
    (False, False, True, True, ("tty", False)),
    (False, True, True, False, ("plain", False)),
    (False, False, False, False, ("plain", False)),
    (True, False, True, False, ("quiet", True)),
    (True, True, False, False, ("quiet", False)),
])
def test_progress_mode(monkeypatch: pytest.MonkeyPatch, quiet: bool, plain: bool, tty: bool, no_color: bool,
                       expected: tuple[str, bool]) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    assert progress_mode(quiet=quiet, plain=plain, stream=Stream(tty)) == expected
