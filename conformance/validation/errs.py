"""Building field paths and field errors as apimachinery's ``field`` package does."""

from __future__ import annotations

from typing import Any

from .verdict import OMIT, FieldErr, go_quote


def child(path: str, *names: str) -> str:
    for n in names:
        path = f"{path}.{n}" if path else n
    return path


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def key(path: str, k: str) -> str:
    return f"{path}[{k}]"


def invalid(path: str, value: Any, detail: str, *, covered: bool = False, origin: str = "") -> FieldErr:
    return FieldErr("FieldValueInvalid", path, detail, value=value, origin=origin, declarative=covered)


def required(path: str, detail: str = "", *, covered: bool = False, origin: str = "") -> FieldErr:
    return FieldErr("FieldValueRequired", path, detail, origin=origin, declarative=covered)


def forbidden(path: str, detail: str, *, covered: bool = False) -> FieldErr:
    return FieldErr("FieldValueForbidden", path, detail, declarative=covered)


def duplicate(path: str, value: Any, *, covered: bool = False) -> FieldErr:
    return FieldErr("FieldValueDuplicate", path, "", value=value, declarative=covered)


def not_found(path: str, value: Any) -> FieldErr:
    return FieldErr("FieldValueNotFound", path, "", value=value)


def too_long(path: str, max_len: int, *, covered: bool = False) -> FieldErr:
    detail = f"may not be more than {max_len} {'byte' if max_len == 1 else 'bytes'}" if max_len >= 0 else "value is too long"
    return FieldErr("FieldValueTooLong", path, detail, declarative=covered)


def too_many(path: str, actual: int, max_items: int, *, covered: bool = False) -> FieldErr:
    detail = f"must have at most {max_items} {'item' if max_items == 1 else 'items'}" if max_items >= 0 else "has too many items"
    return FieldErr("FieldValueTooMany", path, detail, value=actual if actual >= 0 else OMIT, declarative=covered)


def not_supported(path: str, value: Any, valid: list[str], *, covered: bool = False) -> FieldErr:
    detail = ""
    if valid:
        detail = "supported values: " + ", ".join(go_quote(str(v)) for v in valid)
    return FieldErr("FieldValueNotSupported", path, detail, value=value, declarative=covered)


def internal(path: str, detail: str) -> FieldErr:
    return FieldErr("InternalError", path, detail)


def unordered(errs: list[FieldErr]) -> list[FieldErr]:
    """Errors found while iterating a Go map: upstream's order among them is random."""
    from dataclasses import replace
    return [replace(e, unordered=True) for e in errs]


def mark(errs: list[FieldErr], *, covered: bool = True) -> list[FieldErr]:
    """``ErrorList.MarkCoveredByDeclarative()``."""
    from dataclasses import replace
    return [replace(e, declarative=covered) for e in errs]
