"""Vendor values never become CEL code (issue 25): whatever string a vendor profile gives a
placeholder, the CEL expression it ends up in means exactly that string.

A property test: a random string (quotes, backslashes, ``' || 'a' == 'a``, control characters,
any Unicode) as the profile's ``value.gpu.model``, put through the case loader into a selector
written each way a case can write it (single, double and triple quotes, outside any literal,
and the bundled ``core/selectors`` case itself), compiled by drakit's CEL environment and
evaluated on a device whose model is that string (true) and on one whose model differs (false).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from drakit.conformance.attributes import AttributeValue
from drakit.conformance.cases.celtext import CelPlaceholderError, substitute
from drakit.conformance.cases.loader import load_text
from drakit.conformance.cel import CelDevice, compile_selector, encode_device
from drakit.fake_driver.profile import load_profile

PROFILE = load_profile()
DRIVER = PROFILE["driver.gpu"]
EXAMPLES = int(os.environ.get("DRAKIT_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
SELECTORS = Path(__file__).resolve().parents[2] / "conformance" / "suites" / "core" / "selectors.case.yaml"
# any Unicode scalar value but surrogates (not text: YAML and the API refuse them)
VALUES = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
NASTY = ["Acme's A100", "nosuch' || 'a' == 'a", 'x" || "a" == "a', "a\\", "\\'", "'''", '"""', "\n", "\x00", "H100\x00evil",
         "${value.gpu.model}", "é\u202e\U0001F600", "\\u0041", "' + '"]

FORMS = [
    "${cel.gpu.model} == '${value.gpu.model}'",
    '${cel.gpu.model} == "${value.gpu.model}"',
    "${cel.gpu.model} == '''${value.gpu.model}'''",
    '${cel.gpu.model} == """${value.gpu.model}"""',
    "${cel.gpu.model} == ${value.gpu.model}",
    "'${value.gpu.model}' == ${cel.gpu.model} && true",
]


def _case(expression: str) -> str:
    quoted = expression.replace("\\", "\\\\").replace('"', '\\"')
    return f"""\
id: hostile/cel-value
title: a profile value in a selector
features: [core]
steps:
  - apply:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {{name: c}}
      spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: "${{class.gpu}}",
              selectors: [{{cel: {{expression: "{quoted}"}}}}]}}}}]}}}}
"""


def _expression_of(text: str, profile: dict[str, str]) -> list[str]:
    loaded = load_text(text, "v.case.yaml", profile)
    assert not loaded.errors, [str(e) for e in loaded.errors]
    out: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("cel"), dict) and "expression" in value["cel"]:
                out.append(value["cel"]["expression"])
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
    for case in loaded.cases:
        for step in case.steps:
            walk(step.manifests)
    return out


def _model(value: str) -> object:
    return encode_device(CelDevice(driver=DRIVER, attributes={"model": AttributeValue("string", value)}))


def _reference(value: str) -> str:
    """*value* as a CEL literal built another way: every character as a ``\\U`` escape."""
    return '"' + "".join(f"\\U{ord(c):08x}" for c in value) + '"'


def _means_exactly(expression: str, value: str) -> None:
    selector = compile_selector(expression)  # never a syntax error: the value is a literal
    # a NUL too: the engine cut a device's string there (issue 25), see conformance/cel/_nul.py
    assert selector.matches(_model(value)) is True, expression
    assert selector.matches(_model(value + "x")) is False, expression
    assert selector.matches(_model("a")) is (value == "a"), expression
    assert selector.matches(_model(value.partition("\x00")[0])) is ("\x00" not in value), expression
    # the same string written another way (every character a \U escape) means the same
    probe = expression.replace(PROFILE["cel.gpu.model"], _reference(value))
    assert compile_selector(probe).matches(_model("")) is True, probe


@FUZZ
@example(value="Acme's A100", form=FORMS[0])
@example(value="nosuch' || 'a' == 'a", form=FORMS[0])
@example(value="a\x00b", form=FORMS[1])
@example(value="\x00", form=FORMS[4])
@given(value=VALUES, form=st.sampled_from(FORMS))
def test_a_profile_value_in_a_selector_means_exactly_that_string(value: str, form: str) -> None:
    profile = {**PROFILE, "value.gpu.model": value}
    (expression,) = _expression_of(_case(form), profile)
    _means_exactly(expression, value)


@pytest.mark.parametrize("value", NASTY)
def test_the_bundled_selector_case_with_a_hostile_model_name(value: str) -> None:
    """The issue's own inputs, through the bundled case file: ``Acme's A100`` broke it (a syntax
    error blamed on the case), ``nosuch' || 'a' == 'a`` made its selector always true."""
    text = SELECTORS.read_text(encoding="utf-8")
    profile = {**PROFILE, "value.gpu.model": value}
    expressions = [e for e in _expression_of(text, profile) if "model ==" in e]
    assert expressions
    for expression in expressions:
        _means_exactly(expression, value)


def test_a_value_that_cannot_stand_in_a_raw_literal_is_a_load_error() -> None:
    profile = {**PROFILE, "value.gpu.model": "it's"}
    loaded = load_text(_case("${cel.gpu.model} == r'${value.gpu.model}'"), "v.case.yaml", profile)
    assert [str(e) for e in loaded.errors] == [
        "v.case.yaml:10: steps[0].apply.spec.devices.requests[0].exactly.selectors[0].cel.expression: the value of "
        "${value.gpu.model} (\"it's\") cannot be put in a raw CEL string (it holds its quote or a line break): "
        "drop the r prefix"]
    (expression,) = _expression_of(_case("${cel.gpu.model} == r'${value.gpu.model}'"),
                                   {**PROFILE, "value.gpu.model": "a\\b"})
    _means_exactly(expression, "a\\b")


def test_code_placeholders_stay_code_and_refuse_to_be_quoted() -> None:
    assert substitute("${cel.gpu.model} == 'x'", PROFILE.get) == f"device.attributes['{DRIVER}'].model == 'x'"
    with pytest.raises(CelPlaceholderError):
        substitute("'${cel.gpu.model}' == 'x'", PROFILE.get)


RUNTIME_FORMS = [
    "${cel.gpu.model} == '${inv.a.device}'",
    '${cel.gpu.model} == "${namespace}"',
    "${cel.gpu.model} == ${inv.a.pool}",
]


@FUZZ
@given(value=VALUES, form=st.sampled_from(RUNTIME_FORMS))
def test_a_run_time_placeholder_in_a_selector_means_exactly_its_value(value: str, form: str) -> None:
    """The values bound when a case runs (a device or pool name read from the driver's slices,
    the case's namespace) go through the same literal rule."""
    from drakit.conformance.cases.placeholders import substitute_runtime
    expression = substitute_runtime(form.replace("${cel.gpu.model}", PROFILE["cel.gpu.model"]), value,
                                    {"inv.a.device": value, "inv.a.pool": value}, ("cel", "expression"))
    _means_exactly(expression, value)
