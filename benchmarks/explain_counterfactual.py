"""The counterfactual check of ``drakit explain`` at a large count (a script; the test runs 30).

Distinct random inputs from the differential tests' generator (``tests/differential/strategies.py``,
Hypothesis, derandomized; an input drawn again is set aside) that both drakit's allocator and upstream's Go allocator (the oracle)
cannot satisfy are explained; the change the summary names is made to the input and upstream
must then allocate, and when the summary says no single change suffices, each of its blockers'
changes made alone must leave upstream unsatisfied (``tests/differential/counterfactual.py``).
Unlike the test it does not stop at the first wrong explanation: it counts them, writes each
wrong input to ``--wrong-out`` (JSON lines, as they come) and exits 1 when there is any.

    python benchmarks/explain_counterfactual.py [--examples 5000] [--seed N] [--wrong-out FILE]

Run from the repository (it imports the generator from ``tests/``). Needs Go for the oracle
(built on first use, as for the differential tests). Prints progress every 500 inputs and the
figures at the end: unsatisfiable inputs checked, of which one change named / no single change,
changes made and confirmed by upstream per check, blockers no input change expresses, wrong,
wall and CPU time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests.differential

from hypothesis import HealthCheck, Phase, assume, given, seed, settings  # noqa: E402

from drakit.conformance.oracle import Oracle, OracleUnavailable, build_oracle  # noqa: E402
from tests.differential.counterfactual import check  # noqa: E402
from tests.differential.strategies import inputs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=5000, help="unsatisfiable inputs to check (default 5000)")
    ap.add_argument("--seed", type=int, default=None, help="a Hypothesis seed (default: derandomized, as the test)")
    ap.add_argument("--wrong-out", default=None, help="write each wrong input here (JSON lines)")
    args = ap.parse_args()
    try:
        binary = build_oracle()
    except OracleUnavailable as exc:
        print(f"explain_counterfactual: upstream oracle unavailable: {exc}", file=sys.stderr)
        return 2
    kinds: Counter[str] = Counter()
    made: Counter[str] = Counter()
    unmakeable: Counter[str] = Counter()
    wrong: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()  # the unsatisfiable inputs checked, as JSON
    satisfiable: set[str] = set()
    drawn, duplicates = [0], [0]
    t0, c0 = time.perf_counter(), time.process_time()
    if args.wrong_out:
        open(args.wrong_out, "w", encoding="utf-8").close()

    with Oracle(binary) as oracle:
        @settings(max_examples=args.examples, derandomize=args.seed is None, database=None, deadline=None,
                  phases=[Phase.generate], print_blob=False,
                  suppress_health_check=list(HealthCheck))
        @given(inp=inputs())
        def one(inp: dict[str, Any]) -> None:
            drawn[0] += 1
            key = json.dumps(inp, sort_keys=True)
            if key in seen or key in satisfiable:
                duplicates[0] += 1
                assume(False)  # drawn before: the count is of distinct inputs
            got = check(oracle, inp)
            if got.kind == "satisfiable":
                satisfiable.add(key)
                assume(False)
            kinds[got.kind] += 1
            seen.add(key)
            made.update(got.checks)
            unmakeable.update(got.unmakeable)
            if got.wrong is not None:
                wrong.append((got.wrong, inp))
                print(f"WRONG: {got.wrong}", file=sys.stderr, flush=True)
                if args.wrong_out:  # as they come: a run stopped early keeps them
                    with open(args.wrong_out, "a", encoding="utf-8") as f:
                        f.write(json.dumps({"wrong": got.wrong, "input": inp}, separators=(",", ":")) + "\n")
            n = sum(kinds.values())
            if n % 500 == 0:
                print(f"... {n} checked, {len(wrong)} wrong, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

        if args.seed is not None:
            one = seed(args.seed)(one)
        one()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = sum(kinds.values())
    print(f"distinct unsatisfiable inputs checked: {n} ({drawn[0]} drawn: {len(satisfiable)} satisfiable on either "
          f"side and {duplicates[0]} drawn before, set aside)")
    print(f"  one change named: {kinds['one-change']}; no single change: {kinds['no-single-change']}")
    print("  changes made and checked with upstream: " + (", ".join(f"{k} {v}" for k, v in made.most_common()) or "none"))
    print("  blockers no change to the input expresses (not checked): "
          + (", ".join(f"{k} {v}" for k, v in unmakeable.most_common()) or "none"))
    print(f"wrong: {len(wrong)}")
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s (this process; the oracle's own CPU not counted)")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
