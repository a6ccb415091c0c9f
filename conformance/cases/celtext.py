"""Placeholders inside CEL expressions: a value is put in as a CEL string literal, never as code.

A case writes ``"${cel.gpu.model} == '${value.gpu.model}'"``. The value of ``value.gpu.model``
comes from a vendor profile and may hold anything (``Acme's A100``, ``x' || 'a' == 'a``): pasted
as text it would end the literal and become code. Here the expression is lexed for its string
literals and each placeholder is filled in according to where it stands:

- inside a quoted literal: the value escaped for that literal (``\\``, the quote, control
  characters), so the literal means exactly the value;
- inside a raw literal (``r'...'``), where nothing can be escaped: the value as is when it holds
  neither the literal's quote nor a line break, else :class:`CelPlaceholderError`;
- outside any literal: the accessors drakit builds itself from validated names
  (``cel.<role>.<key>``, ``inv.<name>.cel``) are code by design and go in as they are; any other
  value becomes a double-quoted literal of its own.
"""

from __future__ import annotations

import re
from typing import Callable

PATTERN = re.compile(r"\$\{([A-Za-z0-9_.\-]+)\}")
_IDENT = re.compile(r"[A-Za-z0-9_]")


class CelPlaceholderError(ValueError):
    """A value that cannot stand where its placeholder is."""


def is_code(key: str) -> bool:
    """Placeholders whose values are CEL code built by drakit (never a vendor's free text)."""
    return key.startswith("cel.") or (key.startswith("inv.") and key.endswith(".cel"))


def _literals(text: str) -> list[tuple[int, int, str, bool, bool]]:
    """The string literals of *text*: (start of content, end of content, quote, raw, bytes)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c not in "'\"":
            i += 1
            continue
        # a prefix of r/R and b/B right before the quote, not the tail of an identifier
        j = i
        while j > 0 and text[j - 1] in "rRbB" and i - j < 2:
            j -= 1
        if j > 0 and _IDENT.match(text[j - 1]):
            j = i
        prefix = text[j:i].lower()
        quote = text[i:i + 3] if text[i:i + 3] in ("'''", '"""') else c
        k = i + len(quote)
        start = k
        while k < n and not text.startswith(quote, k):
            k += 2 if text[k] == "\\" and "r" not in prefix else 1
        out.append((start, min(k, n), quote, "r" in prefix, "b" in prefix))
        i = k + len(quote)
    return out


def escape(value: str, quote: str) -> str:
    """*value* as the content of a CEL string literal delimited by *quote*."""
    out = []
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch in quote:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def literal(value: str) -> str:
    """A double-quoted CEL string literal meaning exactly *value*."""
    return '"' + escape(value, '"') + '"'


def substitute(expression: str, lookup: Callable[[str], str | None]) -> str:
    """*expression* with each ``${key}`` whose *lookup* gives a value filled in by where it stands
    (a ``None`` leaves the placeholder as written)."""
    if "${" not in expression:
        return expression
    spans = _literals(expression)
    parts, last = [], 0
    for m in PATTERN.finditer(expression):
        key = m.group(1)
        value = lookup(key)
        if value is None:
            continue
        inside = next((s for s in spans if s[0] <= m.start() and m.end() <= s[1]), None)
        if inside is None:
            text = value if is_code(key) else literal(value)
        elif is_code(key):
            raise CelPlaceholderError(f"${{{key}}} is a CEL expression; it cannot stand inside a string literal")
        elif inside[3]:  # raw: nothing can be escaped
            if inside[2][0] in value or "\n" in value or "\r" in value:
                raise CelPlaceholderError(f"the value of ${{{key}}} ({value[:80]!r}) cannot be put in a raw CEL "
                                          f"string (it holds its quote or a line break): drop the r prefix")
            text = value
        else:
            text = escape(value, inside[2])
        parts.append(expression[last:m.start()])
        parts.append(text)
        last = m.end()
    parts.append(expression[last:])
    return "".join(parts)
