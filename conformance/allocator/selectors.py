"""CEL selector and derived-attribute results per device, cached across allocators."""

from __future__ import annotations

from ..cel import (CelDevice, CelRuntimeError, Selector, compile_selector, device_is_plain, encode_device,
                   evaluate_derived, read_key)
from ..attributes import AttributeValue
from ..model.slice import Device


class SelectorCache:
    """CEL results per (expression, device); device attributes do not change during a run, so the
    cache may outlive one allocator. Encoded CEL inputs are cached per device too.

    Devices that agree on every value a selector reads share its outcome (``Selector.reads``):
    across a cluster of identical GPUs a selector is evaluated once per distinct value, not once
    per device, and a device nothing was evaluated on yet is never encoded.

    ``allow_multiple`` is what CEL sees as ``device.allowMultipleAllocations``: the device's own
    field, except in the stable implementation, which never passes it (so it reads false)."""

    def __init__(self) -> None:
        self._encoded: dict[tuple[int, bool], tuple[Device, object]] = {}
        self._results: dict[tuple[str, int, bool], object] = {}
        self._plain: dict[int, tuple[Device, bool]] = {}
        self._selectors: dict[str, tuple[Selector, tuple[tuple[str, ...], ...] | None, bool]] = {}
        self._by_reads: dict[tuple[object, ...], object] = {}

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

    def _shared_key(self, reads: tuple[tuple[str, ...], ...], capacity: bool, device: Device,
                    driver: str) -> tuple[object, ...] | None:
        hit = self._plain.get(id(device))
        if hit is None or hit[0] is not device:
            hit = (device, device_is_plain(driver, device.attributes, device.capacity))
            self._plain[id(device)] = hit
        if not hit[1]:
            return None
        values = {k: c.value for k, c in device.capacity.items()} if capacity else {}
        return read_key(reads, driver, device.attributes, values)

    def _compiled(self, expression: str) -> tuple[Selector, tuple[tuple[str, ...], ...] | None, bool]:
        """The selector, its reads and whether they include a capacity (CelCompileError if it
        does not compile, every time)."""
        hit = self._selectors.get(expression)
        if hit is None:
            selector = compile_selector(expression)
            reads = selector.reads
            hit = (selector, reads, reads is not None and any(r[0] == "capacity" for r in reads))
            self._selectors[expression] = hit
        return hit

    def evaluate(self, expression: str, device: Device, driver: str, allow_multiple: bool) -> bool:
        key = (expression, id(device), allow_multiple)
        got = self._results.get(key)
        if got is None:
            selector, reads, capacity = self._compiled(expression)  # CelCompileError propagates
            shared = None
            if reads is not None:
                values = self._shared_key(reads, capacity, device, driver)
                if values is not None:
                    shared = (expression, allow_multiple, values)
                    got = self._by_reads.get(shared)
            if got is None:
                try:
                    got = selector.matches(self.encoded(device, driver, allow_multiple))  # type: ignore[arg-type]
                except CelRuntimeError as exc:
                    got = exc
                if shared is not None:
                    self._by_reads[shared] = got
            self._results[key] = got
        if isinstance(got, CelRuntimeError):
            raise got
        return bool(got)
