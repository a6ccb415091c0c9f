"""``${...}`` placeholders: a closed set, resolved from a vendor profile at load time.

Run-time placeholders are ``${namespace}`` (each backend names its own namespace) and, in
driver-suite cases, ``${inv.<name>.node|pool|device|cel}`` (the devices bound from the driver's
ResourceSlices at setup, ``conformance.spec.inventory``), ``${inv.<name>.capacity}`` (standing alone
as a value: the mapping of capacity requests two allocations of the device fit with, e.g.
``capacity: {requests: "${inv.a.capacity}"}``) and ``${podImage}`` (an image whose
``sh`` prints the container's environment, for clusters where drakit reads it from the log). Anything else must be a key of the
profile; an unknown key is a load error, never a literal.

In a CEL expression (``cel: {expression: ...}``) a value is never pasted as code: it goes in as
an escaped string literal (:mod:`.celtext`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping

from . import celtext
from .celtext import PATTERN
RUNTIME = frozenset({"namespace", "podImage"})
VALIDATION_VALUE = "drakit-validate"  # stands in for an inventory value while a manifest is validated


def is_runtime(key: str) -> bool:
    return key in RUNTIME or key.startswith("inv.")


def resolve(value: Any, profile: Mapping[str, str], on_unknown: Callable[[tuple[object, ...], str], None],
            path: tuple[object, ...] = ()) -> Any:
    """Return a copy of ``value`` with profile placeholders substituted (marks are preserved on
    the containers that came from YAML)."""
    if isinstance(value, str):
        def lookup(key: str) -> str | None:
            if is_runtime(key):
                return None
            if key not in profile:
                on_unknown(path, key)
                return None
            return profile[key]
        if is_cel(path):
            try:
                return celtext.substitute(value, lookup)
            except celtext.CelPlaceholderError as exc:
                raise PlaceholderError(path, str(exc)) from None
        return PATTERN.sub(lambda m: _or_kept(lookup(m.group(1)), m), value)
    if isinstance(value, dict):
        for k in list(value):
            inner = resolve(value[k], profile, on_unknown, path + (k,))
            new_key = resolve(k, profile, on_unknown, path + (k,)) if isinstance(k, str) and "${" in k else k
            if new_key != k:
                _rename_key(value, k, new_key)
            value[new_key] = inner
        return value
    if isinstance(value, list):
        for i in range(len(value)):
            value[i] = resolve(value[i], profile, on_unknown, path + (i,))
        return value
    return value


def substitute_runtime(value: Any, namespace: str, bound: Mapping[str, str] | None = None,
                       _path: tuple[object, ...] = ()) -> Any:
    """``${namespace}`` and the bound inventory values; ``bound=None`` is for validation only:
    every ``${inv.*}`` becomes :data:`VALIDATION_VALUE`."""
    if isinstance(value, str):
        if "${" not in value:
            return value
        whole = PATTERN.fullmatch(value)
        if whole and whole.group(1).startswith("inv.") and whole.group(1).endswith(".capacity"):
            if bound is None:
                return {}
            if whole.group(1) in bound:
                return json.loads(bound[whole.group(1)])

        def lookup(key: str) -> str | None:
            if key == "namespace":
                return namespace
            if key.startswith("inv.") or key == "podImage":
                if bound is None:  # a CEL selector for a bound device validates as a CEL expression
                    return "true" if key.endswith(".cel") else VALIDATION_VALUE
                return bound.get(key)
            return None
        if is_cel(_path):
            return celtext.substitute(value, lookup)
        return PATTERN.sub(lambda m: _or_kept(lookup(m.group(1)), m), value)
    if isinstance(value, dict):
        return {k: substitute_runtime(v, namespace, bound, _path[-1:] + (k,)) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_runtime(v, namespace, bound, _path[-1:] + (i,)) for i, v in enumerate(value)]
    return value


class PlaceholderError(ValueError):
    """A placeholder's value that cannot stand where it is (*path*: where, in the document)."""

    def __init__(self, path: tuple[object, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def is_cel(path: tuple[object, ...]) -> bool:
    """The field at *path* is a CEL expression (``cel: {expression: ...}``, as in selectors)."""
    return tuple(path[-2:]) == ("cel", "expression")


def _or_kept(value: str | None, m: re.Match[str]) -> str:
    return m.group(0) if value is None else value


def _rename_key(mapping: dict, old: str, new: str) -> None:  # type: ignore[type-arg]
    """Move ``old`` to ``new`` keeping the line mark (marked dicts from the YAML loader)."""
    marks = getattr(mapping, "marks", None)
    del mapping[old]
    if marks is not None and old in marks:
        marks[new] = marks.pop(old)
