"""The Kubernetes lists library, DRA's ``includes``, cel-go's sets and lists extensions.

``isSorted sum min max indexOf lastIndexOf includes`` as Kubernetes defines them (the string
forms of ``indexOf``/``lastIndexOf`` are declared here too: one name, one declaration), the sets
extension (``sets.contains/equivalent/intersects``) and the lists extension version 3 without the
``sortBy`` macro (``slice flatten distinct reverse sort lists.range``). Element comparisons use
CEL's heterogeneous equality and ordering.
"""

from __future__ import annotations

import datetime
from typing import Any, Callable, TypeVar

from cel_expr_python import cel

from ..quantity import MAX_INT64, MIN_INT64
from . import _strings as strings
from ._decl import LIST, MAP, NO_SUCH_OVERLOAD, ORDERED, SCALARS, CelFunctionError, Sig, T, function, guard, tname
from ._values import NotComparable, cel_compare, cel_equal, is_quantity, is_semver

__all__ = ["lists_declarations", "MAX_INCLUDES_LIST"]

#: DRA's ``includes`` refuses to look past this many list elements.
MAX_INCLUDES_LIST = 48

_MISSING = object()
_TIME_TYPES = (datetime.timedelta, datetime.datetime)


_V = TypeVar("_V")


def _returnable(value: _V, function: str) -> _V:
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
    return guard(dispatch)


def _element_sigs(result: Any) -> list[Sig]:
    sigs = [Sig(f"list_{tname(t)}", result, (T.List(t), t)) for t in SCALARS]
    sigs.append(Sig("list_list", result, (T.List(LIST), LIST)))
    sigs.append(Sig("list_map", result, (T.List(MAP), MAP)))
    return sigs


def _lists_decls() -> list[cel.FunctionDecl]:
    decls = [
        function("isSorted", _is_sorted, [Sig(f"list_{tname(t)}", T.BOOL, (T.List(t),)) for t in ORDERED], True),
        # The engine converts a callback's result to the result type of the overload it is bound
        # to, and refuses overlapping overloads, so value-returning list functions are list(dyn).
        function("sum", _sum, [Sig("list", T.DYN, (LIST,))], True),
        function("min", _extreme("min", 1), [Sig("list", T.DYN, (LIST,))], True),
        function("max", _extreme("max", -1), [Sig("list", T.DYN, (LIST,))], True),
    ]
    string_index = [Sig("string", T.INT, (T.STRING, T.STRING)),
                    Sig("string_int", T.INT, (T.STRING, T.STRING, T.INT))]
    decls.append(function("indexOf", _string_or_list(strings.index_of, _index_of),
                           string_index + _element_sigs(T.INT), True))
    decls.append(function("lastIndexOf", _string_or_list(strings.last_index_of, _last_index_of),
                           string_index + _element_sigs(T.INT), True))
    scalar_pairs = [Sig(f"{tname(a)}_{tname(b)}", T.BOOL, (a, b)) for a in SCALARS for b in SCALARS]
    decls.append(function("includes", _includes, _element_sigs(T.BOOL) + scalar_pairs, True))
    return decls


# -- sets and list extensions -------------------------------------------------------------


def _contains_all(haystack: Any, needles: Any) -> bool:
    items = _list(haystack)
    return all(any(cel_equal(have, want) for have in items) for want in _list(needles))


def _sets_decls() -> list[cel.FunctionDecl]:
    pair = [Sig("list_list", T.BOOL, (LIST, LIST))]
    return [
        function("sets.contains", _contains_all, pair, False),
        function("sets.equivalent", lambda a, b: _contains_all(a, b) and _contains_all(b, a), pair, False),
        function("sets.intersects",
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
        function("slice", lambda items, a, b: _returnable(_slice(items, a, b), "slice"), [Sig("list_int_int", LIST, (LIST, T.INT, T.INT))], True),
        function("flatten", lambda items, depth=1: _returnable(_flatten(items, depth), "flatten"), [Sig("list", LIST, (LIST,)), Sig("list_int", LIST, (LIST, T.INT))], True),
        function("distinct", lambda items: _returnable(_distinct(items), "distinct"), [Sig("list", LIST, (LIST,))], True),
        function("reverse", lambda items: _returnable(list(reversed(_list(items))), "reverse"), [Sig("list", LIST, (LIST,))], True),
        function("sort", _sort, [Sig("list", LIST, (LIST,))], True),
        function("lists.range", _range, [Sig("int", T.List(T.INT), (T.INT,))], False),
    ]


def lists_declarations() -> list[cel.FunctionDecl]:
    return _lists_decls() + _sets_decls() + _list_ext_decls()
