"""``NodeAgent``: the kubelet's DRA role for one node, as a library.

It watches the plugin registry folder (polling, ~100 ms), registers plugins like the kubelet's
plugin manager (``client.register``), keeps one gRPC channel per plugin instance, follows
advertised health streams, and prepares / unprepares the claims of pods on its node:

- ``prepare(pod_uid, claims)``: checks every claim first (allocated, reserved for the pod, the
  drivers registered), records the pod's references (checkpoint), calls NodePrepareResources
  once per driver with that pod's claims (45 s deadline), checks the answer the way the kubelet
  does (every claim answered, no unknown UIDs, no per-claim error), records the devices and
  marks the claims prepared (checkpoint). Claims already prepared for another pod are not sent
  again. Drivers whose devices all skip NodePrepareResources (``skipNodeOperations``) are not
  contacted when ``optional_node_operations`` is on; with it off such a claim fails, as on a
  kubelet with the gate off.
- ``unprepare(pod_uid)``: drops the pod's references; a claim no other pod uses is
  unprepared through its drivers (NodeUnprepareResources) and forgotten. A failure keeps the
  references, so a later call retries.

Transient gRPC failures (UNAVAILABLE, DEADLINE_EXCEEDED, ...) are retried with backoff within
one call; per-claim errors are returned at once unless ``RetryPolicy.retry_claim_errors``.
"""

from __future__ import annotations

import logging
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import grpc

from .checkpoint import AgentCheckpoint, ClaimInfo
from .client import (CALL_TIMEOUT, ClaimKey, DeviceResult, PluginClient, PrepareAnswer,
                     Registration, RegistrationError, register)

log = logging.getLogger("drakit.nodeagent")

PREPARE, UNPREPARE, ALL_OPS = "NodePrepareResources", "NodeUnprepareResources", "*"
TRANSIENT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED}
DEFAULT_HEALTH_TIMEOUT = 30


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 4
    initial: float = 0.1
    factor: float = 2.0
    max_delay: float = 2.0
    retry_claim_errors: bool = False

    def delays(self) -> Iterable[float]:
        delay = self.initial
        for _ in range(self.attempts - 1):
            yield delay
            delay = min(delay * self.factor, self.max_delay)


@dataclass(frozen=True, slots=True)
class DriverInfo:
    name: str
    endpoint: str
    service: str
    health_service: str | None
    registration_socket: str
    connected: bool
    instances: int = 1


@dataclass(frozen=True, slots=True)
class ClaimResult:
    namespace: str
    name: str
    uid: str
    devices: tuple[DeviceResult, ...] = ()
    error: str | None = None
    skipped_drivers: tuple[str, ...] = ()

    def cdi_ids(self, request: str | None = None) -> list[str]:
        """CDI ids a container referencing this claim (and ``request``, if given) gets."""
        return [i for d in self.devices
                if request is None or not d.request_names or request in d.request_names
                for i in d.cdi_ids]

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "uid": self.uid,
                "devices": [d.to_json() for d in self.devices], "error": self.error,
                "skippedDrivers": list(self.skipped_drivers)}


@dataclass(frozen=True, slots=True)
class PodResult:
    pod_uid: str
    claims: tuple[ClaimResult, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def claim(self, name_or_uid: str) -> ClaimResult:
        for c in self.claims:
            if name_or_uid in (c.name, c.uid):
                return c
        raise KeyError(name_or_uid)

    def to_json(self) -> dict[str, Any]:
        return {"podUID": self.pod_uid, "ok": self.ok, "error": self.error,
                "claims": [c.to_json() for c in self.claims]}


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    pool: str
    device: str
    health: str  # Healthy | Unhealthy | Unknown
    message: str
    last_updated: int


@dataclass
class _Instance:
    registration: Registration
    client: PluginClient
    seq: int
    stop: threading.Event = field(default_factory=threading.Event)
    stream: Any = None
    thread: threading.Thread | None = None


class PrepareFailed(Exception):
    pass


def skipped_operations(results: Sequence[Mapping[str, Any]]) -> set[str]:
    """Operations skipped by *all* of one driver's results in a claim (``*`` expanded)."""
    sets = []
    for r in results:
        raw = r.get("skipNodeOperations")
        ops = {ALL_OPS} if raw is True else set(raw or ())
        if ALL_OPS in ops:
            ops = {PREPARE, UNPREPARE}
        sets.append(ops & {PREPARE, UNPREPARE})
    return set.intersection(*sets) if sets else set()


class NodeAgent:
    """The kubelet's DRA part for node ``node_name``, driven by plugins in ``registry_dir``."""

    def __init__(self, registry_dir: str | Path, node_name: str, *,
                 state_dir: str | Path | None = None, poll_interval: float = 0.1,
                 optional_node_operations: bool = False, check_reserved: bool = True,
                 driver_wait: float = 5.0, retry: RetryPolicy = RetryPolicy(),
                 call_timeout: float = CALL_TIMEOUT, registration_retry: float = 0.5,
                 health_retry: float = 5.0,
                 on_health: Callable[[str, list[DeviceHealth]], None] | None = None,
                 on_driver_gone: Callable[[str], None] | None = None,
                 wipe_delay: float = 30.0) -> None:
        self.registry_dir = Path(registry_dir).absolute()
        self.node_name = node_name
        self.poll_interval = poll_interval
        self.optional_node_operations = optional_node_operations
        self.check_reserved = check_reserved
        self.driver_wait = driver_wait
        self.retry = retry
        self.call_timeout = call_timeout
        self.registration_retry = registration_retry
        self.health_retry = health_retry
        self.on_health = on_health
        self.on_driver_gone = on_driver_gone
        self.wipe_delay = wipe_delay
        self._checkpoint = AgentCheckpoint(Path(state_dir)) if state_dir is not None else None
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._claims: dict[str, ClaimInfo] = self._checkpoint.load() if self._checkpoint else {}
        self._instances: dict[str, _Instance] = {}
        self._seen: dict[str, tuple[int, int]] = {}
        self._retry_at: dict[str, float] = {}
        self._failures: dict[str, str] = {}
        self._health: dict[str, dict[tuple[str, str], tuple[DeviceHealth, float, int]]] = {}
        self._wipes: dict[str, threading.Timer] = {}
        self._seq = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("node agent already started")
        self._stop.clear()
        self.scan()
        self._thread = threading.Thread(target=self._watch, name=f"drakit-nodeagent-{self.node_name}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            sockets = list(self._instances)
            timers = list(self._wipes.values())
            self._wipes.clear()
        for timer in timers:
            timer.cancel()
        for socket in sockets:
            self._deregister(socket, notify_gone=False)

    def __enter__(self) -> NodeAgent:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- registration ---------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_interval):
            try:
                self.scan()
            except Exception:  # keep watching whatever one socket did
                log.exception("scanning %s failed", self.registry_dir)

    def _sockets(self) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        try:
            entries = list(self.registry_dir.iterdir())
        except FileNotFoundError:
            return found
        for path in entries:
            if path.name.startswith("."):
                continue
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISSOCK(st.st_mode):
                found[str(path)] = (st.st_ino, st.st_ctime_ns)
        return found

    def scan(self) -> None:
        """One pass of the plugin watcher: register new sockets, drop removed ones."""
        current = self._sockets()
        for socket in list(self._seen):
            if socket not in current or current[socket] != self._seen[socket]:
                self._seen.pop(socket)
                self._retry_at.pop(socket, None)
                self._deregister(socket)
        now = time.monotonic()
        for socket, ident in current.items():
            if socket in self._seen or self._retry_at.get(socket, 0) > now:
                continue
            try:
                registration = register(socket, self._accept)
            except (RegistrationError, grpc.RpcError) as err:
                text = err.details() if isinstance(err, grpc.RpcError) else str(err)
                if self._failures.get(socket) != text:
                    log.warning("registering %s failed: %s", socket, text)
                self._failures[socket] = str(text)
                self._retry_at[socket] = now + self.registration_retry
                continue
            self._failures.pop(socket, None)
            self._seen[socket] = ident
            self._add_instance(socket, registration)

    def _accept(self, registration: Registration) -> None:
        with self._lock:
            for socket, inst in self._instances.items():
                if (inst.registration.driver == registration.driver
                        and inst.registration.endpoint == registration.endpoint
                        and socket != registration.registration_socket):
                    raise RegistrationError(f"endpoint {registration.endpoint} already registered "
                                            f"for DRA driver {registration.driver}")

    def _add_instance(self, socket: str, registration: Registration) -> None:
        client = PluginClient(registration)
        with self._lock:
            old = self._instances.pop(socket, None)
            self._seq += 1
            inst = _Instance(registration, client, self._seq)
            self._instances[socket] = inst
            timer = self._wipes.pop(registration.driver, None)
            self._changed.notify_all()
        if timer is not None:
            timer.cancel()
        if old is not None:
            self._close_instance(old)
        log.info("registered DRA driver %s at %s (%s%s)", registration.driver, registration.endpoint,
                 registration.service,
                 f", health {registration.health_service}" if registration.health_service else "")
        if registration.health_service is not None:
            inst.thread = threading.Thread(target=self._health_loop, args=(inst,), daemon=True,
                                           name=f"drakit-health-{registration.driver}")
            inst.thread.start()

    def _deregister(self, socket: str, notify_gone: bool = True) -> None:
        with self._lock:
            inst = self._instances.pop(socket, None)
            if inst is None:
                return
            driver = inst.registration.driver
            remaining = any(i.registration.driver == driver for i in self._instances.values())
            self._changed.notify_all()
        log.info("deregistered DRA driver %s (%s)", driver, socket)
        self._close_instance(inst)
        if not remaining and notify_gone and self.on_driver_gone is not None:
            timer = threading.Timer(self.wipe_delay, self._driver_gone, args=(driver,))
            timer.daemon = True
            with self._lock:
                self._wipes[driver] = timer
            timer.start()

    def _driver_gone(self, driver: str) -> None:
        with self._lock:
            self._wipes.pop(driver, None)
            if any(i.registration.driver == driver for i in self._instances.values()):
                return
        if self.on_driver_gone is not None:
            self.on_driver_gone(driver)

    def _close_instance(self, inst: _Instance) -> None:
        inst.stop.set()
        stream = inst.stream
        if stream is not None:
            stream.cancel()
        if inst.thread is not None and inst.thread is not threading.current_thread():
            inst.thread.join(timeout=5)
        inst.client.close()

    def drivers(self) -> dict[str, DriverInfo]:
        """Registered drivers by name (the preferred instance of each)."""
        with self._lock:
            names = {i.registration.driver for i in self._instances.values()}
            out = {}
            for name in sorted(names):
                inst = self._preferred(name)
                assert inst is not None
                r = inst.registration
                count = sum(i.registration.driver == name for i in self._instances.values())
                out[name] = DriverInfo(r.driver, r.endpoint, r.service, r.health_service,
                                       r.registration_socket, inst.client.connected, count)
            return out

    def registration_failures(self) -> dict[str, str]:
        """Registry sockets whose last registration attempt failed, with the reason."""
        return dict(self._failures)

    def wait_for_driver(self, name: str, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._preferred(name) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, self.poll_interval))
            return True

    def _preferred(self, driver: str) -> _Instance | None:
        candidates = sorted((i for i in self._instances.values() if i.registration.driver == driver),
                            key=lambda i: i.seq, reverse=True)
        for inst in candidates:
            if inst.client.connected:
                return inst
        return candidates[0] if candidates else None

    # -- health ---------------------------------------------------------------------------------

    def _health_loop(self, inst: _Instance) -> None:
        driver = inst.registration.driver
        while not inst.stop.is_set():
            stream = inst.client.watch_health()
            inst.stream = stream
            if stream is None:
                return
            try:
                for message in stream:
                    received = time.monotonic()
                    cache = {}
                    for d in message.devices:
                        state = {1: "Healthy", 2: "Unhealthy"}.get(d.health, "Unknown")
                        timeout = d.health_check_timeout_seconds
                        cache[(d.device.pool_name, d.device.device_name)] = (
                            DeviceHealth(d.device.pool_name, d.device.device_name, state,
                                         d.message, d.last_updated_time),
                            received, timeout if timeout > 0 else DEFAULT_HEALTH_TIMEOUT)
                    with self._lock:
                        self._health[driver] = cache
                    if self.on_health is not None:
                        self.on_health(driver, self.health(driver))
            except grpc.RpcError as err:
                if not inst.stop.is_set():
                    log.info("health stream of %s ended: %s", driver, err.code())
            with self._lock:
                self._health.pop(driver, None)
            inst.stop.wait(self.health_retry)

    def health(self, driver: str) -> list[DeviceHealth]:
        """Last reported health of the driver's devices; stale entries read as Unknown."""
        now = time.monotonic()
        with self._lock:
            cache = dict(self._health.get(driver, {}))
        out = []
        for entry, received, timeout in cache.values():
            if now - received > timeout:
                entry = DeviceHealth(entry.pool, entry.device, "Unknown", entry.message,
                                     entry.last_updated)
            out.append(entry)
        return out

    # -- prepare --------------------------------------------------------------------------------

    def claim_infos(self) -> dict[str, ClaimInfo]:
        with self._lock:
            return dict(self._claims)

    def _save(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.save(self._claims)

    def _client(self, driver: str, wait: float) -> PluginClient:
        if wait > 0:
            self.wait_for_driver(driver, wait)
        with self._lock:
            inst = self._preferred(driver)
        if inst is None:
            raise PrepareFailed(f"DRA driver {driver} is not registered")
        return inst.client

    def _parse(self, pod_uid: str, claim: Mapping[str, Any]
               ) -> tuple[ClaimKey, dict[str, list[Mapping[str, Any]]]]:
        meta = claim.get("metadata") or {}
        key = ClaimKey(meta.get("namespace", ""), meta.get("uid", ""), meta.get("name", ""))
        if not key.uid or not key.name:
            raise PrepareFailed("a ResourceClaim without metadata.name or metadata.uid")
        status = claim.get("status") or {}
        allocation = status.get("allocation")
        if not allocation:
            raise PrepareFailed(f"ResourceClaim {key.namespace}/{key.name} is not allocated")
        if self.check_reserved and not any(r.get("uid") == pod_uid
                                           for r in status.get("reservedFor") or []):
            raise PrepareFailed(f"pod {pod_uid} is not allowed to use ResourceClaim "
                                f"{key.namespace}/{key.name}")
        by_driver: dict[str, list[Mapping[str, Any]]] = {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            by_driver.setdefault(result.get("driver", ""), []).append(result)
        return key, by_driver

    def _retrying(self, call: Callable[[], Any]) -> Any:
        delays = iter(self.retry.delays())
        while True:
            try:
                return call()
            except grpc.RpcError as err:
                if err.code() not in TRANSIENT:
                    raise
                delay = next(delays, None)
                if delay is None:
                    raise
                time.sleep(delay)

    def prepare(self, pod_uid: str, claims: Sequence[Mapping[str, Any]]) -> PodResult:
        """Prepare the claims (wire-form ResourceClaims) of pod ``pod_uid`` on this node."""
        parsed: list[tuple[ClaimKey, dict[str, list[Mapping[str, Any]]], dict[str, set[str]]]] = []
        try:
            for claim in claims:
                key, by_driver = self._parse(pod_uid, claim)
                skips = {d: skipped_operations(rs) for d, rs in by_driver.items()}
                if any(skips.values()) and not self.optional_node_operations:
                    raise PrepareFailed(f"ResourceClaim {key.namespace}/{key.name}: "
                                        "DRAOptionalNodeOperations feature gate is disabled on kubelet")
                parsed.append((key, by_driver, skips))
            needed = list(dict.fromkeys(d for _, by_driver, skips in parsed for d in by_driver
                                        if PREPARE not in skips[d]))
            for driver in needed:
                self._client(driver, self.driver_wait)
        except PrepareFailed as err:
            return PodResult(pod_uid, tuple(ClaimResult(k.namespace, k.name, k.uid)
                                            for k, _, _ in parsed), str(err))
        with self._lock:
            for key, by_driver, skips in parsed:
                info = self._claims.get(key.uid)
                if info is None:
                    clash = next((i for i in self._claims.values()
                                  if (i.namespace, i.name) == (key.namespace, key.name)), None)
                    if clash is not None:
                        return PodResult(pod_uid, (), f"old ResourceClaim with same name {key.name} "
                                                      f"and different UID {clash.uid} still exists")
                    info = ClaimInfo(key.uid, key.namespace, key.name)
                    self._claims[key.uid] = info
                info.pod_uids.add(pod_uid)
                info.skip_prepare = {d for d, s in skips.items() if PREPARE in s}
                info.skip_unprepare = {d for d, s in skips.items() if UNPREPARE in s}
            self._save()
            pending = [(k, bd) for k, bd, _ in parsed if not self._claims[k.uid].prepared]
        claim_errors: dict[str, str] = {}
        error = self._prepare_pending(pending, claim_errors)
        with self._lock:
            if error is None:
                for key, _ in pending:
                    self._claims[key.uid].prepared = True
            self._save()
            return PodResult(pod_uid, tuple(self._claim_result(k, claim_errors.get(k.uid))
                                            for k, _, _ in parsed), error)

    def _claim_result(self, key: ClaimKey, error: str | None) -> ClaimResult:
        info = self._claims[key.uid]
        devices = tuple(d for driver in info.drivers for d in info.drivers[driver])
        return ClaimResult(key.namespace, key.name, key.uid, devices, error,
                           tuple(sorted(info.skip_prepare)))

    def _prepare_pending(self, pending: list[tuple[ClaimKey, dict[str, list[Mapping[str, Any]]]]],
                         claim_errors: dict[str, str]) -> str | None:
        batches: dict[str, list[ClaimKey]] = {}
        for key, by_driver in pending:
            info = self._claims[key.uid]
            for driver in by_driver:
                if driver not in info.skip_prepare:
                    batches.setdefault(driver, []).append(key)
        for driver, batch in batches.items():
            delays = iter(self.retry.delays())
            while True:
                claim_errors.clear()
                error, retry = self._prepare_batch(driver, batch, claim_errors)
                if error is None:
                    break
                delay = next(delays, None) if (retry or self.retry.retry_claim_errors) else None
                if delay is None:
                    return error
                time.sleep(delay)
        return None

    def _prepare_batch(self, driver: str, batch: list[ClaimKey],
                       claim_errors: dict[str, str]) -> tuple[str | None, bool]:
        """(error, worth retrying) for one NodePrepareResources call."""
        try:
            client = self._client(driver, 0)
            answer: PrepareAnswer = self._retrying(lambda: client.prepare(batch, self.call_timeout))
        except PrepareFailed as err:
            return str(err), True
        except grpc.RpcError as err:
            return f"NodePrepareResources: rpc error: code = {err.code().name} desc = {err.details()}", \
                err.code() in TRANSIENT
        with self._lock:
            for uid, devices in answer.devices.items():
                self._claims[uid].drivers[driver] = devices
        if answer.unknown:
            return (f"NodePrepareResources returned result for unknown claim UID "
                    f"{', '.join(answer.unknown)}", False)
        names = {k.uid: k.name for k in batch}
        claim_errors.update(answer.errors)
        for uid, text in answer.errors.items():
            return f"NodePrepareResources failed for ResourceClaim {names[uid]}: {text}", False
        missing = [k for k in batch if k.uid not in answer.devices]
        if missing:
            return f"NodePrepareResources skipped {len(missing)} ResourceClaims", True
        return None, False

    # -- unprepare ------------------------------------------------------------------------------

    def unprepare(self, pod_uid: str, claims: Sequence[Mapping[str, Any]] | None = None
                  ) -> PodResult:
        """Release pod ``pod_uid``'s claims. ``claims`` is only needed for claims the agent
        does not remember (e.g. after losing its checkpoint)."""
        with self._lock:
            infos: list[ClaimInfo] = [i for i in self._claims.values() if pod_uid in i.pod_uids]
            for claim in claims or ():
                meta = claim.get("metadata") or {}
                if meta.get("uid") in self._claims or not meta.get("uid"):
                    continue
                info = ClaimInfo(meta["uid"], meta.get("namespace", ""), meta.get("name", ""), {pod_uid})
                results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
                by_driver: dict[str, list[Mapping[str, Any]]] = {}
                for r in results:
                    by_driver.setdefault(r.get("driver", ""), []).append(r)
                for driver, rs in by_driver.items():
                    info.drivers[driver] = ()
                    if UNPREPARE in skipped_operations(rs) and self.optional_node_operations:
                        info.skip_unprepare.add(driver)
                infos.append(info)
            last = [i for i in infos if not (i.pod_uids - {pod_uid})]
            for info in infos:
                if info not in last:
                    info.pod_uids.discard(pod_uid)
            self._save()
        batches: dict[str, list[ClaimKey]] = {}
        for info in last:
            for driver in info.drivers:
                if driver not in info.skip_unprepare:
                    batches.setdefault(driver, []).append(ClaimKey(info.namespace, info.uid, info.name))
        error = None
        for driver, batch in batches.items():
            error = self._unprepare_batch(driver, batch)
            if error is not None:
                break
        with self._lock:
            if error is None:
                for info in last:
                    self._claims.pop(info.uid, None)
            self._save()
        return PodResult(pod_uid, tuple(ClaimResult(i.namespace, i.name, i.uid) for i in infos), error)

    def _unprepare_batch(self, driver: str, batch: list[ClaimKey]) -> str | None:
        delays = iter(self.retry.delays())
        while True:
            retry = False
            try:
                client = self._client(driver, self.driver_wait)
                answers, unknown = self._retrying(lambda: client.unprepare(batch, self.call_timeout))
                names = {k.uid: k.name for k in batch}
                failed = [(uid, e) for uid, e in answers.items() if e]
                missing = [k for k in batch if k.uid not in answers]
                if unknown:
                    error: str | None = (f"NodeUnprepareResources returned result for unknown claim "
                                         f"UID {', '.join(unknown)}")
                elif failed:
                    error = f"NodeUnprepareResources failed for ResourceClaim {names[failed[0][0]]}: {failed[0][1]}"
                elif missing:
                    error, retry = f"NodeUnprepareResources skipped {len(missing)} ResourceClaims", True
                else:
                    return None
            except PrepareFailed as err:
                error, retry = str(err), True
            except grpc.RpcError as err:
                error = f"NodeUnprepareResources: rpc error: code = {err.code().name} desc = {err.details()}"
                retry = err.code() in TRANSIENT
            delay = next(delays, None) if (retry or self.retry.retry_claim_errors) else None
            if delay is None:
                return error
            time.sleep(delay)

    def reconcile(self, active_pod_uids: Iterable[str]) -> list[PodResult]:
        """Unprepare for pods the agent still tracks but that are no longer active."""
        active = set(active_pod_uids)
        with self._lock:
            stale = sorted({p for i in self._claims.values() for p in i.pod_uids} - active)
        return [self.unprepare(pod) for pod in stale]


def container_cdi_devices(pod: Mapping[str, Any], result: PodResult) -> dict[str, list[str]]:
    """Per container (init containers included) the CDI ids the runtime would get: for every
    ``resources.claims[]`` entry, the claim's devices serving the named request (all devices
    when no request is named), plus devices that serve every request."""
    spec = pod.get("spec") or {}
    statuses = {s.get("name"): s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    names: dict[str, str | None] = {}
    for ref in spec.get("resourceClaims") or []:
        names[ref["name"]] = ref.get("resourceClaimName") or statuses.get(ref["name"])
    by_name = {c.name: c for c in result.claims}
    out: dict[str, list[str]] = {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        ids: list[str] = []
        for entry in (container.get("resources") or {}).get("claims") or []:
            claim_name = names.get(entry.get("name"))
            claim = by_name.get(claim_name or "")
            if claim is None:
                continue
            for cdi_id in claim.cdi_ids(entry.get("request")):
                if cdi_id not in ids:
                    ids.append(cdi_id)
        out[container["name"]] = ids
    return out
