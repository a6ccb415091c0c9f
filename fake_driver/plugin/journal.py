"""The checkpoint's append-only journal: one line per change, checksummed.

A journal file starts with a header line ``{"kind": "DrakitPluginJournal", "version": 1,
"generation": G}`` (G: the snapshot it continues) and then holds one record per line,
``<crc32 of the JSON, 8 hex digits> <JSON>``. Appending is one ``write`` on an ``O_APPEND``
descriptor: what was written survives a crash of the process (the kernel has it), so a record
is as durable against SIGKILL as a rewritten file, at a fraction of the cost.

``sync=True`` adds durability against power loss where a caller asks for it
(:meth:`JournalWriter.make_durable`, before an answer that depends on the record): the records
appended so far are fdatasynced, and callers that ask while one fdatasync runs wait for it or
for the next one, which then covers all of them (group commit: concurrent prepares share one
disk flush instead of queueing one each).

Reading: a last line without its newline is an append a crash cut short; its call was never
answered, so it is dropped. Any complete line that does not check out is corruption and refused
(:class:`JournalError`, with the line number).
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from pathlib import Path
from typing import Any, Iterator

from .files import atomic_write

KIND = "DrakitPluginJournal"
VERSION = 1


class JournalError(ValueError):
    """The journal exists but cannot be read back."""


def _line(record: dict[str, Any]) -> bytes:
    return line_of(json.dumps(record, separators=(",", ":"), sort_keys=True))


def line_of(body_text: str) -> bytes:
    """The journal line of one record given as canonical JSON text (sorted keys, no spaces)."""
    body = body_text.encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def read(path: Path) -> tuple[int, list[dict[str, Any]]] | None:
    """The journal's generation and records, or None when there is no journal."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    lines = raw.split(b"\n")
    lines.pop()  # after the last newline: empty, or an append cut short (dropped)
    if not lines:
        raise JournalError("no header line")
    try:
        header = json.loads(lines[0])
        if header.get("kind") != KIND or header.get("version") != VERSION:
            raise JournalError(f"line 1: not a version {VERSION} plugin journal")
        generation = int(header["generation"])
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise JournalError(f"line 1: unreadable journal header: {err}") from None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines[1:], 2):
        try:
            records.append(_record(line))
        except ValueError as err:
            raise JournalError(f"line {number}: {err}") from None
    return generation, records


def _record(line: bytes) -> dict[str, Any]:
    crc, _, body = line.partition(b" ")
    if len(crc) != 8 or int(crc, 16) != zlib.crc32(body):
        raise ValueError("checksum mismatch (file corrupted)")
    record = json.loads(body)
    if not isinstance(record, dict) or not isinstance(record.get("op"), str) or not isinstance(record.get("uid"), str):
        raise ValueError("not a journal record")
    return record


class JournalWriter:
    """Appends records to one journal file (opened once, kept open).

    :meth:`append` is called under the checkpoint's lock; :meth:`make_durable` outside it, so
    other calls append while one waits for the disk."""

    def __init__(self, path: Path, *, sync: bool = False) -> None:
        self.path = path
        self.sync = sync
        self._fd: int | None = None
        self.records = 0          # records in the current file
        self.tail: list[bytes] | None = None  # lines appended while a compaction runs
        self._seq = 0             # records appended, over every file
        self._durable = 0         # records known to be on disk (sync mode)
        self._syncing = False
        self._cond = threading.Condition(threading.Lock())

    def open(self, generation: int, *, fresh: bool, mode: int, durable: bool) -> None:
        """``fresh``: start a new, empty journal for ``generation`` (replacing any old one
        atomically); otherwise append to the existing one."""
        if fresh:
            atomic_write(self.path, header(generation), mode, durable=durable)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self.switch(fd, 0 if fresh else self.records)

    def switch(self, fd: int, records: int) -> None:
        """Continue in the open file ``fd`` (already in place at :attr:`path`, holding
        ``records`` records, durable as far as this writer's mode asks)."""
        with self._cond:
            while self._syncing:  # never close a descriptor an fdatasync is using
                self._cond.wait()
            if self._fd is not None:
                os.close(self._fd)
            self._fd = fd
            self.records = records
            self._durable = self._seq
            self._cond.notify_all()

    def append_line(self, data: bytes) -> int:
        """Append one line; returns its sequence number (for :meth:`make_durable`)."""
        assert self._fd is not None, "journal not open"
        written = os.write(self._fd, data)
        while written < len(data):  # a short write (rare: signals, full disk)
            written += os.write(self._fd, data[written:])
        self.records += 1
        if self.tail is not None:
            self.tail.append(data)
        self._seq += 1
        return self._seq

    @property
    def appended(self) -> int:
        """The sequence number of the last record appended."""
        return self._seq

    def append(self, record: dict[str, Any]) -> int:
        return self.append_line(_line(record))

    def make_durable(self, seq: int) -> None:
        """With ``sync``: return once record ``seq`` (and every earlier one) is on disk."""
        if not self.sync:
            return
        with self._cond:
            while self._durable < seq:
                if self._syncing:
                    self._cond.wait()
                    continue
                self._syncing = True
                target, fd = self._seq, self._fd
                self._cond.release()
                try:
                    if fd is not None:
                        os.fdatasync(fd)
                finally:
                    self._cond.acquire()
                    self._syncing = False
                    self._cond.notify_all()
                self._durable = max(self._durable, target)

    def flush(self) -> None:
        """Make what was appended durable (fdatasync)."""
        if self._fd is not None:
            os.fdatasync(self._fd)

    def close(self) -> None:
        with self._cond:
            while self._syncing:
                self._cond.wait()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def header(generation: int) -> bytes:
    return json.dumps({"kind": KIND, "version": VERSION, "generation": generation}).encode() + b"\n"


def replay(records: list[dict[str, Any]]) -> Iterator[tuple[str, str, dict[str, Any] | None]]:
    """(op, uid, claim JSON or None) per record."""
    for r in records:
        yield r["op"], r["uid"], r.get("claim")
