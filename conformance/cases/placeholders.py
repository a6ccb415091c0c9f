"""``${...}`` placeholders: a closed set, resolved from a vendor profile at load time.

``${namespace}`` is the one run-time placeholder (each backend names its own namespace).
Anything else must be a key of the profile; an unknown key is a load error, never a literal.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

PATTERN = re.compile(r"\$\{([A-Za-z0-9_.\-]+)\}")
RUNTIME = frozenset({"namespace"})


def resolve(value: Any, profile: Mapping[str, str], on_unknown: Callable[[tuple[object, ...], str], None],
            path: tuple[object, ...] = ()) -> Any:
    """Return a copy of ``value`` with profile placeholders substituted (marks are preserved on
    the containers that came from YAML)."""
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            key = m.group(1)
            if key in RUNTIME:
                return m.group(0)
            if key not in profile:
                on_unknown(path, key)
                return m.group(0)
            return profile[key]
        return PATTERN.sub(sub, value)
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


def substitute_runtime(value: Any, namespace: str) -> Any:
    if isinstance(value, str):
        return value.replace("${namespace}", namespace)
    if isinstance(value, dict):
        return {k: substitute_runtime(v, namespace) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_runtime(v, namespace) for v in value]
    return value


def _rename_key(mapping: dict, old: str, new: str) -> None:  # type: ignore[type-arg]
    """Move ``old`` to ``new`` keeping the line mark (marked dicts from the YAML loader)."""
    marks = getattr(mapping, "marks", None)
    del mapping[old]
    if marks is not None and old in marks:
        marks[new] = marks.pop(old)
