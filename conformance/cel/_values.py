"""Values as they cross between Python and the engine: quantities, semvers, equality, type names.

Python callbacks receive plain Python values (int, float, str, bytearray, list, dict, None, the
two message types, datetime values). cel-expr-python hands uints over as plain ints, so inside
callbacks int and uint cannot be told apart; equality and ordering across them are numeric in
CEL anyway.
"""

from __future__ import annotations

import datetime
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ..quantity import Quantity
from ..semver import Semver
from ._proto import QuantityMessage, SemverMessage

__all__ = [
    "quantity_message", "quantity_value", "semver_message", "semver_value",
    "is_quantity", "is_semver", "cel_equal", "cel_compare", "type_name", "NotComparable",
]


class NotComparable(Exception):
    """Two values without a CEL ordering between them."""


def quantity_message(value: Fraction | Quantity) -> Any:
    """The engine value of a quantity: its exact value as ``"num/den"`` (or ``"num"``)."""
    number = value.value if isinstance(value, Quantity) else value
    text = str(number.numerator) if number.denominator == 1 else f"{number.numerator}/{number.denominator}"
    return QuantityMessage(value=text)


@lru_cache(maxsize=4096)
def _fraction(text: str) -> Fraction:
    numerator, _, denominator = text.partition("/")
    return Fraction(int(numerator), int(denominator or 1))


def quantity_value(message: Any) -> Fraction:
    return _fraction(message.value)


def semver_message(version: Semver) -> Any:
    """The engine value of a version: its text without build metadata (equality ignores it)."""
    return SemverMessage(value=version.core())


@lru_cache(maxsize=4096)
def _semver(text: str) -> Semver:
    return Semver.parse(text)


def semver_value(message: Any) -> Semver:
    return _semver(message.value)


def is_quantity(value: object) -> bool:
    return type(value) is QuantityMessage


def is_semver(value: object) -> bool:
    return type(value) is SemverMessage


_NUMBER_TYPES = (int, float)
_BYTES_TYPES = (bytes, bytearray)


def cel_equal(a: object, b: object) -> bool:
    """CEL's heterogeneous equality (numbers compare across int/uint/double, other kinds never)."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if ta in _NUMBER_TYPES and tb in _NUMBER_TYPES:
        return a == b
    if ta is str or tb is str:
        return ta is tb and a == b
    if isinstance(a, _BYTES_TYPES) and isinstance(b, _BYTES_TYPES):
        return bytes(a) == bytes(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return _maps_equal(a, b)
    if a is None or b is None:
        return a is None and b is None
    return ta is tb and a == b


def _maps_equal(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    if len(a) != len(b):
        return False
    for key, value in a.items():
        match = next((k for k in b if cel_equal(k, key)), _MISSING)
        if match is _MISSING or not cel_equal(value, b[match]):
            return False
    return True


_MISSING = object()


def _order_class(value: object) -> str | None:
    kind = type(value)
    if kind is bool:
        return "bool"
    if kind in _NUMBER_TYPES:
        return "number"
    if kind is str:
        return "string"
    if kind in _BYTES_TYPES:
        return "bytes"
    if kind is datetime.timedelta:
        return "duration"
    if kind is datetime.datetime:
        return "timestamp"
    return None


def cel_compare(a: object, b: object) -> int:
    """-1/0/1 for values CEL can order (``NotComparable`` otherwise)."""
    cls_a, cls_b = _order_class(a), _order_class(b)
    if cls_a is None or cls_a != cls_b:
        raise NotComparable(f"{type_name(a)} and {type_name(b)}")
    left: Any = bytes(a) if cls_a == "bytes" else a  # type: ignore[call-overload]
    right: Any = bytes(b) if cls_a == "bytes" else b  # type: ignore[call-overload]
    return int(left > right) - int(left < right)


def type_name(value: object) -> str:
    """cel-go's name for the type of a Python-side value."""
    kind = type(value)
    names = {bool: "bool", int: "int", float: "double", str: "string", bytes: "bytes", bytearray: "bytes",
             list: "list", dict: "map", type(None): "null_type",
             datetime.timedelta: "google.protobuf.Duration", datetime.datetime: "google.protobuf.Timestamp"}
    if kind in names:
        return names[kind]
    if kind is QuantityMessage:
        return "kubernetes.Quantity"
    if kind is SemverMessage:
        return "kubernetes.Semver"
    return kind.__name__
