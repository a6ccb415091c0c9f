"""CEL selector and derived-attribute results per device, cached across allocators."""

from __future__ import annotations

from ..cel import CelDevice, CelRuntimeError, compile_selector, encode_device, evaluate_derived
from ..attributes import AttributeValue
from ..model.slice import Device


class SelectorCache:
    """CEL results per (expression, device); device attributes do not change during a run, so the
    cache may outlive one allocator. Encoded CEL inputs are cached per device too.

    ``allow_multiple`` is what CEL sees as ``device.allowMultipleAllocations``: the device's own
    field, except in the stable implementation, which never passes it (so it reads false)."""

    def __init__(self) -> None:
        self._encoded: dict[tuple[int, bool], tuple[Device, object]] = {}
        self._results: dict[tuple[str, int, bool], object] = {}

    def encoded(self, device: Device, driver: str, allow_multiple: bool | None = None) -> object:
        multi = device.allow_multiple_allocations if allow_multiple is None else allow_multiple
        hit = self._encoded.get((id(device), multi))
        if hit is None or hit[0] is not device:
            enc = encode_device(CelDevice(driver, device.attributes,
                                          {k: c.value for k, c in device.capacity.items()}, multi))
            hit = (device, enc)
            self._encoded[(id(device), multi)] = hit
        return hit[1]

    def derived(self, expression: str, device: Device, driver: str) -> AttributeValue:
        key = ("derived:" + expression, id(device), device.allow_multiple_allocations)
        got = self._results.get(key)
        if got is None:
            try:
                got = evaluate_derived(expression, self.encoded(device, driver))  # type: ignore[arg-type]
            except CelRuntimeError as exc:
                got = exc
            self._results[key] = got
        if isinstance(got, CelRuntimeError):
            raise got
        return got  # type: ignore[return-value]

    def evaluate(self, expression: str, device: Device, driver: str, allow_multiple: bool) -> bool:
        key = (expression, id(device), allow_multiple)
        got = self._results.get(key)
        if got is None:
            selector = compile_selector(expression)  # CelCompileError propagates
            try:
                got = selector.matches(self.encoded(device, driver, allow_multiple))  # type: ignore[arg-type]
            except CelRuntimeError as exc:
                got = exc
            self._results[key] = got
        if isinstance(got, CelRuntimeError):
            raise got
        return bool(got)
