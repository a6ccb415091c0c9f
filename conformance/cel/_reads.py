"""Which parts of ``device`` a selector reads, so that results can be shared between devices.

Most selectors read a handful of named values (``device.driver``,
``device.attributes["gpu.example.com"].model``, ``device.capacity["gpu.example.com"].memory``)
and nothing else of the device. Their outcome (result or error) is then a function of those
values alone: two devices that agree on them get the same outcome. :func:`device_reads` finds
such a selector's reads in its checked AST, or None when the selector uses ``device`` in any
other way (a whole domain map, a computed domain name, an optional lookup, a ``cel.bind`` of
part of the device, a variable that shadows ``device``); :func:`read_key` is what two devices
must share; :func:`device_is_plain` is False for a device whose evaluations do not depend on
the values read alone (an attribute that cannot be converted fails every evaluation with its
own name in the message; a value past the API's size bound brings in the per-device cost
bound).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..attributes import AttributeValue
from ..quantity import Quantity
from ._ast import _children
from ._cost import API_VALUE_BOUND
from ._device import _attribute_value, _extent

__all__ = ["Read", "device_reads", "device_is_plain", "read_key"]

Read = tuple[str, ...]   # ("driver",) | ("allowMultipleAllocations",) | ("attributes"|"capacity", domain, id)

DEVICE = "device"
_SCALAR_FIELDS = ("driver", "allowMultipleAllocations")
_MAPS = ("attributes", "capacity")
_MISSING = ("missing",)


def _const_string(expr: Any) -> str | None:
    if expr.WhichOneof("expr_kind") == "const_expr" and expr.const_expr.WhichOneof("constant_kind") == "string_value":
        return str(expr.const_expr.string_value)
    return None


def _step(parent: Any, child: Any, *, allow_test: bool) -> str | None:
    """The name ``parent`` looks up in ``child``: ``child.name`` or ``child["name"]`` (a constant
    key), else None."""
    kind = parent.WhichOneof("expr_kind")
    if kind == "select_expr":
        sel = parent.select_expr
        if sel.test_only and not allow_test:
            return None
        return str(sel.field)
    if kind == "call_expr":
        call = parent.call_expr
        if call.function == "_[_]" and not call.HasField("target") and len(call.args) == 2 \
                and call.args[0].id == child.id:
            return _const_string(call.args[1])
    return None



def device_reads(checked: Any) -> tuple[Read, ...] | None:
    """The device values the (rewritten) checked expression reads, sorted, or None when its
    outcome may depend on more than those."""
    reads: set[Read] = set()
    stack: list[tuple[Any, tuple[Any, ...]]] = [(checked.expr, ())]
    while stack:
        node, parents = stack.pop()
        kind = node.WhichOneof("expr_kind")
        if kind == "comprehension_expr":
            comp = node.comprehension_expr
            if DEVICE in (comp.iter_var, comp.iter_var2, comp.accu_var):
                return None
        elif kind == "ident_expr" and node.ident_expr.name == DEVICE:
            if not parents:
                return None
            top = _step(parents[-1], node, allow_test=True)
            if top in _SCALAR_FIELDS:
                reads.add((top,))
                continue
            if top not in _MAPS or len(parents) < 3 or _step(parents[-1], node, allow_test=False) is None:
                return None
            domain = _step(parents[-2], parents[-1], allow_test=False)
            ident = _step(parents[-3], parents[-2], allow_test=True) if domain is not None else None
            if domain is None or ident is None:
                return None
            reads.add((top, domain, ident))
            continue
        below = parents + (node,)
        stack.extend((child, below) for child in _children(node))
    return tuple(sorted(reads))


def device_is_plain(driver: str, attributes: Mapping[str, AttributeValue], capacity: Mapping[str, object]) -> bool:
    """Whether every evaluation on the device depends only on the values it reads: every
    attribute converts (:func:`._device.encode_device` would record no error), and no name or
    value is past the API's size bound (no per-device cost bound comes in). False is always
    safe: the device is then evaluated on its own."""
    if max(len(driver), len(attributes), len(capacity)) > API_VALUE_BOUND:
        return False
    for name, attr in attributes.items():
        try:
            _attribute_value(attr)
        except ValueError:
            return False
        if len(name) > API_VALUE_BOUND or _extent(attr) > API_VALUE_BOUND:
            return False
    return all(len(name) <= API_VALUE_BOUND for name in capacity)


def _lookup(values: Mapping[str, Any], driver: str, domain: str, ident: str) -> Any:
    """The value ``device.<map>[domain].ident`` reads (as encode_device files qualified names),
    _MISSING, or None when the device has it under two names (then which wins is dict order)."""
    full = values.get(f"{domain}/{ident}")
    bare = values.get(ident) if domain == driver and "/" not in ident else None
    if full is not None and bare is not None:
        return None
    return full if full is not None else bare if bare is not None else _MISSING


def read_key(reads: tuple[Read, ...], driver: str, attributes: Mapping[str, AttributeValue],
             capacity: Mapping[str, Quantity]) -> tuple[object, ...] | None:
    """The device's values of ``reads`` (what two devices must share to share an outcome), or
    None when that cannot be told from the values alone. ``allowMultipleAllocations`` is left
    to the caller (it is an input of the evaluation, not of the device alone)."""
    out: list[object] = []
    for r in reads:
        what = r[0]
        if what == "driver":
            out.append(driver)
        elif what == "attributes":
            v = _lookup(attributes, driver, r[1], r[2])
            if v is None:
                return None
            out.append(v if v is _MISSING else (v.kind, v.value))
        elif what == "capacity":
            v = _lookup(capacity, driver, r[1], r[2])
            if v is None:
                return None
            out.append(v if v is _MISSING else v.value)  # the engine sees a quantity's value only
    return tuple(out)
