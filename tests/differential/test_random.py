"""Differential: random allocator inputs through drakit's allocator and the upstream oracle.

``DRAKIT_DIFF_EXAMPLES`` sets the number of examples (500 by default; the full run uses 10000);
``DRAKIT_DIFF_OUT=path`` also writes the minimised input there. Inputs that show a
known divergence (``known.py``, each pinned by a strict xfail) are counted and skipped unless
``DRAKIT_DIFF_STRICT=1``.
The run is derandomized (the same examples every time) and, on a difference, Hypothesis shrinks
the input, then :func:`conformance.oracle.compare.minimise_divergence` shrinks it structurally
(one deletion at a time) and prints it as JSON ready for ``python -m conformance.oracle.compare``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, settings

from conformance.oracle.compare import compare, minimise_divergence, oracle_request, outcome_from_oracle, run_ours

from .known import KNOWN
from .strategies import inputs

EXAMPLES = int(os.environ.get("DRAKIT_DIFF_EXAMPLES", "500"))
STRICT = os.environ.get("DRAKIT_DIFF_STRICT", "0") not in ("0", "", "false", "no")
_FAILING: list[dict[str, Any]] = []   # the failing inputs Hypothesis tried; its final, shrunk one is last


@pytest.fixture(scope="module")
def minimised(oracle: Any) -> Iterator[None]:
    """After a failure, shrink Hypothesis' final example further, structurally, and print it."""
    yield
    if not _FAILING:
        return
    small, c = minimise_divergence(oracle, _FAILING[-1])
    text = json.dumps(small, separators=(",", ":"))
    print(f"\nminimised divergence:\n{c.report()}\ninput (JSON):\n{text}", file=sys.__stderr__)
    out = os.environ.get("DRAKIT_DIFF_OUT")
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, print_blob=False,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                                 HealthCheck.function_scoped_fixture])
@given(inp=inputs())
def test_random_inputs_match_upstream(oracle: Any, minimised: None, inp: dict[str, Any]) -> None:
    ours = run_ours(inp)
    assert ours.status != "rejected", f"the generator made an input drakit's validation refuses: {ours.error}"
    upstream = outcome_from_oracle(oracle.run(oracle_request(inp)))
    event(f"outcome: {upstream.status}" + (f" ({upstream.kind})" if upstream.kind else ""))
    c = compare(ours, upstream)
    if not c.same and not STRICT:
        for k in KNOWN:
            if k.matches(inp, c):
                event(f"known divergence: {k.name}")
                return
    if not c.same:
        note("input (JSON):\n" + json.dumps(inp, separators=(",", ":")))
        _FAILING.append(inp)
    assert c.same, c.report()
