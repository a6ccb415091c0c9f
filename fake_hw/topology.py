"""Where devices sit: sockets, NUMA nodes, PCIe root complexes and bus addresses.

The layout depends on the shape only, never on the node name: two nodes of the same shape have
the same topology, as two servers of one model would.

Root complexes are numbered in order of NUMA node, then of first use in the shape (GPU groups
before NIC groups); devices without NUMA affinity come last. Root ``r`` is called
``pci<dddd>:<bb>`` with domain ``r // 14`` and bus ``0x1a + 0x10 * (r % 14)``, so the first
roots are ``pci0000:1a``, ``pci0000:2a``... Device ``k`` on a root (at most 14) gets bus
``root bus + 1 + k``, device 0, function 0; virtual functions take the next functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from drakit.fake_hw.shapes import MAX_DEVICES_PER_ROOT, Shape

_ROOTS_PER_DOMAIN = 14


@dataclass(frozen=True, slots=True)
class NumaNode:
    """One NUMA node and the socket it belongs to."""

    id: int
    socket: int


@dataclass(frozen=True, slots=True)
class PcieRoot:
    """A PCIe root complex, e.g. ``pci0000:3a``, attached to one NUMA node (or none)."""

    name: str
    numa: int | None


@dataclass(frozen=True, slots=True)
class Slot:
    """The place of one physical device: NUMA node, root complex and PCI address."""

    numa: int | None
    root: str
    bus_id: str

    def function(self, index: int) -> str:
        """The PCI address of function ``index`` of this device (0 is the device itself)."""
        domain, bus, _ = self.bus_id.split(":")
        return f"{domain}:{bus}:{index // 8:02x}.{index % 8:x}"


@dataclass(frozen=True, slots=True)
class Topology:
    """Sockets, NUMA nodes and root complexes of a node."""

    sockets: int
    numa_nodes: tuple[NumaNode, ...]
    pcie_roots: tuple[PcieRoot, ...]

    def socket_of(self, numa: int) -> int:
        for node in self.numa_nodes:
            if node.id == numa:
                return node.socket
        raise KeyError(numa)

    def local_numa_nodes(self, numa: int) -> tuple[int, ...]:
        """``numa`` first, then the other NUMA nodes of its socket in ascending order.

        This is the list form of the standard ``numaNode`` attribute; in our emulation every
        node of a socket is at the same (minimal) distance from the others.
        """
        socket = self.socket_of(numa)
        others = tuple(n.id for n in self.numa_nodes if n.socket == socket and n.id != numa)
        return (numa, *others)


def plan_topology(shape: Shape) -> tuple[Topology, tuple[Slot, ...]]:
    """Lay out ``shape``: the topology, and one slot per physical device in shape order.

    Shape order means every GPU of ``gpus`` (group by group, ``count`` times each), then every
    NIC of ``nics``. Partitions and virtual functions are not physical devices and get no slot.
    """
    numa_nodes = tuple(
        NumaNode(id=s * shape.numa_per_socket + i, socket=s)
        for s in range(shape.sockets)
        for i in range(shape.numa_per_socket)
    )
    # Each physical device names the root it uses: a declared number or a fresh one.
    wanted: list[tuple[tuple[str, int], int | None]] = []
    fresh = 0
    for _, group in shape.groups():
        for _ in range(group.count):
            if group.pcie_root is not None:
                wanted.append((("declared", group.pcie_root), group.numa))
            else:
                wanted.append((("auto", fresh), group.numa))
                fresh += 1
    first_use: dict[tuple[str, int], tuple[int, int]] = {}
    for position, (key, numa) in enumerate(wanted):
        order = numa if numa is not None else shape.numa_node_count
        first_use.setdefault(key, (order, position))
    ordered = sorted(first_use, key=lambda k: first_use[k])
    root_index = {key: r for r, key in enumerate(ordered)}
    roots = tuple(
        PcieRoot(name=_root_name(root_index[key]), numa=_numa_of(key, wanted)) for key in ordered
    )
    used: dict[tuple[str, int], int] = {}
    slots = []
    for key, numa in wanted:
        k = used.get(key, 0)
        used[key] = k + 1
        assert k < MAX_DEVICES_PER_ROOT, "shape validation bounds devices per root"
        slots.append(Slot(numa=numa, root=_root_name(root_index[key]),
                          bus_id=_device_address(root_index[key], k)))
    return Topology(shape.sockets, numa_nodes, roots), tuple(slots)


def _numa_of(key: tuple[str, int], wanted: list[tuple[tuple[str, int], int | None]]) -> int | None:
    return next(numa for k, numa in wanted if k == key)


def _root_bus(r: int) -> tuple[int, int]:
    return r // _ROOTS_PER_DOMAIN, 0x1A + 0x10 * (r % _ROOTS_PER_DOMAIN)


def _root_name(r: int) -> str:
    domain, bus = _root_bus(r)
    return f"pci{domain:04x}:{bus:02x}"


def _device_address(r: int, k: int) -> str:
    domain, bus = _root_bus(r)
    return f"{domain:04x}:{bus + 1 + k:02x}:00.0"
