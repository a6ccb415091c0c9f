"""The emulated vendors: which devices each one sells and how its driver names them.

Every vendor runs its own DRA driver. The drivers deliberately disagree on attribute names
(Acme says ``numa``, Nova and Swift use the standard ``resource.kubernetes.io/numaNode``; Acme
calls the product ``model``, Nova ``productName``), because a conformance kit must show that
cases written against a vendor profile survive such differences.

A vendor maps *logical* facts (``model``, ``numa``, ``memory``...) to the names its driver
publishes. The same logical keys appear in the vendor profile (``fake_driver/profile.yaml``),
so ``${attr.gpu.numa}`` resolves to whatever the GPU driver really publishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

STANDARD_DOMAIN = "resource.kubernetes.io"
"""Domain of the attributes Kubernetes standardises for all drivers."""

PCIE_ROOT = f"{STANDARD_DOMAIN}/pcieRoot"
PCI_BUS_ID = f"{STANDARD_DOMAIN}/pciBusID"
NUMA_NODE = f"{STANDARD_DOMAIN}/numaNode"

VendorKind = Literal["gpu", "nic"]


@dataclass(frozen=True, slots=True)
class PartitionProfile:
    """A fixed-size slice of a GPU (MIG-like): ``compute`` slices and ``memory_gi`` GiB."""

    name: str
    compute: int
    memory_gi: int

    @property
    def slug(self) -> str:
        """The profile name as it may appear inside a device name (``1g.10gb`` -> ``1g10gb``)."""
        return self.name.replace(".", "")

    @property
    def memory(self) -> str:
        return f"{self.memory_gi}Gi"


@dataclass(frozen=True, slots=True)
class GpuModel:
    """A GPU product. ``name`` is what shapes use; ``product`` is what the driver reports."""

    name: str
    product: str
    memory_gi: int
    compute: int
    partitions: tuple[PartitionProfile, ...] = ()

    @property
    def memory(self) -> str:
        return f"{self.memory_gi}Gi"

    def instances(self, profile: PartitionProfile) -> int:
        """How many partitions of ``profile`` fit on one GPU when nothing else is carved out."""
        return min(self.compute // profile.compute, self.memory_gi // profile.memory_gi)


@dataclass(frozen=True, slots=True)
class NicModel:
    """A network card product with its link speed and how many virtual functions it offers."""

    name: str
    product: str
    speed_gbps: int
    max_vfs: int


@dataclass(frozen=True, slots=True)
class Vendor:
    """One vendor and the naming conventions of its DRA driver.

    ``attribute_names`` and ``capacity_names`` map logical keys to the published name: bare for
    the driver's own domain, qualified (``resource.kubernetes.io/...``) for others. A logical fact
    the vendor has no name for is simply not published.
    """

    key: str
    display: str
    driver: str
    kind: VendorKind
    attribute_names: tuple[tuple[str, str], ...]
    capacity_names: tuple[tuple[str, str], ...]
    gpu_models: tuple[GpuModel, ...] = ()
    nic_models: tuple[NicModel, ...] = ()
    version: str | None = None
    uuid_prefix: str = ""

    def attribute_name(self, logical: str) -> str | None:
        return dict(self.attribute_names).get(logical)

    def capacity_name(self, logical: str) -> str | None:
        return dict(self.capacity_names).get(logical)

    @property
    def model_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.gpu_models) + tuple(m.name for m in self.nic_models)

    @property
    def default_model(self) -> str:
        return self.model_names[0]

    def gpu_model(self, name: str) -> GpuModel:
        for model in self.gpu_models:
            if model.name == name:
                return model
        raise KeyError(name)

    def nic_model(self, name: str) -> NicModel:
        for model in self.nic_models:
            if model.name == name:
                return model
        raise KeyError(name)


A100_PARTITIONS = (
    PartitionProfile("1g.10gb", compute=1, memory_gi=10),
    PartitionProfile("2g.20gb", compute=2, memory_gi=20),
    PartitionProfile("3g.40gb", compute=3, memory_gi=40),
    PartitionProfile("7g.80gb", compute=7, memory_gi=80),
)
A30_PARTITIONS = (
    PartitionProfile("1g.6gb", compute=1, memory_gi=6),
    PartitionProfile("2g.12gb", compute=2, memory_gi=12),
    PartitionProfile("4g.24gb", compute=4, memory_gi=24),
)

_GPU_COMMON = (
    ("pcieRoot", PCIE_ROOT),
    ("pciBusID", PCI_BUS_ID),
)

ACME = Vendor(
    key="acme",
    display="Acme",
    driver="gpu.acme.example.com",
    kind="gpu",
    attribute_names=(
        ("type", "type"),
        ("model", "model"),
        ("uuid", "uuid"),
        ("version", "driverVersion"),
        ("index", "index"),
        ("numa", "numa"),
        *_GPU_COMMON,
        ("profile", "profile"),
        ("parentUUID", "parentUUID"),
    ),
    capacity_names=(("memory", "memory"),),
    gpu_models=(
        GpuModel("acme-a100", "acme-a100", memory_gi=80, compute=7, partitions=A100_PARTITIONS),
        GpuModel("acme-a30", "acme-a30", memory_gi=24, compute=4, partitions=A30_PARTITIONS),
    ),
    version="550.54.15",
    uuid_prefix="GPU-",
)

NOVA = Vendor(
    key="nova",
    display="Nova",
    driver="gpu.nova.example.com",
    kind="gpu",
    attribute_names=(
        ("model", "productName"),
        ("uuid", "uuid"),
        ("version", "firmware"),
        ("index", "minor"),
        ("numa", NUMA_NODE),
        *_GPU_COMMON,
    ),
    capacity_names=(("memory", "vram"),),
    gpu_models=(
        GpuModel("nova-x1", "Nova X1", memory_gi=48, compute=1),
        GpuModel("nova-x2", "Nova X2", memory_gi=96, compute=1),
    ),
    version="3.2.1",
)

SWIFT = Vendor(
    key="swift",
    display="Swift",
    driver="nic.swift.example.com",
    kind="nic",
    attribute_names=(
        ("model", "model"),
        ("linkSpeed", "linkSpeedGbps"),
        ("mac", "mac"),
        ("interface", "interface"),
        ("numa", NUMA_NODE),
        ("pcieRoot", PCIE_ROOT),
        ("pciBusID", PCI_BUS_ID),
        ("sriov", "sriov"),
        ("physicalFunction", "physicalFunction"),
    ),
    capacity_names=(("bandwidth", "bandwidth"),),
    nic_models=(
        NicModel("swift-cx100", "swift-cx100", speed_gbps=100, max_vfs=255),
        NicModel("swift-cx25", "swift-cx25", speed_gbps=25, max_vfs=255),
    ),
)

VENDORS: tuple[Vendor, ...] = (ACME, NOVA, SWIFT)
"""Every emulated vendor, in the order their pools are published."""


def find_vendor(name: str) -> Vendor | None:
    """Look a vendor up by its short key (``acme``) or its driver name."""
    for vendor in VENDORS:
        if name in (vendor.key, vendor.driver):
            return vendor
    return None
