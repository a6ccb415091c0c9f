"""The kubelet side of one plugin instance: registration handshake and gRPC calls.

``register(socket)`` does what the kubelet's plugin manager does for a socket found in the
registry folder: GetInfo (1 s deadline), validation (type ``DRAPlugin``, driver name, endpoint,
a DRA service version the kubelet speaks), the choice of version (the plugin's first entry that
the kubelet supports) and of health service (v1 before v1alpha1), and NotifyRegistrationStatus
(5 s deadline) with the verdict.

``PluginClient`` holds the one gRPC channel the kubelet keeps per instance and makes the DRA
calls (45 s deadline) in whichever version was chosen, converting to a version-neutral form.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import grpc

from drakit.fake_driver._gen import (dra_health_v1_pb2, dra_health_v1_pb2_grpc, dra_health_v1alpha1_pb2,
                              dra_health_v1alpha1_pb2_grpc, dra_v1_pb2, dra_v1_pb2_grpc,
                              dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, pluginregistration_v1_pb2,
                              pluginregistration_v1_pb2_grpc)

PLUGIN_TYPE = "DRAPlugin"
KUBELET_DRA_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
KUBELET_HEALTH_SERVICES = ("v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")
DIAL_TIMEOUT = 10.0
GET_INFO_TIMEOUT = 1.0
NOTIFY_TIMEOUT = 5.0
CALL_TIMEOUT = 45.0
_READY = grpc.ChannelConnectivity.READY.value[0]  # the channel core's number for READY
_DRIVER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")

_DRA_STUBS: dict[str, tuple[Any, Any]] = {"v1.DRAPlugin": (dra_v1_pb2, dra_v1_pb2_grpc.DRAPluginStub),
              "v1beta1.DRAPlugin": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc.DRAPluginStub)}
_HEALTH_STUBS: dict[str, tuple[Any, Any]] = {
    "v1.DRAResourceHealth": (dra_health_v1_pb2, dra_health_v1_pb2_grpc.DRAResourceHealthStub),
    "v1alpha1.DRAResourceHealth": (dra_health_v1alpha1_pb2,
                                   dra_health_v1alpha1_pb2_grpc.DRAResourceHealthStub),
}


class RegistrationError(Exception):
    """The plugin failed registration; the message is what NotifyRegistrationStatus carried."""


@dataclass(frozen=True, slots=True)
class PluginInfo:
    type: str
    name: str
    endpoint: str
    supported_versions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Registration:
    """A validated registration: which driver, where, which services."""

    driver: str
    endpoint: str
    service: str
    health_service: str | None
    registration_socket: str
    info: PluginInfo


@dataclass(frozen=True, slots=True)
class ClaimKey:
    namespace: str
    uid: str
    name: str


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One device of a NodePrepareResources answer."""

    driver: str
    pool: str
    device: str
    request_names: tuple[str, ...]
    cdi_ids: tuple[str, ...]
    share_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"driver": self.driver, "pool": self.pool, "device": self.device,
                               "requestNames": list(self.request_names),
                               "cdiDeviceIDs": list(self.cdi_ids)}
        if self.share_id is not None:
            out["shareID"] = self.share_id
        return out


@dataclass(frozen=True, slots=True)
class PrepareAnswer:
    """Per claim UID: devices or an error. ``unknown`` lists UIDs the plugin invented."""

    devices: dict[str, tuple[DeviceResult, ...]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()


def validate_info(info: PluginInfo, registration_socket: str,
                  kubelet_services: Sequence[str] = KUBELET_DRA_SERVICES) -> Registration:
    """The kubelet's checks of a GetInfo answer; raises ``RegistrationError``."""
    if info.type != PLUGIN_TYPE:
        raise RegistrationError(f"no handler registered for plugin type: {info.type}")
    if not info.name or len(info.name) > 63 or not _DRIVER_NAME.match(info.name):
        raise RegistrationError(f"invalid DRA driver name {info.name!r}: must be a lower-case DNS "
                                "subdomain of at most 63 characters")
    endpoint = info.endpoint or registration_socket
    if not os.path.isabs(endpoint):
        raise RegistrationError(f"endpoint {endpoint!r} of driver {info.name} is not an absolute path")
    if not info.supported_versions:
        raise RegistrationError(f"plugin {info.name} lists no supported services")
    service = next((v for v in info.supported_versions if v in kubelet_services), None)
    if service is None:
        raise RegistrationError(
            f"none of services supported by the plugin ({', '.join(info.supported_versions)}) "
            f"are supported by the kubelet ({', '.join(kubelet_services)})")
    health = next((v for v in KUBELET_HEALTH_SERVICES if v in info.supported_versions), None)
    return Registration(info.name, endpoint, service, health, registration_socket, info)


def get_info(registration_socket: str, timeout: float = GET_INFO_TIMEOUT) -> PluginInfo:
    with grpc.insecure_channel(f"unix://{registration_socket}") as channel:
        stub = pluginregistration_v1_pb2_grpc.RegistrationStub(channel)
        reply = stub.GetInfo(pluginregistration_v1_pb2.InfoRequest(), timeout=timeout,
                             wait_for_ready=True)
    return PluginInfo(reply.type, reply.name, reply.endpoint, tuple(reply.supported_versions))


def notify(registration_socket: str, registered: bool, error: str = "",
           timeout: float = NOTIFY_TIMEOUT) -> None:
    with grpc.insecure_channel(f"unix://{registration_socket}") as channel:
        stub = pluginregistration_v1_pb2_grpc.RegistrationStub(channel)
        stub.NotifyRegistrationStatus(
            pluginregistration_v1_pb2.RegistrationStatus(plugin_registered=registered, error=error),
            timeout=timeout)


def register(registration_socket: str | Path,
             accept: Callable[[Registration], None] = lambda r: None) -> Registration:
    """The whole handshake. ``accept`` may raise ``RegistrationError`` to refuse (e.g. an
    endpoint already registered). Raises ``RegistrationError`` (after notifying the plugin when
    it got that far) or ``grpc.RpcError`` (GetInfo itself failed)."""
    socket = str(registration_socket)
    info = get_info(socket)
    try:
        registration = validate_info(info, socket)
        accept(registration)
    except RegistrationError as err:
        try:
            notify(socket, False, str(err))
        except grpc.RpcError:
            pass  # the plugin answers a rejection with an error status; that is expected
        raise
    notify(socket, True)
    return registration


def _claims_message(pb2: Any, claims: Sequence[ClaimKey]) -> list[Any]:
    return [pb2.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]


class PluginClient:
    """One channel to one registered plugin instance, for all calls (health stream included)."""

    def __init__(self, registration: Registration) -> None:
        self.registration = registration
        self.channel = grpc.insecure_channel(f"unix://{registration.endpoint}")
        self._pb2, stub_class = _DRA_STUBS[registration.service]
        self._stub = stub_class(self.channel)
        self._check_state(try_to_connect=True)  # connect now, as the kubelet's client does

    def _check_state(self, try_to_connect: bool) -> bool:
        """Whether the channel is READY. Asked of the channel directly: a connectivity
        subscription (``channel.subscribe``) would start grpc's polling thread, and closing the
        channel then waits for its next 0.2 s poll (25 closes made 3.5 s of a reference run)."""
        check = getattr(getattr(self.channel, "_channel", None), "check_connectivity_state", None)
        if check is None:  # a grpc without it: a socket that exists is taken as reachable
            return os.path.exists(self.registration.endpoint)
        return bool(check(try_to_connect) == _READY)

    @property
    def connected(self) -> bool:
        return self._check_state(try_to_connect=False)

    @property
    def driver(self) -> str:
        return self.registration.driver

    def prepare(self, claims: Sequence[ClaimKey], timeout: float = CALL_TIMEOUT) -> PrepareAnswer:
        request = self._pb2.NodePrepareResourcesRequest(claims=_claims_message(self._pb2, claims))
        reply = self._stub.NodePrepareResources(request, timeout=timeout)
        asked = {c.uid for c in claims}
        answer = PrepareAnswer(unknown=tuple(sorted(set(reply.claims) - asked)))
        for uid, entry in reply.claims.items():
            if uid not in asked:
                continue
            if entry.error:
                answer.errors[uid] = entry.error
                continue
            answer.devices[uid] = tuple(
                DeviceResult(self.driver, d.pool_name, d.device_name, tuple(d.request_names),
                             tuple(d.cdi_device_ids),
                             d.share_id if d.DESCRIPTOR.fields_by_name.get("share_id")
                             and d.HasField("share_id") else None)
                for d in entry.devices)
        return answer

    def unprepare(self, claims: Sequence[ClaimKey], timeout: float = CALL_TIMEOUT
                  ) -> tuple[dict[str, str | None], tuple[str, ...]]:
        """(uid -> error or None for every answered claim, unknown UIDs in the answer)."""
        request = self._pb2.NodeUnprepareResourcesRequest(claims=_claims_message(self._pb2, claims))
        reply = self._stub.NodeUnprepareResources(request, timeout=timeout)
        asked = {c.uid for c in claims}
        out = {uid: (entry.error or None) for uid, entry in reply.claims.items() if uid in asked}
        return out, tuple(sorted(set(reply.claims) - asked))

    def watch_health(self) -> Iterator[Any] | None:
        """The health stream (an iterator of responses; cancel it to stop), if advertised."""
        if self.registration.health_service is None:
            return None
        pb2, stub_class = _HEALTH_STUBS[self.registration.health_service]
        stream: Iterator[Any] = stub_class(self.channel).NodeWatchResources(
            pb2.NodeWatchResourcesRequest())
        return stream

    def close(self) -> None:
        self.channel.close()
