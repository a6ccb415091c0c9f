"""Fault injection: a device going bad, and the device taints that announce it.

A ``Fault`` names a device of the node, what went wrong and which taint effect the driver
should publish. The slice publisher turns faults into taints with key ``drakit.dev/fault`` and
the fault kind as value. A fault on a physical device also taints its partitions or virtual
functions, since they share the broken hardware; a fault on a partition or VF stays local.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, cast, get_args

from drakit.fake_hw.inventory import NodeInventory

FaultKind = Literal["degraded", "link-down", "ecc", "thermal", "lost"]
TaintEffect = Literal["None", "NoSchedule", "NoExecute"]
FAULT_TAINT_KEY = "drakit.dev/fault"
MAX_TAINTS_PER_DEVICE = 16
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
TAINT_EFFECTS: tuple[str, ...] = get_args(TaintEffect)


@dataclass(frozen=True, slots=True)
class Fault:
    """Device ``device`` has a fault of ``kind``; the driver taints it with ``effect``."""

    device: str
    kind: FaultKind
    effect: TaintEffect = "NoSchedule"

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r} (known: {', '.join(FAULT_KINDS)})")
        if self.effect not in TAINT_EFFECTS:
            raise ValueError(f"unknown taint effect {self.effect!r} "
                             f"(known: {', '.join(TAINT_EFFECTS)})")

    @classmethod
    def parse(cls, text: str) -> Fault:
        """Read ``device=kind`` or ``device=kind:Effect``, e.g. ``gpu1=ecc:NoExecute``."""
        device, sep, rest = text.partition("=")
        kind, _, effect = rest.partition(":")
        if not sep or not device or not kind:
            raise ValueError(f"bad fault {text!r}: expected device=kind[:effect]")
        return cls(device, cast(FaultKind, kind), cast(TaintEffect, effect or "NoSchedule"))

    def taint(self) -> Taint:
        return Taint(FAULT_TAINT_KEY, self.kind, self.effect)


@dataclass(frozen=True, slots=True)
class Taint:
    """A device taint in the form a ResourceSlice carries it (``timeAdded`` left to the server)."""

    key: str
    value: str
    effect: TaintEffect

    def to_wire(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


def device_taints(inventory: NodeInventory,
                  faults: Iterable[Fault]) -> dict[str, tuple[Taint, ...]]:
    """Taints per device name for ``faults`` on ``inventory``, in fault order, duplicates dropped.

    Raises ``ValueError`` for a fault on a device the node does not have, or when a device
    would carry more taints than a ResourceSlice allows.
    """
    taints: dict[str, list[Taint]] = {}
    for fault in faults:
        try:
            inventory.device(fault.device)
        except KeyError:
            raise ValueError(f"fault on unknown device {fault.device!r} of node "
                             f"{inventory.node_name}") from None
        for name in (fault.device, *(c.name for c in inventory.children(fault.device))):
            listed = taints.setdefault(name, [])
            if fault.taint() not in listed:
                listed.append(fault.taint())
            if len(listed) > MAX_TAINTS_PER_DEVICE:
                raise ValueError(f"device {name!r} would carry more than "
                                 f"{MAX_TAINTS_PER_DEVICE} taints")
    return {name: tuple(listed) for name, listed in taints.items()}
