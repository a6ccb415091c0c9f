"""Partial matching of expected YAML against actual objects, with explicit list semantics.

Maps: every expected key must be present and match; extra actual keys are fine.
Lists, by the ``lists`` mode of the assertion:

=========  ==================================================================
exact      same length, element i matches element i
ordered    the expected elements match actual elements in the same order
           (other actual elements may sit between them)
unordered  same length, each expected element matches a different actual one
subset     each expected element matches a different actual one (default)
=========  ==================================================================

Scalars compare equal; ``null`` in the expectation means "absent or null".
"""

from __future__ import annotations

from typing import Any

from ..errors import format_path

MODES = ("exact", "ordered", "unordered", "subset")


def mismatches(expected: Any, actual: Any, mode: str = "subset", path: tuple[object, ...] = ()) -> list[str]:
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{format_path(path)}: expected an object, got {_show(actual)}"]
        out: list[str] = []
        for k, v in expected.items():
            if v is None:
                if actual.get(k) is not None:
                    out.append(f"{format_path(path + (k,))}: expected absent, got {_show(actual[k])}")
                continue
            if k not in actual:
                out.append(f"{format_path(path + (k,))}: missing (expected {_show(v)})")
                continue
            out.extend(mismatches(v, actual[k], mode, path + (k,)))
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return [f"{format_path(path)}: expected a list, got {_show(actual)}"]
        return _list_mismatches(expected, actual, mode, path)
    if expected == actual and type(expected) is type(actual) or (_num(expected) and _num(actual) and expected == actual):
        return []
    return [f"{format_path(path)}: expected {_show(expected)}, got {_show(actual)}"]


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _list_mismatches(expected: list[Any], actual: list[Any], mode: str, path: tuple[object, ...]) -> list[str]:
    if mode in ("exact", "unordered") and len(expected) != len(actual):
        return [f"{format_path(path)}: expected {len(expected)} items, got {len(actual)}: {_show(actual)}"]
    if mode == "exact":
        out: list[str] = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out.extend(mismatches(e, a, mode, path + (i,)))
        return out
    if mode == "ordered":
        j = 0
        for i, e in enumerate(expected):
            while j < len(actual) and mismatches(e, actual[j], mode, path + (j,)):
                j += 1
            if j == len(actual):
                return [f"{format_path(path)}: no element (in order) matches expected item {i}: {_show(e)}; got {_show(actual)}"]
            j += 1
        return []
    fits = [[not mismatches(e, a, mode, path) for a in actual] for e in expected]
    if _assign(fits, 0, set()):
        return []
    for i, row in enumerate(fits):
        if not any(row):
            return [f"{format_path(path)}: no element matches expected item {i}: {_show(expected[i])}; got {_show(actual)}"]
    return [f"{format_path(path)}: expected items cannot each match a different element; got {_show(actual)}"]


def _assign(fits: list[list[bool]], i: int, used: set[int]) -> bool:
    if i == len(fits):
        return True
    for j, ok in enumerate(fits[i]):
        if ok and j not in used:
            used.add(j)
            if _assign(fits, i + 1, used):
                return True
            used.discard(j)
    return False


def _show(v: Any, limit: int = 200) -> str:
    import json
    try:
        text = json.dumps(v, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."
