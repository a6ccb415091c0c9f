"""The Kubernetes CEL libraries a DRA selector may call, as engine declarations + Python code.

Covered: the quantity and semver libraries, the lists library (``isSorted sum min max indexOf
lastIndexOf``), DRA's ``includes``, cel-go's sets extension, the list extension (version 3,
without the ``sortBy`` macro), the strings extension (version 2, see ``_strings``) and the
regex library (``find``, ``findAll``).

Two engine rules shape the declarations:

* the engine dispatches on the *kind* of each argument (int, string, list, message, ...), so
  two overloads with the same kinds (``compareTo`` on Quantity and on Semver; ``isSorted`` on
  every list type) share one Python function that looks at the values itself;
* a parameter declared ``dyn`` never matches at run time, so every element type that can occur
  is declared explicitly.
"""

from __future__ import annotations

import datetime
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable, Iterable, NamedTuple

from cel_expr_python import cel

from ..quantity import MAX_INT64, MIN_INT64, Quantity
from ..semver import Semver
from . import _strings as strings
from ._proto import QUANTITY_TYPE, SEMVER_TYPE
from ._values import (NotComparable, cel_compare, cel_equal, is_quantity, is_semver, quantity_message,
                      quantity_value, semver_message, semver_value)

__all__ = ["declarations", "MAX_INCLUDES_LIST", "NO_SUCH_OVERLOAD"]

T = cel.Type
Q = T(QUANTITY_TYPE)
S = T(SEMVER_TYPE)
LIST = T.List(T.DYN)
MAP = T.Map(T.DYN, T.DYN)

#: DRA's ``includes`` refuses to look past this many list elements.
MAX_INCLUDES_LIST = 48
NO_SUCH_OVERLOAD = "no such overload"

# Every kind a value can have at run time, as declared parameter types.
SCALARS = (T.INT, T.UINT, T.DOUBLE, T.BOOL, T.STRING, T.BYTES, T.NULL, T.DURATION, T.TIMESTAMP, Q, S)
ORDERED = (T.INT, T.UINT, T.DOUBLE, T.BOOL, T.DURATION, T.TIMESTAMP, T.STRING, T.BYTES)


class _Sig(NamedTuple):
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


def _function(name: str, impl: Callable[..., Any], sigs: Iterable[_Sig], member: bool) -> cel.FunctionDecl:
    """One declaration; the implementation is bound once per distinct run-time signature."""
    bound: set[tuple[str, ...]] = set()
    overloads = []
    for sig in sigs:
        kinds = tuple(_kind(p) for p in sig.params)
        extra = {} if kinds in bound else {"impl": impl}
        bound.add(kinds)
        overload_id = f"drakit_{name.replace('.', '_')}_{sig.suffix}"
        overloads.append(cel.Overload(overload_id, sig.result, list(sig.params), is_member=member, **extra))
    return cel.FunctionDecl(name, overloads)


def _tname(t: Any) -> str:
    return str(t.name()).lower().replace(".", "_").replace("<", "_").replace(">", "").replace(", ", "_")


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
    decls = [_function(name, impl, [_Sig("quantity", ret, (Q, Q)), _Sig("semver", ret, (S, S))], True)
             for name, impl, ret in member]
    decls += [
        _function("quantity", _parse_quantity, [_Sig("string", Q, (T.STRING,))], False),
        _function("isQuantity", _is_quantity, [_Sig("string", T.BOOL, (T.STRING,))], False),
        _function("sign", _sign, [_Sig("quantity", T.INT, (Q,))], False),
        _function("asApproximateFloat", lambda q: float(_quantity(q)), [_Sig("quantity", T.DOUBLE, (Q,))], True),
        _function("asInteger", _as_integer, [_Sig("quantity", T.INT, (Q,))], True),
        _function("isInteger", _is_integer, [_Sig("quantity", T.BOOL, (Q,))], True),
        _function("add", _add, [_Sig("quantity", Q, (Q, Q)), _Sig("int", Q, (Q, T.INT))], True),
        _function("sub", _sub, [_Sig("quantity", Q, (Q, Q)), _Sig("int", Q, (Q, T.INT))], True),
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
    decls = [_function(name, impl, [_Sig("semver", T.INT, (S,))], True) for name, impl in parts]
    decls.append(_function("semver", _parse_semver, [_Sig("string", S, (T.STRING,)),
                                                      _Sig("string_bool", S, (T.STRING, T.BOOL))], False))
    decls.append(_function("isSemver", _is_semver, [_Sig("string", T.BOOL, (T.STRING,)),
                                                     _Sig("string_bool", T.BOOL, (T.STRING, T.BOOL))], False))
    return decls


# -- lists library ------------------------------------------------------------------------

_MISSING = object()
_TIME_TYPES = (datetime.timedelta, datetime.datetime)


def _returnable(value: Any, function: str) -> Any:
    """The engine cannot take durations or timestamps back from Python."""
    if isinstance(value, _TIME_TYPES) or (isinstance(value, list) and any(isinstance(v, _TIME_TYPES) for v in value)):
        raise CelFunctionError(f"{function}() over durations or timestamps is not supported by this kit's CEL engine")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise CelFunctionError(NO_SUCH_OVERLOAD)
    return value


def _greater(a: Any, b: Any) -> bool:
    """a > b, or False when CEL has no ordering between them (upstream ignores those pairs)."""
    try:
        return cel_compare(a, b) > 0
    except NotComparable:
        return False


def _ordered_item(item: Any) -> Any:
    if is_quantity(item) or is_semver(item) or isinstance(item, (list, dict)) or item is None:
        raise CelFunctionError(NO_SUCH_OVERLOAD)
    return item


def _is_sorted(items: Any) -> bool:
    previous = _MISSING
    for item in _list(items):
        _ordered_item(item)
        if previous is not _MISSING and _greater(previous, item):
            return False
        previous = item
    return True


def _extreme(name: str, prefer: int) -> Callable[[Any], Any]:
    def pick(items: Any) -> Any:
        best = _MISSING
        for item in _list(items):
            _ordered_item(item)
            if best is _MISSING:
                best = item
                continue
            try:
                if cel_compare(best, item) == prefer:
                    best = item
            except NotComparable:
                pass
        if best is _MISSING:
            raise CelFunctionError(f"{name} called on empty list")
        return _returnable(best, name)
    return pick


_SUMMABLE_KINDS = (int, float, datetime.timedelta)


def _sum(items: Any) -> Any:
    values = _list(items)
    if not values:
        return 0
    kinds = {type(v) for v in values}
    if len(kinds) != 1 or next(iter(kinds)) not in _SUMMABLE_KINDS:
        raise CelFunctionError(NO_SUCH_OVERLOAD)
    total = values[0]
    for item in values[1:]:
        total = total + item
        if type(total) is int and not MIN_INT64 <= total <= MAX_INT64:
            raise CelFunctionError("integer overflow")
    return _returnable(total, "sum")


def _index_of(items: Any, wanted: Any) -> int:
    for i, item in enumerate(_list(items)):
        if cel_equal(item, wanted):
            return i
    return -1


def _last_index_of(items: Any, wanted: Any) -> int:
    values = _list(items)
    for i in range(len(values) - 1, -1, -1):
        if cel_equal(values[i], wanted):
            return i
    return -1


def _includes(target: Any, wanted: Any) -> bool:
    if not isinstance(target, list):
        return cel_equal(target, wanted)
    for i, item in enumerate(target):
        if i >= MAX_INCLUDES_LIST:
            raise CelFunctionError(
                f"'includes' function cannot be applied to lists longer than {MAX_INCLUDES_LIST} values")
        if cel_equal(item, wanted):
            return True
    return False


def _string_or_list(string_impl: Callable[..., Any], list_impl: Callable[..., Any]) -> Callable[..., Any]:
    def dispatch(target: Any, *args: Any) -> Any:
        if type(target) is str:
            return string_impl(target, *args)
        return list_impl(target, *args)
    return _guard(dispatch)


def _element_sigs(result: Any) -> list[_Sig]:
    sigs = [_Sig(f"list_{_tname(t)}", result, (T.List(t), t)) for t in SCALARS]
    sigs.append(_Sig("list_list", result, (T.List(LIST), LIST)))
    sigs.append(_Sig("list_map", result, (T.List(MAP), MAP)))
    return sigs


def _lists_decls() -> list[cel.FunctionDecl]:
    decls = [
        _function("isSorted", _is_sorted, [_Sig(f"list_{_tname(t)}", T.BOOL, (T.List(t),)) for t in ORDERED], True),
        # The engine converts a callback's result to the result type of the overload it is bound
        # to, and refuses overlapping overloads, so value-returning list functions are list(dyn).
        _function("sum", _sum, [_Sig("list", T.DYN, (LIST,))], True),
        _function("min", _extreme("min", 1), [_Sig("list", T.DYN, (LIST,))], True),
        _function("max", _extreme("max", -1), [_Sig("list", T.DYN, (LIST,))], True),
    ]
    string_index = [_Sig("string", T.INT, (T.STRING, T.STRING)),
                    _Sig("string_int", T.INT, (T.STRING, T.STRING, T.INT))]
    decls.append(_function("indexOf", _string_or_list(strings.index_of, _index_of),
                           string_index + _element_sigs(T.INT), True))
    decls.append(_function("lastIndexOf", _string_or_list(strings.last_index_of, _last_index_of),
                           string_index + _element_sigs(T.INT), True))
    scalar_pairs = [_Sig(f"{_tname(a)}_{_tname(b)}", T.BOOL, (a, b)) for a in SCALARS for b in SCALARS]
    decls.append(_function("includes", _includes, _element_sigs(T.BOOL) + scalar_pairs, True))
    return decls


# -- sets and list extensions -------------------------------------------------------------


def _contains_all(haystack: Any, needles: Any) -> bool:
    items = _list(haystack)
    return all(any(cel_equal(have, want) for have in items) for want in _list(needles))


def _sets_decls() -> list[cel.FunctionDecl]:
    pair = [_Sig("list_list", T.BOOL, (LIST, LIST))]
    return [
        _function("sets.contains", _contains_all, pair, False),
        _function("sets.equivalent", lambda a, b: _contains_all(a, b) and _contains_all(b, a), pair, False),
        _function("sets.intersects",
                  lambda a, b: any(cel_equal(x, y) for x in _list(a) for y in _list(b)), pair, False),
    ]


def _slice(items: Any, start: int, end: int) -> list[Any]:
    values = _list(items)
    if start < 0 or end < 0:
        raise CelFunctionError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise CelFunctionError(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if end > len(values):
        raise CelFunctionError(f"cannot slice({start}, {end}), list is length {len(values)}")
    return values[start:end]


def _flatten(items: Any, depth: int = 1) -> list[Any]:
    if depth < 0:
        raise CelFunctionError("level must be non-negative")
    out: list[Any] = []
    for item in _list(items):
        if isinstance(item, list) and depth > 0:
            out.extend(_flatten(item, depth - 1))
        else:
            out.append(item)
    return out


def _distinct(items: Any) -> list[Any]:
    out: list[Any] = []
    for item in _list(items):
        if not any(cel_equal(item, seen) for seen in out):
            out.append(item)
    return out


def _sort(items: Any) -> list[Any]:
    values = [_ordered_item(v) for v in _list(items)]
    try:
        for a, b in zip(values, values[1:]):
            cel_compare(a, b)
    except NotComparable:
        raise CelFunctionError(NO_SUCH_OVERLOAD) from None
    return _returnable(sorted(values, key=_SortKey), "sort")


class _SortKey:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _SortKey) -> bool:
        return cel_compare(self.value, other.value) < 0


def _range(count: int) -> list[int]:
    return list(range(count)) if count > 0 else []


def _list_ext_decls() -> list[cel.FunctionDecl]:
    return [
        _function("slice", lambda items, a, b: _returnable(_slice(items, a, b), "slice"), [_Sig("list_int_int", LIST, (LIST, T.INT, T.INT))], True),
        _function("flatten", lambda items, depth=1: _returnable(_flatten(items, depth), "flatten"), [_Sig("list", LIST, (LIST,)), _Sig("list_int", LIST, (LIST, T.INT))], True),
        _function("distinct", lambda items: _returnable(_distinct(items), "distinct"), [_Sig("list", LIST, (LIST,))], True),
        _function("reverse", lambda items: _returnable(list(reversed(_list(items))), "reverse"), [_Sig("list", LIST, (LIST,))], True),
        _function("sort", _sort, [_Sig("list", LIST, (LIST,))], True),
        _function("lists.range", _range, [_Sig("int", T.List(T.INT), (T.INT,))], False),
    ]


# -- strings extension and regex ----------------------------------------------------------


def _guard(impl: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a ValueError from a string helper into an engine error value."""
    def run(*args: Any) -> Any:
        try:
            return impl(*args)
        except ValueError as err:
            raise CelFunctionError(str(err)) from None
    return run


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.ASCII)
    except re.error as err:
        raise CelFunctionError(f"error parsing regexp: {err}") from None


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _strings_decls() -> list[cel.FunctionDecl]:
    s, i = T.STRING, T.INT
    table: list[tuple[str, Callable[..., Any], list[_Sig], bool]] = [
        ("charAt", strings.char_at, [_Sig("int", s, (s, i))], True),
        ("lowerAscii", strings.lower_ascii, [_Sig("", s, (s,))], True),
        ("upperAscii", strings.upper_ascii, [_Sig("", s, (s,))], True),
        ("replace", strings.replace, [_Sig("string_string", s, (s, s, s)), _Sig("string_string_int", s, (s, s, s, i))], True),
        ("split", strings.split, [_Sig("string", T.List(s), (s, s)), _Sig("string_int", T.List(s), (s, s, i))], True),
        ("substring", strings.substring, [_Sig("int", s, (s, i)), _Sig("int_int", s, (s, i, i))], True),
        ("trim", strings.trim, [_Sig("", s, (s,))], True),
        ("join", strings.join, [_Sig("list", s, (T.List(s),)), _Sig("list_string", s, (T.List(s), s))], True),
        ("format", strings.format_string, [_Sig("list", s, (s, LIST))], True),
        ("strings.quote", strings.quote, [_Sig("string", s, (s,))], False),
        ("find", _find, [_Sig("string", s, (s, s))], True),
        ("findAll", _find_all, [_Sig("string", T.List(s), (s, s)), _Sig("string_int", T.List(s), (s, s, i))], True),
    ]
    return [_function(name, _guard(impl), sigs, member) for name, impl, sigs, member in table]


def declarations() -> list[cel.FunctionDecl]:
    """Every function declaration of the DRA selector environment that this package supplies."""
    return (_quantity_decls() + _semver_decls() + _lists_decls() + _sets_decls() + _list_ext_decls()
            + _strings_decls())
