"""Bind a driver-suite case's inventory to the devices a driver really publishes (pure).

A case says what it needs (``inventory.devices``: named devices, optionally on the same node as
another, on another node, or publishing an attribute; ``inventory.nodes``: at least that many
nodes with devices). :func:`bind` looks at the driver's ResourceSlices (wire form, the newest
complete generation of each pool) and returns the placeholder values ``inv.<name>.node``,
``inv.<name>.pool``, ``inv.<name>.device``, ``inv.<name>.cel`` (a selector for it alone, when
one exists), ``inv.<name>.capacity`` (JSON: capacity requests two allocations of it fit with) and
``inv.nodes``, or :class:`Unbound` naming what is missing. Devices are tried in a fixed order
(node, pool, device name), each at most once, and the search backtracks: when any assignment of
devices meets every need, one is found.

A device is selectable when some combination of its attribute values (string, int, bool) is
held by no other device of the driver on its node: partitions that share ``uuid`` and ``index``
with their parent and repeat a partition number across parents are told apart by a pair, and
nodes with the same hardware are told apart by the node, as each pod of a case using
``inv.<name>.cel`` runs on ``inv.<name>.node`` (a test holds the cases to it). The selector
guards each attribute with ``in`` so that it never fails on a device lacking it (a CEL runtime
error fails the whole allocation).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Mapping

from drakit.conformance.quantity import Quantity

from .case import Inventory
from .sharing import counters_fit, two_shares


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
    share: str | None = "{}"  # JSON capacity requests two allocations fit with (two_shares), None: none fits

    @property
    def multi(self) -> bool:
        return "allowMultipleAllocations" in self.has

    def fits_twice(self) -> bool:
        """Two allocations of it fit at once: two shares, or an admin-access allocation on top of
        a dedicated one (which reserves the counters again)."""
        if self.share is None:
            return False
        once = self.multi and self.share != "{}"  # shares of a device with capacities pay counters once
        return counters_fit(self.consumes, self.counters, 1 if once else 2)


@dataclass(frozen=True)
class Unbound:
    """The inventory cannot be bound; ``message`` says what is missing and what there is."""

    message: str


def published_devices(slices: Iterable[Mapping[str, Any]], driver: str) -> list[Published]:
    """Devices of ``driver`` in the newest generation of each complete node-local pool."""
    out = []
    for name, current in current_pools(slices, driver).items():
        counters = tuple((cs.get("name", ""), c, amount(v)) for sp in current for cs in sp.get("sharedCounters") or []
                         for c, v in (cs.get("counters") or {}).items())
        for sp in current:
            for d in sp.get("devices") or []:
                raw = {_qualify(k, driver): v for k, v in (d.get("attributes") or {}).items()}
                has = frozenset(h for h in HAS if d.get(h))
                values = tuple((k, t, _literal(t, v)) for k, a in sorted(raw.items()) if isinstance(a, Mapping)
                               for t, v in a.items() if t in ("string", "int", "bool", "version"))
                consumes = tuple((cc.get("counterSet", ""), c, amount(v)) for cc in d.get("consumesCounters") or []
                                 for c, v in (cc.get("counters") or {}).items())
                share: str | None = "{}"
                if d.get("allowMultipleAllocations"):
                    shares = two_shares(d.get("capacity") or {})
                    share = None if shares is None else json.dumps(shares, sort_keys=True)
                out.append(Published(sp["nodeName"], name, d["name"], frozenset(raw), has, values, consumes,
                                     counters if consumes else (), share))
    return sorted(out, key=lambda p: (p.node, p.pool, p.device))


def current_pools(slices: Iterable[Mapping[str, Any]], driver: str) -> dict[str, list[Mapping[str, Any]]]:
    """The slice specs of the newest generation of each complete node-local pool of ``driver``,
    by pool name (an incomplete pool is left out: the scheduler would not use it either)."""
    pools: dict[str, list[Mapping[str, Any]]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") == driver and spec.get("nodeName"):
            pools.setdefault(spec["pool"]["name"], []).append(spec)
    out = {}
    for name, specs in pools.items():
        newest = max(int(sp["pool"].get("generation", 0)) for sp in specs)
        current = [sp for sp in specs if int(sp["pool"].get("generation", 0)) == newest]
        if len(current) >= int(current[0]["pool"].get("resourceSliceCount", 1)):
            out[name] = current
    return out


def amount(counter: Any) -> Fraction:
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
    """A CEL expression true for ``device`` alone among the ``devices`` of its node (node-local
    slices: a pod on that node can be allocated no other): one of its attribute values no other
    device there has, else a pair, else its values less those not needed to single it out
    (strings kept longest), or None when not even all of them together do."""
    others = [d for d in devices if d.node == device.node
              and (d.node, d.pool, d.device) != (device.node, device.pool, device.device)]
    usable = sorted((v for v in device.values if v[1] != "version"), key=lambda v: (v[1] != "string", v[0]))

    def unique(chosen: list[tuple[str, str, str]]) -> bool:
        return not any(all(v in o.values for v in chosen) for o in others)

    if not usable or not unique(usable):
        return None
    for v in usable:
        if unique([v]):
            return _cel([v])
    pairs = [[a, b] for i, a in enumerate(usable) for b in usable[i + 1:]]
    chosen = next((p for p in pairs if unique(p)), None)
    if chosen is None:  # drop what is not needed, keeping strings longest
        chosen = list(usable)
        for v in reversed(usable):
            trial = [x for x in chosen if x != v]
            if trial and unique(trial):
                chosen = trial
    return _cel(chosen)


_CEL_RESERVED = frozenset({"as", "break", "const", "continue", "else", "false", "for", "function", "if", "import",
                           "in", "let", "loop", "package", "namespace", "null", "return", "true", "var", "void",
                           "while"})


def _cel(chosen: list[tuple[str, str, str]]) -> str:
    parts = []
    for qualified, _kind, literal in chosen:
        domain, _, ident = qualified.partition("/")
        attrs = f"device.attributes[{json.dumps(domain)}]"
        value = f"{attrs}[{json.dumps(ident)}]" if ident in _CEL_RESERVED else f"{attrs}.{ident}"
        parts.append(f"{json.dumps(ident)} in {attrs} && {value} == {literal}")
    return " && ".join(parts)


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


def take_selector(device: Published, devices: list[Published]) -> str | None:
    """A selector with which a claim for all matching devices of the device's node (allocationMode
    All) is allocated this device: one for it alone, else ``true`` when every device of its node
    is dedicated, untainted and consumes no counters (then the claim takes them all). Binding
    conditions do not stand in the way: the allocation is made, and the pod waits for the
    conditions (so does the case)."""
    if device.has & _NOT_TAKEN:
        return None
    alone = selector(device, devices)
    if alone is not None and counters_fit(device.consumes, device.counters, 1):
        return alone
    if all(not (o.has & _NOT_TAKEN) and not o.consumes for o in devices if o.node == device.node):
        return "true"
    return None


_NOT_TAKEN = frozenset({"allowMultipleAllocations", "taints"})  # what keeps a claim for all devices from one


def _criteria(need: Any, d: Published, devices: list[Published], want_attr: str | None,
              memo: dict[tuple[str, str, str], tuple[str | None, str | None]]) -> list[tuple[str, bool]]:
    """What the need asks of one device on its own, in words, and whether the device has it."""
    key = (d.node, d.pool, d.device)
    if key not in memo and (need.selectable or need.takeable):
        memo[key] = (selector(d, devices), take_selector(d, devices))
    sel, take = memo.get(key, (None, None))
    checks = [(want_attr is not None, f"publishing {want_attr}", want_attr in d.attributes if want_attr else True),
              (bool(need.has), f"publishing {need.has}", need.has in d.has if need.has else True),
              (need.dedicated, "not allowing multiple allocations", not d.multi),
              (need.selectable, "singled out by its attribute values (one, or a combination no other device of its node has)",
               sel is not None),
              (need.takeable, "allocatable by a claim for all matching devices of its node (singled out by its "
                              "attribute values, or on a node of dedicated devices without taints or counters)",
               take is not None),
              (need.twice, "with room for two allocations at once (capacity requests its policy allows that fit "
                           "twice, and its counters twice where they are reserved again)", d.fits_twice()),
              (need.plain_node, "on a node whose devices consume no shared counters",
               not any(o.consumes for o in devices if o.node == d.node))]
    return [(words, ok) for wanted, words, ok in checks if wanted]


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
    memo: dict[tuple[str, str, str], tuple[str | None, str | None]] = {}
    wants = [attributes.get(n.attribute, n.attribute) if n.attribute else None for n in inventory.devices]
    candidates = []
    for need, want_attr in zip(inventory.devices, wants):
        found = [d for d in devices if all(ok for _, ok in _criteria(need, d, devices, want_attr, memo))]
        if not found:
            return Unbound(f"the case needs device {need.name!r}{_missing(need, devices, want_attr, memo)}; "
                           f"{describe(devices, driver)}")
        candidates.append(found)
    bound = _search(inventory.devices, candidates, {})
    if bound is None:
        relations = "; ".join(f"{n.name!r}{_wanted(n, None)}" for n in inventory.devices
                              if n.same_node_as or n.other_node_than or n.shares_counters_with)
        wanted = f"meets {relations}" if relations else f"gives {len(inventory.devices)} distinct devices"
        return Unbound(f"each device the case needs is published, but no choice of them {wanted} "
                       f"({', '.join(f'{n.name}: {len(c)} candidate(s)' for n, c in zip(inventory.devices, candidates))}); "
                       f"{describe(devices, driver)}")
    out = {"inv.nodes": str(len(nodes))}
    for need in inventory.devices:
        d = bound[need.name]
        out.update({f"inv.{need.name}.node": d.node, f"inv.{need.name}.pool": d.pool,
                    f"inv.{need.name}.device": d.device, f"inv.{need.name}.capacity": d.share or "{}"})
        cel = take_selector(d, devices) if need.takeable else selector(d, devices)
        if cel is not None:
            out[f"inv.{need.name}.cel"] = cel
    return out


def _search(needs: tuple[Any, ...], candidates: list[list[Published]],
            bound: dict[str, Published]) -> dict[str, Published] | None:
    """The first assignment (in device order) meeting the needs' relations, backtracking."""
    i = len(bound)
    if i == len(needs):
        return bound
    need = needs[i]
    for d in candidates[i]:
        if d in bound.values():
            continue
        if need.same_node_as and d.node != bound[need.same_node_as].node:
            continue
        if need.other_node_than and d.node == bound[need.other_node_than].node:
            continue
        if need.shares_counters_with and not exceed_together(bound[need.shares_counters_with], d):
            continue
        found = _search(needs, candidates, {**bound, need.name: d})
        if found is not None:
            return found
    return None


def _missing(need: Any, devices: list[Published], want_attr: str | None,
             memo: dict[tuple[str, str, str], tuple[str | None, str | None]]) -> str:
    """Each thing the need asks of a device on its own, with how many devices have it."""
    rows = [_criteria(need, d, devices, want_attr, memo) for d in devices]
    parts = [f"{words} ({sum(r[i][1] for r in rows)} of {len(devices)})" for i, (words, _) in enumerate(rows[0])]
    return (": " + ", ".join(parts) + ", none has all of it") if parts else ""


def _wanted(need: Any, want_attr: str | None) -> str:
    """What the need asks of its device relative to the others, in words."""
    parts = [f"on the node of {need.same_node_as}" if need.same_node_as else "",
             f"on another node than {need.other_node_than}" if need.other_node_than else "",
             f"sharing counters with {need.shares_counters_with} beyond what the pool has" if need.shares_counters_with else ""]
    return "".join(f" {p}" for p in parts if p)
