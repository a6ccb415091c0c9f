"""Devices as the selector environment sees them, converted once and reused for every selector."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from ..attributes import AttributeValue, split_qualified_name
from ..quantity import Quantity
from ..semver import Semver
from ._nul import engine_value, has_nul
from ._values import quantity_message, semver_message

__all__ = ["CelDevice", "EncodedDevice", "encode_device"]


@dataclass(frozen=True)
class CelDevice:
    """The inputs of a selector: what upstream's ``cel.Device`` carries.

    Attribute and capacity keys are the slice's qualified names: ``dom/id``, or a bare ``id``
    that belongs to the driver's own domain.
    """

    driver: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, Quantity] = field(default_factory=dict)
    allow_multiple_allocations: bool = False


@dataclass(frozen=True, eq=False)
class EncodedDevice:
    """A device converted for the engine: immutable data plus a per-thread cache of engine inputs,
    so one instance can be matched against any number of selectors from any thread.

    ``device`` is the value of the CEL variable ``device`` (real domains only) and ``data`` the
    evaluation input holding it. ``error`` is set when an attribute cannot be converted; every
    evaluation then fails with it, as upstream converts all attributes before each evaluation.
    ``largest`` is the size of the largest string, list or map reachable from ``device`` (used by
    the cost guard); ``source`` is the device it was made from (pickling re-encodes it).
    """

    device: dict[str, Any]
    data: dict[str, Any]
    attribute_domains: frozenset[str]
    capacity_domains: frozenset[str]
    error: str | None
    largest: int
    source: CelDevice
    # Engine activations built from this device, one per variant of the input (see Selector).
    # They convert values lazily and keep them, which makes further evaluations much cheaper.
    # An activation only works in the thread that created it, hence one cache per thread.
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def activations(self) -> dict[Any, Any]:
        """This thread's cache of engine activations for this device."""
        try:
            cache: dict[Any, Any] = self._local.activations
        except AttributeError:
            cache = self._local.activations = {}
        return cache

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (encode_device, (self.source,))


@lru_cache(maxsize=4096)
def _version_message(text: str) -> Any:
    return semver_message(Semver.parse(text))


def _scalar(kind: str, value: Any) -> Any:
    if kind == "version":
        return _version_message(value)
    return value


def _attribute_value(attr: AttributeValue) -> Any:
    """The engine value of one attribute; ValueError with upstream's reason when impossible."""
    kind = attr.element_kind
    if kind is None:
        raise ValueError("unsupported attribute value")
    try:
        if attr.is_list:
            return [_scalar(kind, v) for v in attr.elements()]
        return _scalar(kind, attr.value)
    except ValueError as err:
        raise ValueError(f"parse semantic version: {err}") from None


def _extent(attr: AttributeValue) -> int:
    """Size of the largest string or list inside one attribute value."""
    if attr.kind == "string":
        return len(attr.value)  # type: ignore[arg-type]
    if attr.kind == "strings":
        return max([len(attr.elements())] + [len(v) for v in attr.elements()])  # type: ignore[arg-type]
    return len(attr.elements()) if attr.is_list else 1


def encode_device(dev: CelDevice) -> EncodedDevice:
    """Convert ``dev`` once; the result can be matched against any number of selectors."""
    attributes: dict[str, dict[str, Any]] = {}
    error: str | None = None
    largest = max(len(dev.driver), len(dev.attributes), len(dev.capacity))
    for name, attr in dev.attributes.items():
        try:
            value = _attribute_value(attr)
        except ValueError as err:
            error = error or f"attribute {name}: {err}"
            continue
        domain, ident = split_qualified_name(name, dev.driver)
        attributes.setdefault(domain, {})[ident] = value
        largest = max(largest, len(domain), len(ident), _extent(attr))
    capacity: dict[str, dict[str, Any]] = {}
    for name, quantity in dev.capacity.items():
        domain, ident = split_qualified_name(name, dev.driver)
        capacity.setdefault(domain, {})[ident] = quantity_message(Quantity.from_yaml(quantity))
        largest = max(largest, len(domain), len(ident))
    device = {"driver": dev.driver, "allowMultipleAllocations": bool(dev.allow_multiple_allocations),
              "attributes": attributes, "capacity": capacity}
    # the engine's copy: strings holding a NUL wrapped, or the same object (see _nul)
    engine = engine_value(device) if has_nul(dev.driver) or any(has_nul(a.value) for a in dev.attributes.values()) else device
    return EncodedDevice(device, {"device": engine}, frozenset(attributes), frozenset(capacity), error, largest,
                         dev)
