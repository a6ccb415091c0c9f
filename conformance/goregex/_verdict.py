"""Go's verdict on a pattern: the scan's errors and RE2's, RE2's put in Go's words, the first
one in the pattern as Go's parser would meet it."""

from __future__ import annotations

import re2

from ._scan import Scan, scan as scan_pattern

__all__ = ["verdict", "options", "has_surrogate", "MAX_MEMORY"]

#: RE2's memory budget for one compiled pattern (its default is 8 MiB).
MAX_MEMORY = 32 << 20


def _go_error(code: str, arg: str) -> str:
    return f"error parsing regexp: {code}: `{arg}`"


_CODES = {
    "invalid escape sequence": "invalid escape sequence", "missing ]": "missing closing ]",
    "missing )": "missing closing )", "unexpected )": "unexpected )",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count", "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax", "invalid UTF-8": "invalid UTF-8",
    "invalid named capture group": "invalid named capture", "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
}
_TOO_LARGE = "pattern too large"


def options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_MEMORY
    return options


_REPEAT_CODES = ("no argument for repetition operator", "invalid repetition size", "bad repetition operator")


def _re2_error(scan: Scan, message: str, pattern: str) -> tuple[int, str, str] | None:
    """(position, Go's code, Go's argument) for RE2's error; None: none Go would give first
    (too large for RE2 only, or a repetition error the scan found as Go does)."""
    if message.startswith(_TOO_LARGE):
        return None
    if message == "trailing \\":
        return len(pattern), "trailing backslash at end of expression", ""
    if message == "invalid UTF-8":  # RE2's word for a '\x{' at the end (the text is UTF-8 here)
        tail = max(pattern.rfind("\\x{"), 0)
        return tail, "invalid escape sequence", pattern[tail:]
    code, _, arg = message.partition(": ")
    if code in _REPEAT_CODES and scan.error is not None:
        return None
    if code in ("missing )", "unexpected )"):
        return (len(pattern) if code == "missing )" else max(scan.unbalanced, 0)), _CODES[code], pattern
    found = _find_original(scan, arg, pattern)
    if found is None:
        return 0, _CODES.get(code, code), arg
    start, text = found
    if code == "missing ]":  # from the class's '[' to the end
        return len(pattern), _CODES[code], pattern[scan.open_class if scan.open_class >= 0 else start:]
    return start, _CODES.get(code, code), text


def _find_original(scan: Scan, arg: str, pattern: str) -> tuple[int, str] | None:
    """Where RE2's argument is in the pattern, and the pattern's text there: the first place
    where it starts outside a piece rewritten for RE2 and is the pattern's own text, else the
    first place it starts outside such a piece, as long as it is there."""
    first = None
    at = scan.re2.find(arg) if arg else -1
    while at >= 0:
        start = _original_pos(scan, at)
        if start is not None:
            if pattern.startswith(arg, start):
                return start, arg
            if first is None:
                first = (start, pattern[start:start + len(arg)])
        at = scan.re2.find(arg, at + 1)
    return first


def _original_pos(scan: Scan, pos: int) -> int | None:
    """The pattern's position behind re2[pos]; None inside a piece rewritten for RE2."""
    for (r0, p0), (r1, p1) in zip(scan.offsets, scan.offsets[1:]):
        if r0 <= pos < r1:
            return p0 + (pos - r0) if (r1 - r0) == (p1 - p0) or pos == r0 else None
    return scan.offsets[-1][1]


def verdict(pattern: str) -> str | Scan:
    """Go's error text, or the scan (with the pattern for RE2) when Go accepts the pattern."""
    if has_surrogate(pattern):
        bad = next(c for c in pattern if "\ud800" <= c <= "\udfff")
        return _go_error("invalid UTF-8", pattern[pattern.index(bad):])
    scan = scan_pattern(pattern)
    theirs = _re2_verdict(scan, scan.re2, pattern)
    if scan.error is not None:
        # Go stops at the first error: RE2's counts only when it is in the part before the scan's
        pos = scan.error[0]
        before = _re2_verdict(scan, scan.re2[:_re2_pos(scan, pos)], pattern) if pos > 0 else None
        if before is not None and before[1] not in _ONLY_AT_END:
            # the same error as in the whole pattern, whose text may run past the cut
            same = theirs is not None and theirs[1] == before[1] and theirs[2].startswith(before[2])
            theirs = theirs if same else before
        else:
            theirs = None
    found = theirs or scan.error
    if found is not None:
        return _go_error(found[1], found[2])
    return scan


_ONLY_AT_END = ("missing closing ]", "missing closing )", "trailing backslash at end of expression")


def _re2_verdict(scan: Scan, text: str, pattern: str) -> tuple[int, str, str] | None:
    try:
        re2.compile(text, options())
    except re2.error as err:
        raw = err.args[0] if err.args else str(err)
        return _re2_error(scan, raw.decode() if isinstance(raw, bytes) else str(raw), pattern)
    return None


def _re2_pos(scan: Scan, pos: int) -> int:
    """The position in the RE2 text of the pattern's position ``pos`` (the start of a piece)."""
    for r, p in scan.offsets:
        if p >= pos:
            return r
    return len(scan.re2)




def has_surrogate(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False
