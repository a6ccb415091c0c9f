"""One random input through both allocators, and the minimised report after a failure (shared by
the differential tests of ``test_random.py`` and ``test_stable.py``)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Sequence

from hypothesis import event, note

from drakit.conformance.oracle.compare import compare, minimise_divergence, oracle_request, outcome_from_oracle, run_ours

from .known import KNOWN

STRICT = os.environ.get("DRAKIT_DIFF_STRICT", "0") not in ("0", "", "false", "no")

Failing = list[tuple[dict[str, Any], tuple[str, ...]]]
"""The failing inputs Hypothesis tried, with the implementations both sides chose from; its
final, shrunk one is last."""


def check_input(oracle: Any, inp: dict[str, Any], allocators: Sequence[str], failing: Failing) -> None:
    """Assert that drakit and upstream agree on ``inp``; known divergences are counted and
    skipped unless ``DRAKIT_DIFF_STRICT=1``."""
    ours = run_ours(inp, allocators=allocators)
    assert ours.status != "rejected", f"the generator made an input drakit's validation refuses: {ours.error}"
    upstream = outcome_from_oracle(oracle.run(oracle_request(inp, allocators=allocators)))
    event(f"outcome: {upstream.status}" + (f" ({upstream.kind})" if upstream.kind else ""))
    c = compare(ours, upstream)
    if not c.same and not STRICT:
        for k in KNOWN:
            if k.matches(inp, c):
                event(f"known divergence: {k.name}")
                return
    if not c.same:
        note("input (JSON):\n" + json.dumps(inp, separators=(",", ":")))
        failing.append((inp, tuple(allocators)))
    assert c.same, c.report()


def report_minimised(oracle: Any, failing: Failing) -> None:
    """Shrink Hypothesis' final failing example further, structurally, and print it (and write it
    to ``DRAKIT_DIFF_OUT`` when set)."""
    if not failing:
        return
    inp, allocators = failing[-1]
    small, c = minimise_divergence(oracle, inp, allocators=allocators)
    text = json.dumps(small, separators=(",", ":"))
    print(f"\nminimised divergence (upstream allocators: {','.join(allocators)}):\n{c.report()}\n"
          f"input (JSON; python -m drakit.conformance.oracle.compare --allocators {','.join(allocators)} FILE):\n{text}",
          file=sys.__stderr__)
    out = os.environ.get("DRAKIT_DIFF_OUT")
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def differential_settings(examples: int) -> Any:
    """The Hypothesis settings of the random differential tests: seeded (derandomized), no
    example database, no deadline (the oracle is a subprocess)."""
    from hypothesis import HealthCheck, settings

    return settings(max_examples=examples, derandomize=True, deadline=None, database=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example, HealthCheck.function_scoped_fixture])
