"""The gRPC calls node-check makes as the kubelet would, with version-neutral answers.

``find_registration_socket`` looks in a plugin registry folder for the driver's socket (the
conventional ``<driver>-reg.sock`` or a rolling-update name whose GetInfo names the driver);
:class:`Plugin` wraps one connection to the DRA endpoint with ``prepare`` / ``unprepare`` over
the v1 or v1beta1 service. Claims are ResourceClaim dicts (namespace, name and uid are used).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import grpc

from drakit.clusters.nodeagent.client import PluginInfo
from drakit.fake_driver._gen import (dra_health_v1_pb2, dra_health_v1_pb2_grpc, dra_health_v1alpha1_pb2,
                                     dra_health_v1alpha1_pb2_grpc, dra_v1_pb2, dra_v1_pb2_grpc,
                                     dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, pluginregistration_v1_pb2,
                                     pluginregistration_v1_pb2_grpc)

DRA_STUBS: dict[str, tuple[Any, Any]] = {
    "v1.DRAPlugin": (dra_v1_pb2, dra_v1_pb2_grpc.DRAPluginStub),
    "v1beta1.DRAPlugin": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc.DRAPluginStub)}
HEALTH_STUBS: dict[str, tuple[Any, Any]] = {
    "v1.DRAResourceHealth": (dra_health_v1_pb2, dra_health_v1_pb2_grpc.DRAResourceHealthStub),
    "v1alpha1.DRAResourceHealth": (dra_health_v1alpha1_pb2, dra_health_v1alpha1_pb2_grpc.DRAResourceHealthStub)}

Device = tuple[tuple[str, ...], str, str, tuple[str, ...], "str | None"]  # requests, pool, device, CDI ids, share


@dataclass(frozen=True)
class Answer:
    """One claim's entry of a prepare answer, version-neutral."""

    present: bool
    error: str
    devices: tuple[Device, ...] = ()

    @property
    def ok(self) -> bool:
        return self.present and not self.error

    def ids(self) -> list[str]:
        return [i for d in self.devices for i in d[3]]

    def comparable(self, share: bool = True) -> list[Any]:
        return sorted((tuple(sorted(r)), p, n, tuple(sorted(c)), s if share else None)
                      for r, p, n, c, s in self.devices)


def claim_ref(claim: dict[str, Any]) -> tuple[str, str, str]:
    """(namespace, name, uid) of a claim."""
    meta = claim["metadata"]
    return meta.get("namespace", ""), meta["name"], meta.get("uid", "")


def missing_claim() -> dict[str, Any]:
    """A claim that exists nowhere (a fresh UID and name)."""
    uid = str(uuid.uuid4())
    return {"metadata": {"namespace": "drakit-node-check", "name": f"missing-{uid[:8]}", "uid": uid}}


def get_info(socket: str) -> PluginInfo:
    with grpc.insecure_channel(f"unix://{socket}") as ch:
        reply = pluginregistration_v1_pb2_grpc.RegistrationStub(ch).GetInfo(
            pluginregistration_v1_pb2.InfoRequest(), timeout=1.0, wait_for_ready=True)
    return PluginInfo(reply.type, reply.name, reply.endpoint, tuple(reply.supported_versions))


def notify_registered(socket: str) -> None:
    with grpc.insecure_channel(f"unix://{socket}") as ch:
        pluginregistration_v1_pb2_grpc.RegistrationStub(ch).NotifyRegistrationStatus(
            pluginregistration_v1_pb2.RegistrationStatus(plugin_registered=True), timeout=5.0)


def find_registration_socket(registry_dir: Path, driver: str) -> str | None:
    conventional = registry_dir / f"{driver}-reg.sock"
    if conventional.is_socket():
        return str(conventional)
    for path in sorted(registry_dir.glob("*.sock")):  # rolling-update names
        if path.name.startswith(".") or not path.is_socket():
            continue
        try:
            if get_info(str(path)).name == driver:
                return str(path)
        except grpc.RpcError:
            continue
    return None


class Plugin:
    """A connection to a plugin's DRA endpoint; ``service`` is the one the kubelet would pick."""

    def __init__(self, endpoint: str, service: str, timeout: float) -> None:
        self.channel = grpc.insecure_channel(f"unix://{endpoint}")
        self.service = service
        self.timeout = timeout

    def close(self) -> None:
        self.channel.close()

    def _stub(self, service: str | None) -> tuple[Any, Any]:
        pb2, stub = DRA_STUBS[service or self.service]
        return pb2, stub(self.channel)

    @staticmethod
    def _claims(pb2: Any, claims: Sequence[dict[str, Any]]) -> list[Any]:
        return [pb2.Claim(namespace=ns, name=name, uid=uid) for ns, name, uid in map(claim_ref, claims)]

    def prepare(self, claims: Sequence[dict[str, Any]], service: str | None = None
                ) -> tuple[dict[str, Answer], list[str]]:
        """(uid -> answer for every requested claim, unknown UIDs in the reply); a failed call
        raises ``grpc.RpcError``."""
        pb2, stub = self._stub(service)
        reply = stub.NodePrepareResources(
            pb2.NodePrepareResourcesRequest(claims=self._claims(pb2, claims)), timeout=self.timeout)
        asked = [claim_ref(c)[2] for c in claims]
        out = {}
        for uid in asked:
            if uid not in reply.claims:
                out[uid] = Answer(False, "")
                continue
            entry = reply.claims[uid]
            devices = tuple(
                (tuple(d.request_names), d.pool_name, d.device_name, tuple(d.cdi_device_ids),
                 d.share_id if "share_id" in d.DESCRIPTOR.fields_by_name and d.HasField("share_id")
                 else None)
                for d in entry.devices)
            out[uid] = Answer(True, entry.error, devices)
        return out, sorted(set(reply.claims) - set(asked))

    def unprepare(self, claims: Sequence[dict[str, Any]], service: str | None = None
                  ) -> tuple[dict[str, str | None], list[str]]:
        """(uid -> error text, or None when the entry is missing; unknown UIDs)."""
        pb2, stub = self._stub(service)
        reply = stub.NodeUnprepareResources(
            pb2.NodeUnprepareResourcesRequest(claims=self._claims(pb2, claims)), timeout=self.timeout)
        asked = [claim_ref(c)[2] for c in claims]
        out = {uid: (reply.claims[uid].error if uid in reply.claims else None) for uid in asked}
        return out, sorted(set(reply.claims) - set(asked))

    def health_stream(self, service: str, timeout: float) -> Any:
        pb2, stub = HEALTH_STUBS[service]
        return stub(self.channel).NodeWatchResources(pb2.NodeWatchResourcesRequest(), timeout=timeout)


def rpc_text(err: grpc.RpcError) -> str:
    return f"{err.code().name}: {err.details()}"
