"""The kubelet plugin's gRPC side: registration socket, DRA service socket, health stream.

Two servers, as the kubelet expects:

- ``<plugin dir>/<driver>/dra.sock`` serves DRA ``v1`` and ``v1beta1`` (NodePrepareResources,
  NodeUnprepareResources) and, when enabled, the health stream ``v1`` and ``v1alpha1``;
- ``<registry dir>/<driver>-reg.sock`` serves ``pluginregistration.Registration`` and points
  the kubelet at the DRA socket, listing ``v1.DRAPlugin`` first.

The DRA socket is bound first, so it answers by the time the kubelet sees the registration
socket. Sockets are mode 0600 and their folders 0700 (when we create them). The registration
socket is bound inside the driver's private folder and renamed into the shared registry folder,
so it is never reachable with looser permissions; where the two folders are different mounts
(a pod's hostPath volumes) the rename fails and it is bound in place instead. ``stop`` removes
the registration socket first (the kubelet reads that as deregistration), ends health streams,
then stops serving.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import grpc

from .._gen import (dra_health_v1_pb2, dra_health_v1_pb2_grpc, dra_health_v1alpha1_pb2,
                    dra_health_v1alpha1_pb2_grpc, dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2,
                    dra_v1beta1_pb2_grpc, pluginregistration_v1_pb2,
                    pluginregistration_v1_pb2_grpc)
from .driver import ClaimRef, FakeDriver
from .files import check_socket_path, ensure_dir, remove_stale_socket, staging_socket_name
from .health import HealthMonitor
from . import rpcserver
from .rpcserver import LoopServer

log = logging.getLogger("drakit.driver")

PLUGIN_TYPE = "DRAPlugin"
DRA_VERSIONS = ("v1", "v1beta1")
HEALTH_VERSIONS = ("v1", "v1alpha1")
SOCKET_MODE = 0o600
DIR_MODE = 0o700
_DRA = {"v1": (dra_v1_pb2, dra_v1_pb2_grpc, True),
        "v1beta1": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, False)}
_HEALTH = {"v1": (dra_health_v1_pb2, dra_health_v1_pb2_grpc),
           "v1alpha1": (dra_health_v1alpha1_pb2, dra_health_v1alpha1_pb2_grpc)}


def dra_service_name(version: str) -> str:
    return f"{version}.DRAPlugin"


def health_service_name(version: str) -> str:
    return f"{version}.DRAResourceHealth"


@dataclass(frozen=True, slots=True)
class RegistrationEvent:
    registered: bool
    error: str


# -- servicers ----------------------------------------------------------------------------------

class RegistrationServicer(pluginregistration_v1_pb2_grpc.RegistrationServicer):
    def __init__(self, server: PluginServer) -> None:
        self.server = server

    def GetInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return pluginregistration_v1_pb2.PluginInfo(
            type=PLUGIN_TYPE, name=self.server.driver.driver,
            endpoint=str(self.server.dra_socket),
            supported_versions=self.server.supported_versions)

    def NotifyRegistrationStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.server.record_registration(RegistrationEvent(request.plugin_registered, request.error))
        if not request.plugin_registered:
            context.abort(grpc.StatusCode.UNKNOWN, f"failed registration process: {request.error}")
        return pluginregistration_v1_pb2.RegistrationStatusResponse()


def dra_servicer(current: Callable[[], FakeDriver], version: str) -> Any:
    """A servicer object for the DRA service of ``version`` (``v1`` or ``v1beta1``), serving the
    driver ``current()`` gives at each call (``PluginServer.swap``)."""
    pb2, pb2_grpc, with_share_id = _DRA[version]

    class Servicer(pb2_grpc.DRAPluginServicer):  # type: ignore[name-defined,misc]
        def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
            outcomes = current().prepare([ClaimRef(c.namespace, c.uid, c.name) for c in request.claims])
            response = pb2.NodePrepareResourcesResponse()
            for uid, outcome in outcomes.items():
                entry = response.claims[uid]
                if outcome.error is not None:
                    entry.error = outcome.error
                    continue
                for device in outcome.devices:
                    wire = entry.devices.add(request_names=device.request_names,
                                             pool_name=device.pool, device_name=device.device,
                                             cdi_device_ids=device.cdi_ids)
                    if with_share_id and device.share_id is not None:
                        wire.share_id = device.share_id
            return response

        def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
            errors = current().unprepare([ClaimRef(c.namespace, c.uid, c.name) for c in request.claims])
            response = pb2.NodeUnprepareResourcesResponse()
            for uid, error in errors.items():
                entry = response.claims[uid]
                if error:
                    entry.error = error
            return response

    Servicer.__name__ = Servicer.__qualname__ = f"DRAPlugin_{version}"
    return Servicer()


def health_servicer(current: Callable[[], HealthMonitor | None], version: str, resend_seconds: float) -> Any:
    """The health stream of ``current()``: a monitor swapped in (``PluginServer.swap``, which
    closes the old one) is followed on the same stream, with its whole device list at once."""
    pb2, pb2_grpc = _HEALTH[version]

    def message(monitor: HealthMonitor, items: Any, now: int) -> Any:
        return pb2.NodeWatchResourcesResponse(devices=[
            pb2.DeviceHealth(
                device=pb2.DeviceIdentifier(pool_name=i.pool, device_name=i.device),
                health=pb2.HEALTHY if i.healthy else pb2.UNHEALTHY,
                last_updated_time=now,
                health_check_timeout_seconds=monitor.timeout_seconds,
                message=i.message)
            for i in items])

    class Servicer(pb2_grpc.DRAResourceHealthServicer):  # type: ignore[name-defined,misc]
        def NodeWatchResources(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            while context.is_active() and (monitor := current()) is not None and not monitor.closed:
                version, items = monitor.snapshot()
                yield message(monitor, items, monitor.now())
                monitor.wait(version, resend_seconds)

    Servicer.__name__ = Servicer.__qualname__ = f"DRAResourceHealth_{version}"
    return Servicer()


# -- the server ---------------------------------------------------------------------------------

SERVERS = ("loop", "grpcio")


def grpc_server(max_workers: int) -> grpc.Server:
    """grpcio's own thread-pool server (``PluginServer(server="grpcio")``, the benchmark's
    baseline): every call handed from the queue thread to a pool thread."""
    return grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                  thread_name_prefix="drakit-plugin"))


class PluginServer:
    """Serves one ``FakeDriver`` on its kubelet sockets."""

    DEFAULT_WORKERS = 16

    def __init__(self, driver: FakeDriver, *, health: HealthMonitor | None = None,
                 dra_versions: tuple[str, ...] = DRA_VERSIONS,
                 health_versions: tuple[str, ...] = HEALTH_VERSIONS,
                 resend_seconds: float = 10.0, max_workers: int = DEFAULT_WORKERS,
                 server: str = "loop") -> None:
        if server not in SERVERS:
            raise ValueError(f"unknown gRPC server {server!r} (known: {', '.join(SERVERS)})")
        unknown = [v for v in dra_versions if v not in _DRA] + \
                  [v for v in health_versions if v not in _HEALTH]
        if unknown or not dra_versions:
            raise ValueError(f"unsupported service versions: {unknown or 'none given'}")
        self.driver = driver
        self.health = health
        self.dra_versions = dra_versions
        self.health_versions = health_versions if health is not None else ()
        self.resend_seconds = resend_seconds
        self.max_workers = max_workers
        self.server_kind = server
        config = driver.config
        self.dra_socket = check_socket_path(config.dra_socket)
        self.registration_socket = check_socket_path(config.registration_socket)
        self.registrations: list[RegistrationEvent] = []
        self.registered = threading.Event()
        self._lock = threading.Lock()
        self._dra_server: grpc.Server | LoopServer | None = None
        self._reg_server: grpc.Server | LoopServer | None = None

    @property
    def supported_versions(self) -> list[str]:
        return ([dra_service_name(v) for v in self.dra_versions]
                + [health_service_name(v) for v in self.health_versions])

    def record_registration(self, event: RegistrationEvent) -> None:
        with self._lock:
            self.registrations.append(event)
        if event.registered:
            self.registered.set()
            log.info("registered with the kubelet")
        else:
            log.warning("registration rejected by the kubelet: %s", event.error)

    def _new_server(self, inline: Callable[[str], bool]) -> grpc.Server | LoopServer:
        """``loop``: unary calls ``inline`` allows are answered on the server's queue thread
        (:mod:`.rpcserver`); ``grpcio``: grpcio's thread-pool server."""
        if self.server_kind == "grpcio":
            return grpc_server(self.max_workers)
        problem = rpcserver.unavailable()
        if problem is not None:
            log.warning("%s: serving with grpcio's thread-pool server instead", problem)
            self.server_kind = "grpcio"
            return grpc_server(self.max_workers)
        return LoopServer(self.max_workers, inline)

    def start(self) -> None:
        if self._dra_server is not None:
            raise RuntimeError("plugin server already started")
        data_dir = self.dra_socket.parent
        ensure_dir(data_dir, DIR_MODE)
        ensure_dir(self.registration_socket.parent, DIR_MODE)

        # prepare and unprepare on the queue thread unless they may wait (API server, fdatasync)
        dra = self._new_server(lambda method: self.driver.answers_inline)
        for version in self.dra_versions:
            _DRA[version][1].add_DRAPluginServicer_to_server(dra_servicer(lambda: self.driver, version), dra)
        if self.health is not None:
            for version in self.health_versions:
                _HEALTH[version][1].add_DRAResourceHealthServicer_to_server(
                    health_servicer(lambda: self.health, version, self.resend_seconds), dra)
        remove_stale_socket(self.dra_socket)
        dra.add_insecure_port(f"unix://{self.dra_socket}")
        os.chmod(self.dra_socket, SOCKET_MODE)
        dra.start()
        self._dra_server = dra

        same_fs = os.stat(data_dir).st_dev == os.stat(self.registration_socket.parent).st_dev
        staging = check_socket_path(data_dir / staging_socket_name(os.getpid())) if same_fs else None
        reg = self._registration_server(staging or self.registration_socket)
        if staging is not None:
            remove_stale_socket(self.registration_socket)
            try:
                os.replace(staging, self.registration_socket)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                # Two bind mounts of one file system (the hostPath volumes of a pod) refuse a
                # rename between them although st_dev is equal: serve where the socket belongs.
                log.info("registration socket bound in place (%s and %s are different mounts)",
                         data_dir, self.registration_socket.parent)
                reg.stop(None).wait()
                staging.unlink(missing_ok=True)
                reg = self._registration_server(self.registration_socket)
        self._reg_server = reg
        log.info("serving %s: DRA %s, registration %s (%s)", self.driver.driver, self.dra_socket,
                 self.registration_socket, ", ".join(self.supported_versions))

    def _registration_server(self, path: Path) -> grpc.Server | LoopServer:
        """A started registration server on ``path`` (mode 0600)."""
        reg = self._new_server(lambda method: True)
        pluginregistration_v1_pb2_grpc.add_RegistrationServicer_to_server(RegistrationServicer(self), reg)
        remove_stale_socket(path)
        reg.add_insecure_port(f"unix://{path}")
        os.chmod(path, SOCKET_MODE)
        reg.start()
        return reg

    def swap(self, driver: FakeDriver, health: HealthMonitor | None) -> None:
        """Serve ``driver`` (same driver name and sockets) and ``health`` from now on, on the
        running sockets: the kubelet's registration stays. The old health monitor is closed,
        which moves its streams to the new one."""
        if driver.config.dra_socket != self.driver.config.dra_socket or driver.driver != self.driver.driver:
            raise ValueError(f"swap to {driver.driver} at {driver.config.dra_socket}: not this server's driver and socket")
        old = self.health
        self.driver, self.health = driver, health
        if old is not None and old is not health:
            old.close()

    def stop(self, grace: float | None = 1.0) -> None:
        """Deregister (remove the registration socket), end streams, stop both servers."""
        reg, dra = self._reg_server, self._dra_server
        self._reg_server = self._dra_server = None
        for path in (self.registration_socket, self.dra_socket):
            try:
                if path.is_socket():
                    path.unlink()
            except FileNotFoundError:
                pass
        if self.health is not None:
            self.health.close()
        waits = [s.stop(grace) for s in (reg, dra) if s is not None]
        for done in waits:
            done.wait()

    def wait(self) -> None:
        if self._dra_server is not None:
            self._dra_server.wait_for_termination()

    def __enter__(self) -> PluginServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def service_modules() -> dict[str, ModuleType]:
    """Generated message modules by advertised service name (for clients and checks)."""
    out: dict[str, ModuleType] = {dra_service_name(v): m for v, (m, _, _) in _DRA.items()}
    out.update({health_service_name(v): m for v, (m, _) in _HEALTH.items()})
    return out
