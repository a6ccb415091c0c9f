"""Derived attributes (KEP-6080): a CEL expression per request that computes an attribute value
for each candidate device, used by matchAttribute and distinctAttribute like a published one."""

from __future__ import annotations

from typing import Any

from ..attributes import AttributeValue
from ._compile import compile_value_expression
from ._device import EncodedDevice
from ._errors import CelRuntimeError

_SCALAR_KIND = {bool: "bool", int: "int", str: "string"}


def _scalar(item: Any) -> tuple[str, Any] | None:
    raw = item.value() if hasattr(item, "value") and callable(item.value) else item
    kind = _SCALAR_KIND.get(type(raw))
    if kind is not None:
        return kind, raw
    text = getattr(raw, "value", None)
    if type(raw).__name__ == "Semver" and isinstance(text, str):
        return "version", text
    return None


def evaluate_derived(expression: str, device: EncodedDevice) -> AttributeValue:
    """The expression's value on ``device`` as an attribute (scalar or list of one kind).

    Raises ``CelCompileError`` for an invalid expression and ``CelRuntimeError`` when evaluation
    fails or the result is neither a scalar (string, int, bool, semver) nor a list of them.
    """
    selector = compile_value_expression(expression)
    result, kind = selector.evaluate(device)
    one = _scalar(result)
    if one is not None:
        return AttributeValue(one[0], one[1])  # type: ignore[arg-type]
    if isinstance(result, list):
        if not result:
            return AttributeValue("strings", ())  # upstream: an empty list, which no constraint accepts
        items = [_scalar(x) for x in result]
        kinds = {i[0] for i in items if i is not None}
        if result and None not in items and len(kinds) == 1:
            k = kinds.pop()
            return AttributeValue(k + "s", tuple(i[1] for i in items if i is not None))  # type: ignore[arg-type]
    raise CelRuntimeError(f"derived attribute must be a string, int, bool or semver, or a list of them, "
                          f"not {selector.result_type_name(kind)}")
