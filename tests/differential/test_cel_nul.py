"""Strings holding a NUL character in CEL (issue 25: an attribute ``"a\\x00b"`` was seen as ``"a"``
by drakit's engine, see conformance/cel/_nul.py), against upstream's allocator and cel-go (the
allocator oracle): the same devices chosen for selectors comparing, measuring and transforming
such strings. Where drakit's engine cannot return such a string from a string function, the
evaluation is an error saying so (the one divergence left, checked here too)."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.attributes import AttributeValue
from drakit.conformance.cel import CelDevice, CelRuntimeError, compile_selector, encode_device
from drakit.conformance.oracle.compare import compare, oracle_request, outcome_from_oracle, run_ours

DRIVER = "nul.example.com"
M = f'device.attributes["{DRIVER}"].model'


def _input(expression: str, models: list[str]) -> dict[str, Any]:
    devices = [{"name": f"dev-{i}", "attributes": {"model": {"string": m}}} for i, m in enumerate(models)]
    return {
        "node": {"name": "node-1"},
        "classes": [{"metadata": {"name": "c"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}],
        "slices": [{"metadata": {"name": "s"}, "spec": {"driver": DRIVER, "nodeName": "node-1",
                                                        "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                                                        "devices": devices}}],
        "claims": [{"metadata": {"name": "claim", "namespace": "default"},
                    "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                        "deviceClassName": "c", "selectors": [{"cel": {"expression": expression}}]}}]}}}],
    }


# (expression, device models): exactly one device should match; the cut string is offered first
SELECTORS = {
    "equal": (f'{M} == "a\\x00b"', ["a", "a\x00b"]),
    "size": (f"{M}.size() == 3", ["a", "a\x00b"]),
    "endsWith": (f'{M}.endsWith("\\x00b")', ["a", "a\x00b"]),
    "ordering": (f'{M} > "a\\x00a"', ["a", "a\x00b"]),
    "indexOf": (f'{M}.indexOf("b") == 2', ["a", "a\x00b"]),
    "in a list": (f'{M} in ["x", "a\\x00b"]', ["a", "a\x00b"]),
    "split": (f'{M}.split("\\x00") == ["a", "b"]', ["a", "a\x00b"]),
    "domain by a computed key": (f'device.attributes["{DRIVER[:3]}" + "{DRIVER[3:]}"].model.size() == 3', ["a", "a\x00b"]),
    "sorted list": (f'[string({M}), "z"].sort()[0].size() == 3', ["a", "a\x00b"]),
    "bind": (f"cel.bind(m, {M}, m.size() == 3 && m.startsWith('a'))", ["a", "a\x00b"]),
}


@pytest.mark.parametrize("name", list(SELECTORS))
def test_a_nul_in_an_attribute_is_kept_as_upstream_keeps_it(name: str, oracle: Any) -> None:
    expression, models = SELECTORS[name]
    inp = _input(expression, models)
    up = outcome_from_oracle(oracle.run(oracle_request(inp)))
    ours = run_ours(inp)
    c = compare(ours, up)
    assert c.same, c.report()
    # the selector really picks the uncut string upstream, not the cut one offered first
    assert up.status == "ok" and [r["device"] for r in up.results[0]["devices"]["results"]] == ["dev-1"], up


def _device(model: str) -> Any:
    return encode_device(CelDevice(driver=DRIVER, attributes={"model": AttributeValue("string", model)}))


def test_a_string_function_returning_a_nul_is_an_error_not_a_cut_string() -> None:
    for expression in ('"a\\x00b".lowerAscii() == "a"', f'{M}.upperAscii().size() == 1', f'{M}.substring(0, 2) == "a"',
                       '["a", "b"].join("\\x00") == "a"'):
        with pytest.raises(CelRuntimeError, match=r"the result holds a NUL character .* upstream keeps it"):
            compile_selector(expression).matches(_device("a\x00b"))
    # without a NUL in the result they work as before
    assert compile_selector(f'{M}.substring(2) == "b"').matches(_device("a\x00b")) is True
    assert compile_selector(f'{M}.upperAscii() == "A"').matches(_device("a")) is True


def test_a_nul_outside_a_literal_is_refused_with_upstreams_whole_message(admission_oracle: Any) -> None:
    """The engine cut its compile error at the NUL too ("token recognition error at: '" and
    nothing after it)."""
    from drakit.conformance.features import DEFAULT_GATES
    from drakit.conformance.validation.admit import admit
    for expression in ("device.driver == 'x' \x00|| true", "device.driver == 'a\x00b' \x00"):
        cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "c"},
               "spec": {"selectors": [{"cel": {"expression": expression}}]}}
        up = admission_oracle.admit(cls, gates=DEFAULT_GATES)
        ours = admit(cls, gates=DEFAULT_GATES)
        assert not up.accepted and "token recognition error at: '\x00'\n | " in up.message
        assert ours.message == up.message
