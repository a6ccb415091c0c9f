"""An in-memory object store with the API server's bookkeeping: uids, resourceVersions,
creation order, generateName, deep copies in and out, and an event log."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..yamlmarks import copy_tree

Key = tuple[str, str, str]  # (kind, namespace or "", name)

# Without a clock, creation timestamps are derived from a counter so runs are reproducible.
_EPOCH = "2026-01-01T00:00:{:02d}Z"

# A watcher sees every change: (kind, old object or None, new object or None). The objects are
# the stored ones: watchers must not mutate them.
Watcher = Callable[[str, "dict[str, Any] | None", "dict[str, Any] | None"], None]


class NotFound(KeyError):
    pass


class Conflict(ValueError):
    pass


@dataclass
class Event:
    type: str
    reason: str
    kind: str
    namespace: str
    name: str
    message: str

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.type, "reason": self.reason, "message": self.message,
                "involvedObject": {"kind": self.kind, "namespace": self.namespace, "name": self.name}}


@dataclass
class ObjectStore:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    _rv: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _seq: Iterator[int] = field(default_factory=lambda: itertools.count(0))
    revision: int = 0
    order: dict[Key, int] = field(default_factory=dict)  # creation sequence, for list order
    clock: Callable[[], str] | None = None  # RFC 3339 "now" for creationTimestamp, when set
    watchers: list[Watcher] = field(default_factory=list)
    tombstones: dict[Key, dict[str, Any]] = field(default_factory=dict)  # last state of deleted objects

    def _notify(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for w in list(self.watchers):
            w(kind, old, new)

    @staticmethod
    def key(kind: str, name: str, namespace: str | None) -> Key:
        return (kind, namespace or "", name)

    def _stamp(self, obj: dict[str, Any]) -> None:
        self.revision = next(self._rv)
        obj["metadata"]["resourceVersion"] = str(self.revision)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy_tree(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            base = meta.get("generateName", "")
            digest = hashlib.sha256(f"{obj['kind']}/{meta.get('namespace', '')}/{base}/{len(self.objects)}".encode()).hexdigest()
            meta["name"] = base + name_suffix(digest)
        key = self.key(obj["kind"], meta["name"], meta.get("namespace"))
        if key in self.objects:
            raise Conflict(f'{obj["kind"]} "{meta["name"]}" already exists')
        seq = next(self._seq)
        meta["uid"] = str(_uid(key, seq))
        meta["creationTimestamp"] = meta.get("creationTimestamp") or (
            self.clock() if self.clock is not None else _EPOCH.format(seq % 60))
        self.order[key] = seq
        self._stamp(obj)
        self.objects[key] = obj
        self.tombstones.pop(key, None)
        self._notify(obj["kind"], None, obj)
        return copy_tree(obj)

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        key = self.key(obj["kind"], meta["name"], meta.get("namespace"))
        if key not in self.objects:
            raise NotFound(key)
        obj = copy_tree(obj)
        old = self.objects[key]["metadata"]
        for k in ("uid", "creationTimestamp"):
            obj["metadata"][k] = old[k]
        self._stamp(obj)
        previous = self.objects[key]
        self.objects[key] = obj
        self._notify(obj["kind"], previous, obj)
        return copy_tree(obj)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        obj = self.objects.get(self.key(kind, name, namespace))
        return copy_tree(obj) if obj is not None else None

    def peek(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """Read without copying; callers must not mutate."""
        return self.objects.get(self.key(kind, name, namespace))

    def delete(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        key = self.key(kind, name, namespace)
        if key not in self.objects:
            raise NotFound(key)
        self.revision = next(self._rv)
        self.order.pop(key, None)
        gone = self.objects.pop(key)
        self.tombstones[key] = gone
        self._notify(kind, gone, None)
        return gone

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Objects of a kind in creation order (shallow view; callers must not mutate)."""
        keys = [key for key in self.objects if key[0] == kind and (namespace is None or key[1] == namespace)]
        keys.sort(key=self.order.__getitem__)
        return [self.objects[key] for key in keys]

    def record(self, type_: str, reason: str, obj: dict[str, Any], message: str) -> None:
        meta = obj["metadata"]
        ev = Event(type_, reason, obj["kind"], meta.get("namespace", ""), meta["name"], message)
        if not self.events or self.events[-1] != ev:
            self.events.append(ev)


def public(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy callers may keep and change."""
    return copy_tree(obj)


def name_suffix(digest: str) -> str:
    """Five characters from the API server's generateName alphabet, derived from a digest."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = int(digest[:16], 16)
    chars = []
    for _ in range(5):
        n, r = divmod(n, len(alphabet))
        chars.append(alphabet[r])
    return "".join(chars)


def _uid(key: Key, seq: int) -> str:
    import uuid
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"drakit:{seq}:{'/'.join(key)}"))
