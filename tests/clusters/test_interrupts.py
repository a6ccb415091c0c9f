"""SIGINT and SIGTERM of a run on drakit's local cluster, at start-up, mid-cases and during the
cluster's teardown: exit 130/143, results.json with verdict incomplete naming the signal, the
phase and the cases not run, no traceback, and nothing left: no run folder, no node folder or
socket, no process."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from drakit.clusters.local.pytest_fixture import skip_or_fail, skip_reason
from tests.interrupting import EXIT, after_lines, run_and_signal

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"
CASES = [str(SUITES / "core" / "template-claims.case.yaml"), str(SUITES / "device-status" / "device-status.case.yaml")]


def _starting(out: str, err: str, tdir: Path) -> bool:
    return any(tdir.glob("drakit-local-*/pki"))  # the local cluster is being started


def _tearing_down(out: str, err: str, tdir: Path) -> bool:
    return "drakit: stopping the local clusters" in err


MOMENTS = {"start-up": _starting, "cases": after_lines(2), "teardown": _tearing_down}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", list(MOMENTS))
def test_signal_on_a_local_cluster_run(tmp_path: Path, sig: int, phase: str) -> None:
    reason = skip_reason()
    if reason:
        skip_or_fail(reason)
    got = run_and_signal([*CASES, "--backend", "cluster", "--cluster", "local", "-v", "-n", "0"], tmp_path, sig,
                         MOMENTS[phase])
    assert got.returncode == EXIT[sig], got.explain()
    assert "Traceback" not in got.stdout + got.stderr, got.explain()
    assert got.results is not None and got.results["verdict"]["result"] == "incomplete", got.explain()
    interrupted = got.reason("interrupted")
    assert interrupted is not None, got.explain()
    assert (interrupted["signal"], interrupted["phase"]) == (signal.Signals(sig).name, phase), got.explain()
    if phase == "teardown":
        assert interrupted["count"] == 0 and got.results["summary"]["passed"] == got.results["summary"]["total"]
    else:
        assert interrupted["count"] > 0
    assert got.leftovers == [], got.leftovers
    assert got.survivors == [], got.survivors
