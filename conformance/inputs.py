"""The one reader of every file drakit takes from a user: case files, vendor profiles, hardware
shapes, explain states and claim files, claims for node-check and the node agent, fault files,
kubeconfigs, results files; and of the files a driver under test writes that drakit checks (CDI
specs, device metadata files).

A file is bounded before a byte of it is read (issue 32):

- it must be a regular file: the path is checked with ``stat`` before it is opened (a FIFO would
  block the open itself, ``/dev/zero`` never ends, a folder or a socket has nothing to read),
  opened with ``O_NONBLOCK`` (a FIFO swapped in after the check does not block) and checked
  again with ``fstat`` on the open descriptor: the same file, still regular;
- its size is capped per :class:`Kind` (:data:`KINDS`, the docs' limits table): a file over its
  cap is refused by its size, and at most cap + 1 bytes are ever read (a file still growing);
- it is decoded strictly as UTF-8;
- JSON is parsed with duplicate keys refused (two ``verdict`` keys are not one), numbers bounded
  (no 5,000-digit integer, no NaN or Infinity, nothing that overflows to infinity) and its
  nesting bounded; YAML goes through :mod:`drakit.conformance.yamlmarks`, bounded in depth,
  nodes and alias expansion.

Every refusal is one :class:`InputError` naming the file and why; the commands print it as their
one line and exit 2. Standard library only: ``drakit.reports`` reads results files with it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from typing import Any


class InputError(ValueError):
    """A file drakit refuses to read, or cannot: ``str()`` is ``PATH: why``; ``reason`` the why."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


@dataclass(frozen=True)
class Kind:
    """What a file is to drakit, and how large it may be."""

    name: str  # "case file", "vendor profile"...: the refusal says "over the case-file size limit"
    max_bytes: int
    raise_with: str = ""  # how a user raises the limit ("" : fixed)
    env: str = ""  # an environment variable (bytes) that raises it

    def limit(self, override: int | None = None) -> int:
        if override is not None:
            return override
        raw = os.environ.get(self.env, "") if self.env else ""
        return int(raw) if raw.isdigit() and raw.isascii() else self.max_bytes


MiB = 1 << 20
CASE_FILE = Kind("case-file", 1 * MiB, "--max-case-size raises it")
PROFILE = Kind("vendor-profile", 1 * MiB)
SHAPE = Kind("hardware-shape", 1 * MiB)
FAULTS = Kind("faults-file", 1 * MiB)
KUBECONFIG = Kind("kubeconfig", 16 * MiB)  # certificates and keys inline, many contexts
CLAIMS = Kind("claims-file", 16 * MiB)
STATE = Kind("explain-state", 64 * MiB, "DRAKIT_MAX_STATE_SIZE=BYTES raises it", "DRAKIT_MAX_STATE_SIZE")
RESULTS = Kind("results-file", 64 * MiB, "DRAKIT_MAX_RESULTS_SIZE=BYTES raises it", "DRAKIT_MAX_RESULTS_SIZE")
DRIVER_FILE = Kind("driver-file", 16 * MiB)  # what a driver under test wrote: CDI specs, device metadata files
KINDS = (CASE_FILE, PROFILE, SHAPE, FAULTS, KUBECONFIG, CLAIMS, STATE, RESULTS, DRIVER_FILE)

MAX_DEPTH = 100  # nesting of a JSON file (objects and arrays), as for YAML
MAX_NUMBER_CHARS = 40  # a number in a JSON file: counts, lines, seconds, quantities are a few digits

_ODD = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


def format_size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def _kind_of(mode: int) -> str:
    return next((k for test, k in _ODD if test(mode)), "an unusual file")


def _over(kind: Kind, size: int | None, limit: int) -> str:
    what = f"the file is {format_size(size)}" if size is not None else "the file goes on"
    hint = f" ({kind.raise_with})" if kind.raise_with else ""
    return f"{what}, over the {kind.name} size limit of {format_size(limit)}{hint}"


def _missing(path: str, exc: OSError) -> str:
    if os.path.islink(path):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        what = "a symlink loop" if exc.errno == errno.ELOOP else "a dangling symlink"
        return f"{what} (to {target[:200]!r}): not a regular file"
    return f"cannot read: {exc.strerror or exc}"


def read_bytes(path: str | os.PathLike[str], kind: Kind, *, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file of at most ``kind``'s size limit (*max_bytes* overrides it);
    :class:`InputError` otherwise, without blocking and without reading more than the limit."""
    name = os.fspath(path)
    limit = kind.limit(max_bytes)
    try:
        before = os.stat(name)
    except OSError as exc:
        raise InputError(name, _missing(name, exc)) from None
    if not stat.S_ISREG(before.st_mode):
        through = " through a symlink" if os.path.islink(name) else ""
        raise InputError(name, f"not a regular file ({_kind_of(before.st_mode)}{through})")
    if before.st_size > limit:
        raise InputError(name, _over(kind, before.st_size, limit))
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(name, _missing(name, exc)) from None
    try:
        after = os.fstat(fd)
        if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise InputError(name, "replaced while it was being opened: not read")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(limit + 1 - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if got > limit:  # grew after the check
        raise InputError(name, _over(kind, None, limit))
    return b"".join(chunks)


def decode(raw: bytes, name: str) -> str:
    """*raw* as strict UTF-8 text; :class:`InputError` naming the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(name, f"not UTF-8 text: {exc.reason} at byte {exc.start:,}") from None


def read_text(path: str | os.PathLike[str], kind: Kind, *, max_bytes: int | None = None) -> str:
    """:func:`read_bytes`, decoded as strict UTF-8."""
    return decode(read_bytes(path, kind, max_bytes=max_bytes), os.fspath(path))


class _Refused(ValueError):
    pass


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"an integer of {len(text):,} digits")
    return int(text)


def _float(text: str) -> float:
    value = float(text) if len(text) <= MAX_NUMBER_CHARS else float("inf")
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"a number too large ({text[:20]}{'...' if len(text) > 20 else ''})")
    return value


def _constant(text: str) -> float:
    raise _Refused(f"{text} (not JSON)")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key[:100]!r} in one object")
        out[key] = value
    return out


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether *value* (JSON data) nests deeper than *limit* (without recursing)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return False


def parse_json(text: str, name: str, *, what: str = "") -> Any:
    """JSON *text* of the file *name*, bounded as the module docstring says; :class:`InputError`
    otherwise (*what*: ``": not a drakit results file"``, appended to refusals of its content)."""
    try:
        obj = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}:{exc.lineno}:{exc.colno}", f"not valid JSON: {exc.msg}") from None
    except _Refused as exc:
        raise InputError(name, f"{exc}{what}") from None
    except RecursionError:  # too deep for the decoder itself
        raise InputError(name, f"nested deeper than {MAX_DEPTH} levels{what}") from None
    if too_deep(obj):
        raise InputError(name, f"nested deeper than {MAX_DEPTH} levels{what}")
    return obj


def read_json(path: str | os.PathLike[str], kind: Kind, *, what: str = "") -> Any:
    """A JSON file, read by :func:`read_text` and parsed by :func:`parse_json`."""
    return parse_json(read_text(path, kind), os.fspath(path), what=what)
