"""``PluginRegistry``: the kubelet's plugin watcher and DRA plugin store for one node.

It polls the plugin registry folder (~100 ms), registers new sockets like the kubelet's plugin
manager (``client.register``), keeps one gRPC channel per plugin instance (the newest connected
instance of a driver is preferred), drops instances whose socket went away, follows advertised
health streams (entries older than their timeout read as ``Unknown``) and, when the last
instance of a driver has been gone for ``wipe_delay`` seconds, calls ``on_driver_gone``.
``NodeAgent`` owns one and calls the plugins it hands out.
"""

from __future__ import annotations

import logging
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import grpc

from .client import PluginClient, Registration, RegistrationError, register
from .results import DeviceHealth, DriverInfo
from drakit.conformance.crash import log_bug

log = logging.getLogger("drakit.nodeagent")

DEFAULT_HEALTH_TIMEOUT = 30


@dataclass
class _Instance:
    registration: Registration
    client: PluginClient
    seq: int
    stop: threading.Event = field(default_factory=threading.Event)
    stream: Any = None
    thread: threading.Thread | None = None


class PluginRegistry:
    """Registered DRA plugin instances of one node, kept in sync with ``registry_dir``."""

    def __init__(self, registry_dir: Path, node_name: str, *, poll_interval: float = 0.1,
                 registration_retry: float = 0.5, health_retry: float = 5.0,
                 on_health: Callable[[str, list[DeviceHealth]], None] | None = None,
                 on_driver_gone: Callable[[str], None] | None = None,
                 wipe_delay: float = 30.0) -> None:
        self.registry_dir = registry_dir
        self.node_name = node_name
        self.poll_interval = poll_interval
        self.registration_retry = registration_retry
        self.health_retry = health_retry
        self.on_health = on_health
        self.on_driver_gone = on_driver_gone
        self.wipe_delay = wipe_delay
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
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

    # -- the watcher ----------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_interval):
            try:
                self.scan()
            except Exception as exc:  # keep watching whatever one socket did
                log_bug(log, f"scanning {self.registry_dir} failed", exc)

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

    # -- queries --------------------------------------------------------------------------------

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

    def client(self, driver: str) -> PluginClient | None:
        """The gRPC client of the driver's preferred instance, or None when not registered."""
        with self._lock:
            inst = self._preferred(driver)
        return inst.client if inst is not None else None

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
