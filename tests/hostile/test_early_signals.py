"""A signal in the first seconds of ``drakit run`` never loses the run (issue 25): from the moment
drakit can catch it, a SIGINT or SIGTERM leaves results.json, junit.xml and report.html with
verdict INCOMPLETE, the interrupted reason counting every selected case (finished or not run),
a line saying where they are, and exit 130/143.

Before: a signal in the first ~2 s left nothing and printed nothing; at 1.5-3 s the 'not run'
count covered only the cases collected so far ('0 of 7'). The moments are measured from when
the process first catches SIGTERM (Python does not by default: that is drakit's own handler),
read from ``/proc/PID/status``."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from drakit.conformance.cases.finder import find_case_files
from drakit.conformance.cases.loader import load_file
from drakit.fake_driver.profile import load_profile
from tests.interrupting import EXIT, run_and_signal

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"


def _selection() -> int:
    """The bundled cases a reference run selects, counted without drakit run."""
    profile = load_profile()
    return sum(1 for f in find_case_files([SUITES]) for c in load_file(f, profile).cases if "reference" in c.backends)


def _catches_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def _moment(delay: float):  # type: ignore[no-untyped-def]
    """When the process has caught SIGTERM for *delay* seconds."""
    since: list[float] = []

    def when(out: str, err: str, tdir: Path, pid: int) -> bool:
        if not since and _catches_sigterm(pid):
            since.append(time.monotonic())
        return bool(since) and time.monotonic() - since[0] >= delay
    return when


MOMENTS = [  # (signal, seconds after drakit's handler is in, workers, to the process group as Ctrl-C)
    (signal.SIGTERM, 0.0, "0", False), (signal.SIGINT, 0.0, "0", False), (signal.SIGINT, 1.0, "0", False),
    (signal.SIGTERM, 2.0, "0", False), (signal.SIGTERM, 1.0, "2", False),
    (signal.SIGINT, 2.0, "4", True),  # the workers get it while they collect
]


@pytest.mark.parametrize(("sig", "delay", "workers", "group"), MOMENTS,
                         ids=[f"{s.name}-{d}s-n{w}{'-group' if g else ''}" for s, d, w, g in MOMENTS])
def test_an_early_signal_still_writes_an_honest_incomplete_run(tmp_path: Path, sig: signal.Signals, delay: float,
                                                              workers: str, group: bool) -> None:
    got = run_and_signal(["-n", workers], tmp_path, sig, _moment(delay), with_pid=True, group=group)
    assert got.returncode == EXIT[sig], got.explain()
    # nor Python's unraisable hook on a KeyboardInterrupt lost in a finalizer (seen in CI on Ctrl-C)
    assert "Traceback" not in got.stdout + got.stderr and "Exception ignored" not in got.stdout + got.stderr, got.explain()
    assert got.results is not None, "no results.json" + got.explain()
    for name in ("junit.xml", "report.html"):
        assert (tmp_path / "out" / name).exists(), name
    assert got.results["verdict"]["result"] == "incomplete", got.explain()
    reason = got.reason("interrupted")
    assert reason is not None and reason["signal"] == sig.name, got.explain()
    finished = got.results["summary"]["total"]
    assert finished + reason["count"] == _selection(), reason["message"]
    assert f"drakit: wrote {tmp_path / 'out' / 'results.json'}" in got.stdout, got.explain()
    assert f"drakit: interrupted by {sig.name}: verdict incomplete" in got.stderr, got.explain()


def test_a_signal_that_ends_the_session_start_still_writes_the_run(tmp_path: Path) -> None:
    """The CI variant of the ``-n4-group`` moment: Ctrl-C killed an xdist worker while xdist set
    its workers up inside pytest's session start, which ended with an EOFError. pytest runs no
    ``pytest_sessionfinish`` for a session that did not start, and the run left no results.json.
    Made certain here by a plugin that signals the run and fails its session start the same way."""
    import os
    import subprocess
    import sys
    (tmp_path / "startfails.py").write_text(
        "import os, signal, time\n"
        "def pytest_sessionstart(session):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.2)\n"
        "    raise EOFError('expected 1 bytes, got 0')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p),
           "PYTEST_PLUGINS": "startfails"}
    out = tmp_path / "out"
    got = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(SUITES / "core"), "--out", str(out)],
                         capture_output=True, text=True, timeout=120, env=env)
    text = got.stdout + got.stderr
    assert got.returncode == EXIT[signal.SIGINT] and "Traceback" not in text, text[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"]["result"] == "incomplete"
    assert [r for r in results["verdict"]["reasons"] if r["code"] == "interrupted" and r["signal"] == "SIGINT"], results["verdict"]
    assert (out / "junit.xml").exists() and (out / "report.html").exists()
    assert "drakit: interrupted by SIGINT: verdict incomplete" in got.stderr, text[-3000:]


def test_ctrl_c_while_a_worker_starts_prints_no_traceback(tmp_path: Path) -> None:
    """Ctrl-C reached an xdist worker whose Python was importing execnet (CI): a KeyboardInterrupt
    traceback on the user's console. Made certain here: a worker's Python start takes a second
    (a ``sitecustomize`` that sleeps, in the workers only), and the whole process group gets
    SIGINT as soon as that Python handles SIGINT. The worker gets it once drakit's handler is in
    there, and the run ends as usual."""
    import os
    import subprocess
    import sys
    (tmp_path / "sitecustomize.py").write_text(
        "import os, time\n"
        "if os.environ.get('DRAKIT_TEST_SLOW_START'):\n"
        "    time.sleep(1.0)\n")
    (tmp_path / "ctrlc_at_spawn.py").write_text(
        "import os, signal, threading, time\n"
        "from pathlib import Path\n"
        "def _starting_child():\n"
        "    for p in Path('/proc').iterdir():\n"
        "        try:\n"
        "            status = (p / 'status').read_text()\n"
        "        except OSError:\n"
        "            continue\n"
        "        f = dict(l.split(':', 1) for l in status.splitlines() if ':' in l)\n"
        "        if f.get('PPid', '').strip() == str(os.getpid()) and int(f['SigCgt'], 16) >> (signal.SIGINT - 1) & 1:\n"
        "            return True\n"
        "    return False\n"
        "def _ctrl_c():\n"
        "    deadline = time.monotonic() + 20\n"
        "    while not _starting_child() and time.monotonic() < deadline:\n"
        "        time.sleep(0.002)\n"
        "    os.killpg(os.getpgrp(), signal.SIGINT)\n"
        "def pytest_xdist_setupnodes(config, specs):\n"
        "    os.environ['DRAKIT_TEST_SLOW_START'] = '1'\n"
        "    threading.Thread(target=_ctrl_c, daemon=True).start()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p),
           "PYTEST_PLUGINS": "ctrlc_at_spawn", "NO_COLOR": "1"}
    out = tmp_path / "out"
    got = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(SUITES / "core"), "-n", "1",
                          "--out", str(out), "--plain"],
                         capture_output=True, text=True, timeout=120, env=env, start_new_session=True)
    text = got.stdout + got.stderr
    assert got.returncode == EXIT[signal.SIGINT], text[-3000:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"]["result"] == "incomplete"
    assert "drakit: interrupted by SIGINT: verdict incomplete" in got.stderr, text[-3000:]
