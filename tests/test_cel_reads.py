"""Selector outcomes shared between devices that agree on what the selector reads."""

from __future__ import annotations

import pytest

from drakit.conformance.allocator.selectors import SelectorCache
from drakit.conformance.cel import CelDevice, CelRuntimeError, compile_selector, encode_device
from drakit.conformance.attributes import AttributeValue as A
from drakit.conformance.model.capacity import DeviceCapacity
from drakit.conformance.model.slice import Device
from drakit.conformance.quantity import Quantity

DRIVER = "gpu.example.com"


@pytest.mark.parametrize("expression, reads", [
    ('device.driver == "gpu.example.com"', (("driver",),)),
    ('device.attributes["gpu.example.com"].model == "a"', (("attributes", "gpu.example.com", "model"),)),
    ('device.attributes["gpu.example.com"]["model"] == "a"', (("attributes", "gpu.example.com", "model"),)),
    ('has(device.attributes["x.org"].numa)', (("attributes", "x.org", "numa"),)),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("1Gi")) >= 0 && device.allowMultipleAllocations',
     (("allowMultipleAllocations",), ("capacity", "gpu.example.com", "memory"))),
    ('device.attributes["gpu.example.com"].tags.exists(t, t == "a")', (("attributes", "gpu.example.com", "tags"),)),
])
def test_reads_of_simple_selectors(expression: str, reads: tuple) -> None:
    assert compile_selector(expression).reads == tuple(sorted(reads))


@pytest.mark.parametrize("expression", [
    '"gpu.example.com" in device.attributes',                              # the whole map
    'size(device.attributes["gpu.example.com"]) > 1',                      # a whole domain
    'device.attributes[device.driver].model == "a"',                       # a computed domain
    'device.attributes["gpu.example.com"].?model.orValue("") == "a"',      # an optional lookup
    'cel.bind(d, device.attributes["gpu.example.com"], d.model == "a")',   # an alias of a domain
    '[device].exists(device, device.driver == "x")',                       # a shadowing variable
    'device.attributes.exists(k, k == "x")',                               # iteration
])
def test_selectors_that_read_more_are_evaluated_per_device(expression: str) -> None:
    assert compile_selector(expression).reads is None


def _device(name: str, **attrs: A) -> Device:
    return Device(name, dict(attrs), {"memory": DeviceCapacity(Quantity("40Gi"))})


def _direct(expression: str, d: Device) -> object:
    enc = encode_device(CelDevice(DRIVER, d.attributes, {k: c.value for k, c in d.capacity.items()}))
    try:
        return compile_selector(expression).matches(enc)
    except CelRuntimeError as exc:
        return f"error: {exc}"


def _cached(cache: SelectorCache, expression: str, d: Device) -> object:
    try:
        return cache.evaluate(expression, d, DRIVER, False)
    except CelRuntimeError as exc:
        return f"error: {exc}"


@pytest.mark.parametrize("expression", [
    'device.attributes["gpu.example.com"].model == "a"',
    'device.attributes["gpu.example.com"].model == "a" && device.capacity["gpu.example.com"].memory '
    '.compareTo(quantity("40Gi")) == 0',
    'device.attributes["gpu.example.com"].profile == "1g"',     # missing on some: no such key
    'device.attributes["gpu.example.com"].version.isGreaterThan(semver("1.0.0"))',
])
def test_shared_outcomes_equal_evaluation_on_each_device(expression: str) -> None:
    devices = [
        _device("a0", model=A("string", "a"), version=A("version", "1.2.0")),
        _device("a1", model=A("string", "a"), version=A("version", "1.2.0")),           # same reads as a0
        _device("b0", model=A("string", "b"), version=A("version", "0.1.0"), profile=A("string", "1g")),
        _device("bad", model=A("string", "a"), version=A("version", "1.2.0"), other=A("version", "x.y")),
        _device("full", **{"gpu.example.com/model": A("string", "a"), "version": A("version", "1.2.0")}),
        _device("both", **{"gpu.example.com/model": A("string", "b"), "model": A("string", "a"),
                           "version": A("version", "1.2.0")}),
    ]
    cache = SelectorCache()
    for d in devices + devices:
        assert _cached(cache, expression, d) == _direct(expression, d), d.name


def test_a_device_with_a_bad_attribute_keeps_its_own_error() -> None:
    cache = SelectorCache()
    expression = 'device.attributes["gpu.example.com"].model == "a"'
    good = _device("good", model=A("string", "a"))
    bad = _device("bad", model=A("string", "a"), broken=A("version", "not-a-version"))
    assert cache.evaluate(expression, good, DRIVER, False) is True
    with pytest.raises(CelRuntimeError, match="broken"):
        cache.evaluate(expression, bad, DRIVER, False)
