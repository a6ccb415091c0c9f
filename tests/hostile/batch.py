"""Run many ``drakit`` command lines in one interpreter, as a user would type them.

Reads a JSON list of argument lists on stdin; for each, calls ``drakit``'s console entry point
(``drakit.conformance.cli:main``, last-resort handler included) with stdout and stderr captured,
and writes one JSON object per command line to stdout: ``{"argv", "code", "out", "err",
"seconds", "cpu"}`` (wall and CPU seconds: on a loaded machine the CPU time is the figure). Sharing the interpreter keeps a corpus of a hundred refusals fast on two cores;
with ``--limit-bytes N`` it first limits its own address space, so every input shares that bound,
and it ends with its peak RSS (``{"maxrss_kib"}``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
import time

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def run_one(argv: list[str]) -> dict[str, object]:
    from drakit.conformance.cli import main

    out, err = io.StringIO(), io.StringIO()
    t0, c0 = time.monotonic(), time.process_time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return {"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue(),
            "seconds": round(time.monotonic() - t0, 4), "cpu": round(time.process_time() - c0, 4)}


def main() -> None:
    if sys.argv[1:2] == ["--limit-bytes"]:
        limit = int(sys.argv[2])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for argv in json.load(sys.stdin):
        print(json.dumps(run_one(argv)), flush=True)
    print(json.dumps({"maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}), flush=True)


if __name__ == "__main__":
    main()
