"""Differential: generated objects through the reference's admission and the 1.37.2 API
server's (the admission oracle).

Valid objects of every kind are mutated (``admission_strategies``) and admitted under random
gates; both sides must agree on the decision, the field errors (order and words) and the stored
object. ``DRAKIT_ADMISSION_EXAMPLES`` sets the number of examples (5,000 by default; 50,000 for
the full run). Seeded (derandomized); on a difference Hypothesis shrinks the input to the fewest,
simplest mutations and the module prints it (object, gates and both verdicts) as JSON.

The planted-fault tests prove the search can fail: a changed word and an accepted-but-invalid
value are planted in the reference and must be found (the time it took is printed).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import find, given, note, settings

from drakit.conformance.features import DEFAULT_GATES
from drakit.conformance.oracle.admission import compare_verdicts
from drakit.conformance.validation import admit as admit_module
from drakit.conformance.validation.admit import admit

from .admission_strategies import admission_inputs
from .check import differential_settings

EXAMPLES = int(os.environ.get("DRAKIT_ADMISSION_EXAMPLES", "5000"))
_FAILING: list[dict[str, Any]] = []


def differences(oracle: Any, inp: dict[str, Any]) -> list[str]:
    gates = dict(DEFAULT_GATES, **inp["gates"])
    old = inp.get("old")
    ours = admit(inp["object"], old, gates=gates)
    up = oracle.admit(inp["object"], old, gates)
    return compare_verdicts(ours, up)


def report(inp: dict[str, Any], diffs: list[str]) -> str:
    return ("minimised admission divergence (mutations: " + "; ".join(inp["mutations"]) + ")\n" + "\n".join(diffs) +
            "\ninput (JSON):\n" + json.dumps({"object": inp["object"], "old": inp.get("old"), "gates": inp["gates"]}, separators=(",", ":")))


@pytest.fixture(scope="module")
def minimised(admission_oracle: Any) -> Iterator[None]:
    yield
    if _FAILING:
        inp = _FAILING[-1]  # Hypothesis replays its shrunk example last
        print("\n" + report(inp, differences(admission_oracle, inp)), file=sys.__stderr__)


@differential_settings(EXAMPLES)
@given(inp=admission_inputs())
def test_generated_objects_admission_matches_upstream(admission_oracle: Any, minimised: None, inp: dict[str, Any]) -> None:
    diffs = differences(admission_oracle, inp)
    if diffs:
        note(report(inp, diffs))
        _FAILING.append(inp)
    assert not diffs, "\n".join(diffs)


PLANTS = {
    # the words of one message changed
    "wording": ("drakit.conformance.validation.claim", "allocation_mode", lambda orig: (
        lambda mode, count, mp, cp: [type(e)(e.type, e.field, e.detail.replace("greater than zero", "positive"), value=e.value,
                                             declarative=e.declarative) for e in orig(mode, count, mp, cp)])),
    # a value the API server refuses is accepted: a toleration value with operator Exists
    "acceptance": ("drakit.conformance.validation.common", "toleration", lambda orig: (
        lambda t, path: orig({**t, "value": ""} if t.get("operator") == "Exists" else t, path))),
}


@pytest.mark.parametrize("plant", list(PLANTS))
def test_planted_fault_is_found(plant: str, admission_oracle: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    module_name, attr, wrap = PLANTS[plant]
    module = importlib.import_module(module_name)
    monkeypatch.setattr(module, attr, wrap(getattr(module, attr)))
    if module_name.endswith("common"):  # imported by name into the claim validators
        claim = importlib.import_module("drakit.conformance.validation.claim")
        monkeypatch.setattr(claim, attr, getattr(module, attr))
    assert admit_module  # the pipeline under test
    t0 = time.monotonic()
    found = find(admission_inputs(), lambda inp: bool(differences(admission_oracle, inp)),
                 settings=settings(max_examples=20000, derandomize=True, database=None, deadline=None))
    took = time.monotonic() - t0
    print(f"\nplanted {plant} fault found in {took:.1f} s:\n" + report(found, differences(admission_oracle, found)),
          file=sys.__stderr__)
    assert differences(admission_oracle, found)
