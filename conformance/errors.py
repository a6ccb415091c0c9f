"""Errors a user can act on: one line that says what and where."""

from __future__ import annotations

import re
from dataclasses import dataclass


class Key(str):
    """A map key in a field path: printed as ``[key]``, as upstream's field paths print them."""

    __slots__ = ()


def format_path(path: tuple[object, ...]) -> str:
    """('spec', 'devices', 'requests', 0, 'name') -> 'spec.devices.requests[0].name';
    a :class:`Key` part prints as ``[key]``."""
    out = ""
    for part in path:
        if isinstance(part, (int, Key)):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


class FieldError(ValueError):
    """A validation failure at a field path inside one object (no file position yet)."""

    def __init__(self, path: tuple[object, ...], message: str) -> None:
        super().__init__(f"{format_path(path)}: {message}")
        self.path = path
        self.message = message


@dataclass
class LoadError(Exception):
    """A problem in an input file, rendered as ``file:line: path: message``; a problem of two
    places (an id defined twice) names the other one first: ``a:1 and b:7: message``."""

    file: str
    line: int | None
    message: str
    path: str | None = None
    first: str | None = None  # "file:line" of the other place

    MAX_MESSAGE = 400  # a message quoting a huge value stays one readable line

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        if self.first:
            where = f"{self.first} and {where}"
        message = _visible(" ".join(self.message.split()))
        if len(message) > self.MAX_MESSAGE:  # cut in the middle: the reason usually comes last
            half = self.MAX_MESSAGE // 2
            message = f"{message[:half]}... ({len(message) - 2 * half:,} characters left out) ...{message[-half:]}"
        path = None if self.path is None else _visible(self.path)
        if path is not None and len(path) > self.MAX_MESSAGE:
            path = path[:self.MAX_MESSAGE] + "..."
        return f"{_visible(where)}: {path}: {message}" if path else f"{_visible(where)}: {message}"


# control characters (a newline in a key, a terminal escape), line separators and bidi overrides,
# shown escaped; a lone surrogate as U+FFFD. The same rule as drakit.reports.names.clean_name, the
# escaping of every name the console shows (this pure module may not import it; a test keeps them equal).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def visible(text: str) -> str:
    """*text* on one line with every control character shown as an escape."""
    return _CONTROL.sub(lambda m: "\ufffd" if 0xD800 <= ord(m.group()) <= 0xDFFF
                        else f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


_visible = visible


class ApiRejected(Exception):
    """An API server (real or reference) refused an object; the message reads like kubectl's."""


def api_error_message(exc: BaseException) -> str:
    """The API server's own message from a kubernetes client error (the ``message`` of the Status
    in its body), else the error's first line."""
    import json

    body = getattr(exc, "body", None)
    try:
        data = json.loads(body) if isinstance(body, (str, bytes)) else None
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__
