"""Fuzzing the case loader (issue 15): whatever the YAML text, loading it returns cases and
one-line errors, never an exception.

Three kinds of text: random characters that matter to YAML, mutations of real cases (splices,
cuts, repeats), and random data dumped as YAML into a case's fields. The budget is
``DRAKIT_FUZZ_EXAMPLES`` examples per kind (default 300: seconds in CI); derandomised, so CI
runs the same examples every time; a larger budget explores further.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drakit.conformance.cases.loader import load_text
from drakit.fake_driver.profile import load_profile

from .inputs import VALID

PROFILE = load_profile()
VOCABULARY = frozenset(PROFILE)
EXAMPLES = int(os.environ.get("DRAKIT_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"
SEEDS = [VALID] + [p.read_text(encoding="utf-8").split("\n---\n")[0]
                   for p in sorted(SUITES.rglob("*.case.yaml"))[:12]]
YAML_CHARS = "[]{}:,-&*!|>'\"#%@`?~ \n\t\\.0123456789abcxyz<=${}_/"
SNIPPETS = ["&a ", "*a", "<<: *a\n", "- ", ": ", "{", "}", "[", "]", "---\n", "...\n", "!!set ", "!!binary ",
            "!!python/name:os.system", "? ", "|\n", ">-\n", "${class.gpu}", "${nope}", "${", "\t", "\x00", "\ufeff",
            "'", '"', "#", "%TAG ! x\n", "%YAML 1.1\n", "~", "null", "1e999", "0x", "2024-01-01", "9" * 40,
            "\u202e", "\r\n", "  " * 30, "cel: {expression: 'device.driver =='}", "count: -1"]


def _check(text: str) -> None:
    result = load_text(text, "fuzz.case.yaml", PROFILE, vocabulary=VOCABULARY)
    for error in result.errors:
        line = str(error)
        assert "\n" not in line and line.startswith("fuzz.case.yaml"), line
    for case in result.cases:
        assert case.id and case.file == "fuzz.case.yaml"


@FUZZ
@given(st.text(alphabet=YAML_CHARS, max_size=400))
def test_random_yaml_text(text: str) -> None:
    _check(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(("insert", "cut", "repeat")))
        if op == "insert":
            text = text[:at] + draw(st.sampled_from(SNIPPETS) | st.text(alphabet=YAML_CHARS, max_size=8)) + text[at:]
        elif op == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        else:
            piece = text[at:at + draw(st.integers(1, 80))]
            text = text[:at] + piece * draw(st.integers(2, 30)) + text[at:]
    return text


@FUZZ
@given(mutated())
def test_mutated_cases(text: str) -> None:
    _check(text)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
    | st.sampled_from(["${class.gpu}", "${driver.gpu}", "${nope.x}", "gpu", "1s", "core"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "name", "kind", "apiVersion", "metadata", "spec", "devices", "requests", "exactly",
                         "deviceClassName", "count", "selectors", "cel", "expression", "expect", "apply", "claim",
                         "match", "steps", "x"]) | st.text(max_size=8), inner, max_size=4),
    max_leaves=25)
FIELDS = ["title", "features", "steps", "hardware", "featureGates", "namespace", "backends", "profile", "needs",
          "description"]


@FUZZ
@given(st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=4), st.integers(0, 3))
def test_random_data_in_a_case(fields: dict, step: int) -> None:
    doc = yaml.safe_load(SEEDS[step % len(SEEDS)])
    doc.update(fields)
    _check(yaml.safe_dump(doc, sort_keys=False))
