"""The upstream structured allocator's own test table, run through drakit's reference allocator
and (when Go is available) through the upstream oracle.

Every entry of ``cases/*.yaml`` is one upstream case (see README.md). ``notPorted`` entries are
inputs the API server refuses: our model refuses them too (asserted), so only the oracle runs
them. ``knownIssue`` entries are expected to fail until the issue is fixed (strict xfail).
"""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.oracle.compare import oracle_request, outcome_from_oracle, run_ours

from .table import check, load_cases

CASES = load_cases()
PORTED = [c for c in CASES if "notPorted" not in c]
NOT_PORTED = [c for c in CASES if "notPorted" in c]
WITH_STEPS = [c for c in PORTED if c.get("upstreamSteps") and "knownIssue" not in c]


def _params(cases: list[dict[str, Any]]) -> list[Any]:
    out = []
    for c in cases:
        marks = [pytest.mark.xfail(reason=c["knownIssue"], strict=True)] if "knownIssue" in c else []
        out.append(pytest.param(c, id=f"{c['theme']}/{c['name']}", marks=marks))
    return out


def test_table_size() -> None:
    assert len(CASES) >= 279
    assert len(PORTED) >= 200


@pytest.mark.parametrize("case", _params(PORTED))
def test_reference_allocator(case: dict[str, Any]) -> None:
    problems = check(case, run_ours(case), who="drakit")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("case", _params([c for c in PORTED if "stable" in c.get("upstreamChannels", ())]))
def test_reference_allocator_as_stable(case: dict[str, Any]) -> None:
    """Entries upstream also runs through its stable implementation give the same outcome when
    drakit follows that implementation (the search steps may differ: stable has no start
    location)."""
    got = run_ours(case, allocators=("stable",))
    assert got.channel == "stable"
    problems = check(case, got, who="drakit (stable)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("case", _params(NOT_PORTED))
def test_not_ported_inputs_are_refused_by_validation(case: dict[str, Any]) -> None:
    got = run_ours(case)
    assert got.status == "rejected", f"{case['name']}: expected our API validation to refuse it, got {got.summary()}"


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c['theme']}/{c['name']}") for c in WITH_STEPS])
def test_search_steps_match_upstream(case: dict[str, Any]) -> None:
    """Where upstream's test pins the number of allocateOne calls, our search makes as many
    (with the node pre-check off: upstream has none, and it skips hopeless searches)."""
    got = run_ours(case, precheck=False)
    assert got.steps == case["upstreamSteps"], f"search steps: drakit {got.steps}, upstream {case['upstreamSteps']}"


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c['theme']}/{c['name']}") for c in WITH_STEPS])
def test_precheck_only_saves_steps(case: dict[str, Any]) -> None:
    """The node pre-check changes no outcome and never adds a step to upstream's count."""
    got, searched = run_ours(case), run_ours(case, precheck=False)
    assert (got.status, got.results, got.error) == (searched.status, searched.results, searched.error)
    assert got.steps is not None and got.steps <= case["upstreamSteps"]


@pytest.fixture(scope="module")
def oracle_outcomes(oracle: Any) -> dict[str, Any]:
    """Every entry through the oracle, in one batch."""
    names = [c["name"] for c in CASES]
    answers = oracle.run_many(oracle_request(c, ident=c["name"]) for c in CASES)
    return {n: outcome_from_oracle(a) for n, a in zip(names, answers)}


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c['theme']}/{c['name']}") for c in CASES])
def test_oracle_reproduces_the_table(case: dict[str, Any], oracle_outcomes: dict[str, Any]) -> None:
    """The oracle (upstream v0.37.2 through our JSON bridge) gives the table's expected outcome:
    this checks the bridge and the port of the data, independently of drakit's allocator."""
    problems = check(case, oracle_outcomes[case["name"]], who="upstream")
    assert not problems, "\n".join(problems)
