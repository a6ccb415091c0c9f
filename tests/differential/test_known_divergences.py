"""Every known divergence's minimal input, as a strict xfail; every fixed one's, as a plain test."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.oracle.compare import compare, oracle_request, outcome_from_oracle, run_ours

from .known import FIXED, KNOWN, Known


if KNOWN:  # none at the moment; an empty parameter list would show up as a skipped test
    @pytest.mark.parametrize("known", [pytest.param(k, id=k.name, marks=pytest.mark.xfail(reason=k.explanation,
                                                                                           strict=True))
                                       for k in KNOWN])
    def test_known_divergence(known: Known, oracle: Any) -> None:
        c = compare(run_ours(known.repro), outcome_from_oracle(oracle.run(oracle_request(known.repro))))
        assert known.matches(known.repro, c) is (not c.same), "the matcher does not recognise its own minimal input"
        assert c.same, f"{known.name}:\n{c.report()}"


@pytest.mark.parametrize("known", [pytest.param(k, id=k.name) for k in FIXED])
def test_fixed_divergence_stays_fixed(known: Known, oracle: Any) -> None:
    c = compare(run_ours(known.repro), outcome_from_oracle(oracle.run(oracle_request(known.repro))))
    assert c.same, f"{known.name} is back:\n{c.report()}"
