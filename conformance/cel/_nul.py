"""Strings holding a NUL character (``"\\x00"``) on their way into the engine.

cel-expr-python converts a Python ``str`` to a CEL string as a C string: it is cut at its first
NUL, both in evaluation inputs (an attribute ``"a\\x00b"`` was seen as ``"a"``) and in what a
Python callback returns (``"a\\x00b".lowerAscii()`` gave ``"a"``). cel-go, upstream's engine,
keeps the whole string. A ``google.protobuf.StringValue`` crosses intact and CEL unwraps it to a
plain ``string``, so such strings go in wrapped; strings without a NUL go in as they are.

A callback whose overload is declared to return ``string`` (or a list of strings) cannot hand the
engine a wrapper (the engine checks the declared type), so there a result holding a NUL is a
runtime error saying so, never a cut string: the one divergence left (upstream returns the
string), listed in ``conformance/cel/__init__.py``.
"""

from __future__ import annotations

from typing import Any, Callable

from google.protobuf.wrappers_pb2 import StringValue

__all__ = ["NUL_RESULT_TEXT", "engine_value", "has_nul", "nul_safe"]

NUL_RESULT_TEXT = ("{name}: the result holds a NUL character (\\x00), which this kit's CEL engine (cel-expr-python) "
                   "would cut there; upstream keeps it (a known divergence)")


def has_nul(value: Any) -> bool:
    """Whether a string inside ``value`` (a str, or lists and maps of them) holds a NUL."""
    t = type(value)
    if t is str:
        return "\x00" in value
    if t is list or t is tuple:
        return any(has_nul(v) for v in value)
    if t is dict:
        return any(has_nul(v) for v in value.values())
    return False


def engine_value(value: Any) -> Any:
    """``value`` with every string that holds a NUL wrapped (the same object when none does)."""
    t = type(value)
    if t is str:
        return StringValue(value=value) if "\x00" in value else value
    if (t is list or t is tuple or t is dict) and not has_nul(value):
        return value
    if t is list or t is tuple:
        return [engine_value(v) for v in value]
    if t is dict:
        return {k: engine_value(v) for k, v in value.items()}
    return value


def nul_safe(name: str, impl: Callable[..., Any], wraps: bool, error: type[Exception]) -> Callable[..., Any]:
    """``impl`` whose results reach the engine whole: wrapped when the overload's result type
    allows it (``wraps``: dyn, list(dyn), map), else ``error`` (which the engine turns into a
    runtime error) naming the function."""

    def run(*args: Any) -> Any:
        out = impl(*args)
        t = type(out)
        if t is str:
            if "\x00" not in out:
                return out
        elif t is not list and t is not dict or not has_nul(out):
            return out
        if wraps:
            return engine_value(out)
        raise error(NUL_RESULT_TEXT.format(name=name))
    return run
