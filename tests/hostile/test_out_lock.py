"""Two runs into one ``--out`` (issue 25: they overwrote each other's files, both saying
'wrote'): the second says the folder is in use, in one line, exit 2, and touches nothing."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

from .inputs import VALID


def _run(tmp_path: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(tmp_path / "v.case.yaml"),
                           "--out", str(out), "--plain"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1"})


def test_a_second_run_into_the_same_out_is_refused(tmp_path: Path) -> None:
    (tmp_path / "v.case.yaml").write_text(VALID)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("the first run's")
    with open(out / ".drakit-run.lock", "a+") as held:  # what a running drakit run holds
        held.write("4242")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX)
        refused = _run(tmp_path, out)
    assert refused.returncode == 2
    assert refused.stderr == (f"drakit run: --out {out} is in use by another drakit run (pid 4242): wait for it or "
                              f"give another --out\n"), refused.stderr
    assert (out / "results.json").read_text() == "the first run's"
    done = _run(tmp_path, out)  # the lock went with its holder
    assert done.returncode == 0, done.stderr
