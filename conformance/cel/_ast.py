"""Reading and rewriting the checked AST of a compiled selector.

``Expression.serialize()`` yields a ``cel.expr.CheckedExpr``; ``Env.deserialize()`` accepts one
back. In between this module

* emulates DRA's *unknown domain yields an empty map* rule for ``device.attributes`` and
  ``device.capacity`` (see :func:`rewrite_domain_maps`),
* runs the literal validators Kubernetes adds after type checking (regex, duration and
  timestamp literals, homogeneous list and map literals), and
* provides positions for error messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from google.protobuf import any_pb2

from ._proto import CHECKED_EXPR_URL, CheckedExpr

__all__ = [
    "DomainMapUse", "decode", "encode", "rewrite_domain_maps", "literal_arguments", "homogeneous_literal_issues",
    "format_issue", "format_type", "walk", "is_bind",
    "DOMAIN_MAPS", "HIDDEN_FIELDS", "DOMAIN_LOOKUP_FUNCTION", "rename_calls", "regex_constants",
    "MATCHES_FUNCTION",
]

DEVICE = "device"
DOMAIN_MAPS = ("attributes", "capacity")
#: Fields of the encoded ``device`` map holding the maps without pre-filled domains.
HIDDEN_FIELDS = {"attributes": "@attributes", "capacity": "@capacity"}
#: Replaces ``_[_]`` when a domain map is indexed with a computed key.
DOMAIN_LOOKUP_FUNCTION = "@drakit.domain"
#: ``matches`` runs on :mod:`goregex` (Go's regexp), not on the engine's own RE2: the calls are
#: pointed at this function of ``_functions`` once compiled
MATCHES_FUNCTION = "@drakit.matches"

_LOOKUP_CALLS = ("_[_]", "_[?_]")


def decode(serialized: bytes) -> tuple[Any, Any]:
    wrapper = any_pb2.Any()
    wrapper.ParseFromString(serialized)
    if wrapper.type_url != CHECKED_EXPR_URL:
        raise ValueError(f"unexpected serialized expression type {wrapper.type_url!r}")
    checked = CheckedExpr()
    checked.ParseFromString(wrapper.value)
    return wrapper, checked


def encode(wrapper: Any, checked: Any) -> bytes:
    wrapper.value = checked.SerializeToString()
    return bytes(wrapper.SerializeToString())


# -- unknown-domain emulation --------------------------------------------------------------


@dataclass
class DomainMapUse:
    """What an expression does with ``device.attributes`` / ``device.capacity``.

    ``literals[kind]``: domain names looked up with a constant key; the evaluation data gets an
    empty map for each of them that the device lacks. ``real[kind]``: whether some node reads the
    map as a whole (``in``, ``size``, iteration, ...); those nodes were redirected to a hidden
    field holding the map as it is. ``alias_whole_use``: a ``cel.bind`` alias of the map was used
    as a whole, which still sees the pre-filled domains (a documented approximation).
    """

    literals: dict[str, set[str]] = field(default_factory=lambda: {k: set() for k in DOMAIN_MAPS})
    real: dict[str, bool] = field(default_factory=lambda: {k: False for k in DOMAIN_MAPS})
    dynamic_lookups: int = 0
    alias_whole_use: bool = False


def _const_string(expr: Any) -> str | None:
    if expr.WhichOneof("expr_kind") == "const_expr" and expr.const_expr.WhichOneof("constant_kind") == "string_value":
        return str(expr.const_expr.string_value)
    return None


def _classify(expr: Any, scope: dict[str, str | None]) -> str | None:
    """``"device"``, ``"attributes"``, ``"capacity"`` or None for anything else."""
    kind = expr.WhichOneof("expr_kind")
    if kind == "ident_expr":
        name = expr.ident_expr.name
        if name in scope:
            return scope[name]
        return DEVICE if name == DEVICE else None
    if kind == "select_expr":
        sel = expr.select_expr
        if not sel.test_only and sel.field in DOMAIN_MAPS and _classify(sel.operand, scope) == DEVICE:
            return str(sel.field)
        return None
    if kind == "call_expr":
        call = expr.call_expr
        if call.function == "_[_]" and not call.HasField("target") and len(call.args) == 2:
            key = _const_string(call.args[1])
            if key in DOMAIN_MAPS and _classify(call.args[0], scope) == DEVICE:
                return key
    return None


def is_bind(comp: Any) -> bool:
    """Whether a comprehension is the expansion of ``cel.bind`` (an empty iteration range)."""
    rng = comp.iter_range
    return rng.WhichOneof("expr_kind") == "list_expr" and len(rng.list_expr.elements) == 0


class _DomainRewriter:
    def __init__(self, next_id: int) -> None:
        self.use = DomainMapUse()
        self.next_id = next_id

    def visit(self, expr: Any, scope: dict[str, str | None], lookup: bool = False) -> None:
        kind = expr.WhichOneof("expr_kind")
        cls = _classify(expr, scope)
        if cls in DOMAIN_MAPS and not lookup:
            self._whole_map_use(expr, cls)
        if kind == "select_expr":
            self._visit_select(expr.select_expr, scope)
        elif kind == "call_expr":
            self._visit_call(expr.call_expr, scope)
        elif kind == "list_expr":
            for element in expr.list_expr.elements:
                self.visit(element, scope)
        elif kind == "struct_expr":
            for entry in expr.struct_expr.entries:
                if entry.HasField("map_key"):
                    self.visit(entry.map_key, scope)
                self.visit(entry.value, scope)
        elif kind == "comprehension_expr":
            self._visit_comprehension(expr.comprehension_expr, scope)

    def _whole_map_use(self, expr: Any, cls: str) -> None:
        kind = expr.WhichOneof("expr_kind")
        if kind == "ident_expr":
            self.use.alias_whole_use = True
            return
        self.use.real[cls] = True
        if kind == "select_expr":
            expr.select_expr.field = HIDDEN_FIELDS[cls]
        else:
            expr.call_expr.args[1].const_expr.string_value = HIDDEN_FIELDS[cls]

    def _visit_select(self, sel: Any, scope: dict[str, str | None]) -> None:
        cls = _classify(sel.operand, scope)
        if cls in DOMAIN_MAPS:
            self.use.literals[cls].add(str(sel.field))
            self.visit(sel.operand, scope, lookup=True)
        elif cls == DEVICE:
            self.visit(sel.operand, scope, lookup=True)
        else:
            self.visit(sel.operand, scope)

    def _visit_call(self, call: Any, scope: dict[str, str | None]) -> None:
        if call.HasField("target"):
            self.visit(call.target, scope)
        args = list(call.args)
        operand_cls = _classify(args[0], scope) if args and not call.HasField("target") else None
        if operand_cls in DOMAIN_MAPS and call.function in _LOOKUP_CALLS + ("_?._",) and len(args) == 2:
            self.visit(args[0], scope, lookup=True)
            self.visit(args[1], scope)
            self._domain_lookup(call, operand_cls)  # may restructure the call: children first
            return
        for i, arg in enumerate(args):
            keeps_device = i == 0 and operand_cls == DEVICE and call.function in _LOOKUP_CALLS + ("_?._",)
            self.visit(arg, scope, lookup=keeps_device)

    def _domain_lookup(self, call: Any, cls: str) -> None:
        key = _const_string(call.args[1])
        if key is not None:
            self.use.literals[cls].add(key)
        elif call.function == "_[_]":
            call.function = DOMAIN_LOOKUP_FUNCTION
            self.use.dynamic_lookups += 1
        elif call.function == "_[?_]":
            # m[?k] becomes optional.of(lookup(m, k)): a domain lookup always finds a map.
            inner = type(call.args[0])()
            inner.id = self.next_id
            self.next_id += 1
            inner.call_expr.function = DOMAIN_LOOKUP_FUNCTION
            inner.call_expr.args.extend(call.args)
            del call.args[:]
            call.function = "optional.of"
            call.args.append(inner)
            self.use.dynamic_lookups += 1

    def _visit_comprehension(self, comp: Any, scope: dict[str, str | None]) -> None:
        inner = dict(scope)
        if is_bind(comp):
            bound = _classify(comp.accu_init, scope)
            self.visit(comp.accu_init, scope, lookup=bound is not None)
            inner[comp.accu_var] = bound
            self.visit(comp.result, inner)
            return
        self.visit(comp.iter_range, scope)
        self.visit(comp.accu_init, scope)
        for name in (comp.iter_var, comp.iter_var2, comp.accu_var):
            if name:
                inner[name] = None
        self.visit(comp.loop_condition, inner)
        self.visit(comp.loop_step, inner)
        self.visit(comp.result, inner)


def rewrite_domain_maps(checked: Any) -> DomainMapUse:
    """Rewrite ``checked`` in place (see :class:`DomainMapUse`) and report what it uses.

    Kubernetes wraps both maps so that looking up a missing domain returns ``{}`` while ``in``,
    ``size()`` and iteration still see only the real domains. The engine has no such map, so:
    lookups with a constant key stay as they are and the device data gets an empty map for each
    such domain; whole-map uses are pointed at a hidden field without pre-filled domains; lookups
    with a computed key call a Python function that returns ``{}`` for a missing domain
    (``m[?k]`` becomes ``optional.of(lookup(m, k))``).
    """
    rewriter = _DomainRewriter(max(int(e.id) for e, _ in walk(checked.expr)) + 1)
    rewriter.visit(checked.expr, {})
    return rewriter.use


def rename_calls(checked: Any, function: str, to: str) -> None:
    """Point every call of ``function`` (member or global form) at the global ``to``, in place."""
    for expr, _ in walk(checked.expr):
        if expr.WhichOneof("expr_kind") != "call_expr" or expr.call_expr.function != function:
            continue
        call = expr.call_expr
        if call.HasField("target"):
            args = [type(call.target)()] + [type(a)() for a in call.args]
            args[0].CopyFrom(call.target)
            for copy, arg in zip(args[1:], call.args):
                copy.CopyFrom(arg)
            call.ClearField("target")
            del call.args[:]
            call.args.extend(args)
        call.function = to  # the reference map (kept as unknown fields) still names matches' overloads


# -- literal validators --------------------------------------------------------------------


def _children(expr: Any) -> list[Any]:
    kind = expr.WhichOneof("expr_kind")
    if kind == "select_expr":
        return [expr.select_expr.operand]
    if kind == "call_expr":
        call = expr.call_expr
        return ([call.target] if call.HasField("target") else []) + list(call.args)
    if kind == "list_expr":
        return list(expr.list_expr.elements)
    if kind == "struct_expr":
        out = []
        for entry in expr.struct_expr.entries:
            if entry.HasField("map_key"):
                out.append(entry.map_key)
            out.append(entry.value)
        return out
    if kind == "comprehension_expr":
        comp = expr.comprehension_expr
        return [comp.iter_range, comp.accu_init, comp.loop_condition, comp.loop_step, comp.result]
    return []


def walk(expr: Any) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """Every node with its ancestors (nearest last), parents before children, left to right."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(expr, ())]
    while stack:
        node, parents = stack.pop()
        yield node, parents
        below = parents + (node,)
        stack.extend((child, below) for child in reversed(_children(node)))


_VALIDATED_CALLS = {"matches": "matches", "duration": "duration", "timestamp": "timestamp"}


def literal_arguments(checked: Any) -> list[tuple[str, str, int]]:
    """(function, literal, node id) for the literal first argument of matches/duration/timestamp."""
    found = []
    for expr, _ in walk(checked.expr):
        if expr.WhichOneof("expr_kind") != "call_expr":
            continue
        call = expr.call_expr
        if call.function in _VALIDATED_CALLS and call.args:
            literal = _const_string(call.args[0])
            if literal is not None:
                found.append((str(call.function), literal, int(call.args[0].id)))
    return found


def _folded_string(expr: Any) -> str | None:
    """The string ``expr`` is once upstream folds constants (``OptOptimize`` folds a type
    conversion of a constant: ``string('x')``, ``dyn('x')``), or None."""
    literal = _const_string(expr)
    if literal is not None or expr.WhichOneof("expr_kind") != "call_expr":
        return literal
    call = expr.call_expr
    if call.function in ("string", "dyn") and not call.HasField("target") and len(call.args) == 1:
        return _folded_string(call.args[0])
    return None


def regex_constants(checked: Any) -> list[str]:
    """The constant patterns of ``matches``, ``find`` and ``findAll`` in the order upstream meets
    them when it makes the program (children first), where Kubernetes' environment (cel-go's
    ``OptOptimize`` and the regex library) compiles them."""
    found: list[str] = []

    def visit(expr: Any) -> None:
        for child in _children(expr):
            visit(child)
        if expr.WhichOneof("expr_kind") != "call_expr":
            return
        call = expr.call_expr
        args = ([call.target] if call.HasField("target") else []) + list(call.args)
        if call.function in ("matches", "find", "findAll") and len(args) >= 2:
            pattern = _folded_string(args[1])
            if pattern is not None:
                found.append(pattern)

    visit(checked.expr)
    return found


def _format_type(t: Any) -> str:
    kind = t.WhichOneof("type_kind")
    if kind == "dyn":
        return "dyn"
    if kind == "null":
        return "null_type"
    if kind == "primitive":
        return _PRIMITIVES.get(t.primitive, "unknown")
    if kind == "wrapper":
        return f"wrapper({_PRIMITIVES.get(t.wrapper, 'unknown')})"
    if kind == "well_known":
        return _WELL_KNOWN.get(t.well_known, "unknown")
    if kind == "list_type":
        return f"list({_format_type(t.list_type.elem_type)})"
    if kind == "map_type":
        return f"map({_format_type(t.map_type.key_type)}, {_format_type(t.map_type.value_type)})"
    if kind == "message_type":
        return str(t.message_type)
    if kind == "type_param":
        return str(t.type_param)
    if kind == "type":
        return f"type({_format_type(t.type)})"
    if kind == "abstract_type":
        params = ", ".join(_format_type(p) for p in t.abstract_type.parameter_types)
        return f"{t.abstract_type.name}({params})" if params else str(t.abstract_type.name)
    return kind or "unknown"


_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}


def format_type(t: Any) -> str:
    """cel-go's spelling of a checked type (``int``, ``list(string)``, ``map(string, dyn)``)."""
    return _format_type(t)


def _in_format_call(parents: tuple[Any, ...]) -> bool:
    return any(p.WhichOneof("expr_kind") == "call_expr" and p.call_expr.function == "format" for p in parents)


def _unwrap_optional(t: Any) -> Any:
    if t.WhichOneof("type_kind") == "abstract_type" and t.abstract_type.name == "optional_type" \
            and t.abstract_type.parameter_types:
        return t.abstract_type.parameter_types[0]
    return t


def homogeneous_literal_issues(checked: Any) -> list[tuple[int, str]]:
    """Mixed-type list/map literals, which Kubernetes' environment rejects after type checking.

    Everything read from ``device`` is ``dyn`` in this environment, while upstream types some of
    it: a member typed ``dyn`` here takes the type upstream gives it (:func:`_upstream_type`),
    and is skipped when that is not known. Like upstream, ``dyn`` and ``int`` do not mix:
    ``[device.attributes["d"].numa, 1]`` is an error.
    """
    types = checked.type_map
    issues: list[tuple[int, str]] = []
    for expr, parents in walk(checked.expr):
        kind = expr.WhichOneof("expr_kind")
        if kind not in ("list_expr", "struct_expr") or _in_format_call(parents):
            continue
        if kind == "list_expr":
            optional = set(expr.list_expr.optional_indices)
            elements = [(e, i in optional) for i, e in enumerate(expr.list_expr.elements)]
            issues += _mismatches(types, elements)
        elif not expr.struct_expr.message_name:
            entries = expr.struct_expr.entries
            issues += _mismatches(types, [(e.map_key, False) for e in entries])
            issues += _mismatches(types, [(e.value, e.optional_entry) for e in entries])
    return issues


#: Upstream's static types of ``device`` fields that are ``dyn`` in this environment.
_DEVICE_FIELD_TYPES = {"driver": "string", "allowMultipleAllocations": "bool"}


def _is_device_map(expr: Any, field: str) -> bool:
    """``device.<field>`` (``attributes`` or ``capacity``)."""
    if expr.WhichOneof("expr_kind") != "select_expr":
        return False
    sel = expr.select_expr
    return bool(sel.field == field and sel.operand.WhichOneof("expr_kind") == "ident_expr"
                and sel.operand.ident_expr.name == DEVICE)


def _domain_of(expr: Any, field: str) -> bool:
    """``device.<field>["domain"]`` or ``device.<field>.domain`` (a domain's map)."""
    kind = expr.WhichOneof("expr_kind")
    if kind == "call_expr" and expr.call_expr.function in _LOOKUP_CALLS and expr.call_expr.args:
        return _is_device_map(expr.call_expr.args[0], field)
    return kind == "select_expr" and _is_device_map(expr.select_expr.operand, field)


def _upstream_type(expr: Any) -> str | None:
    """The type upstream's checker gives a member this environment types ``dyn``, or None."""
    kind = expr.WhichOneof("expr_kind")
    if kind == "select_expr":
        sel = expr.select_expr
        if sel.operand.WhichOneof("expr_kind") == "ident_expr" and sel.operand.ident_expr.name == DEVICE:
            return _DEVICE_FIELD_TYPES.get(sel.field)
        if _domain_of(sel.operand, "attributes"):
            return "dyn"  # attribute values are dyn upstream too
        return None
    if kind == "call_expr":
        call = expr.call_expr
        if call.function == "dyn":
            return "dyn"
        if call.function in _LOOKUP_CALLS and call.args and _domain_of(call.args[0], "attributes"):
            return "dyn"
    return None


def _mismatches(types: Any, members: list[tuple[Any, bool]]) -> list[tuple[int, str]]:
    first: str | None = None
    for expr, optional in members:
        node_id = expr.id
        if node_id not in types:
            continue
        t = _unwrap_optional(types[node_id]) if optional else types[node_id]
        name = _upstream_type(expr) if t.WhichOneof("type_kind") == "dyn" else _format_type(t)
        if name is None:
            continue  # dyn here and of a type we cannot know upstream: never report it
        if first is None:
            first = name
            continue
        if name != first:
            return [(node_id, f"expected type '{first}' but found '{name}'")]
    return []


# -- positions and messages ----------------------------------------------------------------


def _location(checked: Any, source: str, node_id: int) -> tuple[int, int]:
    offset = checked.source_info.positions.get(node_id)
    if offset is None:
        return -1, -1
    codepoints = source  # offsets count code points
    line_start = codepoints.rfind("\n", 0, offset) + 1
    line = codepoints.count("\n", 0, offset) + 1
    return line, offset - line_start + 1


def format_issue(checked: Any, source: str, node_id: int, message: str) -> str:
    """``ERROR: <input>:L:C: message`` followed by the source line and a caret, as cel-go prints."""
    line, column = _location(checked, source, node_id)
    text = f"ERROR: <input>:{line}:{column}: {message}"
    if line > 0:
        snippet = source.split("\n")[line - 1]
        text += f"\n | {snippet}\n | {'.' * (column - 1)}^"
    return text
