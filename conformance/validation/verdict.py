"""Field errors and admission verdicts in the API server's own form.

:class:`FieldErr` is apimachinery's ``field.Error``: a type, a field path, the bad value and a
detail, printed exactly as ``Error()`` / ``ErrorBody()`` print them (``path: Invalid value: "x":
detail``, ``path: Required value``, ...). :class:`Verdict` is what an API server's admission
answers for one write: stored, refused by validation (``Invalid``, with the errors in order and
``NewInvalid``'s message) or refused by decoding (``BadRequest``). The reference and the oracle
both produce verdicts, so they compare field by field.
"""

from __future__ import annotations

import json
import math
import dataclasses
from dataclasses import dataclass
from typing import Any

# ErrorType -> the text ErrorType.String() gives.
TYPE_TEXT = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "FieldValueTooShort": "Too short",
    "FieldValueTooFew": "Too few",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}
_NO_VALUE = ("FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "FieldValueTooShort", "InternalError")


class Omit:
    """The bad value ``field.OmitValueType``: the body prints the type alone."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT = Omit()


def go_quote(s: str) -> str:
    """Go's ``%q`` / strconv.Quote of a string."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\a":
            out.append("\\a")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\v":
            out.append("\\v")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif not ch.isprintable() and o >= 0x80:
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_json(value: Any, sort_keys: bool = True) -> str:
    """encoding/json.Marshal of a plain value (HTML characters escaped as Go does); a map's keys
    are sorted, a struct's (``sort_keys=False``) keep their order."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and not math.isinf(value) else repr(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, GoRepr):
        return value.text
    return go_json(value)


@dataclass(frozen=True, slots=True)
class GoRepr:
    """A bad value whose Go rendering is given verbatim (a struct printed with ``%#v`` ...)."""

    text: str


@dataclass(frozen=True, slots=True)
class FieldErr:
    """One ``field.Error``. ``body`` may carry the rendered ErrorBody (as the oracle reports it);
    otherwise it is rendered from ``value`` and ``detail``. ``declarative`` marks an error that
    declarative validation reports (appended after the hand-written ones, upstream's order)."""

    type: str
    field: str
    detail: str = ""
    value: Any = dataclasses.field(default=OMIT, compare=False)
    body: str = ""
    origin: str = dataclasses.field(default="", compare=False)
    declarative: bool = dataclasses.field(default=False, compare=False)
    unordered: bool = dataclasses.field(default=False, compare=False)  # emitted while iterating a Go map

    def error_body(self) -> str:
        if self.body:
            return self.body
        text = TYPE_TEXT.get(self.type, self.type)
        if self.type not in _NO_VALUE and not isinstance(self.value, Omit):
            text = f"{text}: {format_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def message(self) -> str:
        return f"{self.field}: {self.error_body()}"

    def __str__(self) -> str:
        return self.message()


def aggregate(errors: "list[FieldErr] | tuple[FieldErr, ...]") -> str:
    """``ErrorList.ToAggregate().Error()``: duplicates (by message) dropped, one message bare,
    several in ``[a, b]``."""
    seen: list[str] = []
    for e in errors:
        m = e.message()
        if m not in seen:
            seen.append(m)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def invalid_message(qualified_kind: str, name: str, errors: "list[FieldErr] | tuple[FieldErr, ...]") -> str:
    """``errors.NewInvalid(kind, name, errs).Error()``."""
    if not errors:
        return f"{qualified_kind} {go_quote(name)} is invalid"
    return f"{qualified_kind} {go_quote(name)} is invalid: {aggregate(errors)}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What admission answers for one write."""

    accepted: bool
    stored: dict[str, Any] | None = None
    status: str = ""              # "Invalid", "BadRequest", ... when refused
    message: str = ""             # the Status message, as kubectl prints it after "Error from server"
    errors: tuple[FieldErr, ...] = ()


def qualified_kind(api_version: str, kind: str) -> str:
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    return f"{kind}.{group}" if group else kind


__all__ = ["FieldErr", "GoRepr", "OMIT", "Verdict", "aggregate", "format_value", "go_json", "go_quote",
           "invalid_message", "qualified_kind"]
