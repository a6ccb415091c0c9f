"""A walk over a pattern as Go's parser (regexp/syntax) makes it, for what Go refuses and RE2
does not (``\\C``, named captures such as ``(?<=``, repeat counts past 10⁸, Unicode class names
Go does not know, nesting deeper than 1,000) or reports in another order (a repeat count before
a nested repetition), and the pattern rewritten for RE2 where Go's spelling differs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._names import negated_items, table

__all__ = ["Scan", "scan"]

_MAX_REPEAT = 1000
_MAX_HEIGHT = 1000
_MAX_SIZE = (128 << 20) // 40  # instructions

@dataclass
class Scan:
    re2: str                      # the pattern for RE2
    offsets: list[tuple[int, int]]  # (position in re2, position in the pattern), increasing
    error: tuple[int, str, str] | None = None   # (position, Go's code, Go's argument)
    unsupported: str | None = None
    unbalanced: int = -1          # where the first ')' without its '(' is
    open_class: int = -1          # where the first '[' without its ']' is

    def fail(self, pos: int, code: str, arg: str) -> None:
        if self.error is None:
            self.error = (pos, code, arg)


def _parse_int(s: str, i: int) -> tuple[int | None, int]:
    """Go's parseInt at s[i:]: (value, -1 when too big; None when no number), end."""
    if i >= len(s) or not "0" <= s[i] <= "9":
        return None, i
    if i + 1 < len(s) and s[i] == "0" and "0" <= s[i + 1] <= "9":
        return None, i
    j = i
    while j < len(s) and "0" <= s[j] <= "9":
        j += 1
    n = 0
    for c in s[i:j]:
        if n >= 100_000_000:
            return -1, j
        n = n * 10 + ord(c) - 48
    return n, j


def _parse_repeat(s: str, i: int) -> tuple[int, int, int] | None:
    """Go's parseRepeat at s[i] == '{': (min, max, end) or None when ``{`` is a literal."""
    lo, j = _parse_int(s, i + 1)
    if lo is None or j >= len(s):
        return None
    if s[j] != ",":
        hi = lo
    else:
        j += 1
        if j >= len(s):
            return None
        if s[j] == "}":
            hi = -1
        else:
            hi_, j = _parse_int(s, j)
            if hi_ is None:
                return None
            hi = hi_
            if hi < 0:
                lo = -1
    if j >= len(s) or s[j] != "}":
        return None
    return lo, hi, j + 1


def _named_capture(s: str, i: int, scan: Scan) -> bool:
    """Go's rules at ``(?P<`` and ``(?<``; True when they apply (a valid name or an error)."""
    t = s[i:]
    with_p = len(t) > 4 and t[2] == "P" and t[3] == "<"
    if not (with_p or (len(t) > 3 and t[2] == "<")):
        return False
    end = t.find(">")
    if end < 0:
        scan.fail(i, "invalid named capture", t)
        return True
    name = t[4 if with_p else 3:end]
    if not name or not all(c == "_" or ("0" <= c <= "9") or ("a" <= c <= "z") or ("A" <= c <= "Z") for c in name):
        scan.fail(i, "invalid named capture", t[:end + 1])
    return True


def _unicode_class(s: str, i: int, in_class: bool, scan: Scan) -> tuple[str, int]:
    """``\\p``/``\\P`` at s[i]: (RE2 text, end)."""
    negate = s[i + 1] == "P"
    if i + 2 >= len(s):
        scan.fail(i, "invalid character class range", s[i:])
        return s[i:], len(s)
    if s[i + 2] != "{":
        seq, name, end = s[i:i + 3], s[i + 2], i + 3
    else:
        close = s.find("}", i)
        if close < 0:
            scan.fail(i, "invalid character class range", s[i:])
            return s[i:], len(s)
        seq, name, end = s[i:close + 1], s[i + 3:close], close + 1
    if name.startswith("^"):
        negate, name = not negate, name[1:]
    found = table(name)
    if found is None:
        scan.fail(i, "invalid character class range", seq)
        return seq, end
    items, negated = found
    negate ^= negated
    if not in_class:
        return ("[^" if negate else "[") + items + "]", end
    if not negate:
        return items, end
    other = negated_items(items)
    if other is not None:
        return other, end
    scan.unsupported = f"the negation of {seq} inside a character class"
    return items, end


def _class_end(s: str, i: int, scan: Scan, out: list[str], spans: list[tuple[int, int]]) -> int:
    """Copy the class at s[i] == '[' (rewriting its Unicode classes); its end."""
    j = i + 1
    if j < len(s) and s[j] == "^":
        j += 1
    first = True
    start = i
    while j < len(s) and (s[j] != "]" or first):
        first = False
        if s.startswith("[:", j):
            close = s.find(":]", j + 2)
            if close >= 0:
                j = close + 2
                continue
        if s.startswith(("\\p", "\\P"), j):
            out.append(s[start:j])
            spans.append((start, j))
            text, k = _unicode_class(s, j, True, scan)
            out.append(text)
            spans.append((j, k))
            start = j = k
            continue
        # a character, or a range of two (its upper end is a character, a \\p there is an escape)
        j = _escape_end(s, j) if s[j] == "\\" and j + 1 < len(s) else j + 1
        if j + 1 < len(s) and s[j] == "-" and s[j + 1] != "]":
            j = _escape_end(s, j + 1) if s[j + 1] == "\\" and j + 2 < len(s) else j + 2
    end = j + 1 if j < len(s) else len(s)
    if j >= len(s) and scan.open_class < 0:
        scan.open_class = i
    out.append(s[start:end])
    spans.append((start, end))
    return end


def _escape_end(s: str, i: int) -> int:
    if s[i + 1] == "x" and i + 2 < len(s) and s[i + 2] == "{":
        close = s.find("}", i)
        return close + 1 if close >= 0 else len(s)
    return i + 2


@dataclass
class _Frame:
    capture: bool
    height: int = 0      # the tallest item so far
    items: int = 0       # items since the group or the last '|' began
    all_items: int = 0
    branches: int = 1
    size: int = 0        # Go's program size of the branch so far (regexp/syntax calcSize)
    done: int = 0        # ... of the branches before it


_FLAGS = re.compile(r"\(\?[imsU-]*([:)])")


def scan(s: str) -> Scan:
    scan = Scan("", [])
    out: list[str] = []
    spans: list[tuple[int, int]] = []   # for each piece of out: the pattern's span it came from
    frames = [_Frame(False)]
    last = 0            # height of the last item (what a repetition applies to)
    last_size = 0       # and its size
    last_repeat = -1    # where the repetition operator just before began (-1: the last token was none)
    i = 0

    def item(h: int, size: int = 1) -> None:
        nonlocal last, last_size
        top = frames[-1]
        top.items += 1
        top.all_items += 1
        last, last_size = h, size
        top.height = max(top.height, h)
        top.size += size
        if top.done + top.size > _MAX_SIZE:
            scan.fail(i, "expression too large", s)

    def copy(j: int) -> None:
        out.append(s[i:j])
        spans.append((i, j))

    def repeat(op_end: int, lo: int, hi: int) -> int:
        """Go's checks of a repetition operator s[i:op_end] (a '?' after it makes it non-greedy),
        ``{lo,hi}`` (``hi`` -1: no upper bound)."""
        nonlocal last, last_repeat
        after = op_end + 1 if op_end < len(s) and s[op_end] == "?" else op_end
        if last_repeat >= 0:
            scan.fail(i, "invalid nested repetition operator", s[last_repeat:after])
        elif frames[-1].items == 0:
            scan.fail(i, "missing argument to repetition operator", s[i:after])
        else:
            sub = last_size
            frames[-1].size -= sub
            item(last + 1, max(1, (2 + sub if lo == 0 else 1 + lo * sub) if hi < 0 else hi * sub + hi - lo))
            frames[-1].items -= 1
            frames[-1].all_items -= 1
        last_repeat = i
        return after

    while i < len(s):
        c = s[i]
        was_repeat, last_repeat = last_repeat, -1
        if c == "(":
            flags = _FLAGS.match(s, i)
            if flags is not None and flags.group(1) == ")":  # flags only: no group, no item
                copy(flags.end())
                i = flags.end()
                continue
            named = s.startswith("(?", i) and _named_capture(s, i, scan)
            frames.append(_Frame(not s.startswith("(?", i) or named))
            if flags is not None:
                j = flags.end()
            elif named:
                j = s.find(">", i) + 1 or len(s)
            else:  # '(' or a '(?' Go refuses (RE2 says where)
                j = i + (2 if s.startswith("(?", i) else 1)
            copy(j)
            i = j
            continue
        if c == ")" and len(frames) > 1:
            f = frames.pop()
            # Go flattens a group without capture into its parent's concatenation or alternation
            h = max(f.height + (1 if f.all_items > 1 or f.branches > 1 else 0) + 1 if f.capture else f.height, 1)
            item(h, max(1, f.done + f.size + f.branches - 1 + (2 if f.capture else 0)))
            if h > _MAX_HEIGHT:
                scan.fail(i, "expression nests too deeply", s)
        elif c == ")" and scan.unbalanced < 0:
            scan.unbalanced = i
        elif c == "|":
            top = frames[-1]
            top.branches += 1
            top.items = 0
            top.done, top.size = top.done + top.size + 1, 0
        elif c == "[":
            j = _class_end(s, i, scan, out, spans)
            item(1)
            i = j
            continue
        elif c in "*+?":
            last_repeat = was_repeat
            j = repeat(i + 1, 1 if c == "+" else 0, 1 if c == "?" else -1)
            copy(j)
            i = j
            continue
        elif c == "{" and _parse_repeat(s, i) is not None:
            lo, hi, j = _parse_repeat(s, i) or (0, 0, 0)
            if lo < 0 or lo > _MAX_REPEAT or hi > _MAX_REPEAT or 0 <= hi < lo:
                scan.fail(i, "invalid repeat count", s[i:j])
            last_repeat = was_repeat
            j = repeat(j, lo, hi)
            copy(j)
            i = j
            continue
        elif c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "Q":
                close = s.find("\\E", i + 2)
                j = len(s) if close < 0 else close + 2
                if j > i + 2 + (0 if close < 0 else 2):
                    item(1, j - i - 2 - (0 if close < 0 else 2))
                copy(j)
                i = j
                continue
            if n == "C":
                scan.fail(i, "invalid escape sequence", "\\C")
            if n in "pP":
                text, j = _unicode_class(s, i, False, scan)
                out.append(text)
                spans.append((i, j))
                item(1)
                i = j
                continue
            j = _escape_end(s, i)
            copy(j)
            item(1)
            i = j
            continue
        else:
            item(1)
        copy(i + 1)
        i += 1
    root = frames[0]
    if root.height + (1 if root.all_items > 1 or root.branches > 1 else 0) > _MAX_HEIGHT:
        scan.fail(len(s), "expression nests too deeply", s)
    pos = 0
    for text, (start, _) in zip(out, spans):
        scan.offsets.append((pos, start))
        pos += len(text)
    scan.offsets.append((pos, len(s)))
    scan.re2 = "".join(out)
    return scan

