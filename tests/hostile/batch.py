"""Run many ``drakit`` command lines in one interpreter, as a user would type them.

Reads a JSON list of argument lists on stdin; for each, calls ``drakit``'s console entry point
(``drakit.conformance.cli:main``, last-resort handler included) with stdout and stderr captured,
and writes one JSON object per command line to stdout: ``{"argv", "code", "out", "err",
"seconds", "cpu"}`` (wall and CPU seconds: on a loaded machine the CPU time is the figure). Sharing the interpreter keeps a corpus of a hundred refusals fast on two cores;
with ``--limit-bytes N`` it first limits its own address space, so every input shares that bound,
and it ends with its peak RSS (``{"maxrss_kib"}``); with ``--alarm S`` a command still running
after S seconds is stopped (its code says so) and the next one runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import sys
import time

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


class Hung(BaseException):
    """A command still running after ``--alarm`` seconds (a BaseException: drakit's last resort
    does not catch it)."""


def _hung(signum: int, frame: object) -> None:
    raise Hung()


def run_one(argv: list[str], alarm: float = 0.0) -> dict[str, object]:
    from drakit.conformance.cli import main

    out, err = io.StringIO(), io.StringIO()
    t0, c0 = time.monotonic(), time.process_time()
    if alarm:
        signal.signal(signal.SIGALRM, _hung)
        signal.setitimer(signal.ITIMER_REAL, alarm)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: object = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        except Hung:  # a FIFO opened for reading blocks until a writer comes: the open is interrupted
            code = f"still running after {alarm} s"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return {"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue(),
            "seconds": round(time.monotonic() - t0, 4), "cpu": round(time.process_time() - c0, 4)}


def main() -> None:
    args = sys.argv[1:]
    alarm = 0.0
    while args:
        if args[0] == "--limit-bytes":
            limit = int(args[1])
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        elif args[0] == "--alarm":  # seconds each command may take
            alarm = float(args[1])
        args = args[2:]
    for argv in json.load(sys.stdin):
        print(json.dumps(run_one(argv, alarm)), flush=True)
    print(json.dumps({"maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}), flush=True)


if __name__ == "__main__":
    main()
