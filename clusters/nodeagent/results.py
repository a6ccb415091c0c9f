"""What the node agent reports: results of prepare / unprepare, driver and device health facts,
the retry policy, and the pure helpers around them.

- ``PodResult`` / ``ClaimResult``: the answer of ``NodeAgent.prepare`` and ``unprepare``;
- ``DriverInfo`` / ``DeviceHealth``: a registered driver, one device's last reported health;
- ``RetryPolicy``: backoff for transient gRPC failures;
- ``skipped_operations(results)``: the node operations all of one driver's results skip;
- ``container_cdi_devices(pod, result)``: the CDI ids each container of a pod would get.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from .client import DeviceResult

PREPARE, UNPREPARE, ALL_OPS = "NodePrepareResources", "NodeUnprepareResources", "*"


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
