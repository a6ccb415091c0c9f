"""The plugin's checkpoint: which claims it prepared, with what answer and which files.

A restarted plugin reads it back, so NodeUnprepareResources for a claim prepared before the
restart still removes the right files, and NodePrepareResources for it returns the same
devices. Two files in the state folder:

- ``checkpoint.json``, the snapshot: ``{"kind": "DrakitPluginCheckpoint", "version": 3,
  "generation": G, "checksum": <crc32 of the canonical body>, "folded": {"generation": F,
  "records": K}, "claims": {...}, "pending": {...}}``, replaced atomically (fsynced, with its
  folder, when ``durable``), mode 0600; versions 1 (no generation, no pending claims) and 2 (no
  ``folded``) are read too;
- ``checkpoint.journal``, what changed since (:mod:`.journal`): a prepare records its intent
  (``begin``, with the claim's answer and every file it will write) *before* writing any file,
  and ``commit`` once they are all written; an unprepare records ``remove`` once the files are
  gone. A new claim therefore costs two short appends, however many claims are prepared.

After a crash, :meth:`Checkpoint.load` returns the prepared claims and, separately, the
interrupted prepares (begun, never committed): the driver removes whatever those left and
drops them, then :meth:`Checkpoint.start` folds everything into a new snapshot.

Compaction keeps loading proportional to what is prepared: once the journal has grown past
twice the number of live claims (at least ``compact_min`` records), a background thread writes
snapshot G+1 holding the state as of the journal's K-th record (``folded``: journal G, K
records), while calls go on appending to journal G; then, under the lock, journal G+1 (the
records after the K-th) replaces journal G. A crash in between leaves snapshot G+1 and journal
G, and :meth:`load` applies journal G's records after the K-th; a journal older than that was
folded in whole. Each claim's canonical JSON is kept from its ``begin``, so a snapshot of 5,000
claims is a join of strings, not a re-encoding, and no call waits for it.

What is fsynced: the snapshot (it replaces the previous state) always, when ``durable``; the
journal only with ``sync``: before the driver answers a call, every record appended so far is
flushed (:meth:`Checkpoint.make_durable`: one fdatasync for all of the call's claims, shared
with concurrent calls: group commit). A ``begin`` needs no flush of its own: the files it
announces are not fsynced either, and the flush before the answer covers it. Without ``sync`` a record survives
any crash of the driver process, and a power loss can only drop the newest records: the claims
they describe are prepared again by the kubelet (same devices, same file names, derived from
the claim) and a claim unprepared while unknown still has its files found and removed by name.

A checkpoint that cannot be read back is refused (:class:`CheckpointError`: the file, what is
wrong, and that the driver does not start), never silently dropped.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import zlib
from json.encoder import encode_basestring_ascii as _quote
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import journal
from .files import atomic_write, fsync_dir

log = logging.getLogger("drakit.driver")

KIND = "DrakitPluginCheckpoint"
VERSION = 3
READ_VERSIONS = (1, 2, 3)
MODE = 0o600
JOURNAL_SUFFIX = ".journal"
COMPACT_MIN = 1024


class CheckpointError(RuntimeError):
    """The checkpoint exists but cannot be used: ``path`` is the file, ``problem`` what is wrong
    with it. The driver does not start on it (it will not guess which claims it prepared)."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    """One device in a NodePrepareResources answer, independent of the gRPC version."""

    request_names: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]
    share_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requestNames": list(self.request_names), "pool": self.pool,
                               "device": self.device, "cdiDeviceIDs": list(self.cdi_ids)}
        if self.share_id is not None:
            out["shareID"] = self.share_id
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PreparedDevice:
        return cls(tuple(data["requestNames"]), data["pool"], data["device"],
                   tuple(data["cdiDeviceIDs"]), data.get("shareID"))


@dataclass(frozen=True, slots=True)
class PreparedClaim:
    """A claim the plugin prepared: its answer and the files it wrote (path -> content)."""

    uid: str
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]
    files: dict[str, str] = field(default_factory=dict)
    shared: frozenset[tuple[str, str]] = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name,
                "devices": [d.to_json() for d in self.devices],
                "files": dict(sorted(self.files.items())),
                "shared": sorted(f"{pool}/{device}" for pool, device in self.shared)}

    @classmethod
    def from_json(cls, uid: str, data: dict[str, Any]) -> PreparedClaim:
        shared = frozenset(tuple(s.split("/", 1)) for s in data.get("shared", []))
        return cls(uid, data["namespace"], data["name"],
                   tuple(PreparedDevice.from_json(d) for d in data["devices"]),
                   dict(data.get("files", {})), shared)  # type: ignore[arg-type]


def _canonical(claims: dict[str, Any]) -> bytes:
    return canonical_text(claims).encode()


def canonical_text(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _object_text(texts: dict[str, str]) -> str:
    """The canonical JSON object of uid -> canonical JSON text (sorted keys)."""
    return "{" + ",".join(f"{_quote(uid)}:{texts[uid]}" for uid in sorted(texts)) + "}"


class Checkpoint:
    """The prepared claims at ``path`` (snapshot) and next to it (journal); thread-safe.

    Use: :meth:`load`, clean up :meth:`interrupted` claims, :meth:`start`; then :meth:`begin`
    and :meth:`commit` (or :meth:`abort`) around each prepare, :meth:`remove` after each
    unprepare; :meth:`close` at the end. ``background=False`` compacts in the calling thread.
    """

    def __init__(self, path: Path, *, durable: bool = True, sync: bool = False,
                 compact_min: int = COMPACT_MIN, background: bool = True) -> None:
        self.path = path
        self.durable = durable
        self.sync = sync
        self.journal_path = path.with_name(path.stem + JOURNAL_SUFFIX)
        self.compact_min = compact_min
        self.background = background
        self._lock = threading.Lock()
        self._generation = 0
        self._prepared: dict[str, PreparedClaim] = {}
        self._pending: dict[str, PreparedClaim] = {}
        self._texts: dict[str, str] = {}  # uid -> canonical JSON of its record (prepared or pending)
        self._writer = journal.JournalWriter(self.journal_path, sync=sync)
        self._compactor: threading.Thread | None = None
        self.compactions = 0

    # -- reading --------------------------------------------------------------------------------

    def load(self) -> dict[str, PreparedClaim]:
        """The prepared claims (snapshot plus journal); :meth:`interrupted` has the rest."""
        with self._lock:
            generation, folded, prepared, pending = self._read_snapshot()
            try:
                got = journal.read(self.journal_path)
            except journal.JournalError as err:
                raise CheckpointError(self.journal_path, str(err)) from None
            if got is not None and got[0] > generation:
                raise CheckpointError(self.journal_path, f"journal generation {got[0]} is newer than the "
                                      f"snapshot's ({generation}): the snapshot {self.path.name} is missing or old")
            if got is not None and got[0] == generation:
                self._replay(got[1], prepared, pending, 0)
            elif got is not None and folded is not None and got[0] == folded[0]:
                # a compaction cut short: the snapshot holds the journal's first records
                self._replay(got[1][folded[1]:], prepared, pending, folded[1])
            # an older journal was folded into the snapshot already
            self._generation, self._prepared, self._pending = generation, prepared, pending
            self._texts = {uid: canonical_text(r.to_json()) for uid, r in (*prepared.items(), *pending.items())}
            return dict(prepared)

    def interrupted(self) -> dict[str, PreparedClaim]:
        """Prepares that recorded their intent but never completed (the process died)."""
        with self._lock:
            return dict(self._pending)

    def _read_snapshot(self) -> tuple[int, tuple[int, int] | None, dict[str, PreparedClaim],
                                      dict[str, PreparedClaim]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return 0, None, {}, {}
        try:
            doc = json.loads(raw)
            if doc.get("kind") != KIND or doc.get("version") not in READ_VERSIONS:
                raise CheckpointError(self.path, "not a version 1, 2 or 3 plugin checkpoint")
            body: dict[str, Any] = {"claims": doc["claims"]}
            if doc["version"] >= 2:
                body["pending"] = doc["pending"]
            if zlib.crc32(_canonical(body if doc["version"] >= 2 else doc["claims"])) != doc["checksum"]:
                raise CheckpointError(self.path, "checksum mismatch (file corrupted)")
            claims = {uid: PreparedClaim.from_json(uid, data) for uid, data in doc["claims"].items()}
            pending = {uid: PreparedClaim.from_json(uid, data) for uid, data in body.get("pending", {}).items()}
            folded = doc.get("folded")
            fold = (int(folded["generation"]), int(folded["records"])) if folded is not None else None
            return int(doc.get("generation", 0)), fold, claims, pending
        except CheckpointError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CheckpointError(self.path, f"unreadable checkpoint: {err}") from None

    def _replay(self, records: list[dict[str, Any]], prepared: dict[str, PreparedClaim],
                pending: dict[str, PreparedClaim], skipped: int) -> None:
        for number, (op, uid, claim) in enumerate(journal.replay(records), 2 + skipped):
            try:
                if op == "begin":
                    pending[uid] = PreparedClaim.from_json(uid, claim)  # type: ignore[arg-type]
                elif op == "commit":
                    prepared[uid] = pending.pop(uid)
                elif op in ("abort", "remove"):
                    pending.pop(uid, None)
                    prepared.pop(uid, None)
                else:
                    raise ValueError(f"unknown operation {op!r}")
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                raise CheckpointError(self.journal_path, f"line {number}: {op} {uid}: {err}") from None

    # -- writing --------------------------------------------------------------------------------

    def start(self) -> None:
        """Drop the interrupted prepares (their files are the caller's to remove first), write
        a snapshot of the prepared claims and start an empty journal."""
        with self._idle():
            for uid in self._pending:
                self._texts.pop(uid, None)
            self._pending.clear()
            self._compact()

    def begin(self, record: PreparedClaim) -> None:
        """Record a prepare's intent: call before writing any of ``record.files``."""
        text = canonical_text(record.to_json())
        line = journal.line_of(f'{{"claim":{text},"op":"begin","uid":{_quote(record.uid)}}}')
        with self._lock:
            self._pending[record.uid] = record
            self._texts[record.uid] = text
            self._writer.append_line(line)
            self._maybe_compact()

    def commit(self, uid: str, *, wait: bool = True) -> None:
        """The prepare of ``uid`` wrote all its files: it is prepared (on disk before this
        returns, with ``sync``; ``wait=False``: once :meth:`make_durable` returns)."""
        line = journal.line_of(f'{{"op":"commit","uid":{_quote(uid)}}}')
        with self._lock:
            self._prepared[uid] = self._pending.pop(uid)
            seq = self._writer.append_line(line)
            self._maybe_compact()
        if wait:
            self._writer.make_durable(seq)

    def make_durable(self) -> None:
        """With ``sync``: return once every record appended so far is on disk (one flush for a
        call's claims, shared with concurrent calls). Call before answering."""
        self._writer.make_durable(self._writer.appended)

    def abort(self, uid: str) -> None:
        """A begun prepare failed and its files were removed."""
        self._drop("abort", uid)

    def remove(self, uid: str, *, wait: bool = True) -> None:
        """An unprepared claim (its files are gone; on disk before this returns, with ``sync``;
        ``wait=False``: once :meth:`make_durable` returns)."""
        seq = self._drop("remove", uid)
        if seq and wait:
            self._writer.make_durable(seq)

    def _drop(self, op: str, uid: str) -> int:
        line = journal.line_of(f'{{"op":"{op}","uid":{_quote(uid)}}}')
        with self._lock:
            if self._prepared.pop(uid, None) is None and self._pending.pop(uid, None) is None:
                return 0
            self._texts.pop(uid, None)
            seq = self._writer.append_line(line)
            self._maybe_compact()
            return seq

    def save(self, claims: dict[str, PreparedClaim]) -> None:
        """Replace everything with exactly ``claims`` (prepared), as a snapshot."""
        with self._idle():
            self._prepared, self._pending = dict(claims), {}
            self._texts = {uid: canonical_text(r.to_json()) for uid, r in claims.items()}
            self._compact()

    def close(self) -> None:
        """Fold the journal into a snapshot (a quick start next time). Records may follow: they
        go to the new journal."""
        with self._idle():
            if self._writer.records:
                self._compact()

    def settle(self) -> None:
        """Wait until no background compaction runs."""
        with self._idle():
            pass

    @contextmanager
    def _idle(self) -> Iterator[None]:
        """The lock, held while no background compaction runs."""
        while True:
            thread = self._compactor
            if thread is not None:
                thread.join()
            self._lock.acquire()
            if self._writer.tail is None:
                break
            self._lock.release()
        try:
            yield
        finally:
            self._lock.release()

    def _maybe_compact(self) -> None:
        """(Under the lock.) Start a compaction once the journal is long enough."""
        if self._writer.records < max(self.compact_min, 2 * len(self._texts)) or self._writer.tail is not None:
            return
        if not self.background:
            self._compact()
            return
        self._writer.tail = []
        fold = (self._generation, self._writer.records)
        self._compactor = threading.Thread(target=self._compact_in_background, name="drakit-checkpoint",
                                           args=(fold, self._snapshot_parts()), daemon=True)
        self._compactor.start()

    def _snapshot_parts(self) -> tuple[dict[str, str], dict[str, str]]:
        return ({uid: self._texts[uid] for uid in self._prepared},
                {uid: self._texts[uid] for uid in self._pending})

    def _snapshot(self, generation: int, fold: tuple[int, int], parts: tuple[dict[str, str], dict[str, str]]) -> bytes:
        body = f'{{"claims":{_object_text(parts[0])},"pending":{_object_text(parts[1])}}}'
        return (f'{{"kind":"{KIND}","version":{VERSION},"generation":{generation},'
                f'"checksum":{zlib.crc32(body.encode())},"folded":{{"generation":{fold[0]},"records":{fold[1]}}},'
                f'{body[1:]}\n').encode()

    def _compact_in_background(self, fold: tuple[int, int], parts: tuple[dict[str, str], dict[str, str]]) -> None:
        """Snapshot G+1 (the state as of journal G's record ``fold[1]``), then journal G+1 with
        the records appended since, swapped in under the lock."""
        generation = fold[0] + 1
        tmp = f"{self.journal_path}.{os.getpid()}.next"
        fd = -1
        try:
            atomic_write(self.path, self._snapshot(generation, fold, parts), MODE, durable=self.durable)
            with self._lock:
                tail = list(self._writer.tail or ())
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, MODE)
            os.write(fd, journal.header(generation) + b"".join(tail))
            if self.durable or self.sync:
                os.fsync(fd)
            with self._lock:
                rest = (self._writer.tail or [])[len(tail):]
                if rest:
                    os.write(fd, b"".join(rest))
                    if self.sync:  # the switch marks every record so far durable
                        os.fdatasync(fd)
                os.replace(tmp, self.journal_path)
                if self.sync:  # later records are acknowledged from this file: its name must last
                    fsync_dir(self.journal_path.parent)
                self._writer.switch(fd, len(tail) + len(rest))
                fd = -1
                self._writer.tail = None
                self._generation = generation
                self.compactions += 1
            if self.durable and not self.sync:
                fsync_dir(self.journal_path.parent)
        except OSError as err:  # the old journal goes on; the next record tries again
            log.warning("checkpoint compaction failed: %s", err)
            with self._lock:
                self._writer.tail = None
            if fd >= 0:
                os.close(fd)
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass

    def _compact(self) -> None:
        """(Under the lock, no compaction running.) Snapshot G+1 first, then the new journal: a
        crash in between leaves the new snapshot and the old journal, folded in whole."""
        generation = self._generation + 1
        fold = (self._generation, self._writer.records)
        atomic_write(self.path, self._snapshot(generation, fold, self._snapshot_parts()), MODE,
                     durable=self.durable)
        self._writer.open(generation, fresh=True, mode=MODE, durable=self.durable)
        self._generation = generation
        self.compactions += 1
