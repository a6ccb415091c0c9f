"""The plugin's checkpoint: which claims it prepared, with what answer and which files.

A restarted plugin reads it back, so NodeUnprepareResources for a claim prepared before the
restart still removes the right files, and NodePrepareResources for it returns the same
devices. The file is JSON, ``{"kind": "DrakitPluginCheckpoint", "version": 1, "checksum": <crc32
of the canonical claims JSON>, "claims": {...}}``, written atomically with mode 0600.
A checkpoint with a bad checksum is refused (``CheckpointError``), never silently dropped.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .files import atomic_write

KIND = "DrakitPluginCheckpoint"
VERSION = 1
MODE = 0o600


class CheckpointError(RuntimeError):
    """The checkpoint file exists but cannot be used."""


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
    """Load and save the prepared claims at ``path``."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self.durable = durable

    def load(self) -> dict[str, PreparedClaim]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            doc = json.loads(raw)
            if doc.get("kind") != KIND or doc.get("version") != VERSION:
                raise CheckpointError(f"{self.path}: not a version {VERSION} plugin checkpoint")
            claims = doc["claims"]
            if zlib.crc32(_canonical(claims)) != doc["checksum"]:
                raise CheckpointError(f"{self.path}: checksum mismatch (file corrupted)")
            return {uid: PreparedClaim.from_json(uid, data) for uid, data in claims.items()}
        except CheckpointError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CheckpointError(f"{self.path}: unreadable checkpoint: {err}") from None

    def save(self, claims: dict[str, PreparedClaim]) -> None:
        body = {uid: claims[uid].to_json() for uid in sorted(claims)}
        doc = {"kind": KIND, "version": VERSION, "checksum": zlib.crc32(_canonical(body)),
               "claims": body}
        atomic_write(self.path, (json.dumps(doc, indent=1) + "\n").encode(), MODE,
                     durable=self.durable)
