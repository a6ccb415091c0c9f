"""Differential: random allocator inputs through drakit's allocator and the upstream oracle.

``DRAKIT_DIFF_EXAMPLES`` sets the number of examples (500 by default; the full run uses 10000);
``DRAKIT_DIFF_OUT=path`` also writes the last failing input there as JSON. Inputs that show a
known divergence (``known.py``, each pinned by a strict xfail) are counted and skipped unless
``DRAKIT_DIFF_STRICT=1``.
The run is derandomized (the same examples every time) and, on a difference, Hypothesis shrinks
the input to a small one and prints it as JSON ready for ``python -m conformance.oracle.compare``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, event, given, note, settings

from conformance.oracle.compare import compare, oracle_request, outcome_from_oracle, run_ours

from .known import KNOWN
from .strategies import inputs

EXAMPLES = int(os.environ.get("DRAKIT_DIFF_EXAMPLES", "500"))
STRICT = os.environ.get("DRAKIT_DIFF_STRICT", "0") not in ("0", "", "false", "no")


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, print_blob=False,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                                 HealthCheck.function_scoped_fixture])
@given(inp=inputs())
def test_random_inputs_match_upstream(oracle: Any, inp: dict[str, Any]) -> None:
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
        text = json.dumps(inp, separators=(",", ":"))
        note("input (JSON):\n" + text)
        out = os.environ.get("DRAKIT_DIFF_OUT")
        if out:  # the last (most shrunk) failing input wins
            with open(out, "w") as f:
                f.write(text + "\n")
    assert c.same, c.report()
