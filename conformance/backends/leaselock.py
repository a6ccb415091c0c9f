"""The shards of a run on one cluster: side by side, or a cluster-wide case alone.

``clusterlock`` keeps the xdist workers of one process apart with ``flock``; shards run in
different processes, often on different machines (``drakit run --shard i/N``, or the Jobs of
``drakit run --in-cluster``), and share nothing but the cluster. This is the same reader-writer
lock kept in a Lease (coordination.k8s.io/v1) on that cluster: its ``drakit.dev/lock``
annotation holds, per holder, ``shared`` or ``exclusive`` or ``waiting`` and when the holder
last renewed it. A case of a shard holds it shared (its cluster-scoped names carry the shard's
prefix), a cluster-wide case exclusive (all of them are in shard 1, ``conformance.shards``);
an exclusive request marks itself waiting, so that no new shared holder overtakes it, and takes
the lock once the shared holders are gone. Every write is a replace at the resourceVersion read
(a conflict is read again), so two shards never both believe they won.

A holder renews its entry every :data:`RENEW` seconds from a thread while it holds or waits; an
entry older than :data:`EXPIRE` seconds is a shard that died (a killed pod, a vanished node)
and is ignored, so a dead shard blocks the others for a minute at most.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from ..errors import ApiRejected

ANNOTATION = "drakit.dev/lock"
RENEW = 10.0
EXPIRE = 60.0
POLL = 0.25
DEFAULT_WHERE = "default/drakit-shard-lock"


def parse_where(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` of the Lease; ValueError with one line."""
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ValueError(f"{text!r} is not NAMESPACE/NAME")
    return ns, name


def live_entries(state: dict[str, Any], now: float) -> dict[str, Any]:
    """The entries of the lock's state renewed within :data:`EXPIRE` seconds of *now*."""
    return {k: v for k, v in state.items() if isinstance(v, dict) and now - float(v.get("renewed", 0)) <= EXPIRE}


def decide(state: dict[str, Any], holder: str, exclusive: bool, now: float) -> tuple[bool, dict[str, Any]]:
    """One step of acquiring: (acquired, the state to write). Pure."""
    live = live_entries(state, now)
    others = {k: v for k, v in live.items() if k != holder}
    if exclusive:
        if any(v["mode"] in ("shared", "exclusive") for v in others.values()) or any(
                v["mode"] == "waiting" and k < holder for k, v in others.items()):
            return False, {**live, holder: {"mode": "waiting", "renewed": now}}
        return True, {**live, holder: {"mode": "exclusive", "renewed": now}}
    if any(v["mode"] in ("exclusive", "waiting") for v in others.values()):
        return False, live
    return True, {**live, holder: {"mode": "shared", "renewed": now}}


class LeaseLock:
    def __init__(self, api: Any, where: str, holder: str, clock: Any = time.time) -> None:
        self.api = api
        self.namespace, self.name = parse_where(where)
        self.holder = holder
        self.clock = clock
        self.held: str | None = None
        self._mode: str | None = None  # what the renewer keeps alive: waiting, shared, exclusive
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._mutex = threading.Lock()

    def _read(self) -> tuple[dict[str, Any], dict[str, Any]]:
        lease = self.api.get("Lease", self.name, self.namespace)
        if lease is None:
            try:
                lease = self.api.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                         "metadata": {"name": self.name, "namespace": self.namespace,
                                                      "annotations": {ANNOTATION: "{}"}}, "spec": {}})
            except ApiRejected:  # another shard created it first
                lease = self.api.get("Lease", self.name, self.namespace)
        try:
            meta = (lease or {}).get("metadata") or {}
            state = json.loads((meta.get("annotations") or {}).get(ANNOTATION) or "{}")
        except ValueError:
            state = {}
        return lease or {}, state if isinstance(state, dict) else {}

    def _write(self, lease: dict[str, Any], state: dict[str, Any]) -> bool:
        """Replace at the version read; False on a conflict (read again)."""
        meta = lease.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION: json.dumps(state, sort_keys=True)}
        try:
            self.api.replace(lease)
        except ApiRejected:
            return False
        return True

    def acquire(self, exclusive: bool) -> None:
        self._start_renewer()
        while True:
            with self._mutex:
                lease, state = self._read()
                now = self.clock()
                got, new = decide(state, self.holder, exclusive, now)
                # a write when the lock is taken, or to mark this holder waiting (the renewer keeps it)
                was = live_entries(state, now).get(self.holder) or {}
                changed = got or (exclusive and was.get("mode") != "waiting")
                written = self._write(lease, new) if changed else True
                if written and got:
                    self.held = self._mode = "exclusive" if exclusive else "shared"
                    return
                if written and exclusive:
                    self._mode = "waiting"
            time.sleep(POLL)

    def release(self) -> None:
        if self._mode is None:
            return
        with self._mutex:
            for _ in range(100):
                lease, state = self._read()
                state.pop(self.holder, None)
                if self._write(lease, state):
                    break
            self.held = self._mode = None

    def _start_renewer(self) -> None:
        if self._renewer is None:
            self._renewer = threading.Thread(target=self._renew, name="drakit-lease-lock", daemon=True)
            self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(RENEW):
            with self._mutex:
                if self._mode is None:
                    continue
                try:
                    lease, state = self._read()
                    state[self.holder] = {"mode": self._mode, "renewed": self.clock()}
                    self._write(lease, state)
                except Exception:  # noqa: BLE001 - the next renewal tries again; the entry lives a minute
                    pass

    def close(self) -> None:
        try:
            self.release()
        finally:
            self._stop.set()
