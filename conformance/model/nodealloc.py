"""Node-allocatable resources backed by devices (KEP-5517, DRANodeAllocatableResources, alpha).

API shape: ``k8s.io/api`` v0.37.2 (``resource/v1``), the "alpha2" shape:
``devices[].nodeAllocatableResources: {<cpu|memory|hugepages-*>: {mapping: {capacityKey +
capacityMultiplier | deviceMultiplier}, overhead: {perPod, perContainer}}}`` and in the pod
``status.nodeAllocatableResourceClaimStatuses[] {resourceClaimName, containers, mapping[] {name,
quantity}, overhead[] {name, perPod, perContainer}}``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FieldError, Key
from ..quantity import Quantity
from .reader import Reader, check_qualified_name


@dataclass(frozen=True, slots=True)
class NodeAllocatableMapping:
    capacity_key: str | None = None
    capacity_multiplier: Quantity | None = None
    device_multiplier: Quantity | None = None


@dataclass(frozen=True, slots=True)
class NodeAllocatableOverhead:
    per_pod: Quantity | None = None
    per_container: Quantity | None = None


@dataclass(frozen=True, slots=True)
class NodeAllocatableResource:
    mapping: NodeAllocatableMapping | None = None
    overhead: NodeAllocatableOverhead | None = None


def is_node_allocatable_resource_name(name: str) -> bool:
    """cpu, memory and hugepages-<size> (upstream IsNodeAllocatableResourceName)."""
    return name in ("cpu", "memory") or (name.startswith("hugepages-") and len(name) > len("hugepages-"))


def _quantity(r: Reader, key: str) -> Quantity | None:
    v = r.raw(key)
    if v is None:
        return None
    try:
        return Quantity.from_yaml(v)
    except (ValueError, TypeError) as exc:
        raise FieldError(r.at(key), f"invalid quantity {v!r}: {exc}") from None


def _mapping(r: Reader, capacities: set[str]) -> NodeAllocatableMapping:
    key = r.str("capacityKey")
    cm = _quantity(r, "capacityMultiplier")
    dm = _quantity(r, "deviceMultiplier")
    r.done()
    if key is None and dm is None:
        raise FieldError(r.path, "must specify one of: `capacityKey`, `deviceMultiplier`")
    if key is not None and dm is not None:
        raise FieldError(r.path, "must specify exactly one of: `capacityKey`, `deviceMultiplier`")
    if key is not None:
        check_qualified_name(r.at("capacityKey"), key)
        if key not in capacities:
            raise FieldError(r.at("capacityKey"), f"Not found: {key!r}")
        if cm is None:
            raise FieldError(r.at("capacityMultiplier"), "Required value: capacityMultiplier is required when capacityKey is set")
        if cm.sign() <= 0:
            raise FieldError(r.at("capacityMultiplier"), f"Invalid value: {cm}: must be positive")
    if cm is not None and key is None:
        raise FieldError(r.at("capacityKey"), "Required value: capacityKey is required when capacityMultiplier is set")
    if dm is not None and dm.sign() <= 0:
        raise FieldError(r.at("deviceMultiplier"), f"Invalid value: {dm}: must be positive")
    return NodeAllocatableMapping(key, cm, dm)


def _overhead(r: Reader) -> NodeAllocatableOverhead:
    pp = _quantity(r, "perPod")
    pc = _quantity(r, "perContainer")
    r.done()
    if pp is None and pc is None:
        raise FieldError(r.path, "Invalid value: at least one of perPod or perContainer must be set")
    for name, q in (("perPod", pp), ("perContainer", pc)):
        if q is not None and q.sign() < 0:
            raise FieldError(r.at(name), f"Invalid value: {q}: must be non-negative")
    return NodeAllocatableOverhead(pp, pc)


def parse_node_allocatable_resources(r: Reader, key: str, capacities: set[str]) -> dict[str, NodeAllocatableResource]:
    raw = r.raw(key)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise FieldError(r.at(key), "must be an object")
    out: dict[str, NodeAllocatableResource] = {}
    for name, spec in raw.items():
        path = r.at(key) + (Key(str(name)),)
        if not is_node_allocatable_resource_name(str(name)):
            raise FieldError(path, f"Invalid value: {name!r}: must be a node allocatable resource name")
        e = Reader(spec, path)
        m = e.obj("mapping")
        o = e.obj("overhead")
        e.done()
        if m is None and o is None:
            raise FieldError(path, "Required value: at least one of mapping or overhead must be set")
        out[str(name)] = NodeAllocatableResource(_mapping(m, capacities) if m is not None else None,
                                                 _overhead(o) if o is not None else None)
    return out
