"""Regular expressions as the API server runs them (issue 32), on the reference alone: every
pattern of ``tests/regex_table.py`` is accepted or refused with Go's words, in CEL selectors as
the API server's admission says it, and matches as Go's regexp does; evaluation is linear.

Before: ``find``/``findAll`` ran Python's backtracking ``re`` (``(a+)+$`` on 40 characters ran
past the case's budget), a backreference or lookaround in ``find`` passed admission, ``matches``
ran the engine's own RE2 (``\\C`` accepted), and ``findAll('a*')`` on ``baaac`` gave four
matches where Go gives three. The cluster test checks the same table on the real API server."""

from __future__ import annotations

import time

import pytest

from drakit.conformance import goregex
from drakit.conformance.cel import AdmissionIssue, CelDevice, check_new_expression, compile_selector, encode_device
from drakit.conformance.validation.admit import admit
from drakit.fake_driver.envtemplate import EnvPattern, check
from tests.regex_table import MATCHES, REFUSED, VALID, cel_string, expressions

DEVICE = encode_device(CelDevice(driver="gpu.example.com", attributes={}, capacity={}))


def _id(pattern: str) -> str:
    return pattern if len(pattern) < 30 else f"{pattern[:12]}...({len(pattern)} characters)"


@pytest.mark.parametrize("pattern", VALID, ids=_id)
def test_the_api_server_accepts_it_and_so_does_the_reference(pattern: str) -> None:
    assert goregex.check(pattern) is None
    for expression in expressions(pattern).values():
        assert check_new_expression(expression) is None, expression


@pytest.mark.parametrize(("pattern", "error"), REFUSED.items(), ids=[_id(p) for p in REFUSED])
def test_the_api_server_refuses_it_and_so_does_the_reference_in_its_words(pattern: str, error: str) -> None:
    go = "error parsing regexp: " + error
    assert goregex.check(pattern) == go
    with pytest.raises(goregex.GoRegexpError, match="^error parsing regexp: "):
        goregex.compile(pattern)
    forms = expressions(pattern)
    issue = check_new_expression(forms["matches"])  # cel-go's validator, when compiling
    assert issue is not None and issue.type == "FieldValueInvalid"
    assert issue.detail == ("compilation failed: ERROR: <input>:1:13: invalid matches argument\n"
                            f" | {forms['matches']}\n | ............^"), issue.detail
    # Kubernetes' regex library compiles find's literal when it makes the program
    assert check_new_expression(forms["find"]) == AdmissionIssue("InternalError", "program instantiation failed: " + go)
    template = pattern.replace("{", "{{").replace("}", "}}")  # a vendor profile's containerEnv (braces doubled)
    assert check(EnvPattern(template)) == "not a regular expression: " + go


def test_the_refusal_reads_as_the_api_server_writes_it() -> None:
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "c"},
           "spec": {"selectors": [{"cel": {"expression": expressions(r"(?<=a)b")["find"]}}]}}
    verdict = admit(cls, gates={})
    assert not verdict.accepted
    assert verdict.message == ('DeviceClass.resource.k8s.io "c" is invalid: spec.selectors[0].cel.expression: Internal '
                               'error: program instantiation failed: error parsing regexp: invalid named capture: '
                               '`(?<=a)b`')


@pytest.mark.parametrize(("pattern", "text", "matched", "found", "all_found"), MATCHES,
                         ids=[f"{p}-{t!r}" for p, t, *_ in MATCHES])
def test_matches_are_go_s(pattern: str, text: str, matched: bool, found: str, all_found: list[str]) -> None:
    compiled = goregex.compile(pattern)
    assert (compiled.match(text), compiled.find(text), compiled.find_all(text)) == (matched, found, all_found)
    t, p = cel_string(text), cel_string(pattern)
    listed = "[" + ", ".join(cel_string(f) for f in all_found) + "]"
    for expression in (f"{t}.matches({p}) == {str(matched).lower()}", f"matches({t}, {p}) == {str(matched).lower()}",
                       f"{t}.find({p}) == {cel_string(found)}", f"{t}.findAll({p}) == {listed}",
                       f"{t}.findAll({p}, 1) == {listed if len(all_found) < 2 else '[' + cel_string(all_found[0]) + ']'}"):
        assert compile_selector(expression).matches(DEVICE), expression


def test_a_pathological_pattern_is_linear() -> None:
    text = cel_string("a" * 5000 + "!")
    t0 = time.monotonic()
    for expression in (f"{text}.find('(a+)+$') == ''", f"{text}.findAll('(a|aa)+$') == []",
                       f"!{text}.matches('^(a+)+$')", f"{text}.matches('(x+x+)+y') == false"):
        assert compile_selector(expression).matches(DEVICE), expression
    assert time.monotonic() - t0 < 2, "a backtracking engine takes hours here; RE2 milliseconds"


def test_a_dynamic_pattern_go_refuses_is_the_runtime_error_upstream_gives() -> None:
    from drakit.conformance.cel import CelRuntimeError
    with pytest.raises(CelRuntimeError, match=r"^Illegal regex: error parsing regexp: invalid escape sequence: `\\1`$"):
        compile_selector(r"'x'.find(device.driver + '(a)\\1') == ''").matches(DEVICE)
    with pytest.raises(CelRuntimeError, match=r"^error parsing regexp: invalid escape sequence: `\\C`$"):
        compile_selector(r"'x'.matches(device.driver.substring(0, 0) + '\\C')").matches(DEVICE)


def test_a_container_env_pattern_is_go_s_and_whole() -> None:
    rx = EnvPattern("[0-9]+(-[0-9]+)?{claim}").regex({"claim": "a.b"})
    assert rx.fullmatch("0-3a.b") and not rx.fullmatch("0-3axb") and not rx.fullmatch("x0-3a.b")
    assert EnvPattern("(a+)+$").regex({}).fullmatch("a" * 5000 + "!") is False


@pytest.mark.parametrize(("shape", "when"), [
    ("matches({p}, 'x')", "compile"),          # the validator checks the global form's first argument
    ("matches('x', {p})", "program"),          # OptOptimize compiles matches' constant pattern
    ("'x'.find(dyn({p})) == ''", "program"),   # after folding a conversion of a constant
    ("'x'.findAll(string(dyn({p}))) == []", "program"),
])
def test_constant_patterns_in_other_forms_are_refused_where_upstream_refuses_them(shape: str, when: str) -> None:
    issue = check_new_expression(shape.format(p=cel_string(r"(a)\1")))
    assert issue is not None
    if when == "compile":
        assert issue.type == "FieldValueInvalid" and "invalid matches argument" in issue.detail
    else:
        assert issue == AdmissionIssue("InternalError", "program instantiation failed: error parsing regexp: invalid "
                                                        "escape sequence: `\\1`")
    assert check_new_expression(shape.format(p=cel_string("a+"))) is None or "string(" in shape
