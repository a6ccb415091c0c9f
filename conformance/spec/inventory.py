"""Bind a driver-suite case's inventory to the devices a driver really publishes (pure).

A case says what it needs (``inventory.devices``: named devices, optionally on the same node as
another, on another node, or publishing an attribute; ``inventory.nodes``: at least that many
nodes with devices). :func:`bind` looks at the driver's ResourceSlices (wire form, the newest
complete generation of each pool) and returns the placeholder values ``inv.<name>.node``,
``inv.<name>.pool``, ``inv.<name>.device`` (and ``inv.nodes``), or :class:`Unbound` naming what
is missing. Devices are taken in a fixed order (node, pool, device name), each at most once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .case import Inventory


@dataclass(frozen=True)
class Published:
    node: str
    pool: str
    device: str
    attributes: frozenset[str]


@dataclass(frozen=True)
class Unbound:
    """The inventory cannot be bound; ``message`` says what is missing and what there is."""

    message: str


def published_devices(slices: Iterable[Mapping[str, Any]], driver: str) -> list[Published]:
    """Devices of ``driver`` in the newest generation of each complete node-local pool."""
    pools: dict[str, list[Mapping[str, Any]]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") == driver and spec.get("nodeName"):
            pools.setdefault(spec["pool"]["name"], []).append(spec)
    out = []
    for name, specs in pools.items():
        newest = max(int(sp["pool"].get("generation", 0)) for sp in specs)
        current = [sp for sp in specs if int(sp["pool"].get("generation", 0)) == newest]
        if len(current) < int(current[0]["pool"].get("resourceSliceCount", 1)):
            continue  # incomplete: the scheduler would not use it either
        for sp in current:
            for d in sp.get("devices") or []:
                attrs = frozenset(_qualify(k, driver) for k in (d.get("attributes") or {}))
                out.append(Published(sp["nodeName"], name, d["name"], attrs))
    return sorted(out, key=lambda p: (p.node, p.pool, p.device))


def _qualify(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def describe(devices: list[Published], driver: str) -> str:
    nodes = sorted({d.node for d in devices})
    if not devices:
        return f"the driver {driver} publishes no devices in node-local ResourceSlices"
    return f"the driver {driver} publishes {len(devices)} devices on {len(nodes)} node(s) ({', '.join(nodes[:4])})"


def bind(inventory: Inventory, devices: list[Published], driver: str,
         attributes: Mapping[str, str] | None = None) -> dict[str, str] | Unbound:
    """Placeholder values for the case, or what is missing. ``attributes`` maps a logical
    attribute key to its qualified name (the vendor profile's names for the driver's role)."""
    attributes = attributes or {}
    if not devices:
        return Unbound(f"{describe(devices, driver)}; the case needs {len(inventory.devices)} device(s)")
    nodes = sorted({d.node for d in devices})
    if len(nodes) < inventory.nodes:
        return Unbound(f"the case needs devices on {inventory.nodes} nodes; {describe(devices, driver)}")
    bound: dict[str, Published] = {}
    for need in inventory.devices:
        want_attr = attributes.get(need.attribute, need.attribute) if need.attribute else None
        for d in devices:
            if d in bound.values():
                continue
            if need.same_node_as and d.node != bound[need.same_node_as].node:
                continue
            if need.other_node_than and d.node == bound[need.other_node_than].node:
                continue
            if want_attr and want_attr not in d.attributes:
                continue
            bound[need.name] = d
            break
        else:
            where = (f" on the node of {need.same_node_as}" if need.same_node_as else
                     f" on another node than {need.other_node_than}" if need.other_node_than else "")
            attr = f" publishing {want_attr}" if want_attr else ""
            got = ", ".join(bound) or "none"
            return Unbound(f"the case needs device {need.name!r}{where}{attr} "
                           f"({len(inventory.devices)} devices in all; bound so far: {got}); {describe(devices, driver)}")
    out = {"inv.nodes": str(len(nodes))}
    for name, d in bound.items():
        out.update({f"inv.{name}.node": d.node, f"inv.{name}.pool": d.pool, f"inv.{name}.device": d.device})
    return out
