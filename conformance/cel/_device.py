"""Devices as the selector environment sees them, converted once and reused for every selector."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..model.attributes import AttributeValue, split_qualified_name
from ..quantity import Quantity
from ..semver import Semver
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
    """A device converted for the engine. Plain data: safe to share between threads.

    ``device`` is the value of the CEL variable ``device`` (real domains only) and ``data`` the
    evaluation input holding it; ``error`` is set
    when an attribute cannot be converted, in which case every evaluation fails with it, as
    upstream converts all attributes before each evaluation. ``largest`` is the size of the
    largest string, list or map reachable from ``device`` (used by the cost guard).
    """

    device: dict[str, Any]
    data: dict[str, Any]
    attribute_domains: frozenset[str]
    capacity_domains: frozenset[str]
    error: str | None
    largest: int


def _scalar(kind: str, value: Any) -> Any:
    if kind == "version":
        return semver_message(Semver.parse(value))
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


def _size(value: Any) -> int:
    if isinstance(value, (str, list, dict)):
        return len(value)
    return 1


def _largest(device: dict[str, Any]) -> int:
    largest = len(device["driver"])
    for maps in (device["attributes"], device["capacity"]):
        largest = max(largest, len(maps))
        for domain, entries in maps.items():
            largest = max(largest, len(domain), len(entries))
            for ident, value in entries.items():
                largest = max(largest, len(ident), _size(value))
                if isinstance(value, list):
                    largest = max([largest] + [_size(v) for v in value])
    return largest


def encode_device(dev: CelDevice) -> EncodedDevice:
    """Convert ``dev`` once; the result can be matched against any number of selectors."""
    attributes: dict[str, dict[str, Any]] = {}
    error: str | None = None
    for name, attr in dev.attributes.items():
        try:
            value = _attribute_value(attr)
        except ValueError as err:
            error = error or f"attribute {name}: {err}"
            continue
        domain, ident = split_qualified_name(name, dev.driver)
        attributes.setdefault(domain, {})[ident] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, quantity in dev.capacity.items():
        domain, ident = split_qualified_name(name, dev.driver)
        capacity.setdefault(domain, {})[ident] = quantity_message(Quantity.from_yaml(quantity))
    device = {"driver": dev.driver, "allowMultipleAllocations": bool(dev.allow_multiple_allocations),
              "attributes": attributes, "capacity": capacity}
    return EncodedDevice(device, {"device": device}, frozenset(attributes), frozenset(capacity), error,
                         _largest(device))
