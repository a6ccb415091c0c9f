"""Differential: random allocator inputs through drakit's allocator and the upstream oracle.

``DRAKIT_DIFF_EXAMPLES`` sets the number of examples (500 by default; the full run uses 10000);
``DRAKIT_DIFF_OUT=path`` also writes the minimised input there. Inputs that show a
known divergence (``known.py``, each pinned by a strict xfail) are counted and skipped unless
``DRAKIT_DIFF_STRICT=1``. Both sides choose between upstream's incubating and experimental
implementations, as the kube-scheduler does for these gates (``test_stable.py`` covers stable).
The run is derandomized (the same examples every time) and, on a difference, Hypothesis shrinks
the input, then :func:`conformance.oracle.compare.minimise_divergence` shrinks it structurally
(one deletion at a time) and prints it as JSON ready for ``python -m drakit.conformance.oracle.compare``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given

from drakit.conformance.oracle.compare import DEFAULT_ALLOCATORS

from .check import Failing, check_input, differential_settings, report_minimised
from .strategies import inputs

EXAMPLES = int(os.environ.get("DRAKIT_DIFF_EXAMPLES", "500"))
_FAILING: Failing = []


@pytest.fixture(scope="module")
def minimised(oracle: Any) -> Iterator[None]:
    """After a failure, shrink Hypothesis' final example further, structurally, and print it."""
    yield
    report_minimised(oracle, _FAILING)


@differential_settings(EXAMPLES)
@given(inp=inputs())
def test_random_inputs_match_upstream(oracle: Any, minimised: None, inp: dict[str, Any]) -> None:
    check_input(oracle, inp, DEFAULT_ALLOCATORS, _FAILING)
