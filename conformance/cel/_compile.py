"""The engine environment, compilation (with a cache) and evaluation of device selectors."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional

from .. import goregex
from . import _ast, _reads
from ._cost import API_VALUE_BOUND, estimate_cost, non_iterable_range
from ._device import EncodedDevice
from ._errors import (COST_LIMIT_TEXT, NOT_ITERABLE_TEXT, CelCompileError, CelRuntimeError, compile_error_text,
                      runtime_error_text, strip_status)
from ._decl import raise_pending
from ._functions import declarations
from ._nul import engine_value
from ._proto import VALUE_POOL

__all__ = [
    "MAX_EXPRESSION_LENGTH", "MAX_COST", "CACHE_SIZE", "ENGINE_BUDGET_TEXT", "CelUnsupportedError", "Selector",
    "compile_selector", "validate_expression", "compile_unchecked_program", "PROGRAM_FAILED",
]

MAX_EXPRESSION_LENGTH = 10 * 1024
MAX_COST = 1_000_000
CACHE_SIZE = 1024
#: The engine's own, fixed guard (about 10,000 comprehension iterations per evaluation).
#: the start of the error of a pattern upstream compiles when it makes the program (a constant
#: pattern of ``matches``, ``find``, ``findAll``): the API server's "Internal error"
PROGRAM_FAILED = "program instantiation failed: "
ENGINE_BUDGET_TEXT = ("CEL engine limit: more than 10000 comprehension iterations in one evaluation "
                      "(a fixed limit of cel-expr-python; Kubernetes only stops at its cost limit)")


class CelUnsupportedError(CelCompileError):
    """Valid for Kubernetes but not compilable by this kit's engine (e.g. two-variable macros)."""


_T = cel.Type
_TWO_VARIABLE_MACRO = re.compile(
    r"\.\s*(all|exists|existsOne|exists_one|transformList|transformMap|transformMapEntry)\s*\(\s*[A-Za-z_]\w*\s*,"
    r"\s*[A-Za-z_]\w*\s*,")
_MIXED_NUMERIC_ORDER = re.compile(
    r"found no matching overload for '_(<|<=|>|>=)_' applied to '\((int|uint|double), (int|uint|double)\)'")
_RESULT_TYPES = {"BOOL": "bool", "INT": "int", "UINT": "uint", "DOUBLE": "double", "STRING": "string",
                 "BYTES": "bytes", "LIST": "list", "MAP": "map", "NULL": "null_type", "TYPE": "type",
                 "DURATION": "google.protobuf.Duration", "TIMESTAMP": "google.protobuf.Timestamp"}


# -- environment --------------------------------------------------------------------------


class _Engine:
    """The engine environment plus tiny probe programs used to validate literals."""

    def __init__(self) -> None:
        functions = declarations() + [_domain_lookup_declaration()]
        self.env = cel.NewEnv(VALUE_POOL, variables={"device": _T.DYN}, functions=functions,
                              extensions=[ext_optional.ExtOptional(version=2), ext_bindings.ExtBindings()])
        self.env.compile("true")  # declaration conflicts only surface on the first compile
        self.probes = {
            "matches": self.env.compile('"".matches(device)'),
            "duration": self.env.compile("duration(device)"),
            "timestamp": self.env.compile("timestamp(device)"),
        }

    def literal_error(self, function: str, literal: str) -> str | None:
        value = self.probes[function].eval(data={"device": engine_value(literal)})
        if value.type() == _T.ERROR:
            return strip_status(str(value.value()))
        return None


def _domain_lookup(domains: Any, key: Any) -> Any:
    return engine_value(domains.get(key, {})) if isinstance(domains, dict) else {}


def _domain_lookup_declaration() -> cel.FunctionDecl:
    """``map[key]`` that yields ``{}`` for a missing key, whatever the key's type (as upstream)."""
    overloads = [cel.Overload(f"drakit_domain_lookup_{key.name().lower()}", _T.DYN, [_T.Map(_T.STRING, _T.DYN), key],
                              impl=_domain_lookup)
                 for key in (_T.STRING, _T.INT, _T.UINT, _T.DOUBLE, _T.BOOL)]
    return cel.FunctionDecl(_ast.DOMAIN_LOOKUP_FUNCTION, overloads)


_engine_lock = threading.Lock()
_engine: _Engine | None = None


def _get_engine() -> _Engine:
    global _engine
    if _engine is None:
        with _engine_lock:
            if _engine is None:
                _engine = _Engine()
    return _engine


# -- selectors ----------------------------------------------------------------------------


class Selector:
    """A compiled selector expression. Immutable; safe to share between threads."""

    __slots__ = ("expression", "_program", "_checked", "_static_cost", "_attr_literals", "_cap_literals",
                 "_real_attributes", "_real_capacity", "_plain", "reads")

    def __init__(self, expression: str, program: Any, checked: Any, use: _ast.DomainMapUse) -> None:
        self.expression = expression
        self._program = program
        self._checked = checked
        self._static_cost = estimate_cost(checked)
        self._attr_literals = frozenset(use.literals["attributes"])
        self._cap_literals = frozenset(use.literals["capacity"])
        self._real_attributes = use.real["attributes"]
        self._real_capacity = use.real["capacity"]
        self._plain = not (self._real_attributes or self._real_capacity)
        # The device values the outcome depends on (see _reads), or None: evaluate per device.
        # Past the static cost bound the per-device sizes matter too.
        self.reads = _reads.device_reads(checked) if self._static_cost <= MAX_COST else None

    @property
    def static_cost(self) -> int:
        """Upper bound of the cost on any device within the API's size limits."""
        return self._static_cost

    def estimated_cost(self, device: EncodedDevice | None = None) -> int:
        """Upper bound of the cost of evaluating on ``device`` (on any valid device if None)."""
        if device is None:
            return self._static_cost
        return estimate_cost(self._checked, device.device, max(API_VALUE_BOUND, device.largest))

    def matches(self, device: EncodedDevice) -> bool:
        """Evaluate on ``device``; ``CelRuntimeError`` with upstream's wording on any error."""
        result, kind = self.evaluate(device)
        if type(result) is bool:
            return result
        raise CelRuntimeError(f"CEL result of type {_result_type_name(kind)} could not be converted to bool")

    def evaluate(self, device: EncodedDevice) -> tuple[Any, Any]:
        """The engine's result value and its type; ``CelRuntimeError`` on any evaluation error."""
        if device.error is not None:
            raise CelRuntimeError(device.error)
        if (self._static_cost > MAX_COST or device.largest > API_VALUE_BOUND) \
                and self.estimated_cost(device) > MAX_COST:
            raise CelRuntimeError(COST_LIMIT_TEXT)
        activation = self._activation(device)
        try:
            value = self._program.eval(activation)
        except RuntimeError as err:
            raise_pending()
            raise _engine_exception(str(err)) from None
        raise_pending()
        result = value.value()
        kind = value.type()
        if type(result) is not bool and kind == _T.ERROR:
            raise CelRuntimeError(self._error_text(str(result), device), str(result))
        return result, kind

    def result_type_name(self, kind: Any) -> str:
        return _result_type_name(kind)

    def _error_text(self, raw: str, device: EncodedDevice) -> str:
        text = runtime_error_text(raw)
        if text == NOT_ITERABLE_TEXT:
            # The engine does not name the offending type; find it the way cel-go reports it.
            found = non_iterable_range(self._checked, device.device)
            if found is not None:
                return f"got '{found}', expected iterable type"
        return text

    def _activation(self, device: EncodedDevice) -> Any:
        """The engine input for ``device``, built once per device and input variant."""
        missing_attr = self._attr_literals - device.attribute_domains if self._attr_literals else frozenset()
        missing_cap = self._cap_literals - device.capacity_domains if self._cap_literals else frozenset()
        key = None
        if not (self._plain and not missing_attr and not missing_cap):
            key = (missing_attr, missing_cap, self._real_attributes, self._real_capacity)
        cache = device.activations()
        activation = cache.get(key)
        if activation is None:
            data = device.data if key is None else self._patched(device, missing_attr, missing_cap)
            activation = cache[key] = _get_engine().env.Activation(data=data)
        return activation

    def _patched(self, device: EncodedDevice, missing_attr: frozenset[str],
                 missing_cap: frozenset[str]) -> dict[str, Any]:
        """The device with empty maps for absent looked-up domains and the hidden real maps."""
        base = device.data["device"]  # the engine's copy (see _nul)
        patched = dict(base)
        if missing_attr:
            patched["attributes"] = {**base["attributes"], **{d: {} for d in missing_attr}}
        if missing_cap:
            patched["capacity"] = {**base["capacity"], **{d: {} for d in missing_cap}}
        if self._real_attributes:
            patched[_ast.HIDDEN_FIELDS["attributes"]] = base["attributes"]
        if self._real_capacity:
            patched[_ast.HIDDEN_FIELDS["capacity"]] = base["capacity"]
        return {"device": patched}

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


def _engine_exception(text: str) -> CelRuntimeError:
    if "Iteration budget exceeded" in text:
        return CelRuntimeError(ENGINE_BUDGET_TEXT, text)
    return CelRuntimeError(runtime_error_text(text), text)


def _result_type_name(kind: Any) -> str:
    name = str(kind.name())
    base = name.split("<", 1)[0]
    if base.lower().startswith("optional"):
        return "optional_type"
    return _RESULT_TYPES.get(base, name)


# -- compilation --------------------------------------------------------------------------


def _compile_failure(expression: str, raw: str) -> CelCompileError:
    detail = compile_error_text(raw)
    if _TWO_VARIABLE_MACRO.search(expression):
        return CelUnsupportedError(detail + "\n(two-variable comprehensions are not supported by this kit's CEL engine)")
    mixed = _MIXED_NUMERIC_ORDER.search(raw)
    if mixed and mixed.group(2) != mixed.group(3):
        return CelUnsupportedError(detail + "\n(ordering across int, uint and double is not supported by this kit's "
                                   "CEL type checker; wrap one side in dyn())")
    return CelCompileError(detail)


def _whole_message(engine: _Engine, expression: str, raw: str) -> str:
    """The engine's compile error, whole: it cuts its message at a NUL character (a C string;
    see _nul), so an expression holding one is compiled again with another character that no
    token accepts either, for the message only, and the NUL put back in it."""
    if "\x00" not in expression:
        return raw
    stand_in = next((chr(c) for c in range(1, 32) if chr(c) not in expression and chr(c) not in "\t\n\r"), None)
    if stand_in is None:
        return raw
    try:
        engine.env.compile(expression.replace("\x00", stand_in))
    except RuntimeError as err:
        return str(err).replace(stand_in, "\x00")
    return raw


def _validate_checked(engine: _Engine, expression: str, checked: Any, *, want_bool: bool = True,
                      program_checks: bool = True) -> None:
    issues = [(node_id, message) for node_id, message in _ast.homogeneous_literal_issues(checked)]
    for function, literal, node_id in _ast.literal_arguments(checked):
        bad = goregex.check(literal) if function == "matches" else engine.literal_error(function, literal)
        if bad is not None:
            issues.append((node_id, f"invalid {function} argument"))
    if issues:
        lines = [_ast.format_issue(checked, expression, node_id, message) for node_id, message in issues]
        raise CelCompileError("compilation failed: " + "\n".join(lines))
    root_type = checked.type_map.get(checked.expr.id)
    if want_bool and root_type is not None and root_type.WhichOneof("type_kind") not in ("dyn", None) \
            and _ast.format_type(root_type) != "bool":
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {_ast.format_type(root_type)}")
    if program_checks:
        for literal in _ast.regex_constants(checked):
            bad = goregex.check(literal)
            if bad is not None:  # upstream compiles them when it makes the program
                raise CelCompileError(PROGRAM_FAILED + bad)


def _compile(expression: str, *, want_bool: bool = True, program_checks: bool = True) -> Selector:
    size = len(expression.encode("utf-8"))
    if size > MAX_EXPRESSION_LENGTH:
        raise CelCompileError(f"expression too long: {size} bytes, limit {MAX_EXPRESSION_LENGTH}")
    engine = _get_engine()
    try:
        program = engine.env.compile(expression)
    except RuntimeError as err:
        raise _compile_failure(expression, _whole_message(engine, expression, str(err))) from None
    wrapper, checked = _ast.decode(program.serialize())
    _validate_checked(engine, expression, checked, want_bool=want_bool, program_checks=program_checks)
    _ast.rename_calls(checked, "matches", _ast.MATCHES_FUNCTION)
    use = _ast.rewrite_domain_maps(checked)
    rewritten = engine.env.deserialize(_ast.encode(wrapper, checked))
    return Selector(expression, rewritten, checked, use)


class _SelectorCache:
    """A small thread-safe LRU of compilation outcomes (selectors and compile errors)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, Selector | CelCompileError] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, expression: str) -> Selector | CelCompileError | None:
        with self._lock:
            found = self._items.get(expression)
            if found is not None:
                self._items.move_to_end(expression)
            return found

    def put(self, expression: str, outcome: Selector | CelCompileError) -> None:
        with self._lock:
            self._items[expression] = outcome
            self._items.move_to_end(expression)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_cache = _SelectorCache(CACHE_SIZE)
_value_cache = _SelectorCache(CACHE_SIZE)


def compile_value_expression(expression: str) -> Selector:
    """Compile an expression whose result is a value rather than a bool (derived attributes)."""
    outcome = _value_cache.get(expression)
    if outcome is None:
        try:
            outcome = _compile(expression, want_bool=False)
        except CelCompileError as err:
            outcome = err
        _value_cache.put(expression, outcome)
    if isinstance(outcome, CelCompileError):
        raise type(outcome)(str(outcome))
    return outcome


def compile_unchecked_program(expression: str, *, want_bool: bool = True) -> Selector:
    """Compile without the checks upstream makes with the program (``find`` literals): for
    admission, which reports the type checker's issues first. Not cached."""
    return _compile(expression, want_bool=want_bool, program_checks=False)


def compile_selector(expression: str) -> Selector:
    """Compile (or fetch from the cache) a selector; ``CelCompileError`` if it is invalid."""
    outcome = _cache.get(expression)
    if outcome is None:
        try:
            outcome = _compile(expression)
        except CelCompileError as err:
            outcome = err
        _cache.put(expression, outcome)
    if isinstance(outcome, CelCompileError):
        raise type(outcome)(str(outcome))
    return outcome


def validate_expression(expression: str) -> str | None:
    """None if ``expression`` compiles, otherwise a one-line description of the problem."""
    try:
        compile_selector(expression)
    except CelCompileError as err:
        lines = str(err).split("\n")
        hint = lines[-1] if len(lines) > 1 and lines[-1].startswith("(") else ""
        return (lines[0] + (" " + hint if hint else "")).strip()
    return None
