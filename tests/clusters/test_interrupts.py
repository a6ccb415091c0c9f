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


def test_a_sigkilled_run_leaves_folders_that_cluster_down_removes(tmp_path: Path) -> None:
    """SIGKILL cannot be handled: the run's cluster folder and fake-node folders stay (the
    processes die with the run); `drakit cluster down` (as the next `drakit run`) removes them."""
    import os
    import subprocess
    import sys
    import tempfile
    reason = skip_reason()
    if reason:
        skip_or_fail(reason)
    tdir = Path(tempfile.mkdtemp(prefix="dk"))
    try:
        got = _kill_and_look(tdir, tmp_path)
        assert any(p.startswith("drakit-local-") for p in got), got
        env = {**os.environ, "TMPDIR": str(tdir)}
        down = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "cluster", "down",
                               "--run-dir", str(tmp_path / "no-cluster-here")],
                              env=env, capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "that killed drakit runs left" in down.stdout, down.stdout
        assert sorted(p.name for p in tdir.iterdir() if not p.name.startswith("pytest-of-")) == []
    finally:
        import shutil
        shutil.rmtree(tdir, ignore_errors=True)


def _kill_and_look(tdir: Path, tmp_path: Path) -> list[str]:
    import os
    import subprocess
    import sys
    import time
    env = {**os.environ, "TMPDIR": str(tdir)}
    proc = subprocess.Popen([sys.executable, "-m", "drakit.conformance.cli", "run", *CASES, "--backend", "cluster",
                             "--cluster", "local", "-v", "-n", "0", "--plain", "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("PASSED "):
            break
    proc.kill()
    proc.wait()
    time.sleep(1.0)  # the cluster's processes die with the run
    return sorted(p.name for p in tdir.iterdir())
