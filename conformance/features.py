"""The feature registry: every Kubernetes 1.37 DRA feature drakit knows, in one table.

Markers, ``requires`` checks, report rows and the README matrix all read this table. Stages
and defaults are those of the 1.37 feature-gate table (code truth), not the KEP yaml where the
two disagree (PreQueueingHints: KEP says beta, the 1.37 gate is alpha and off).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Feature:
    id: str
    title: str
    kep: str
    gates: tuple[str, ...]
    stage: str  # GA | beta | alpha | stable-naming | opt-in
    default_on: bool
    apis: tuple[str, ...] = ("resource.k8s.io/v1",)

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "kep": self.kep,
            "gates": list(self.gates),
            "stage": self.stage,
            "defaultOn": self.default_on,
            "apis": list(self.apis),
        }


FEATURES: tuple[Feature, ...] = (
    Feature("core", "Core allocation: classes, claims, templates, slices, selectors, constraints, modes",
            "4381", ("DynamicResourceAllocation",), "GA", True),
    Feature("prioritized-list", "Prioritized list of subrequests (firstAvailable)",
            "4816", ("DRAPrioritizedList",), "GA", True),
    Feature("admin-access", "Admin access to devices in use",
            "5018", ("DRAAdminAccess",), "GA", True),
    Feature("extended-resource", "Extended resources backed by DRA",
            "5004", ("DRAExtendedResource",), "GA", True),
    Feature("device-taints", "Device taints, tolerations and DeviceTaintRule",
            "5055", ("DRADeviceTaints", "DRADeviceTaintRules"), "GA", True),
    Feature("device-status", "Claim device status with network data",
            "4817", ("DRAResourceClaimDeviceStatus",), "GA", True),
    Feature("device-metadata", "Device metadata downward API (driver opt-in)",
            "5304", (), "beta", True, ("resource.k8s.io/v1", "metadata.resource.k8s.io/v1beta1")),
    Feature("partitionable-devices", "Partitionable devices (shared counters)",
            "4815", ("DRAPartitionableDevices",), "beta", True),
    Feature("consumable-capacity", "Consumable capacity and multiple allocations",
            "5075", ("DRAConsumableCapacity",), "beta", True),
    Feature("fractional-capacity", "Fractional capacity ranges",
            "5075", ("DRAFractionalCapacityRange",), "beta", False),
    Feature("binding-conditions", "Binding conditions",
            "5007", ("DRADeviceBindingConditions",), "beta", True),
    Feature("workload-claims", "ResourceClaims for workloads and pod groups",
            "5729", ("DRAWorkloadResourceClaims", "GenericWorkload"), "beta", False,
            ("resource.k8s.io/v1", "scheduling.k8s.io/v1beta1")),
    Feature("list-attributes", "List-type attributes",
            "5491", ("DRAListTypeAttributes",), "alpha", False),
    Feature("derived-attributes", "Derived attributes (CEL-computed)",
            "6080", ("DRADerivedAttributes",), "alpha", False),
    Feature("compatibility-groups", "Device compatibility groups",
            "5963", ("DRADeviceCompatibilityGroups",), "alpha", False),
    Feature("node-allocatable", "Node allocatable resources backed by devices",
            "5517", ("DRANodeAllocatableResources",), "alpha", False),
    Feature("optional-node-operations", "Optional node operations (skipNodeOperations)",
            "5945", ("DRAOptionalNodeOperations",), "alpha", False),
    Feature("pool-status", "Resource pool status requests",
            "5677", ("DRAResourcePoolStatus",), "alpha", False,
            ("resource.k8s.io/v1", "resource.k8s.io/v1alpha3")),
    Feature("numa-node", "Standard resource.kubernetes.io/numaNode attribute",
            "6072", (), "GA", True),
    Feature("prequeueing-hints", "PreQueueingHints for DRA events",
            "6132", ("SchedulerPreQueueingHints",), "alpha", False),
    Feature("driver", "DRA driver contract: the driver under test on its own inventory (registration, "
            "slices, allocation, prepare, the pod's CDI edits, unprepare, reuse, restarts)",
            "5970", (), "opt-in", True),
)

BY_ID: dict[str, Feature] = {f.id: f for f in FEATURES}

# Every gate the registry names, with its 1.37 default. Gates that no feature row owns but
# that change allocator behaviour (e.g. the device-status half of binding conditions) are here too.
DEFAULT_GATES: dict[str, bool] = {
    "DynamicResourceAllocation": True,
    "DRAPrioritizedList": True,
    "DRAAdminAccess": True,
    "DRAExtendedResource": True,
    "DRADeviceTaints": True,
    "DRADeviceTaintRules": True,
    "DRAResourceClaimDeviceStatus": True,
    "DRAPartitionableDevices": True,
    "DRAConsumableCapacity": True,
    "DRAFractionalCapacityRange": False,
    "DRADeviceBindingConditions": True,
    "DRAWorkloadResourceClaims": False,
    "GenericWorkload": False,
    "DRAListTypeAttributes": False,
    "DRADerivedAttributes": False,
    "DRADeviceCompatibilityGroups": False,
    "DRANodeAllocatableResources": False,
    "DRAOptionalNodeOperations": False,
    "DRAResourcePoolStatus": False,
    "DRAPartitionableDevicesType": False,
    "SchedulerPreQueueingHints": False,
}

# Gates that need other gates on (the 1.37 feature dependency table); a binary refuses to start
# otherwise. Only dependencies among the gates above that are not locked on are listed.
GATE_DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "DRAWorkloadResourceClaims": ("GenericWorkload",),
    "DRADeviceTaintRules": ("DRADeviceTaints",),
    "DRADeviceCompatibilityGroups": ("DRAPartitionableDevices",),
    "DRAFractionalCapacityRange": ("DRAConsumableCapacity",),
    "DRAPartitionableDevicesType": ("DRAPartitionableDevices", "DRAResourcePoolStatus"),
}


def unmet_dependencies(gates: dict[str, bool]) -> list[str]:
    """``A needs B`` for every enabled gate whose dependency is disabled."""
    return [f"{g} needs {d}" for g, deps in GATE_DEPENDENCIES.items() if gates.get(g) for d in deps if not gates.get(d)]

# Gates that are GA and locked on in 1.37: turning them off is refused, as a real binary does.
LOCKED_GATES: frozenset[str] = frozenset(
    {"DynamicResourceAllocation", "DRAPrioritizedList", "DRAAdminAccess", "DRAExtendedResource",
     "DRAResourceClaimDeviceStatus"}
)


def parse_gates(spec: str, base: dict[str, bool] | None = None) -> dict[str, bool]:
    """Parse ``A=true,B=false`` on top of the 1.37 defaults. Unknown or locked gates raise ValueError."""
    gates = dict(DEFAULT_GATES if base is None else base)
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, value = part.partition("=")
        if not sep or value.lower() not in ("true", "false"):
            raise ValueError(f"feature gate {part!r}: expected NAME=true|false")
        if name not in DEFAULT_GATES:
            raise ValueError(f"unknown feature gate {name!r} (known: {', '.join(sorted(DEFAULT_GATES))})")
        on = value.lower() == "true"
        if name in LOCKED_GATES and not on:
            raise ValueError(f"feature gate {name} is GA and locked to true in 1.37")
        gates[name] = on
    return gates
