"""The devices of one emulated node, as each vendor's driver sees them.

``build_inventory(shape, node_name)`` expands a shape into devices with their published
attributes and capacities, grouped into one pool per driver. Everything is derived from the
shape and the node name, so the same pair always yields the same inventory.

Device names are unique on the node across drivers, which lets faults and tests name a device
without saying which driver owns it:

- GPUs are ``gpu0``, ``gpu1``... in shape order across vendors; the vendor's own index attribute
  (``index`` for Acme, ``minor`` for Nova) counts that vendor's GPUs from 0.
- Partitions of a partitionable GPU are ``<gpu>-<profile without dots>-<n>``, e.g.
  ``gpu0-1g10gb-6``. The GPU itself stays allocatable as a whole; the GPU and its partitions all
  consume from one counter set named ``<gpu>-counters`` (counters ``compute`` and ``memory``).
- NICs are ``nic0``, ``nic1``...; virtual functions ``nic0-vf0``... are devices of their own that
  name their physical function in the ``physicalFunction`` attribute. They do not consume
  counters: the fake NIC does not stop a PF and its VFs from being allocated at the same time,
  so NIC shapes never depend on the partitionable-devices feature.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Sequence

from drakit.fake_hw.attributes import Attr
from drakit.fake_hw.identity import device_mac, device_uuid
from drakit.fake_hw.shapes import Shape, load_shape
from drakit.fake_hw.topology import Slot, Topology, plan_topology
from drakit.fake_hw.vendors import NUMA_NODE, VENDORS, GpuModel, NicModel, Vendor, find_vendor

DeviceKind = Literal["gpu", "gpu-partition", "nic", "nic-vf"]
LABEL_PREFIX = "drakit.dev"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


@dataclass(frozen=True, slots=True)
class CounterSet:
    """A named set of counters shared by the devices that consume from it."""

    name: str
    counters: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class CounterUse:
    """How much of a counter set one device takes while it is allocated."""

    counter_set: str
    counters: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Device:
    """One device as its driver publishes it, plus the hardware facts behind it.

    ``attributes`` and ``capacity`` keep publication order and use the published names (bare for
    the driver's own domain). ``parent`` names the physical device of a partition or a VF.
    """

    name: str
    driver: str
    vendor: str
    kind: DeviceKind
    model: str
    numa: int | None
    pcie_root: str
    pci_bus_id: str
    attributes: tuple[tuple[str, Attr], ...]
    capacity: tuple[tuple[str, str], ...]
    consumes: tuple[CounterUse, ...] = ()
    parent: str | None = None
    profile: str | None = None
    uuid: str | None = None
    mac: str | None = None
    interface: str | None = None

    def attribute(self, name: str) -> Attr | None:
        """The value published under ``name`` (as published: bare or qualified), if any."""
        return dict(self.attributes).get(name)

    @property
    def has_list_attributes(self) -> bool:
        return any(value.is_list for _, value in self.attributes)


@dataclass(frozen=True, slots=True)
class DriverPool:
    """Everything one driver publishes for the node: its devices and shared counter sets."""

    driver: str
    vendor: str
    devices: tuple[Device, ...]
    counter_sets: tuple[CounterSet, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeInventory:
    """The emulated hardware of one node, grouped by driver, with its topology and labels."""

    node_name: str
    shape: Shape
    topology: Topology
    pools: tuple[DriverPool, ...]
    labels: tuple[tuple[str, str], ...]

    @property
    def drivers(self) -> tuple[str, ...]:
        return tuple(pool.driver for pool in self.pools)

    def pool(self, driver: str) -> DriverPool:
        for pool in self.pools:
            if pool.driver == driver:
                return pool
        raise KeyError(f"no pool for driver {driver!r} on node {self.node_name}")

    def devices(self, driver: str | None = None) -> tuple[Device, ...]:
        """The devices of one driver, or of all drivers in pool order."""
        if driver is not None:
            return self.pool(driver).devices
        return tuple(d for pool in self.pools for d in pool.devices)

    def device(self, name: str) -> Device:
        for device in self.devices():
            if device.name == name:
                return device
        raise KeyError(f"no device {name!r} on node {self.node_name}")

    def children(self, name: str) -> tuple[Device, ...]:
        """The partitions or virtual functions carved from physical device ``name``."""
        return tuple(d for d in self.devices() if d.parent == name)

    def node_labels(self) -> dict[str, str]:
        return dict(self.labels)


def build_inventory(shape: Shape | str, node_name: str) -> NodeInventory:
    """Expand ``shape`` (a ``Shape`` or a bundled shape name; a shape file is read at the edge,
    ``drakit.conformance.hwshapes.read_shape``) for ``node_name``."""
    if not isinstance(shape, Shape):
        shape = load_shape(shape)
    if len(node_name) > 253 or not _DNS_SUBDOMAIN.match(node_name):
        raise ValueError(f"invalid node name {node_name!r}: must be a DNS subdomain "
                         "(lower-case letters, digits, '-' and '.', at most 253 characters)")
    topology, slots = plan_topology(shape)
    builder = _Builder(shape, node_name, topology)
    slot_iter = iter(slots)
    for group in shape.gpus:
        vendor = _vendor(group.vendor)
        for _ in range(group.count):
            builder.add_gpu(vendor, vendor.gpu_model(group.model), next(slot_iter))
    for group in shape.nics:
        vendor = _vendor(group.vendor)
        for _ in range(group.count):
            builder.add_nic(vendor, vendor.nic_model(group.model), next(slot_iter), group.vfs)
    pools = builder.pools()
    return NodeInventory(node_name, shape, topology, pools, _labels(shape, topology, pools))


def _vendor(key: str) -> Vendor:
    vendor = find_vendor(key)
    assert vendor is not None, "shape validation admits known vendors only"
    return vendor


class _Builder:
    """Accumulates devices per vendor while walking the shape; used once per inventory."""

    def __init__(self, shape: Shape, node: str, topology: Topology) -> None:
        self.shape = shape
        self.node = node
        self.topology = topology
        self.devices: dict[str, list[Device]] = {v.key: [] for v in VENDORS}
        self.counter_sets: dict[str, list[CounterSet]] = {v.key: [] for v in VENDORS}
        self.gpus = 0
        self.nics = 0

    def pools(self) -> tuple[DriverPool, ...]:
        return tuple(
            DriverPool(v.driver, v.key, tuple(self.devices[v.key]),
                       tuple(self.counter_sets[v.key]))
            for v in VENDORS if self.devices[v.key]
        )

    def publish(self, vendor: Vendor, numa: int | None,
                facts: Sequence[tuple[str, Attr | None]]
                ) -> tuple[tuple[str, Attr], ...]:
        """Name the logical facts the vendor's way, in the vendor's order; drop the rest."""
        known = dict(facts)
        known["numa"] = _int(numa)
        out = []
        for logical, name in vendor.attribute_names:
            value = known.get(logical)
            if value is None:
                continue
            if name == NUMA_NODE and numa is not None and self.shape.numa_node_form == "list":
                value = Attr("ints", self.topology.local_numa_nodes(numa))
            out.append((name, value))
        return tuple(out)

    def add_gpu(self, vendor: Vendor, model: GpuModel, slot: Slot) -> None:
        name = f"gpu{self.gpus}"
        self.gpus += 1
        index = len([d for d in self.devices[vendor.key] if d.kind == "gpu"])
        partitioned = self.shape.partitioning == "partitionable" and bool(model.partitions)
        uuid = vendor.uuid_prefix + device_uuid(self.node, name)
        counter_set = f"{name}-counters"
        whole_use: tuple[CounterUse, ...] = ()
        if partitioned:
            self.counter_sets[vendor.key].append(CounterSet(
                counter_set, (("compute", str(model.compute)), ("memory", model.memory))))
            whole_use = (CounterUse(counter_set,
                                    (("compute", str(model.compute)), ("memory", model.memory))),)
        common = (
            ("model", _str(model.product)),
            ("version", _version(vendor.version)),
            ("index", _int(index)),
            ("pcieRoot", _str(slot.root)),
            ("pciBusID", _str(slot.bus_id)),
        )
        memory = vendor.capacity_name("memory")
        assert memory is not None
        self.devices[vendor.key].append(Device(
            name=name, driver=vendor.driver, vendor=vendor.key, kind="gpu", model=model.name,
            numa=slot.numa, pcie_root=slot.root, pci_bus_id=slot.bus_id,
            attributes=self.publish(vendor, slot.numa,
                                    (("type", _str("gpu")), ("uuid", _str(uuid)), *common)),
            capacity=((memory, model.memory),), consumes=whole_use, uuid=uuid,
        ))
        if not partitioned:
            return
        for profile in model.partitions:
            for n in range(model.instances(profile)):
                part = f"{name}-{profile.slug}-{n}"
                part_uuid = vendor.uuid_prefix + device_uuid(self.node, part)
                self.devices[vendor.key].append(Device(
                    name=part, driver=vendor.driver, vendor=vendor.key, kind="gpu-partition",
                    model=model.name, numa=slot.numa, pcie_root=slot.root,
                    pci_bus_id=slot.bus_id,
                    attributes=self.publish(vendor, slot.numa, (
                        ("type", _str("partition")), ("uuid", _str(part_uuid)), *common,
                        ("profile", _str(profile.name)), ("parentUUID", _str(uuid)),
                    )),
                    capacity=((memory, profile.memory),),
                    consumes=(CounterUse(counter_set, (("compute", str(profile.compute)),
                                                       ("memory", profile.memory))),),
                    parent=name, profile=profile.name, uuid=part_uuid,
                ))

    def add_nic(self, vendor: Vendor, model: NicModel, slot: Slot, vfs: int) -> None:
        name = f"nic{self.nics}"
        interface = f"eth{self.nics + 1}"
        self.nics += 1
        bandwidth = vendor.capacity_name("bandwidth")
        assert bandwidth is not None

        def nic(dev: str, iface: str, bus_id: str, parent: str | None, capacity: str) -> Device:
            mac = device_mac(self.node, dev)
            facts = (
                ("model", _str(model.product)),
                ("linkSpeed", _int(model.speed_gbps)),
                ("mac", _str(mac)),
                ("interface", _str(iface)),
                ("pcieRoot", _str(slot.root)),
                ("pciBusID", _str(bus_id)),
                ("sriov", Attr("bool", parent is None and vfs > 0)),
                ("physicalFunction", _str(parent) if parent else None),
            )
            return Device(
                name=dev, driver=vendor.driver, vendor=vendor.key,
                kind="nic" if parent is None else "nic-vf", model=model.name, numa=slot.numa,
                pcie_root=slot.root, pci_bus_id=bus_id,
                attributes=self.publish(vendor, slot.numa, facts),
                capacity=((bandwidth, capacity),), parent=parent, mac=mac, interface=iface,
            )

        self.devices[vendor.key].append(nic(name, interface, slot.bus_id, None,
                                            f"{model.speed_gbps}G"))
        for j in range(vfs):
            self.devices[vendor.key].append(nic(
                f"{name}-vf{j}", f"{interface}v{j}", slot.function(j + 1), name,
                _share(model.speed_gbps, vfs)))


def _share(speed_gbps: int, parts: int) -> str:
    """An even share of the link as a quantity: whole gigabits when exact, else megabits."""
    if speed_gbps % parts == 0:
        return f"{speed_gbps // parts}G"
    return f"{speed_gbps * 1000 // parts}M"


def _labels(shape: Shape, topology: Topology,
            pools: tuple[DriverPool, ...]) -> tuple[tuple[str, str], ...]:
    physical = [d for pool in pools for d in pool.devices if d.parent is None]
    labels = [
        (f"{LABEL_PREFIX}/shape", shape.name),
        (f"{LABEL_PREFIX}/sockets", str(topology.sockets)),
        (f"{LABEL_PREFIX}/numa-nodes", str(len(topology.numa_nodes))),
        (f"{LABEL_PREFIX}/pcie-roots", str(len(topology.pcie_roots))),
        (f"{LABEL_PREFIX}/gpus", str(sum(d.kind == "gpu" for d in physical))),
        (f"{LABEL_PREFIX}/nics", str(sum(d.kind == "nic" for d in physical))),
        (f"{LABEL_PREFIX}/partitioning", shape.partitioning),
    ]
    labels += [(f"{LABEL_PREFIX}/driver.{pool.driver}", "true") for pool in pools]
    return tuple(labels)


def _int(value: int | None) -> Attr | None:
    return None if value is None else Attr("int", value)


def _str(value: str) -> Attr:
    return Attr("string", value)


def _version(value: str | None) -> Attr | None:
    return None if value is None else Attr("version", value)
