"""Run the corpus on the reference backend with allocator faults planted, one at a time, in one
process: ``python -m tests.mutation.plant_run OUT FAULT[,FAULT...]``. For each fault (and for
``none``, no fault, over every folder), ``drakit run --backend reference`` over the fault's
suites (and core where its broken cases are) writes OUT/<fault>/results.json; the exit code is
0 when every run wrote its results."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

from drakit.conformance.cli import main as drakit

from .faults import BY_NAME, planted

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"


def run(out: Path, name: str) -> float:
    fault = BY_NAME.get(name)
    if fault is None:  # the clean run: every folder a fault's run covers
        suites = ("core", *sorted({s for f in BY_NAME.values() for s in f.suites}))
    else:  # its own folders, and core where its broken cases are (CI time: core is the biggest)
        suites = (*(("core",) if any(c.startswith("core/") for c in fault.breaks) else ()), *fault.suites)
    t0 = time.monotonic()
    with planted(fault) if fault else contextlib.nullcontext():
        drakit(["run", "--backend", "reference", "-n", "0", "--plain", "--quiet", "--out", str(out / name),
                *(str(SUITES / s) for s in suites)])
    return time.monotonic() - t0


def main(argv: list[str]) -> int:
    out, names = Path(argv[0]), argv[1].split(",")
    for name in names:
        took = run(out, name)
        print(f"{name}: {took:.1f} s", file=sys.stderr)
    return 0 if all((out / n / "results.json").is_file() for n in names) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
