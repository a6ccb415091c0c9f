"""SIGINT and SIGTERM stop ``drakit run`` with an honest verdict: the finished cases, verdict
incomplete with the cases not run, exit 130/143, no traceback (reference backend; the cluster
runs are tests/clusters/test_interrupts.py)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from drakit.conformance.interrupt import Interrupts
from tests.interrupting import EXIT, after_lines, run_and_signal


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("workers", ["0", "2"])
def test_signal_mid_run_is_incomplete(tmp_path: Path, sig: int, workers: str) -> None:
    got = run_and_signal(["-v", "-n", workers], tmp_path, sig, after_lines(10))
    assert got.returncode == EXIT[sig], got.explain()
    assert "Traceback" not in got.stdout + got.stderr, got.explain()
    assert got.results is not None, got.explain()
    assert got.results["verdict"]["result"] == "incomplete", got.explain()
    reason = got.reason("interrupted")
    assert reason is not None and reason["signal"] == signal.Signals(sig).name and reason["phase"] == "cases"
    finished = got.results["summary"]["total"]
    assert finished >= 10 and reason["count"] > 0
    assert reason["count"] == len(reason["cases"])
    assert {(c["id"], c["backend"]) for c in reason["cases"]}.isdisjoint(
        {(c["id"], c["backend"]) for c in got.results["cases"]})
    assert f"{finished} of {finished + reason['count']} cases finished" in reason["message"]
    assert "interrupted by" in got.stdout  # the summary says so too
    assert (tmp_path / "out" / "report.html").read_text().count("not run") >= 1
    assert (tmp_path / "out" / "junit.xml").exists()
    assert got.leftovers == [] and got.survivors == [], (got.leftovers, got.survivors)


def test_a_first_signal_in_a_shield_is_recorded_and_the_block_finishes() -> None:
    state = Interrupts()
    state.enter("cases")
    with state.shield():
        state._handle(signal.SIGTERM, None)  # recorded, not raised
        finished = True
    assert finished and state.signal == "SIGTERM" and state.phase == "cases" and state.exit_code() == 143
    state._handle(signal.SIGINT, None)  # a later signal is ignored: the first one counts
    assert state.signal == "SIGTERM"


def test_a_first_signal_outside_a_shield_raises_once() -> None:
    state = Interrupts()
    with pytest.raises(KeyboardInterrupt):
        state._handle(signal.SIGINT, None)
    state._handle(signal.SIGINT, None)  # cleaning up: no second KeyboardInterrupt
    assert state.exit_code() == 130 and state.phase == "start-up"
    state.reset()
    state.enter("teardown")
    state._handle(signal.SIGTERM, None)  # teardown is never interrupted
    assert state.phase == "teardown"


def test_the_interrupt_raised_inside_a_finalizer_prints_no_traceback(capfd: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen in CI: Ctrl-C landed while the garbage collector ran execnet's ``Channel.__del__``;
    Python printed 'Exception ignored in ... KeyboardInterrupt' with a traceback. The signal is
    recorded, so the finalizer's lost KeyboardInterrupt is dropped quietly; anything else still
    reaches the previous hook."""
    import sys

    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # as after pytest's own session: Python's
    state = Interrupts()
    state.install(announce=False)
    try:
        state.signal, state.phase = "SIGINT", "cases"

        class Dropping:
            def __del__(self) -> None:
                raise KeyboardInterrupt("SIGINT")

        class Failing:
            def __del__(self) -> None:
                raise ValueError("a real bug in a finalizer")

        Dropping()
        Failing()
        err = capfd.readouterr().err
        assert "KeyboardInterrupt" not in err
        assert "a real bug in a finalizer" in err
    finally:
        state.uninstall()
    assert sys.unraisablehook is not state._quiet_unraisable
