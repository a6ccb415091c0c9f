"""Regular expressions as the API server reads and runs them: Go's ``regexp``, on Google's RE2.

Every pattern drakit evaluates for a user or a vendor is compiled here, and nowhere else: CEL's
``matches()``, ``find()`` and ``findAll()`` and a vendor profile's ``containerEnv`` patterns.
Kubernetes evaluates CEL with Go's ``regexp`` package, whose syntax is RE2's with differences
of its own; matching is linear in the text, with no backreferences and no lookaround.

:func:`compile` gives a :class:`GoRegexp` or raises :class:`GoRegexpError` whose text is Go's
``regexp.Compile`` error word for word (``error parsing regexp: invalid escape sequence:
`\\1```). The syntax is checked in two parts: the ``google-re2`` binding (RE2 itself: Go's
parser is a port of it, and most errors are the same with other words), and ``_scan``, which
walks the pattern as Go's parser does for what Go refuses and RE2 does not (``\\C``, named
captures such as ``(?<=``, repeat counts past 10⁸, Unicode class names Go does not know,
nesting deeper than 1,000, a program over Go's size limit), reports in another order, or spells
otherwise (``\\pl``, ``\\p{Letter}``, ``\\p{Assigned}``: rewritten for RE2). Of the errors Go
would meet, the first in the pattern is given, as Go's parser stops there.

Matching follows Go: leftmost-first, ``$`` only at the end of the text, ``findAll`` skips an
empty match right after a match. Text is matched as UTF-8 (a lone surrogate, which the API
server's JSON decoding would have replaced, counts as U+FFFD).

Approximate: Unicode tables are RE2's (Go 1.26 has Unicode 15.0.0), so a code point assigned
in a later version may fall in a class here and not in Go; the nesting depth is estimated from
the groups (Go counts its parse tree: patterns nested close to 1,000 deep may differ). Not
supported (an evaluation error,
:class:`GoRegexpUnsupported`): a pattern RE2 cannot compile in :data:`MAX_MEMORY` that Go
accepts, and inside a class the negation of a Unicode class RE2 spells as several
(``[^a\\P{LC}]``).
"""


from __future__ import annotations

from functools import lru_cache

import re2

from ._verdict import MAX_MEMORY, has_surrogate, options, verdict

__all__ = ["GoRegexp", "GoRegexpError", "GoRegexpUnsupported", "compile", "check", "quote_meta", "MAX_MEMORY"]

_CACHE = 16  # compiled patterns kept (each within MAX_MEMORY)


class GoRegexpError(ValueError):
    """Go refuses the pattern; the text is Go's error."""


class GoRegexpUnsupported(ValueError):
    """Go accepts the pattern, this kit's engine cannot run it (see the package notes)."""


class GoRegexp:
    """A compiled pattern; methods take and give ``str``, matching as Go's regexp does."""

    __slots__ = ("pattern", "_re")

    def __init__(self, pattern: str, compiled: object) -> None:
        self.pattern = pattern
        self._re = compiled

    def _search(self, data: bytes, pos: int) -> tuple[int, int] | None:
        """The leftmost match at or after ``pos`` that starts on a character, as Go tries only
        those (RE2 may find an empty one inside a character's bytes: ``\\B`` in ``☺``)."""
        while True:
            m = self._re.search(data, pos)  # type: ignore[attr-defined]
            if m is None:
                return None
            start, end = m.span()
            if start >= len(data) or not 0x80 <= data[start] < 0xC0:
                return start, end
            pos = start + 1
            while pos < len(data) and 0x80 <= data[pos] < 0xC0:
                pos += 1

    def match(self, text: str) -> bool:
        """Go's MatchString: a match anywhere in ``text``."""
        return self._search(_utf8(text), 0) is not None

    def find(self, text: str) -> str:
        """Go's FindString: the leftmost match, or ``""``."""
        data = _utf8(text)
        span = self._search(data, 0)
        return "" if span is None else data[span[0]:span[1]].decode()

    def find_all(self, text: str, limit: int = -1) -> list[str]:
        """Go's FindAllString(text, limit): successive matches; an empty match right after a
        match is skipped; at most ``limit`` (all when negative)."""
        data = _utf8(text)
        if limit < 0:
            limit = len(data) + 1
        found: list[str] = []
        pos, prev_end = 0, -1
        while len(found) < limit and pos <= len(data):
            span = self._search(data, pos)
            if span is None:
                break
            accept = True
            if span[1] == pos:  # an empty match
                if span[0] == prev_end:
                    accept = False
                pos += _width(data, pos) if pos < len(data) else 1
            else:
                pos = span[1]
            prev_end = span[1]
            if accept:
                found.append(data[span[0]:span[1]].decode())
        return found

    def fullmatch(self, text: str) -> bool:
        """The whole of ``text`` matches."""
        return self._re.fullmatch(_utf8(text)) is not None  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"GoRegexp({self.pattern!r})"


def _width(data: bytes, pos: int) -> int:
    """Go's step past one character at data[pos] (1 for a byte that starts none)."""
    b = data[pos]
    n = 1 if b < 0xC0 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
    try:
        data[pos:pos + n].decode()
    except UnicodeDecodeError:
        return 1
    return n


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace") if has_surrogate(text) else text.encode()




@lru_cache(maxsize=1024)
def check(pattern: str) -> str | None:
    """Go's error for ``pattern`` (``regexp.Compile``), or None when Go accepts it."""
    outcome = verdict(pattern)
    return outcome if isinstance(outcome, str) else None


@lru_cache(maxsize=_CACHE)
def compile(pattern: str) -> GoRegexp:  # noqa: A001 - the module's verb, as re.compile
    """The compiled pattern; :class:`GoRegexpError` (Go's text) when Go refuses it,
    :class:`GoRegexpUnsupported` when Go accepts it and RE2 cannot run it here."""
    outcome = verdict(pattern)
    if isinstance(outcome, str):
        raise GoRegexpError(outcome)
    if outcome.unsupported:
        raise GoRegexpUnsupported(f"this kit's regex engine cannot run {outcome.unsupported} (Go accepts it)")
    try:
        compiled = re2.compile(outcome.re2.encode(), options())
    except re2.error:
        raise GoRegexpUnsupported(f"the pattern is over this kit's regex engine's memory limit of {MAX_MEMORY >> 20} MiB "
                                  "(Go accepts it)") from None
    return GoRegexp(pattern, compiled)


def quote_meta(text: str) -> str:
    """Go's QuoteMeta: ``text`` as a pattern matching it literally."""
    return "".join("\\" + c if c in "\\.+*?()|[]{}^$" else c for c in text)

