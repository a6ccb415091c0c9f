"""Differential: every ported upstream-table case through drakit's allocator and the upstream oracle.

Fails on any difference in feasibility, in the devices chosen (with their share, capacity and
binding details, configs and node selector) or in the kind of error; the error text is compared
too where drakit words it as upstream does. Known divergences (``knownIssue`` in the table) are
strict xfails.
"""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.oracle.compare import compare, oracle_request, outcome_from_oracle, run_ours
from tests.upstream_table.table import load_cases

PORTED = [c for c in load_cases() if "notPorted" not in c]


@pytest.fixture(scope="module")
def upstream(oracle: Any) -> dict[str, Any]:
    answers = oracle.run_many(oracle_request(c, ident=c["name"]) for c in PORTED)
    return {c["name"]: outcome_from_oracle(a) for c, a in zip(PORTED, answers)}


@pytest.mark.parametrize("case", [
    pytest.param(c, id=f"{c['theme']}/{c['name']}",
                 marks=[pytest.mark.xfail(reason=c["knownIssue"], strict=True)] if "knownIssue" in c else [])
    for c in PORTED])
def test_table_case_matches_upstream(case: dict[str, Any], upstream: dict[str, Any]) -> None:
    c = compare(run_ours(case), upstream[case["name"]])
    assert c.same, f"{case['name']}:\n{c.report()}"
