"""Exceptions of the CEL layer and the translation of engine messages into upstream wording.

cel-expr-python reports problems as ``absl::Status`` text (``NOT_FOUND: Key not found in map :
"model"``). Kubernetes reports cel-go's wording (``no such key: model``), and test cases match on
that, so every message leaving this package goes through :func:`runtime_error_text` or
:func:`compile_error_text`.
"""

from __future__ import annotations

import re

__all__ = ["CelCompileError", "CelRuntimeError", "runtime_error_text", "compile_error_text", "COST_LIMIT_TEXT",
           "NOT_ITERABLE_TEXT"]

COST_LIMIT_TEXT = "operation cancelled: actual cost limit exceeded"
#: Used when the offending type cannot be named (cel-go: ``got 'types.Int', expected iterable type``).
NOT_ITERABLE_TEXT = "got a value that is not a list or map, expected iterable type"

_STATUS_PREFIX = re.compile(r"^[A-Z][A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r"\s*\[[A-Z][A-Z_]+\]\s*$")
_MISSING_KEY = re.compile(r'^Key not found in map : (?:"(?P<s>.*)"|(?P<o>.*))$', re.S)
_INDEX_ERROR = re.compile(r"^Index error: index=(-?\d+) size=(\d+)$")


class CelCompileError(Exception):
    """An expression that does not compile. ``str(e)`` is the detail, as upstream reports it."""


class CelRuntimeError(Exception):
    """An evaluation error. ``str(e)`` uses cel-go's wording; ``engine_detail`` keeps the original."""

    def __init__(self, message: str, engine_detail: str | None = None) -> None:
        super().__init__(message)
        self.engine_detail = engine_detail if engine_detail is not None else message


def strip_status(raw: str) -> str:
    text = _STATUS_PREFIX.sub("", raw.strip(), count=1)
    return _STATUS_SUFFIX.sub("", text)


def runtime_error_text(raw: str) -> str:
    """Map an engine error (error value or exception text) to cel-go's message."""
    text = strip_status(raw)
    missing = _MISSING_KEY.match(text)
    if missing:
        key = missing.group("s") if missing.group("s") is not None else missing.group("o")
        return f"no such key: {key}"
    if text.startswith("No matching overloads found : <iter_range>"):
        return NOT_ITERABLE_TEXT
    if text.startswith("No matching overloads found"):
        return "no such overload"
    if text == "divide by zero":
        return "division by zero"
    index = _INDEX_ERROR.match(text)
    if index:
        return f"index '{index.group(1)}' out of range in list size '{index.group(2)}'"
    if "Iteration budget exceeded" in text:
        return COST_LIMIT_TEXT
    return text


def compile_error_text(raw: str) -> str:
    """Map a checker/parser error to upstream's ``compilation failed: ERROR: ...`` form."""
    return "compilation failed: " + strip_status(raw)
