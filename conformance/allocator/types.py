"""Inputs, outputs and errors of the reference allocator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..quantity import Quantity
from ..model.claim import Toleration
from ..model.meta import NodeSelector
from ..model.slice import Device, ResourceSlice

DeviceID = tuple[str, str, str]  # (driver, pool, device)


def device_id_str(d: DeviceID) -> str:
    return "/".join(d)


CHANNELS = ("stable", "incubating", "experimental")
"""Upstream's allocator implementations, most stable first (the order ``NewAllocator`` tries)."""

_STABLE = frozenset({"admin_access", "prioritized_list", "partitionable_devices", "device_taints"})
_INCUBATING = _STABLE | {"device_binding_and_status", "consumable_capacity", "fractional_capacity"}
_FEATURE_NAMES = ("admin_access", "prioritized_list", "partitionable_devices", "device_taints",
                  "device_binding_and_status", "consumable_capacity", "list_type_attributes", "fractional_capacity",
                  "optional_node_operations", "derived_attributes", "compatibility_groups")
CHANNEL_FEATURES: dict[str, frozenset[str]] = {
    "stable": _STABLE,
    "incubating": _INCUBATING,
    "experimental": frozenset(_FEATURE_NAMES),
}
"""The switches each implementation supports (upstream's ``SupportedFeatures`` per package)."""


@dataclass(frozen=True, slots=True)
class Features:
    """The allocator-relevant feature switches, derived from feature gates as upstream does.
    :meth:`channel` names the upstream implementation that handles them."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_binding_and_status: bool = True
    consumable_capacity: bool = True
    list_type_attributes: bool = False
    fractional_capacity: bool = False
    optional_node_operations: bool = False
    derived_attributes: bool = False
    compatibility_groups: bool = False

    def enabled(self) -> frozenset[str]:
        """The switches that are on, by name (the names of :data:`CHANNEL_FEATURES`)."""
        return frozenset(name for name in _FEATURE_NAMES if getattr(self, name))

    def channel(self, enabled: Sequence[str] = CHANNELS) -> str:
        """The upstream implementation ``NewAllocator`` picks for these switches: the first of
        ``stable``, ``incubating``, ``experimental`` (among ``enabled``) that supports every
        switch that is on. Raises :class:`AllocationError` when none does."""
        on = self.enabled()
        for name in CHANNELS:
            if name in enabled and on <= CHANNEL_FEATURES[name]:
                return name
        raise AllocationError(f"internal error: no allocator available for feature set {sorted(on)}, "
                              f"enabled allocators: {', '.join(c for c in CHANNELS if c in enabled)}")

    @classmethod
    def from_gates(cls, gates: Mapping[str, bool]) -> "Features":
        def g(name: str) -> bool:
            return bool(gates.get(name, False))

        return cls(
            admin_access=g("DRAAdminAccess"),
            prioritized_list=g("DRAPrioritizedList"),
            partitionable_devices=g("DRAPartitionableDevices"),
            device_taints=g("DRADeviceTaints"),
            device_binding_and_status=g("DRADeviceBindingConditions") and g("DRAResourceClaimDeviceStatus"),
            consumable_capacity=g("DRAConsumableCapacity"),
            list_type_attributes=g("DRAListTypeAttributes"),
            fractional_capacity=g("DRAFractionalCapacityRange"),
            optional_node_operations=g("DRAOptionalNodeOperations"),
            derived_attributes=g("DRADerivedAttributes"),
            compatibility_groups=g("DRADeviceCompatibilityGroups"),
        )


@dataclass(slots=True)
class AllocatedState:
    """What is already committed: dedicated devices, shares of shareable devices, and the
    capacity those shares consume (summed per device)."""

    devices: set[DeviceID] = field(default_factory=set)
    shares: set[tuple[DeviceID, str]] = field(default_factory=set)
    capacity: dict[DeviceID, dict[str, Quantity]] = field(default_factory=dict)

    def shared_devices(self) -> set[DeviceID]:
        return {dev for dev, _ in self.shares}

    def is_allocated(self, dev: DeviceID, shared: set[DeviceID]) -> bool:
        """Dedicated, or holding any committed share or consumed capacity (upstream IsDeviceAllocated)."""
        return dev in self.devices or dev in shared or dev in self.capacity


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    declared_features: tuple[str, ...] = ()  # node.status.declaredFeatures


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    tolerations: tuple[Toleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] | None = None
    skip_node_operations: tuple[str, ...] = ()

    @property
    def id(self) -> DeviceID:
        return (self.driver, self.pool, self.device)

    def to_wire(self) -> dict[str, object]:
        out: dict[str, object] = {"request": self.request, "driver": self.driver, "pool": self.pool, "device": self.device}
        if self.admin_access:
            out["adminAccess"] = True
        if self.tolerations:
            out["tolerations"] = [t.to_wire() for t in self.tolerations]
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
        if self.binding_failure_conditions:
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.consumed_capacity is not None:
            out["consumedCapacity"] = {k: str(v) for k, v in self.consumed_capacity.items()}
        if self.skip_node_operations:
            out["skipNodeOperations"] = list(self.skip_node_operations)
        return out


@dataclass(frozen=True, slots=True)
class ConfigResult:
    source: str  # FromClass | FromClaim
    requests: tuple[str, ...]
    driver: str
    parameters: object

    def to_wire(self) -> dict[str, object]:
        out: dict[str, object] = {"source": self.source}
        if self.requests:
            out["requests"] = list(self.requests)
        out["opaque"] = {"driver": self.driver, "parameters": self.parameters}
        return out


@dataclass(frozen=True, slots=True)
class AllocationResult:
    devices: tuple[DeviceResult, ...]
    config: tuple[ConfigResult, ...] = ()
    node_selector: NodeSelector | None = None

    def to_wire(self) -> dict[str, object]:
        out: dict[str, object] = {"devices": {"results": [d.to_wire() for d in self.devices]}}
        if self.config:
            out["devices"]["config"] = [c.to_wire() for c in self.config]  # type: ignore[index]
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector.to_wire()
        return out


class AllocationError(Exception):
    """Fatal for the whole scheduling attempt (upstream: Error status, pod backs off)."""


class NodeAllocationError(AllocationError):
    """Unschedulable on this node only (upstream: ErrFailedAllocationOnNode)."""


@dataclass(frozen=True, slots=True, eq=False)
class CandidateDevice:
    """A device in the search order, with what the checks need to know about where it lives."""

    device: Device
    slice: ResourceSlice
    id: DeviceID
    pool_index: int
    slice_index: int
    device_index: int

ALLOCATION_LIMIT = 32


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    generation: int
    slices: list[ResourceSlice] = field(default_factory=list)  # device slices targeting the node, by name
    other_slices: list[ResourceSlice] = field(default_factory=list)  # same generation, not targeting the node
    counter_sets: dict[str, dict[str, Quantity]] = field(default_factory=dict)
    incomplete: bool = False
    invalid: str | None = None
    has_binding_conditions: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.driver, self.name)
