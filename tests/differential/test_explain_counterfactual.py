"""Counterfactual check of ``drakit explain``: for random inputs drakit's allocator cannot satisfy,
the change the explanation names (free the committed devices, tolerate the taint, drop the
selector, turn on the gate) is made to the input and upstream's Go allocator (the oracle) must
then allocate; when the explanation offers no single change, each change it could make from its
blockers alone must leave upstream unsatisfied too (see :mod:`.counterfactual`).

``DRAKIT_EXPLAIN_EXAMPLES`` sets the number of unsatisfiable inputs checked (30 here, under a
minute); the large count is a script that counts instead of stopping at the first wrong one:
``python benchmarks/explain_counterfactual.py --examples 5000``. Derandomized, like the other
differential tests.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import assume, event, given

from .check import differential_settings
from .counterfactual import check
from .strategies import inputs

EXAMPLES = int(os.environ.get("DRAKIT_EXPLAIN_EXAMPLES", "30"))


@differential_settings(EXAMPLES)
@given(inp=inputs())
def test_each_named_change_makes_upstream_allocate(oracle: Any, inp: dict[str, Any]) -> None:
    got = check(oracle, inp)
    assume(got.kind != "satisfiable")
    event(f"explained: {got.kind}")
    for c in got.checks:
        event(f"change made: {c}")
    assert got.wrong is None, got.wrong
