"""Folders for Unix sockets whatever TMPDIR is (issue 25).

A Unix socket's path is at most 107 bytes (``sun_path``), so a folder in a long temp folder (a CI
runner's ``/home/runner/work/_temp/...``, or longer) cannot hold the sockets of a driver's
plugin or the kubelet. :func:`short_temp_dir` is the temp folder when the sockets fit in it,
else the first writable of ``/tmp``, ``/var/tmp`` and ``/dev/shm`` that leaves room;
:func:`socket_dir` makes a folder there and says so, once per run and folder, in one line
through :data:`notice` (stderr unless the caller set another, e.g. ``drakit run``'s console).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["MAX_SOCKET_PATH", "socket_dir", "short_temp_dir", "fallback_roots", "set_notice"]

#: The longest Unix socket path (sun_path is 108 bytes with its terminating NUL).
MAX_SOCKET_PATH = 107
_FALLBACKS = ("/tmp", "/var/tmp", "/dev/shm")
_said: set[tuple[str, str]] = set()


def _stderr(line: str) -> None:
    sys.stderr.write(f"drakit: {line}\n")


notice: Callable[[str], None] = _stderr


def set_notice(say: Callable[[str], None]) -> None:
    """Where the one line about a fallback folder goes (``drakit run``: its console)."""
    global notice
    notice = say


def short_temp_dir(room: int) -> str:
    """The temp folder when ``room`` more characters (the folder drakit makes in it and the
    longest socket path inside that) fit within :data:`MAX_SOCKET_PATH`, else the first writable
    fallback that does; the temp folder when none does (the socket's own bind then fails)."""
    for base in (tempfile.gettempdir(), *_FALLBACKS):
        if len(base.encode()) + room <= MAX_SOCKET_PATH and os.access(base, os.W_OK | os.X_OK):
            return base
    return tempfile.gettempdir()


def socket_dir(prefix: str, longest: int, what: str) -> Path:
    """A new folder ``<base>/<prefix>XXXXXXXX`` whose sockets, at most ``longest`` characters
    below it, fit; ``what`` names them in the line said when the temp folder is too long."""
    room = len(prefix) + 9 + longest  # "/" + prefix + 8 random characters, then the sockets
    base = short_temp_dir(room)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    tmp = tempfile.gettempdir()
    if base != tmp and (what, base) not in _said:
        _said.add((what, base))
        notice(f"{what} in {base}: the temp folder {tmp} is too long for their Unix sockets "
               f"({len(tmp.encode())} characters; at most {MAX_SOCKET_PATH - room} leave room for them)")
    return folder


def fallback_roots() -> list[Path]:
    """The temp folder and the fallbacks drakit may have made folders in (for the sweep of what
    killed runs left)."""
    out = [Path(tempfile.gettempdir())]
    out += [Path(b) for b in _FALLBACKS if Path(b) not in out and os.path.isdir(b)]
    return out
