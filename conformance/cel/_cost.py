"""An upper bound of cel-go's *actual* evaluation cost, from the checked AST.

Kubernetes stops a selector evaluation once its running cost passes 1,000,000 units. The engine
used here counts nothing, so this module walks the (rewritten) checked AST once and adds up the
units cel-go's cost tracker would charge, using the cost rules of cel-go's interpreter and
Kubernetes' library estimator: 1 per identifier, field selection and index step, 0 for constants
and ``has()``, 10 per list literal and 30 per map literal, string functions proportional to their
lengths (factor 0.1), regex functions length times pattern length (0.1 x 0.25), list functions
proportional to the list size, and every comprehension iteration charged with its loop condition
plus loop step.

Where the walk knows a value (constants, anything reached from ``device`` by constant keys) it
uses the real size; elsewhere it uses a bound: a device value of unknown shape is assumed to have
at most ``bound`` elements (64 is the API's limit for attribute values), and a function result is
bounded from its inputs (``split`` of an n-character string gives at most n+1 strings, ...).

It is an *upper bound*: comprehensions are charged for every element even where cel-go would
stop early (``exists`` finding a match), both branches of ``&&``/``||`` are charged, and the
larger branch of ``?:``. So an expression can be rejected here whose actual upstream cost stays
under the limit; the reverse should not happen for the constructs listed above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

from ._ast import DOMAIN_LOOKUP_FUNCTION, HIDDEN_FIELDS, MATCHES_FUNCTION, is_bind, walk
from ._proto import QuantityMessage, SemverMessage

__all__ = ["estimate_cost", "non_iterable_range", "value_size", "API_VALUE_BOUND"]

#: Largest list or string an attribute value may have under API validation.
API_VALUE_BOUND = 64

_STRING_FACTOR = 0.1
_REGEX_FACTOR = 0.25
_LIST_CREATE = 10
_MAP_CREATE = 30
_STRUCT_CREATE = 40
_UNKNOWN: Any = object()


@dataclass(frozen=True, slots=True)
class _Est:
    cost: int
    size: int = 1          # bound on len() of the value (1 for scalars)
    item: int = 1          # bound on the size of its elements (list items, map keys and values)
    value: Any = _UNKNOWN  # the concrete value, where the walk knows it


def _ceil(x: float) -> int:
    return int(math.ceil(x))


def value_size(value: Any) -> int:
    """cel-go's ``actualSize``: length of strings, bytes, lists and maps; 1 otherwise."""
    if isinstance(value, (str, bytes, bytearray, list, dict)):
        return len(value)
    return 1


def _item_size(value: Any) -> int:
    if isinstance(value, list):
        return max((value_size(v) for v in value), default=1)
    if isinstance(value, dict):
        return max((max(value_size(k), value_size(v)) for k, v in value.items()), default=1)
    return 1


def _known(cost: int, value: Any) -> _Est:
    return _Est(cost, value_size(value), _item_size(value), value)


class _Estimator:
    def __init__(self, device: Any, bound: int) -> None:
        self.device = device
        self.bound = bound
        self.domain_maps = self._domain_maps(device)

    @staticmethod
    def _domain_maps(device: Any) -> tuple[int, ...]:
        if not isinstance(device, dict):
            return ()
        names = tuple(HIDDEN_FIELDS) + tuple(HIDDEN_FIELDS.values())
        return tuple(id(device[n]) for n in names if n in device)

    def unknown(self, cost: int) -> _Est:
        return _Est(cost, self.bound, self.bound)

    def est(self, expr: Any, scope: dict[str, _Est]) -> _Est:
        kind = expr.WhichOneof("expr_kind")
        handler: Callable[[Any, dict[str, _Est]], _Est] = getattr(self, f"_{kind}", self._other)
        return handler(expr, scope)

    def _other(self, expr: Any, scope: dict[str, _Est]) -> _Est:
        return self.unknown(1)

    def _const_expr(self, expr: Any, scope: dict[str, _Est]) -> _Est:
        const = expr.const_expr
        which = const.WhichOneof("constant_kind")
        return _known(0, getattr(const, which) if which else None)

    def _ident_expr(self, expr: Any, scope: dict[str, _Est]) -> _Est:
        name = expr.ident_expr.name
        if name in scope:
            return replace(scope[name], cost=1)
        if name == "device" and self.device is not _UNKNOWN:
            return _known(1, self.device)
        return self.unknown(1)

    def _lookup(self, container: _Est, key: Any, cost: int) -> _Est:
        if isinstance(container.value, dict) and key is not _UNKNOWN:
            if key in container.value:
                return _known(cost, container.value[key])
            if id(container.value) in self.domain_maps:
                return _known(cost, {})
            return _Est(cost, 0, 0)  # a missing key: evaluation stops with an error here
        if isinstance(container.value, list) and type(key) is int and 0 <= key < len(container.value):
            return _known(cost, container.value[key])
        return _Est(cost, container.item, self.bound)

    def _select_expr(self, expr: Any, scope: dict[str, _Est]) -> _Est:
        sel = expr.select_expr
        operand = self.est(sel.operand, scope)
        if sel.test_only:
            return _Est(operand.cost)
        return self._lookup(operand, sel.field, operand.cost + 1)

    def _list_expr(self, expr: Any, scope: dict[str, _Est]) -> _Est:
        items = [self.est(e, scope) for e in expr.list_expr.elements]
        cost = _LIST_CREATE + sum(i.cost for i in items)
        if all(i.value is not _UNKNOWN for i in items):
            return _known(cost, [i.value for i in items])
        return _Est(cost, len(items), max((i.size for i in items), default=1))

    def _struct_expr(self, expr: Any, scope: dict[str, _Est]) -> _Est:
        struct = expr.struct_expr
        cost = _STRUCT_CREATE if struct.message_name else _MAP_CREATE
        item = 1
        for entry in struct.entries:
            if entry.HasField("map_key"):
                key = self.est(entry.map_key, scope)
                cost, item = cost + key.cost, max(item, key.size)
            value = self.est(entry.value, scope)
            cost, item = cost + value.cost, max(item, value.size)
        return _Est(cost, len(struct.entries), item)

    def _comprehension_expr(self, expr: Any, scope: dict[str, _Est]) -> _Est:
        comp = expr.comprehension_expr
        rng = self.est(comp.iter_range, scope)
        init = self.est(comp.accu_init, scope)
        inner = dict(scope)
        inner[comp.accu_var] = init
        count = value_size(rng.value) if rng.value is not _UNKNOWN else rng.size
        if count == 0:
            result = self.est(comp.result, inner)
            return replace(result, cost=rng.cost + init.cost + result.cost)
        element = _Est(0, rng.item, self.bound)
        inner[comp.iter_var] = element
        if comp.iter_var2:
            inner[comp.iter_var2] = element
        step = self.est(comp.loop_step, inner)
        condition = self.est(comp.loop_condition, inner)
        growth = max(0, step.size - init.size)
        final_size = init.size + count * growth if growth else max(init.size, step.size)
        inner[comp.accu_var] = _Est(0, final_size, max(init.item, step.item, step.size if growth else 1))
        result = self.est(comp.result, inner)
        cost = rng.cost + init.cost + count * (condition.cost + step.cost) + result.cost
        return replace(result, cost=cost)

    def _call_expr(self, expr: Any, scope: dict[str, _Est]) -> _Est:
        call = expr.call_expr
        target = self.est(call.target, scope) if call.HasField("target") else None
        args = [self.est(a, scope) for a in call.args]
        operands = ([target] if target is not None else []) + args
        base = sum(o.cost for o in operands)
        rule = _CALL_RULES.get(call.function, _default_call)
        return rule(self, base, operands)


def _str_cost(size: int, factor: float = _STRING_FACTOR) -> int:
    return _ceil(size * factor)


def _default_call(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + 1, max((o.size for o in ops), default=1), max((o.item for o in ops), default=1))


def _logical(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base)


def _conditional(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    taken = max(ops[1:], key=lambda o: o.cost)
    widest = max(o.size for o in ops[1:])
    return _Est(ops[0].cost + taken.cost, widest, max(o.item for o in ops[1:]))


def _index(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return e._lookup(ops[0], ops[1].value, base + 1)


def _optional_index(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    found = e._lookup(ops[0], ops[1].value, base + 1)
    return replace(found, value=_UNKNOWN)


def _compare(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + _str_cost(min(ops[0].size, ops[1].size)))


def _in(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    container = ops[1]
    return _Est(base + (1 if isinstance(container.value, dict) else container.size))


def _plus(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    size = ops[0].size + ops[1].size
    return _Est(base + max(1, _str_cost(size)), size, max(ops[0].item, ops[1].item))


def _scan_target(factor: float = _STRING_FACTOR, keep_size: bool = True) -> Callable[[_Estimator, int, list[_Est]], _Est]:
    def rule(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
        size = ops[0].size
        return _Est(base + max(1, _str_cost(size, factor)), size if keep_size else 1)
    return rule


def _contains(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + max(1, _str_cost(ops[0].size) * _str_cost(ops[1].size)))


def _regex_cost(text: _Est, pattern: _Est) -> int:
    return max(1, _ceil((1 + text.size) * _STRING_FACTOR) * _ceil(pattern.size * _REGEX_FACTOR))


def _matches(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + _regex_cost(ops[0], ops[1]))


def _find(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + _regex_cost(ops[0], ops[1]), ops[0].size)


def _find_all(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + _regex_cost(ops[0], ops[1]), ops[0].size + 1, ops[0].size)


def _traverse(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    lst = ops[0]
    return _Est(base + max(1, lst.size * max(1, _str_cost(lst.item))), lst.item, lst.item)


def _split(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + max(1, _str_cost(ops[0].size, 2 * _STRING_FACTOR)), ops[0].size + 1, ops[0].size)


def _replace(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    text, new = ops[0], ops[2] if len(ops) > 2 else ops[0]
    size = text.size + (text.size + 1) * new.size
    return _Est(base + max(1, _str_cost(text.size, 2 * _STRING_FACTOR)), size)


def _join(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    lst = ops[0]
    sep = ops[1].size if len(ops) > 1 else 0
    size = lst.size * lst.item + max(0, lst.size - 1) * sep
    return _Est(base + max(1, _str_cost(size, 2 * _STRING_FACTOR)), size)


def _format(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    template, args = ops[0], ops[1]
    return _Est(base + max(1, _str_cost(template.size)), template.size + args.size * max(args.item, e.bound))


def _quote(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + max(1, _str_cost(ops[0].size)), 2 * ops[0].size + 2)


def _list_copy(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    lst = ops[0]
    return _Est(base + max(1, lst.size), lst.size, lst.item)


def _flatten(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    lst = ops[0]
    size = lst.size * max(1, lst.item)
    return _Est(base + max(1, size), size, e.bound)


def _range(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    count = ops[0].value if type(ops[0].value) is int else e.bound
    return _Est(base + max(1, count), max(0, count), 1)


def _sets(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + max(1, ops[0].size * ops[1].size))


def _passthrough(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    widest = max(ops, key=lambda o: o.size)
    return _Est(base + 1, widest.size, widest.item)


def _to_string(e: _Estimator, base: int, ops: list[_Est]) -> _Est:
    return _Est(base + 1, max(ops[0].size, 32))


_CALL_RULES: dict[str, Callable[[_Estimator, int, list[_Est]], _Est]] = {
    "_&&_": _logical, "_||_": _logical, "!_": _default_call, "@not_strictly_false": _default_call,
    "_?_:_": _conditional,
    "_[_]": _index, DOMAIN_LOOKUP_FUNCTION: _index, "_[?_]": _optional_index, "_?._": _optional_index,
    "_==_": _compare, "_!=_": _compare, "_<_": _compare, "_<=_": _compare, "_>_": _compare, "_>=_": _compare,
    "@in": _in, "_+_": _plus,
    "contains": _contains, "startsWith": _scan_target(keep_size=False), "endsWith": _scan_target(keep_size=False),
    "matches": _matches, MATCHES_FUNCTION: _matches, "find": _find, "findAll": _find_all,
    "isSorted": _traverse, "sum": _traverse, "min": _traverse, "max": _traverse, "indexOf": _traverse,
    "lastIndexOf": _traverse, "includes": _traverse,
    "lowerAscii": _scan_target(), "upperAscii": _scan_target(), "substring": _scan_target(), "trim": _scan_target(),
    "split": _split, "replace": _replace, "join": _join, "format": _format, "strings.quote": _quote,
    "quantity": _scan_target(keep_size=False), "isQuantity": _scan_target(keep_size=False),
    "semver": _scan_target(keep_size=False), "isSemver": _scan_target(keep_size=False),
    "slice": _list_copy, "distinct": _list_copy, "reverse": _list_copy, "sort": _list_copy,
    "flatten": _flatten, "lists.range": _range,
    "sets.contains": _sets, "sets.equivalent": _sets, "sets.intersects": _sets,
    "dyn": _passthrough, "value": _passthrough, "orValue": _passthrough, "or": _passthrough,
    "optional.of": _passthrough, "optional.ofNonZeroValue": _passthrough,
    "string": _to_string,
}


def estimate_cost(checked: Any, device: Any = _UNKNOWN, bound: int = API_VALUE_BOUND) -> int:
    """Upper bound of the runtime cost of ``checked`` against ``device`` (or any device if omitted).

    ``device`` is the encoded ``device`` map; ``bound`` caps the size of every value whose size
    the walk cannot know.
    """
    return _Estimator(_with_hidden_fields(device), bound).est(checked.expr, {}).cost


def _with_hidden_fields(device: Any) -> Any:
    """The device map as the rewritten AST reads it (hidden fields alias the real maps)."""
    if not isinstance(device, dict):
        return device
    view = dict(device)
    for name, hidden in HIDDEN_FIELDS.items():
        if name in view:
            view[hidden] = view[name]
    return view


_GO_TYPE_NAMES = {bool: "types.Bool", int: "types.Int", float: "types.Double", str: "types.String",
                  bytes: "types.Bytes", bytearray: "types.Bytes", type(None): "types.Null",
                  QuantityMessage: "cel.Quantity", SemverMessage: "cel.Semver"}


def non_iterable_range(checked: Any, device: Any) -> str | None:
    """cel-go's type name of the first comprehension range (in evaluation order) that the
    device determines and that is neither a list nor a map; None if there is none."""
    estimator = _Estimator(_with_hidden_fields(device), API_VALUE_BOUND)
    for expr, _ in walk(checked.expr):
        if expr.WhichOneof("expr_kind") != "comprehension_expr" or is_bind(expr.comprehension_expr):
            continue
        value = estimator.est(expr.comprehension_expr.iter_range, {}).value
        if value is not _UNKNOWN and not isinstance(value, (list, dict)):
            return _GO_TYPE_NAMES.get(type(value), type(value).__name__)
    return None
