"""What a driver's published ResourceSlices and the cluster's DeviceClasses say about it. Pure.

:func:`infer` takes wire-form objects (dicts as the API server serves them) and returns a
:class:`Draft`: every fact the objects show, each with the reason it was concluded, and the
questions they cannot answer. Attribute and capacity names are mapped to drakit's logical keys
(the ones cases use, ``fake_driver/profile.yaml``) where a published name is a known spelling of
one; any other name gets a key made from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

NUMA = "resource.kubernetes.io/numaNode"
# logical key -> the published names (bare: in the driver's own domain) that mean it, first best
ATTRIBUTE_KEYS: dict[str, tuple[str, ...]] = {
    "type": ("type", "deviceType"),
    "model": ("model", "productName", "product", "modelName"),
    "uuid": ("uuid", "UUID", "serial", "serialNumber"),
    "version": ("driverVersion", "version", "firmware", "firmwareVersion"),
    "index": ("index", "minor", "id"),
    "numa": (NUMA, "numa", "numaNode"),
    "pcieRoot": ("resource.kubernetes.io/pcieRoot", "pcieRoot"),
    "pciBusID": ("resource.kubernetes.io/pciBusID", "pciBusID", "pciAddress"),
    "profile": ("profile", "partitionProfile"),
    "parentUUID": ("parentUUID", "parentUuid"),
    "linkSpeed": ("linkSpeedGbps", "linkSpeed", "speed"),
    "mac": ("mac", "macAddress"),
    "interface": ("interface", "ifName", "interfaceName"),
    "sriov": ("sriov", "sriovCapable"),
    "physicalFunction": ("physicalFunction", "pf"),
}
CAPACITY_KEYS: dict[str, tuple[str, ...]] = {
    "memory": ("memory", "vram", "memorySize"),
    "bandwidth": ("bandwidth",),
    "cpus": ("cpu", "cpus"),
}
_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z_][A-Za-z0-9_]{0,31}$")
_TYPES = {"int": "int", "bool": "bool", "string": "string", "version": "version"}
# a role name for the driver, from a word of its name (cases of the feature suites use gpu, nic)
_ROLES = (("gpu", "gpu"), ("nic", "nic"), ("net", "nic"), ("cpu", "cpu"), ("memory", "memory"))


class InferError(ValueError):
    """The objects say nothing about the driver: one line, what and where."""


@dataclass(frozen=True, slots=True)
class Attribute:
    key: str  # logical key
    name: str  # as published: bare (driver's domain) or qualified
    type: str | None  # int, bool, string, version; None: mixed or a type profiles cannot declare
    devices: int  # how many devices publish it
    matched: bool  # a known spelling of drakit's logical key
    note: str = ""


@dataclass(frozen=True, slots=True)
class Capacity:
    key: str
    name: str
    devices: int
    matched: bool
    policy: str = ""  # its requestPolicy, in words ("" when none)


@dataclass(frozen=True, slots=True)
class Behaviour:
    name: str  # an optional behaviour of driverUnderTest.optional
    why: str


@dataclass
class Draft:
    driver: str
    role: str
    slices: int
    devices: int
    nodes: tuple[str, ...]
    pools: str
    pools_why: str
    classes: tuple[tuple[str, str], ...]  # (name, selector) of the DeviceClasses selecting it
    class_proposed: bool
    attributes: tuple[Attribute, ...]
    capacities: tuple[Capacity, ...]
    numa_node: bool
    numa_why: str
    values: tuple[tuple[str, str], ...]
    optional: list[Behaviour] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def class_name(self) -> str:
        return self.classes[0][0]


def role_for(driver: str) -> str:
    """A role key for the driver: gpu, nic, cpu... from a word of its name, else ``dev``."""
    words = re.split(r"[^a-z0-9]+", driver.lower())
    for word in words:
        for part, role in _ROLES:
            if word == part or word.startswith(part):
                return role
    return "dev"


def _key_of(name: str) -> str:
    """A logical key made from a published identifier: ``driver-version`` -> ``driverVersion``."""
    ident = name.rpartition("/")[2]
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", ident) if p]
    key = "".join([parts[0][:1].lower() + parts[0][1:]] + [p[:1].upper() + p[1:] for p in parts[1:]]) if parts else "attr"
    return key if re.match(r"^[a-z]", key) else "a" + key


def _published(name: str, driver: str) -> str:
    """The profile's spelling: bare in the driver's own domain, else qualified."""
    domain, slash, ident = name.rpartition("/")
    return ident if slash and domain == driver else name


def _value(raw: Mapping[str, Any]) -> tuple[str | None, Any]:
    for kind, key in (("int", "int"), ("bool", "bool"), ("string", "string"), ("version", "version")):
        if key in raw:
            return kind, raw[key]
    other: str | None = next(iter(raw), None)
    return (f"list ({other})" if other else None), raw.get(other) if other else None


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _assign(names: Iterable[str], table: Mapping[str, tuple[str, ...]], driver: str,
            taken: set[str]) -> dict[str, tuple[str, bool]]:
    """published name -> (logical key, matched a known spelling), keys unique."""
    out: dict[str, tuple[str, bool]] = {}
    names = list(names)
    for key, spellings in table.items():
        for spelling in spellings:
            hit = next((n for n in names if n not in out and _qualified(n, driver).lower() == _qualified(spelling, driver).lower()), None)
            if hit is not None and key not in taken:
                out[hit] = (key, True)
                taken.add(key)
                break
    for n in names:
        if n in out:
            continue
        key, i = _key_of(n), 2
        while key in taken or key in table:
            key, i = f"{_key_of(n)}{i}", i + 1
        taken.add(key)
        out[n] = (key, False)
    return out


def _policy(raw: Mapping[str, Any]) -> str:
    pol = raw.get("requestPolicy") or {}
    if not pol:
        return ""
    parts = []
    if "default" in pol:
        parts.append(f"default {pol['default']}")
    if "validValues" in pol:
        parts.append("valid values " + ", ".join(map(str, pol["validValues"])))
    rng = pol.get("validRange") or {}
    if rng:
        parts.append(f"range {rng.get('min', '0')}..{rng.get('max', 'any')}" + (f" step {rng['step']}" if "step" in rng else ""))
    return "; ".join(parts)


def infer(driver: str, slices: Sequence[Mapping[str, Any]], classes: Sequence[Mapping[str, Any]] = (),
          *, role: str | None = None, source: str = "the cluster") -> Draft:
    """The draft of the driver's profile from its slices and the DeviceClasses."""
    mine = [s for s in slices if isinstance(s, Mapping) and (s.get("spec") or {}).get("driver") == driver]
    if not mine:
        seen = sorted({str((s.get("spec") or {}).get("driver")) for s in slices if isinstance(s, Mapping)} - {"None"})
        raise InferError(f"{source}: no ResourceSlice of driver {driver!r}"
                         + (f" (drivers seen: {', '.join(seen[:10])})" if seen else " (no ResourceSlice at all)"))
    devices = [d for s in mine for d in (s["spec"].get("devices") or []) if isinstance(d, Mapping)]
    if not devices:
        raise InferError(f"{source}: the {len(mine)} ResourceSlice(s) of driver {driver!r} publish no device")
    role = role or role_for(driver)
    nodes = tuple(sorted({str(s["spec"]["nodeName"]) for s in mine if s["spec"].get("nodeName")}))
    pools, pools_why = _pools(mine)
    attributes, numa_node, numa_why = _attributes(driver, devices)
    capacities = _capacities(driver, devices, {a.key for a in attributes})
    found, proposed = _classes(driver, classes)
    draft = Draft(driver=driver, role=role, slices=len(mine), devices=len(devices), nodes=nodes, pools=pools,
                  pools_why=pools_why, classes=found, class_proposed=proposed, attributes=attributes,
                  capacities=capacities, numa_node=numa_node, numa_why=numa_why,
                  values=_values(driver, devices, attributes, capacities))
    draft.optional = _behaviours(mine, devices)
    return draft


def _pools(mine: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    by_pool: dict[str, set[str]] = {}
    for s in mine:
        spec = s["spec"]
        name = str((spec.get("pool") or {}).get("name"))
        by_pool.setdefault(name, set()).add(str(spec.get("nodeName") or ""))
    if all(nodes and "" not in nodes and len(nodes) == 1 for nodes in by_pool.values()):
        per_node = {next(iter(n)) for n in by_pool.values()}
        if len(per_node) == len(by_pool):
            return "per-node", f"each of its {len(by_pool)} pools is on one node, with nodeName set"
    return "any", "its pools are not one per node with nodeName set (allNodes, a node selector or several per node)"


def _attributes(driver: str, devices: Sequence[Mapping[str, Any]]) -> tuple[tuple[Attribute, ...], bool, str]:
    kinds: dict[str, set[str | None]] = {}
    counts: dict[str, int] = {}
    for d in devices:
        for name, raw in (d.get("attributes") or {}).items():
            kind, _ = _value(raw if isinstance(raw, Mapping) else {})
            kinds.setdefault(name, set()).add(kind)
            counts[name] = counts.get(name, 0) + 1
    for name in [n for n in kinds if not _NAME.match(n)]:  # not a name the API server takes, nor a profile
        del kinds[name]
    keys = _assign(sorted(kinds), ATTRIBUTE_KEYS, driver, set())
    out = []
    for name in sorted(kinds, key=lambda n: (not keys[n][1], keys[n][0])):
        key, matched = keys[name]
        types = kinds[name]
        kind = next(iter(types)) if len(types) == 1 else None
        note = ""
        if len(types) > 1:
            note = f"published with several types ({', '.join(sorted(str(t) for t in types))})"
        elif kind not in _TYPES:
            note, kind = f"a {kind} attribute: profiles declare int, bool, string or version", None
        if counts[name] < len(devices):
            note = (note + "; " if note else "") + f"published by {counts[name]} of the {len(devices)} devices"
        out.append(Attribute(key, _published(name, driver), kind, counts[name], matched, note))
    numa = [d for d in devices if "int" in ((d.get("attributes") or {}).get(NUMA) or {})]
    if len(numa) == len(devices):
        return tuple(out), True, f"every one of its {len(devices)} devices publishes {NUMA} as an int"
    why = f"{len(numa)} of its {len(devices)} devices publish {NUMA} as an int" if numa else f"no device publishes {NUMA}"
    return tuple(out), False, why


def _capacities(driver: str, devices: Sequence[Mapping[str, Any]], taken: set[str]) -> tuple[Capacity, ...]:
    counts: dict[str, int] = {}
    policies: dict[str, str] = {}
    for d in devices:
        for name, raw in (d.get("capacity") or {}).items():
            counts[name] = counts.get(name, 0) + 1
            policies.setdefault(name, _policy(raw if isinstance(raw, Mapping) else {}))
    counts = {n: c for n, c in counts.items() if _NAME.match(n)}
    keys = _assign(sorted(counts), CAPACITY_KEYS, driver, set(taken))
    return tuple(Capacity(keys[n][0], _published(n, driver), counts[n], keys[n][1], policies[n])
                 for n in sorted(counts, key=lambda n: keys[n][0]))


def _values(driver: str, devices: Sequence[Mapping[str, Any]], attributes: Sequence[Attribute],
            capacities: Sequence[Capacity]) -> tuple[tuple[str, str], ...]:
    """A concrete model, version and memory the devices have (the most common; the first on a tie)."""
    out = []
    for a in attributes:
        if a.key in ("model", "version") and a.type in ("string", "version"):
            seen = [str(_value(d["attributes"][n])[1]) for d in devices
                    for n in (a.name, _qualified(a.name, driver)) if n in (d.get("attributes") or {})]
            if seen:
                out.append((a.key, max(dict.fromkeys(seen), key=seen.count)))
    for c in capacities:
        if c.key == "memory":
            seen = [str(d["capacity"][n].get("value")) for d in devices
                    for n in (c.name, _qualified(c.name, driver)) if n in (d.get("capacity") or {})]
            if seen:
                out.append(("memory", max(dict.fromkeys(seen), key=seen.count)))
    return tuple(out)


def _classes(driver: str, classes: Sequence[Mapping[str, Any]]) -> tuple[tuple[tuple[str, str], ...], bool]:
    """DeviceClasses whose CEL selectors name the driver (the one selecting nothing else first),
    else one proposed: named as the driver, selecting its devices."""
    found = []
    for c in classes:
        exprs = [str(((s or {}).get("cel") or {}).get("expression", "")) for s in (c.get("spec") or {}).get("selectors") or []]
        if any(re.search(r"device\.driver\s*==\s*['\"]" + re.escape(driver) + r"['\"]", e) for e in exprs):
            found.append((str(c["metadata"]["name"]), " && ".join(exprs), len(exprs)))
    if found:
        found.sort(key=lambda f: (f[2], f[0] != driver, f[0]))
        return tuple((n, s) for n, s, _ in found), False
    return ((driver, f"device.driver == '{driver}'"),), True


def _behaviours(mine: Sequence[Mapping[str, Any]], devices: Sequence[Mapping[str, Any]]) -> list[Behaviour]:
    out = []
    multi = sum(1 for d in devices if d.get("allowMultipleAllocations"))
    if multi:
        out.append(Behaviour("consumable-capacity", f"{multi} of its devices allow multiple allocations"))
    counters = sum(1 for s in mine if s["spec"].get("sharedCounters")) + sum(1 for d in devices if d.get("consumesCounters"))
    if counters:
        out.append(Behaviour("partitionable-devices", "its slices publish shared counters that its devices consume"))
    bound = sum(1 for d in devices if d.get("bindingConditions"))
    if bound:
        out.append(Behaviour("binding-conditions", f"{bound} of its devices have binding conditions"))
    tainted = sum(1 for d in devices if d.get("taints"))
    if tainted:
        out.append(Behaviour("device-taints", f"{tainted} of its devices publish taints"))
    return out
