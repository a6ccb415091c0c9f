"""What the API server's validation says about a new or changed selector expression.

Upstream compiles new expressions in the ``NewExpressions`` environment with ``device`` declared
field by field (``driver`` string, ``allowMultipleAllocations`` bool when DRAConsumableCapacity is
on, ``attributes`` and ``capacity`` maps), checks the result type and estimates the worst-case
cost. This environment declares ``device`` dynamically, so this module re-types the members that
upstream knows statically and applies upstream's overload rules to the standard operators over
them (``device.driver + 1`` is ``found no matching overload for '_+_' applied to '(string, int)'``).

Cost: upstream refuses an estimate over 1,000,000; the estimate here is
:attr:`Selector.static_cost` (an upper bound within API limits), see the package notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _ast
from ._compile import (MAX_COST, MAX_EXPRESSION_LENGTH, PROGRAM_FAILED, compile_selector, compile_unchecked_program,
                       compile_value_expression)
from ._errors import CelCompileError

_NUMERIC = ("int", "uint", "double")
_ARITH = {
    "_+_": {("int", "int"): "int", ("uint", "uint"): "uint", ("double", "double"): "double",
            ("string", "string"): "string", ("bytes", "bytes"): "bytes",
            ("google.protobuf.Timestamp", "google.protobuf.Duration"): "google.protobuf.Timestamp",
            ("google.protobuf.Duration", "google.protobuf.Timestamp"): "google.protobuf.Timestamp",
            ("google.protobuf.Duration", "google.protobuf.Duration"): "google.protobuf.Duration"},
    "_-_": {("int", "int"): "int", ("uint", "uint"): "uint", ("double", "double"): "double"},
    "_*_": {("int", "int"): "int", ("uint", "uint"): "uint", ("double", "double"): "double"},
    "_/_": {("int", "int"): "int", ("uint", "uint"): "uint", ("double", "double"): "double"},
    "_%_": {("int", "int"): "int", ("uint", "uint"): "uint"},
}
_ORDER = ("_<_", "_<=_", "_>_", "_>=_")
_ORDERABLE = ("string", "bytes", "bool", "google.protobuf.Timestamp", "google.protobuf.Duration")
_LOGIC = ("_&&_", "_||_")


@dataclass(frozen=True, slots=True)
class AdmissionIssue:
    """``type`` is a field.Error type (``FieldValueInvalid``, ``FieldValueForbidden``,
    ``FieldValueTooLong``, ``InternalError``); ``detail`` its detail."""

    type: str
    detail: str


_ANY = "google.protobuf.Any"
_QUANTITY = "kubernetes.Quantity"


def _concrete(t: str | None) -> bool:
    return t is not None and t not in ("dyn", "any", _ANY)


def _map_value(t: str | None) -> str | None:
    """``map(string, X)`` -> ``X``."""
    if t and t.startswith("map(string, ") and t.endswith(")"):
        return t[len("map(string, "):-1]
    return None


class _Typer:
    def __init__(self, checked: Any, source: str, consumable_capacity: bool, list_attributes: bool = False) -> None:
        self.value_type = "dyn" if list_attributes else _ANY
        self.checked = checked
        self.source = source
        self.types = checked.type_map
        self.consumable = consumable_capacity
        self.issue: tuple[int, str] | None = None

    def own(self, expr: Any) -> str | None:
        t = self.types.get(expr.id)
        if t is None:
            return None
        if t.WhichOneof("type_kind") == "dyn":
            return "dyn"
        return _ast.format_type(t)

    def type_of(self, expr: Any) -> str | None:
        """Upstream's static type of ``expr`` as far as this module knows it."""
        if self.issue is not None:
            return None
        kind = expr.WhichOneof("expr_kind")
        own = self.own(expr)
        if kind == "select_expr":
            sel = expr.select_expr
            if sel.operand.WhichOneof("expr_kind") == "ident_expr" and sel.operand.ident_expr.name == _ast.DEVICE \
                    and not sel.test_only:
                if sel.field == "driver":
                    return "string"
                if sel.field == "allowMultipleAllocations":
                    if not self.consumable:
                        self.issue = (expr.id, "undefined field 'allowMultipleAllocations'")
                        return None
                    return "bool"
                field = sel.field.lstrip("@")
                if field == "attributes":
                    return f"map(string, map(string, {self.value_type}))"
                if field == "capacity":
                    return f"map(string, map(string, {_QUANTITY}))"
                self.issue = (expr.id, f"undefined field '{sel.field}'")
                return None
            inner = self.type_of(sel.operand)
            value = _map_value(inner)
            if value is not None and not sel.test_only:
                return value
            return own
        if kind == "call_expr":
            call = expr.call_expr
            args = ([call.target] if call.HasField("target") else []) + list(call.args)
            ts = [self.type_of(a) for a in args]
            if self.issue is not None:
                return None
            fn = call.function
            if fn in ("_[_]", "@drakit.domain") and len(ts) == 2:
                value = _map_value(ts[0])
                if value is not None:
                    return value
            if fn in _LOGIC:
                for a, t in zip(args, ts):
                    if _concrete(t) and t != "bool":
                        self.issue = (a.id, f"expected type 'bool' but found '{t}'")
                        return None
                return "bool"
            if fn == "_+_" and len(ts) == 2 and all((t or "").startswith("list(") for t in ts):
                return own
            if fn in _ARITH and len(ts) == 2 and _concrete(ts[0]) and _concrete(ts[1]):
                out = _ARITH[fn].get((str(ts[0]), str(ts[1])))
                if out is None:
                    return self._no_overload(expr, fn, ts)
                return out
            if fn in _ORDER and len(ts) == 2 and _concrete(ts[0]) and _concrete(ts[1]):
                a, b = ts
                if not ((a in _NUMERIC and b in _NUMERIC) or (a == b and a in _ORDERABLE)):
                    return self._no_overload(expr, fn, ts)
                return "bool"
            if fn in ("_==_", "_!=_") and len(ts) == 2 and _concrete(ts[0]) and _concrete(ts[1]):
                a, b = ts
                if a != b and not (a in _NUMERIC and b in _NUMERIC):
                    return self._no_overload(expr, fn, ts)
                return "bool"
            if fn == "!_" and ts and _concrete(ts[0]) and ts[0] != "bool":
                return self._no_overload(expr, fn, ts)
            if fn == "-_" and ts and _concrete(ts[0]) and ts[0] not in ("int", "double"):
                return self._no_overload(expr, fn, ts)
            if fn == "_?_:_" and len(ts) == 3:
                if _concrete(ts[0]) and ts[0] != "bool":
                    return self._no_overload(expr, fn, ts)
                if own == "dyn" and _concrete(ts[1]) and ts[1] == ts[2]:
                    return ts[1]
                return own
            if own == "dyn" and fn in _ARITH and len(ts) == 2:
                known = [t for t in ts if _concrete(t)]
                k0 = str(known[0]) if known else ""
                if known and all(t == k0 for t in known) and (k0, k0) in _ARITH[fn]:
                    return _ARITH[fn][(k0, k0)]
            return own
        if kind == "comprehension_expr":
            comp = expr.comprehension_expr
            for part in (comp.iter_range, comp.accu_init, comp.loop_condition, comp.loop_step, comp.result):
                self.type_of(part)
            return own
        if kind == "list_expr":
            for e in expr.list_expr.elements:
                self.type_of(e)
            return own
        if kind == "struct_expr":
            for e in expr.struct_expr.entries:
                if e.HasField("map_key"):
                    self.type_of(e.map_key)
                self.type_of(e.value)
            return own
        return own

    def _no_overload(self, expr: Any, fn: str, ts: list[str | None]) -> str | None:
        self.issue = (expr.id, f"found no matching overload for '{fn}' applied to '({', '.join(t or 'dyn' for t in ts)})'")
        return None


def check_new_expression(expression: str, *, consumable_capacity: bool = True, list_attributes: bool = False,
                         derived: bool = False) -> AdmissionIssue | None:
    """None when the API server would accept ``expression`` as a new selector (or, ``derived``,
    a derived attribute's value expression), else the issue."""
    if len(expression.encode("utf-8")) > MAX_EXPRESSION_LENGTH:
        return AdmissionIssue("FieldValueTooLong", "")
    program_failed = None
    try:
        selector = compile_value_expression(expression) if derived else compile_selector(expression)
    except CelCompileError as err:
        text = str(err)
        if text.startswith(PROGRAM_FAILED):
            # upstream makes the program after type checking: its errors come first
            program_failed, selector = text, compile_unchecked_program(expression, want_bool=not derived)
    else:
        text = ""
    if text and program_failed is None:
        if text.startswith("must evaluate to bool"):
            return AdmissionIssue("FieldValueInvalid", text)
        text = text.split("\n(two-variable", 1)[0].split("\n(ordering across", 1)[0]
        if not text.startswith("compilation failed:"):
            text = "compilation failed: " + text
        if expression == "":
            text = text.replace("ERROR: <input>:1:1:", "ERROR: <input>:1:0:", 1)  # cel-go's column at an empty input
        return AdmissionIssue("FieldValueInvalid", text)
    checked = selector._checked  # noqa: SLF001 - same package
    typer = _Typer(checked, expression, consumable_capacity, list_attributes)
    root = typer.type_of(checked.expr)
    if typer.issue is not None:
        node_id, message = typer.issue
        return AdmissionIssue("FieldValueInvalid", "compilation failed: " + _ast.format_issue(checked, expression, node_id, message))
    if not derived and _concrete(root) and root != "bool":
        return AdmissionIssue("FieldValueInvalid", f"must evaluate to bool or the unknown type, not {root}")
    if program_failed is not None:  # the API server's field.InternalError
        return AdmissionIssue("InternalError", program_failed)
    if selector.static_cost > MAX_COST:
        return AdmissionIssue("FieldValueForbidden", "too complex, exceeds cost limit")
    return None


__all__ = ["AdmissionIssue", "check_new_expression"]
