"""The plugin's checkpoint: which claims it prepared, with what answer and which files.

A restarted plugin reads it back, so NodeUnprepareResources for a claim prepared before the
restart still removes the right files, and NodePrepareResources for it returns the same
devices. Two files in the state folder:

- ``checkpoint.json``, the snapshot: ``{"kind": "DrakitPluginCheckpoint", "version": 2,
  "generation": G, "checksum": <crc32 of the canonical body>, "claims": {...}, "pending":
  {...}}``, replaced atomically (fsynced, with its folder, when ``durable``), mode 0600;
  version 1 files (no generation, no pending claims) are read too;
- ``checkpoint.journal``, what changed since (:mod:`.journal`): a prepare records its intent
  (``begin``, with the claim's answer and every file it will write) *before* writing any file,
  and ``commit`` once they are all written; an unprepare records ``remove`` once the files are
  gone. A new claim therefore costs two short appends, however many claims are prepared.

After a crash, :meth:`Checkpoint.load` returns the prepared claims and, separately, the
interrupted prepares (begun, never committed): the driver removes whatever those left and
drops them, then :meth:`Checkpoint.start` folds everything into a new snapshot. The journal
is folded the same way whenever it has grown past twice the number of live claims (at least
``compact_min`` records), so loading stays proportional to what is prepared.

What is fsynced: the snapshot (it replaces the previous state) always, when ``durable``; the
journal's records only with ``sync`` (each append then waits for the disk, as the kubelet's
own checkpoint does). Without it a record survives any crash of the driver process, and a
power loss can only drop the newest records: the claims they describe are prepared again by
the kubelet (same devices, same file names, derived from the claim) and a claim unprepared
while unknown still has its files found and removed by name.

A checkpoint that cannot be read back is refused (:class:`CheckpointError`: the file, what is
wrong, and that the driver does not start), never silently dropped.
"""

from __future__ import annotations

import json
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import journal
from .files import atomic_write

KIND = "DrakitPluginCheckpoint"
VERSION = 2
READ_VERSIONS = (1, 2)
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
    return json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()


class Checkpoint:
    """The prepared claims at ``path`` (snapshot) and next to it (journal); thread-safe.

    Use: :meth:`load`, clean up :meth:`interrupted` claims, :meth:`start`; then :meth:`begin`
    and :meth:`commit` (or :meth:`abort`) around each prepare, :meth:`remove` after each
    unprepare; :meth:`close` at the end.
    """

    def __init__(self, path: Path, *, durable: bool = True, sync: bool = False,
                 compact_min: int = COMPACT_MIN) -> None:
        self.path = path
        self.durable = durable
        self.journal_path = path.with_name(path.stem + JOURNAL_SUFFIX)
        self.compact_min = compact_min
        self._lock = threading.Lock()
        self._generation = 0
        self._prepared: dict[str, PreparedClaim] = {}
        self._pending: dict[str, PreparedClaim] = {}
        self._writer = journal.JournalWriter(self.journal_path, sync=sync)

    # -- reading --------------------------------------------------------------------------------

    def load(self) -> dict[str, PreparedClaim]:
        """The prepared claims (snapshot plus journal); :meth:`interrupted` has the rest."""
        with self._lock:
            generation, prepared, pending = self._read_snapshot()
            try:
                got = journal.read(self.journal_path)
            except journal.JournalError as err:
                raise CheckpointError(self.journal_path, str(err)) from None
            if got is not None and got[0] > generation:
                raise CheckpointError(self.journal_path, f"journal generation {got[0]} is newer than the "
                                      f"snapshot's ({generation}): the snapshot {self.path.name} is missing or old")
            if got is not None and got[0] == generation:
                self._replay(got[1], prepared, pending)
            # an older journal was folded into the snapshot already (a compaction cut short)
            self._generation, self._prepared, self._pending = generation, prepared, pending
            return dict(prepared)

    def interrupted(self) -> dict[str, PreparedClaim]:
        """Prepares that recorded their intent but never completed (the process died)."""
        with self._lock:
            return dict(self._pending)

    def _read_snapshot(self) -> tuple[int, dict[str, PreparedClaim], dict[str, PreparedClaim]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return 0, {}, {}
        try:
            doc = json.loads(raw)
            if doc.get("kind") != KIND or doc.get("version") not in READ_VERSIONS:
                raise CheckpointError(self.path, "not a version 1 or 2 plugin checkpoint")
            body: dict[str, Any] = {"claims": doc["claims"]}
            if doc["version"] >= 2:
                body["pending"] = doc["pending"]
            if zlib.crc32(_canonical(body if doc["version"] >= 2 else doc["claims"])) != doc["checksum"]:
                raise CheckpointError(self.path, "checksum mismatch (file corrupted)")
            claims = {uid: PreparedClaim.from_json(uid, data) for uid, data in doc["claims"].items()}
            pending = {uid: PreparedClaim.from_json(uid, data) for uid, data in body.get("pending", {}).items()}
            return int(doc.get("generation", 0)), claims, pending
        except CheckpointError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CheckpointError(self.path, f"unreadable checkpoint: {err}") from None

    def _replay(self, records: list[dict[str, Any]], prepared: dict[str, PreparedClaim],
                pending: dict[str, PreparedClaim]) -> None:
        for number, (op, uid, claim) in enumerate(journal.replay(records), 2):
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
        with self._lock:
            self._pending.clear()
            self._compact()

    def begin(self, record: PreparedClaim) -> None:
        """Record a prepare's intent: call before writing any of ``record.files``."""
        with self._lock:
            self._pending[record.uid] = record
            self._writer.append({"op": "begin", "uid": record.uid, "claim": record.to_json()})
            self._maybe_compact()

    def commit(self, uid: str) -> None:
        """The prepare of ``uid`` wrote all its files: it is prepared."""
        with self._lock:
            self._prepared[uid] = self._pending.pop(uid)
            self._writer.append({"op": "commit", "uid": uid})
            self._maybe_compact()

    def abort(self, uid: str) -> None:
        """A begun prepare failed and its files were removed."""
        self._drop("abort", uid)

    def remove(self, uid: str) -> None:
        """An unprepared claim (its files are gone)."""
        self._drop("remove", uid)

    def _drop(self, op: str, uid: str) -> None:
        with self._lock:
            if self._prepared.pop(uid, None) is None and self._pending.pop(uid, None) is None:
                return
            self._writer.append({"op": op, "uid": uid})
            self._maybe_compact()

    def save(self, claims: dict[str, PreparedClaim]) -> None:
        """Replace everything with exactly ``claims`` (prepared), as a snapshot."""
        with self._lock:
            self._prepared, self._pending = dict(claims), {}
            self._compact()

    def close(self) -> None:
        """Fold the journal into a snapshot (a quick start next time). Records may follow: they
        go to the new journal."""
        with self._lock:
            if self._writer.records:
                self._compact()

    def _maybe_compact(self) -> None:
        if self._writer.records >= max(self.compact_min, 2 * (len(self._prepared) + len(self._pending))):
            self._compact()

    def _compact(self) -> None:
        """Snapshot generation G+1 first, then the new journal: a crash in between leaves the
        new snapshot and the old journal, which :meth:`load` recognises as folded in."""
        generation = self._generation + 1
        body = {"claims": {uid: self._prepared[uid].to_json() for uid in sorted(self._prepared)},
                "pending": {uid: self._pending[uid].to_json() for uid in sorted(self._pending)}}
        doc = {"kind": KIND, "version": VERSION, "generation": generation, "checksum": zlib.crc32(_canonical(body)),
               **body}
        atomic_write(self.path, (json.dumps(doc, separators=(",", ":")) + "\n").encode(), MODE, durable=self.durable)
        self._writer.open(generation, fresh=True, mode=MODE, durable=self.durable)
        self._generation = generation
