"""Differential: upstream's stable implementation, which the kube-scheduler picks when only
GA-level DRA switches are on (no consumable capacity, no binding conditions, no alpha gates).

Inputs hold one pool: stable searches pools in Go map order, which is random, so with more
than one its answer is not a function of its input. ``DRAKIT_DIFF_STABLE_EXAMPLES`` sets the
number of examples (300 by default); strict mode and the minimised report work as in
``test_random.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given

from .check import Failing, check_input, differential_settings, report_minimised
from .strategies import inputs

EXAMPLES = int(os.environ.get("DRAKIT_DIFF_STABLE_EXAMPLES", "300"))
_FAILING: Failing = []


@pytest.fixture(scope="module")
def minimised(oracle: Any) -> Iterator[None]:
    yield
    report_minimised(oracle, _FAILING)


@differential_settings(EXAMPLES)
@given(inp=inputs(stable=True))
def test_stable_inputs_match_upstream(oracle: Any, minimised: None, inp: dict[str, Any]) -> None:
    check_input(oracle, inp, ("stable",), _FAILING)
