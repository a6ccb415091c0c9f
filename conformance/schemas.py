"""JSON Schema validation with the schema language's own regular expressions.

A JSON Schema ``pattern`` is an ECMA-262 regular expression: its ``$`` matches at the end of the
string only. jsonschema runs patterns with Python's ``re.search``, whose ``$`` also matches
before a trailing newline, so ``"core/x\\n"`` passed ``^[a-z0-9/-]+$`` as a case id and slipped
past the duplicate-id check (issue 32). :func:`validator` gives a Draft 2020-12 validator whose
``pattern`` and ``patternProperties`` read ``$`` as ECMA does; every schema drakit validates an
input file against (cases, vendor profiles, explain states) is checked through it.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterator, Mapping

import jsonschema
from jsonschema import validators


@functools.lru_cache(maxsize=256)
def ecma_regex(pattern: str) -> re.Pattern[str]:
    """*pattern* compiled so that an unescaped ``$`` outside a character class matches at the
    very end only (Python's ``\\Z``), as in ECMA-262 without the ``m`` flag."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":  # "[]...]": a literal ] first in a class
                out.append("[]")
                i += 2
                continue
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return re.compile("".join(out))


def _pattern(validator: Any, patrn: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[jsonschema.ValidationError]:
    if validator.is_type(instance, "string") and not ecma_regex(patrn).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, properties: Mapping[str, Any], instance: Any,
                        schema: Mapping[str, Any]) -> Iterator[jsonschema.ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in properties.items():
        for k, v in instance.items():
            if ecma_regex(patrn).search(k):
                yield from validator.descend(v, subschema, path=k, schema_path=patrn)


StrictValidator = validators.extend(jsonschema.Draft202012Validator,
                                    {"pattern": _pattern, "patternProperties": _pattern_properties})


def validator(schema: Mapping[str, Any]) -> Any:
    """A Draft 2020-12 validator of *schema* whose patterns mean what JSON Schema says."""
    return StrictValidator(schema)
