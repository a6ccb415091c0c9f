"""Build the bad-input corpus on disk and put it through drakit in two shared processes.

- the *batch*: every case file linted alone (``drakit lint FILE``), every command line of
  ``inputs.COMMANDS``, and one ``drakit lint`` of the whole folder, in one interpreter;
- the *run*: one ``drakit run`` of the whole folder, the valid case among the bad files.

Both run under an address-space limit (``RLIMIT_AS``, 1 GiB; glibc's per-thread malloc arenas
are capped so that the limit bounds memory rather than reserved address space), and report
their peak RSS. ``python -m tests.hostile.corpus`` prints the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import inputs

BATCH = Path(__file__).with_name("batch.py")
REPO = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 1 << 30


@dataclass
class Outcome:
    lint: dict[str, dict[str, Any]]  # case file name -> batch result of linting it alone
    commands: dict[str, dict[str, Any]]  # command name -> batch result
    lint_all: dict[str, Any]
    run: dict[str, Any]  # batch result of the shared drakit run
    results: dict[str, Any] | None  # its results.json
    peak_rss: dict[str, int]  # process -> KiB
    seconds: dict[str, float]


def case_path(root: Path, entry: inputs.CaseFile) -> Path:
    return root / "cases" / f"{entry.name}.case.yaml"


def valid_path(root: Path) -> Path:
    return root / "cases" / "a-valid.case.yaml"


def command_dir(root: Path, entry: inputs.Command) -> Path:
    return root / "commands" / entry.name


def _write(path: Path, content: inputs.Content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if callable(content):
        content(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def build(root: Path) -> None:
    (root / "cases").mkdir(parents=True)
    valid_path(root).write_text(inputs.VALID, encoding="utf-8")
    for entry in inputs.CASE_FILES:
        _write(case_path(root, entry), entry.content)
    for command in inputs.COMMANDS:
        folder = command_dir(root, command)
        folder.mkdir(parents=True)
        for name, content in command.files.items():
            _write(folder / name, content)


def argv_of(root: Path, command: inputs.Command) -> list[str]:
    d = str(command_dir(root, command))
    return [a.replace("{d}", d).replace("{valid}", str(valid_path(root))) for a in command.argv]


def lint_argv(root: Path, entry: inputs.CaseFile) -> list[str]:
    return ["lint"] + ([str(valid_path(root))] if entry.with_valid else []) + [str(case_path(root, entry))]


def _batch(argvs: list[list[str]], cwd: Path) -> tuple[list[dict[str, Any]], int, float]:
    """(results, peak RSS in KiB, seconds) of one batch process under the address-space limit."""
    env = {**os.environ, "MALLOC_ARENA_MAX": "2", "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    env.pop("KUBECONFIG", None)
    env["HOME"] = str(cwd)  # no ~/.kube/config of the machine's user

    t0 = time.monotonic()
    # the batch sets its own limit first thing (no Python between fork and exec here: this
    # process may have gRPC threads)
    proc = subprocess.Popen([sys.executable, str(BATCH), "--limit-bytes", str(LIMIT_BYTES)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
    out, err = proc.communicate(json.dumps(argvs), timeout=900)
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        raise AssertionError(f"the batch process failed (exit {proc.returncode}):\n{err[-3000:]}")
    results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    peak = next((r["maxrss_kib"] for r in results if "maxrss_kib" in r), -1)
    return [r for r in results if "argv" in r], peak, seconds


def run_corpus(root: Path) -> Outcome:
    build(root)
    lint_argvs = [lint_argv(root, e) for e in inputs.CASE_FILES]
    command_argvs = [argv_of(root, c) for c in inputs.COMMANDS]
    warm_up = [["lint", str(valid_path(root))]]  # the imports, paid once, not by the first refusal
    batch, batch_rss, batch_s = _batch(warm_up + lint_argvs + command_argvs + [["lint", str(root / "cases")]], root)
    batch = batch[1:]
    lint = {e.name: r for e, r in zip(inputs.CASE_FILES, batch)}
    commands = {c.name: r for c, r in zip(inputs.COMMANDS, batch[len(lint_argvs):])}
    out = root / "run-out"
    (run,), run_rss, run_s = _batch([["run", str(root / "cases"), "--out", str(out), "--plain"]], root)
    results_file = out / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else None
    return Outcome(lint, commands, batch[-1], run, results, {"batch": batch_rss, "run": run_rss},
                   {"batch": batch_s, "run": run_s})


def figures(outcome: Outcome) -> str:
    """The corpus table's counts, as the closing note of issue 15 wants them."""
    every = list(outcome.lint.values()) + list(outcome.commands.values()) + [outcome.run]
    tracebacks = sum("Traceback (most recent call last)" in r["out"] + r["err"] for r in every)
    codes: dict[int, int] = {}
    for r in list(outcome.lint.values()) + list(outcome.commands.values()):
        codes[r["code"]] = codes.get(r["code"], 0) + 1
    every_refusal = list(outcome.lint.items()) + list(outcome.commands.items())
    slowest = max(every_refusal, key=lambda kv: kv[1]["seconds"])
    costliest = max(every_refusal, key=lambda kv: kv[1]["cpu"])
    over = [k for k, v in every_refusal if v["seconds"] > 2]
    valid = [c for c in (outcome.results or {}).get("cases", []) if c["id"] == "hostile/valid"]
    errors = [c for c in (outcome.results or {}).get("cases", []) if c.get("backend") == "-"]
    lines = [
        f"inputs: {len(inputs.CASE_FILES)} case files, {len(inputs.COMMANDS)} command lines "
        f"(gRPC requests: tests/node/test_hostile_grpc.py)",
        f"exit codes: {', '.join(f'{n} x {code}' for code, n in sorted(codes.items()))}",
        f"tracebacks: {tracebacks}",
        f"shared drakit run: exit {outcome.run['code']}, {len(errors)} files reported as load errors, "
        f"valid case beside them: {valid[0]['status'] if valid else 'MISSING'}",
        f"peak RSS: batch {outcome.peak_rss['batch'] / 1024:.0f} MiB, run {outcome.peak_rss['run'] / 1024:.0f} MiB "
        f"(address space limited to {LIMIT_BYTES >> 20} MiB)",
        f"wall: batch {outcome.seconds['batch']:.1f} s, run {outcome.seconds['run']:.1f} s; slowest refusal "
        f"{slowest[0]} {slowest[1]['seconds']:.2f} s wall; most CPU {costliest[0]} {costliest[1]['cpu']:.2f} s; "
        f"over 2 s wall: {', '.join(over) or 'none'}",
        "each refusal (wall s / CPU s): " + ", ".join(f"{k} {v['seconds']:.2f}/{v['cpu']:.2f}" for k, v in
                                                      sorted(every_refusal, key=lambda kv: -kv[1]["seconds"])),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory(prefix="drakit-hostile-") as tmp:
        print(figures(run_corpus(Path(tmp))))
