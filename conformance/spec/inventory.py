"""Bind a driver-suite case's inventory to the devices a driver really publishes (pure).

A case says what it needs (``inventory.devices``: named devices, optionally on the same node as
another, on another node, or publishing an attribute; ``inventory.nodes``: at least that many
nodes with devices). :func:`bind` looks at the driver's ResourceSlices (wire form, the newest
complete generation of each pool) and returns the placeholder values ``inv.<name>.node``,
``inv.<name>.pool``, ``inv.<name>.device`` (and ``inv.nodes``), or :class:`Unbound` naming what
is missing. Devices are taken in a fixed order (node, pool, device name), each at most once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Mapping

from drakit.conformance.quantity import Quantity

from .case import Inventory


HAS = ("consumesCounters", "allowMultipleAllocations", "taints", "bindingConditions")


@dataclass(frozen=True)
class Published:
    node: str
    pool: str
    device: str
    attributes: frozenset[str]
    has: frozenset[str] = frozenset()  # which of HAS the device publishes
    values: tuple[tuple[str, str, str], ...] = ()  # (qualified attribute, type, value as CEL literal)
    consumes: tuple[tuple[str, str, Fraction], ...] = ()  # (counter set, counter, amount)
    counters: tuple[tuple[str, str, Fraction], ...] = ()  # the pool's shared counters (set, counter, amount)


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
        counters = tuple((cs.get("name", ""), c, _amount(v)) for sp in current for cs in sp.get("sharedCounters") or []
                         for c, v in (cs.get("counters") or {}).items())
        for sp in current:
            for d in sp.get("devices") or []:
                raw = {_qualify(k, driver): v for k, v in (d.get("attributes") or {}).items()}
                has = frozenset(h for h in HAS if d.get(h))
                values = tuple((k, t, _literal(t, v)) for k, a in sorted(raw.items()) if isinstance(a, Mapping)
                               for t, v in a.items() if t in ("string", "int", "bool", "version"))
                consumes = tuple((cc.get("counterSet", ""), c, _amount(v)) for cc in d.get("consumesCounters") or []
                                 for c, v in (cc.get("counters") or {}).items())
                out.append(Published(sp["nodeName"], name, d["name"], frozenset(raw), has, values, consumes,
                                     counters if consumes else ()))
    return sorted(out, key=lambda p: (p.node, p.pool, p.device))


def _amount(counter: Any) -> Fraction:
    try:
        return Quantity.parse(str((counter or {}).get("value", "0"))).value
    except (ValueError, AttributeError):
        return Fraction(0)


def _literal(kind: str, value: Any) -> str:
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        return str(int(value))
    return json.dumps(str(value))


def selector(device: Published, devices: list[Published]) -> str | None:
    """A CEL expression true for ``device`` alone among ``devices`` (one of its attribute values
    no other device of the driver has), or None. Prefers strings (names, UUIDs)."""
    others = [d for d in devices if d != device]
    for qualified, kind, literal in sorted(device.values, key=lambda v: v[1] != "string"):
        if kind == "version" or any((qualified, kind, literal) in d.values for d in others):
            continue
        domain, _, ident = qualified.partition("/")
        return f"device.attributes[{json.dumps(domain)}].{ident} == {literal}"
    return None


def exceed_together(a: Published, b: Published) -> bool:
    """The two devices of one pool share a counter set and together consume more of one of its
    counters than the pool has: they cannot be allocated at once."""
    if a.pool != b.pool:
        return False
    have = {(cs, c): v for cs, c, v in a.counters}
    used: dict[tuple[str, str], Fraction] = {}
    for cs, c, v in a.consumes + b.consumes:
        used[(cs, c)] = used.get((cs, c), Fraction(0)) + v
    shared = {(cs, c) for cs, c, _ in a.consumes} & {(cs, c) for cs, c, _ in b.consumes}
    return any(key in have and used[key] > have[key] for key in shared)


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
            if need.has and need.has not in d.has:
                continue
            if need.selectable and selector(d, devices) is None:
                continue
            if need.shares_counters_with and not exceed_together(bound[need.shares_counters_with], d):
                continue
            if need.plain_node and any(o.consumes for o in devices if o.node == d.node):
                continue
            bound[need.name] = d
            break
        else:
            return Unbound(f"the case needs device {need.name!r}{_wanted(need, want_attr)} "
                           f"({len(inventory.devices)} devices in all; bound so far: {', '.join(bound) or 'none'}); "
                           f"{describe(devices, driver)}")
    out = {"inv.nodes": str(len(nodes))}
    for name, d in bound.items():
        out.update({f"inv.{name}.node": d.node, f"inv.{name}.pool": d.pool, f"inv.{name}.device": d.device})
        cel = selector(d, devices)
        if cel is not None:
            out[f"inv.{name}.cel"] = cel
    return out


def _wanted(need: Any, want_attr: str | None) -> str:
    """What the need asks of its device, in words, for the inventory skip."""
    parts = [f"on the node of {need.same_node_as}" if need.same_node_as else "",
             f"on another node than {need.other_node_than}" if need.other_node_than else "",
             f"publishing {want_attr}" if want_attr else "",
             f"publishing {need.has}" if need.has else "",
             "with an attribute value no other device has (so that a claim can ask for it alone)" if need.selectable else "",
             f"sharing counters with {need.shares_counters_with} beyond what the pool has" if need.shares_counters_with else "",
             "on a node whose devices consume no shared counters" if need.plain_node else ""]
    return "".join(f" {p}" for p in parts if p)
