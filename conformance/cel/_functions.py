"""The Kubernetes CEL libraries a DRA selector may call, as engine declarations + Python code.

This module holds the quantity and semver libraries, the strings extension (version 2, the
helpers live in ``_strings``) and the regex library (``find``, ``findAll``); the lists library,
``includes``, sets and the lists extension are in ``_lists``. See ``_decl`` for the rules the
engine imposes on declarations.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable

from cel_expr_python import cel

from .. import goregex
from ..quantity import MAX_INT64, MIN_INT64, Quantity
from ..semver import Semver
from . import _strings as strings
from ._ast import MATCHES_FUNCTION
from ._decl import LIST, NO_SUCH_OVERLOAD, CelFunctionError, Q, S, Sig, T, function, guard
from ._lists import MAX_INCLUDES_LIST, lists_declarations
from ._values import is_quantity, is_semver, quantity_message, quantity_value, semver_message, semver_value

__all__ = ["declarations", "MAX_INCLUDES_LIST", "NO_SUCH_OVERLOAD"]


# -- quantity library ---------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _quantity_message(text: str) -> Any:
    return quantity_message(Quantity.parse(text))


def _parse_quantity(text: str) -> Any:
    try:
        return _quantity_message(text)
    except ValueError as err:
        raise CelFunctionError(str(err)) from None


def _is_quantity(text: str) -> bool:
    try:
        Quantity.parse(text)
    except ValueError:
        return False
    return True


def _order(a: Any, b: Any) -> int:
    """compareTo for two quantities or two semvers (they share one run-time signature)."""
    if is_quantity(a) and is_quantity(b):
        x, y = quantity_value(a), quantity_value(b)
        return (x > y) - (x < y)
    if is_semver(a) and is_semver(b):
        return semver_value(a).compare(semver_value(b))
    raise CelFunctionError(NO_SUCH_OVERLOAD)


def _quantity(value: Any) -> Fraction:
    if not is_quantity(value):
        raise CelFunctionError(NO_SUCH_OVERLOAD)
    return quantity_value(value)


def _sign(value: Any) -> int:
    number = _quantity(value)
    return (number > 0) - (number < 0)


def _as_integer(value: Any) -> int:
    number = _quantity(value)
    if number.denominator != 1 or not MIN_INT64 <= number <= MAX_INT64:
        raise CelFunctionError("cannot convert value to integer")
    return int(number)


def _is_integer(value: Any) -> bool:
    number = _quantity(value)
    return number.denominator == 1 and MIN_INT64 <= number <= MAX_INT64


def _operand(value: Any) -> Fraction:
    if type(value) is int:
        return Fraction(value)
    return _quantity(value)


def _add(a: Any, b: Any) -> Any:
    return quantity_message(_quantity(a) + _operand(b))


def _sub(a: Any, b: Any) -> Any:
    return quantity_message(_quantity(a) - _operand(b))


def _quantity_decls() -> list[cel.FunctionDecl]:
    member = [
        ("isGreaterThan", lambda a, b: _order(a, b) > 0, T.BOOL),
        ("isLessThan", lambda a, b: _order(a, b) < 0, T.BOOL),
        ("compareTo", _order, T.INT),
    ]
    decls = [function(name, impl, [Sig("quantity", ret, (Q, Q)), Sig("semver", ret, (S, S))], True)
             for name, impl, ret in member]
    decls += [
        function("quantity", _parse_quantity, [Sig("string", Q, (T.STRING,))], False),
        function("isQuantity", _is_quantity, [Sig("string", T.BOOL, (T.STRING,))], False),
        function("sign", _sign, [Sig("quantity", T.INT, (Q,))], False),
        function("asApproximateFloat", lambda q: float(_quantity(q)), [Sig("quantity", T.DOUBLE, (Q,))], True),
        function("asInteger", _as_integer, [Sig("quantity", T.INT, (Q,))], True),
        function("isInteger", _is_integer, [Sig("quantity", T.BOOL, (Q,))], True),
        function("add", _add, [Sig("quantity", Q, (Q, Q)), Sig("int", Q, (Q, T.INT))], True),
        function("sub", _sub, [Sig("quantity", Q, (Q, Q)), Sig("int", Q, (Q, T.INT))], True),
    ]
    return decls


# -- semver library -----------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _parse_semver_cached(text: str, normalize: bool) -> Semver:
    return Semver.parse(text, normalize)


@lru_cache(maxsize=1024)
def _semver_message(text: str, normalize: bool) -> Any:
    return semver_message(_parse_semver_cached(text, normalize))


def _parse_semver(text: str, normalize: bool = False) -> Any:
    try:
        return _semver_message(text, normalize)
    except ValueError as err:
        raise CelFunctionError(str(err)) from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _parse_semver_cached(text, normalize)
    except ValueError:
        return False
    return True


def _int64(value: int) -> int:
    """Go's int64(uint64) conversion."""
    return (value + 2**63) % 2**64 - 2**63


def _version(value: Any) -> Semver:
    if not is_semver(value):
        raise CelFunctionError(NO_SUCH_OVERLOAD)
    return semver_value(value)


def _semver_decls() -> list[cel.FunctionDecl]:
    parts = (("major", lambda v: _int64(_version(v).major)), ("minor", lambda v: _int64(_version(v).minor)),
             ("patch", lambda v: _int64(_version(v).patch)))
    decls = [function(name, impl, [Sig("semver", T.INT, (S,))], True) for name, impl in parts]
    decls.append(function("semver", _parse_semver, [Sig("string", S, (T.STRING,)),
                                                      Sig("string_bool", S, (T.STRING, T.BOOL))], False))
    decls.append(function("isSemver", _is_semver, [Sig("string", T.BOOL, (T.STRING,)),
                                                     Sig("string_bool", T.BOOL, (T.STRING, T.BOOL))], False))
    return decls


# -- strings extension and regex ----------------------------------------------------------




def _regex(pattern: str, prefix: str = "") -> goregex.GoRegexp:
    """The pattern as Go compiles it; a refused one is the runtime error upstream gives."""
    try:
        return goregex.compile(pattern)
    except goregex.GoRegexpError as err:
        raise CelFunctionError(f"{prefix}{err}") from None
    except goregex.GoRegexpUnsupported as err:
        raise CelFunctionError(str(err)) from None


def _matches(text: str, pattern: str) -> bool:
    """``matches``, which the compiler points here (see ``_ast.MATCHES_FUNCTION``): the engine's
    own RE2 is not Go's (it takes ``\\C`` and names Unicode classes otherwise)."""
    return _regex(pattern).match(text)


def _find(text: str, pattern: str) -> str:
    return _regex(pattern, "Illegal regex: ").find(text)


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    return _regex(pattern, "Illegal regex: ").find_all(text, limit)


def _strings_decls() -> list[cel.FunctionDecl]:
    s, i = T.STRING, T.INT
    table: list[tuple[str, Callable[..., Any], list[Sig], bool]] = [
        ("charAt", strings.char_at, [Sig("int", s, (s, i))], True),
        ("lowerAscii", strings.lower_ascii, [Sig("", s, (s,))], True),
        ("upperAscii", strings.upper_ascii, [Sig("", s, (s,))], True),
        ("replace", strings.replace, [Sig("string_string", s, (s, s, s)), Sig("string_string_int", s, (s, s, s, i))], True),
        ("split", strings.split, [Sig("string", T.List(s), (s, s)), Sig("string_int", T.List(s), (s, s, i))], True),
        ("substring", strings.substring, [Sig("int", s, (s, i)), Sig("int_int", s, (s, i, i))], True),
        ("trim", strings.trim, [Sig("", s, (s,))], True),
        ("join", strings.join, [Sig("list", s, (T.List(s),)), Sig("list_string", s, (T.List(s), s))], True),
        ("format", strings.format_string, [Sig("list", s, (s, LIST))], True),
        ("strings.quote", strings.quote, [Sig("string", s, (s,))], False),
        (MATCHES_FUNCTION, _matches, [Sig("string_string", T.BOOL, (s, s))], False),
        ("find", _find, [Sig("string", s, (s, s))], True),
        ("findAll", _find_all, [Sig("string", T.List(s), (s, s)), Sig("string_int", T.List(s), (s, s, i))], True),
    ]
    return [function(name, guard(impl), sigs, member) for name, impl, sigs, member in table]


def declarations() -> list[cel.FunctionDecl]:
    """Every function declaration of the DRA selector environment that this package supplies."""
    return _quantity_decls() + _semver_decls() + lists_declarations() + _strings_decls()
