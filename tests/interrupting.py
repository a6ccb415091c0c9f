"""Run ``drakit run`` as a user would, send it a signal at a chosen moment, and collect what it
left: exit code, output, results.json, and anything remaining in its private temp dir or alive
under it."""

from __future__ import annotations

import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Interrupted:
    returncode: int
    stdout: str
    stderr: str
    results: dict[str, Any] | None
    leftovers: list[str] = field(default_factory=list)  # paths still in the run's temp dir
    survivors: list[str] = field(default_factory=list)  # processes whose command line names that dir

    def reason(self, code: str) -> dict[str, Any] | None:
        reasons = (self.results or {}).get("verdict", {}).get("reasons") or []
        return next((r for r in reasons if r["code"] == code), None)

    def explain(self) -> str:
        return f"\nrc={self.returncode}\nstdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}"


def _processes_naming(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state not in ("Z", "X"):
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def run_and_signal(args: list[str], tmp: Path, sig: int, when: Callable[..., bool],
                   timeout: float = 600.0, *, with_pid: bool = False, group: bool = False) -> Interrupted:
    """Start ``drakit run <args> --out tmp/out`` with TMPDIR a fresh short folder (Unix socket
    paths must stay short); send *sig* once ``when(stdout so far, stderr so far, that folder)``
    holds (``when(..., pid)`` with *with_pid*); wait for the exit, then see what is left in that
    folder (and remove it). *group*: the signal goes to drakit's whole process group (its
    workers too), as Ctrl-C in a terminal sends it."""
    tdir = Path(tempfile.mkdtemp(prefix="dk"))
    try:
        return _run(args, tmp / "out", tdir, sig, when, timeout, with_pid, group)
    finally:
        shutil.rmtree(tdir, ignore_errors=True)


def _run(args: list[str], out: Path, tdir: Path, sig: int, when: Callable[..., bool],
         timeout: float, with_pid: bool, group: bool = False) -> Interrupted:
    env = {**os.environ, "TMPDIR": str(tdir), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "drakit.conformance.cli", "run", *args, "--out", str(out), "--plain"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=group)
    chunks: dict[str, list[str]] = {"out": [], "err": []}

    def pump(stream: Any, key: str) -> None:
        for line in stream:
            chunks[key].append(line)

    pumps = [threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True),
             threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True)]
    for t in pumps:
        t.start()
    deadline = time.monotonic() + timeout
    sent = False
    while proc.poll() is None and time.monotonic() < deadline:
        if not sent and when("".join(chunks["out"]), "".join(chunks["err"]), tdir, *([proc.pid] if with_pid else [])):
            if group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
            sent = True
        time.sleep(0.005 if with_pid and not sent else 0.05)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for t in pumps:
        t.join(10)
    assert sent, "the moment to send the signal never came:\n" + "".join(chunks["out"])[-3000:] + "".join(chunks["err"])[-3000:]
    time.sleep(0.5)  # children that die with their parent get a moment
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    # pytest-of-<user>/: pytest-xdist's base temp dir for its workers (pytest keeps the last 3)
    leftovers = sorted(str(p.relative_to(tdir)) for p in tdir.rglob("*") if not p.relative_to(tdir).parts[0].startswith("pytest-of-"))
    return Interrupted(proc.returncode, "".join(chunks["out"]), "".join(chunks["err"]), results, leftovers,
                       _processes_naming(str(tdir)))


def after_lines(n: int, marker: str = "PASSED ") -> Callable[[str, str, Path], bool]:
    """The moment *n* cases were reported (``-v`` prints one line per finished case)."""
    return lambda out, err, tdir: out.count(marker) >= n


EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
