"""Helpers for declaring engine functions backed by Python callbacks.

Two engine rules shape every declaration:

* the engine dispatches on the *kind* of each argument (int, string, list, message, ...), so
  overloads with the same kinds (``compareTo`` on Quantity and on Semver; ``isSorted`` on every
  list type) share one Python function that looks at the values itself; :func:`function` binds
  the implementation to the first overload of each kind signature only;
* a parameter declared ``dyn`` never matches at run time, so every element type that can occur
  is declared explicitly; and the engine converts a callback's result to the result type of the
  overload it is bound to, so a result whose type varies must be declared ``dyn``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, NamedTuple

from cel_expr_python import cel

from ._nul import nul_safe
from ._proto import QUANTITY_TYPE, SEMVER_TYPE

__all__ = ["T", "Q", "S", "LIST", "MAP", "SCALARS", "ORDERED", "NO_SUCH_OVERLOAD", "Sig", "CelFunctionError",
           "function", "tname", "guard", "raise_pending"]

T = cel.Type
Q = T(QUANTITY_TYPE)
S = T(SEMVER_TYPE)
LIST = T.List(T.DYN)
MAP = T.Map(T.DYN, T.DYN)
NO_SUCH_OVERLOAD = "no such overload"

# Every kind a value can have at run time, as declared parameter types.
SCALARS = (T.INT, T.UINT, T.DOUBLE, T.BOOL, T.STRING, T.BYTES, T.NULL, T.DURATION, T.TIMESTAMP, Q, S)
ORDERED = (T.INT, T.UINT, T.DOUBLE, T.BOOL, T.DURATION, T.TIMESTAMP, T.STRING, T.BYTES)


class Sig(NamedTuple):
    """One overload: overload id suffix, result type, parameter types (receiver first)."""

    suffix: str
    result: Any
    params: tuple[Any, ...]


class CelFunctionError(ValueError):
    """Raised inside a callback; the engine turns it into an error value carrying the message."""


def _kind(t: Any) -> str:
    if t.is_message():
        return "message"
    name = str(t.name())
    return name.split("<", 1)[0]


def function(name: str, impl: Callable[..., Any], sigs: Iterable[Sig], member: bool) -> cel.FunctionDecl:
    """One declaration; the implementation is bound once per distinct run-time signature."""
    bound: set[tuple[str, ...]] = set()
    overloads = []
    for sig in sigs:
        kinds = tuple(_kind(p) for p in sig.params)
        # results holding a NUL reach the engine whole, or as an error (see _nul)
        wraps = sig.result == T.DYN or sig.result == LIST or sig.result == MAP
        extra = {} if kinds in bound else {"impl": _passing_interrupts(nul_safe(name, impl, wraps, CelFunctionError))}
        bound.add(kinds)
        overload_id = f"drakit_{name.replace('.', '_').lstrip('@')}_{sig.suffix}"
        overloads.append(cel.Overload(overload_id, sig.result, list(sig.params), is_member=member, **extra))
    return cel.FunctionDecl(name, overloads)


# The engine turns whatever a callback raises into an evaluation error, a KeyboardInterrupt or a
# case's time budget (BaseExceptions) included; the one a callback raised in this thread waits
# here, to be raised again once the engine returns (:func:`raise_pending`).
_pending = threading.local()


def _passing_interrupts(impl: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        try:
            return impl(*args)
        except Exception:
            raise
        except BaseException as exc:  # not the engine's to turn into an error value
            _pending.exc = exc
            raise
    return run


def raise_pending() -> None:
    """Raise again the interrupt a callback raised during the last evaluation in this thread."""
    exc = getattr(_pending, "exc", None)
    if exc is not None:
        _pending.exc = None
        raise exc


def tname(t: Any) -> str:
    """A type's name as it may appear in an overload id (``list_int``, ``kubernetes_quantity``)."""
    return str(t.name()).lower().replace(".", "_").replace("<", "_").replace(">", "").replace(", ", "_")


def guard(impl: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a ValueError from a helper into an engine error value carrying its message."""
    def run(*args: Any) -> Any:
        try:
            return impl(*args)
        except ValueError as err:
            raise CelFunctionError(str(err)) from None
    return run
