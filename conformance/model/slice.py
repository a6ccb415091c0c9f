"""ResourceSlice (resource.k8s.io/v1) and the devices it publishes."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import FieldError
from ..quantity import Quantity
from ..attributes import ALL_KINDS, LIST_KINDS, AttributeValue
from .capacity import (MAX_VALID_VALUES, DeviceCapacity, RequestPolicy, ValidRange,  # noqa: F401 (re-exported)
                       parse_capacity, quantity_field)
from .nodealloc import NodeAllocatableResource, parse_node_allocatable_resources
from .meta import NodeSelector, ObjectMeta, parse_meta, parse_node_selector, selector_matches
from .reader import Reader, check_dns_label, check_dns_subdomain, check_label_key, check_qualified_name

MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_PER_SLICE_ADVANCED = 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_VALUES = 48
MAX_ATTRIBUTE_STRING = 64
MAX_TAINTS = 16
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMES_COUNTERS = 2
MAX_BINDING_CONDITIONS = 4
MAX_COMPATIBILITY_GROUPS = 2
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str | None
    effect: str
    time_added: str | None = None

    def to_wire(self) -> dict[str, object]:
        out: dict[str, object] = {"key": self.key, "effect": self.effect}
        if self.value is not None:
            out["value"] = self.value
        if self.time_added is not None:
            out["timeAdded"] = self.time_added
        return out


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: dict[str, Quantity] = field(hash=False)
    compatibility_groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: dict[str, Quantity] = field(hash=False)


@dataclass(frozen=True, slots=True, eq=False)
class Device:
    name: str
    attributes: dict[str, AttributeValue]
    capacity: dict[str, DeviceCapacity]
    consumes_counters: tuple[CounterConsumption, ...] = ()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False
    # DRANodeAllocatableResources: resource name -> mapping/overhead (see .nodealloc)
    node_allocatable: dict[str, NodeAllocatableResource] = field(default_factory=dict, hash=False)

    def uses_advanced_features(self) -> bool:
        return bool(self.taints or self.consumes_counters or any(a.is_list for a in self.attributes.values()))


@dataclass(frozen=True, slots=True)
class PoolRef:
    name: str
    generation: int
    resource_slice_count: int


@dataclass(frozen=True, slots=True, eq=False)
class ResourceSlice:
    meta: ObjectMeta
    driver: str
    pool: PoolRef
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    skip_node_operations: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name


def node_matches(node_name: str, labels: dict[str, str], *, want_node: str | None, all_nodes: bool,
                 selector: NodeSelector | None) -> bool:
    if want_node:
        return node_name == want_node
    if all_nodes:
        return True
    if selector is not None:
        return selector_matches(selector, node_name, labels)
    return False


# --- parsing --------------------------------------------------------------------------------

def _counter_map(r: Reader, key: str) -> dict[str, Quantity]:
    raw = r.raw(key)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise FieldError(r.at(key), "must be an object")
    if len(raw) > MAX_COUNTERS:
        raise FieldError(r.at(key), f"must have at most {MAX_COUNTERS} counters, got {len(raw)}")
    out: dict[str, Quantity] = {}
    for name, spec in raw.items():
        check_dns_label(r.at(key) + (name,), str(name), "counter name must be a DNS label")
        c = Reader(spec, r.at(key) + (name,))
        q = quantity_field(c, "value", required=True)
        c.done()
        assert q is not None
        out[str(name)] = q
    return out


def parse_attribute(r: Reader) -> AttributeValue:
    present = [k for k in ALL_KINDS if r.has(k)]
    for k in ALL_KINDS:
        r.raw(k)
    r.done()
    if len(present) != 1:
        raise FieldError(r.path, "must have exactly one of int, bool, string, version, ints, bools, strings, versions")
    kind = present[0]
    v = r.data[kind]
    elem = kind[:-1] if kind in LIST_KINDS else kind
    values = v if kind in LIST_KINDS else [v]
    if kind in LIST_KINDS and not isinstance(v, list):
        raise FieldError(r.at(kind), "must be a list")
    for i, item in enumerate(values):
        p = r.at(kind) + ((i,) if kind in LIST_KINDS else ())
        if elem == "int" and (isinstance(item, bool) or not isinstance(item, int)):
            raise FieldError(p, "must be an integer")
        if elem == "bool" and not isinstance(item, bool):
            raise FieldError(p, "must be a boolean")
        if elem in ("string", "version"):
            if not isinstance(item, str):
                raise FieldError(p, "must be a string")
            if len(item) > MAX_ATTRIBUTE_STRING:
                raise FieldError(p, f"must be at most {MAX_ATTRIBUTE_STRING} characters, got {len(item)}")
            if elem == "version":
                from ..semver import Semver
                try:
                    Semver.parse(item)
                except ValueError as exc:
                    raise FieldError(p, f"must be a semantic version: {exc}") from None
    if kind in LIST_KINDS:
        if not v:
            raise FieldError(r.at(kind), "must not be empty")
        if len(set(map(repr, v))) != len(v):
            raise FieldError(r.at(kind), "values must be unique")
        return AttributeValue(kind, tuple(v))
    return AttributeValue(kind, v)


def _parse_taint(r: Reader) -> DeviceTaint:
    key = r.str("key", required=True)
    value = r.str("value")
    effect = r.str("effect", required=True)
    added = r.str("timeAdded")
    r.done()
    assert key is not None and effect is not None
    if effect not in TAINT_EFFECTS:
        raise FieldError(r.at("effect"), f"unsupported value {effect!r}: one of {', '.join(TAINT_EFFECTS)}")
    return DeviceTaint(key, value, effect, added)


def _parse_consumption(r: Reader) -> CounterConsumption:
    cs = r.str("counterSet", required=True)
    assert cs is not None
    counters = _counter_map(r, "counters")
    groups = r.strs("compatibilityGroups", max_items=MAX_COMPATIBILITY_GROUPS, unique=True)
    for i, g in enumerate(groups):
        check_dns_label(r.at("compatibilityGroups") + (i,), g, "group name must be a short name (DNS label)")
    r.done()
    return CounterConsumption(cs, counters, groups)


def _parse_node_selection(r: Reader, *, per_device_allowed: bool) -> tuple[str | None, NodeSelector | None, bool, bool]:
    node_name = r.str("nodeName")
    sel_r = r.obj("nodeSelector")
    sel = parse_node_selector(sel_r) if sel_r is not None else None
    all_nodes = bool(r.bool("allNodes"))
    per_device = bool(r.bool("perDeviceNodeSelection")) if per_device_allowed else False
    return node_name, sel, all_nodes, per_device


def _parse_device(r: Reader, *, per_device: bool) -> Device:
    name = r.str("name", required=True)
    assert name is not None
    check_dns_label(r.at("name"), name)
    attrs: dict[str, AttributeValue] = {}
    raw_attrs = r.raw("attributes") or {}
    if not isinstance(raw_attrs, dict):
        raise FieldError(r.at("attributes"), "must be an object")
    for k, v in raw_attrs.items():
        check_qualified_name(r.at("attributes") + (k,), str(k))
        attrs[str(k)] = parse_attribute(Reader(v, r.at("attributes") + (k,)))
    multi = bool(r.bool("allowMultipleAllocations"))
    caps: dict[str, DeviceCapacity] = {}
    raw_caps = r.raw("capacity") or {}
    if not isinstance(raw_caps, dict):
        raise FieldError(r.at("capacity"), "must be an object")
    for k, v in raw_caps.items():
        check_qualified_name(r.at("capacity") + (k,), str(k))
        caps[str(k)] = parse_capacity(Reader(v, r.at("capacity") + (k,)), allow_multiple=multi)
    if len(attrs) + len(caps) > MAX_ATTRIBUTES_AND_CAPACITIES:
        raise FieldError(r.path, f"must have at most {MAX_ATTRIBUTES_AND_CAPACITIES} attributes and capacities combined, got {len(attrs) + len(caps)}")
    n_values = sum(a.value_count() for a in attrs.values())
    if n_values > MAX_ATTRIBUTE_VALUES:
        raise FieldError(r.at("attributes"), f"must have at most {MAX_ATTRIBUTE_VALUES} attribute values in total, got {n_values}")
    consumes = r.objs("consumesCounters", _parse_consumption, max_items=MAX_CONSUMES_COUNTERS)
    if len({c.counter_set for c in consumes}) != len(consumes):
        raise FieldError(r.at("consumesCounters"), "each counter set may be consumed only once per device")
    node_name, sel, all_nodes, _ = _parse_node_selection(r, per_device_allowed=False)
    chosen = sum(1 for x in (node_name, sel, all_nodes or None) if x)
    if per_device and chosen != 1:
        raise FieldError(r.path, "exactly one of nodeName, nodeSelector or allNodes is required with perDeviceNodeSelection")
    if not per_device and chosen:
        raise FieldError(r.path, "nodeName, nodeSelector and allNodes on a device need spec.perDeviceNodeSelection")
    taints = r.objs("taints", _parse_taint, max_items=MAX_TAINTS)
    binds = bool(r.bool("bindsToNode"))
    bc = r.strs("bindingConditions", max_items=MAX_BINDING_CONDITIONS, unique=True)
    bfc = r.strs("bindingFailureConditions", max_items=MAX_BINDING_CONDITIONS, unique=True)
    for key, conds in (("bindingConditions", bc), ("bindingFailureConditions", bfc)):
        for i, cond in enumerate(conds):
            check_label_key(r.at(key) + (i,), cond)  # a condition type is a qualified (label) name
    for i, cond in enumerate(bfc):
        if cond in bc:
            raise FieldError(r.at("bindingFailureConditions") + (i,),
                             f"Invalid value: {cond!r}: bindingFailureConditions must not overlap with bindingConditions")
    # bindsToNode stands on its own; the two condition lists need each other.
    if bfc and not bc:
        raise FieldError(r.at("bindingConditions"), "Invalid value: bindingConditions are required to use "
                                                    "bindingFailureConditions")
    if bc and not bfc:
        raise FieldError(r.at("bindingFailureConditions"), "Invalid value: bindingFailureConditions are required to "
                                                           "use bindingConditions")
    node_alloc = parse_node_allocatable_resources(r, "nodeAllocatableResources", set(caps))
    r.done()
    return Device(name, attrs, caps, consumes, node_name, sel, all_nodes, taints, binds, bc, bfc, multi,
                  node_allocatable=node_alloc)


def parse_resource_slice(r: Reader) -> ResourceSlice:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=False)
    s = r.obj("spec", required=True)
    assert s is not None
    driver = s.str("driver", required=True)
    assert driver is not None
    check_dns_subdomain(s.at("driver"), driver, 63)
    p = s.obj("pool", required=True)
    assert p is not None
    pool_name = p.str("name", required=True)
    assert pool_name is not None
    if len(pool_name) > 253 or not all(part and check_dns_subdomain(p.at("name"), part) for part in pool_name.split("/")):
        raise FieldError(p.at("name"), "must be one or more DNS subdomains separated by '/'")
    gen = p.int("generation", required=True)
    count = p.int("resourceSliceCount", required=True)
    p.done()
    assert gen is not None and count is not None
    if gen < 0:
        raise FieldError(p.at("generation"), "must be non-negative")
    if count <= 0:
        raise FieldError(p.at("resourceSliceCount"), "must be greater than zero")
    node_name, sel, all_nodes, per_device = _parse_node_selection(s, per_device_allowed=True)
    chosen = sum(1 for x in (node_name, sel, all_nodes or None, per_device or None) if x)
    if chosen != 1:
        raise FieldError(s.path, "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required")
    if sel is not None and len(sel.terms) != 1:
        raise FieldError(s.at("nodeSelector") + ("nodeSelectorTerms",), f"must have exactly one term, got {len(sel.terms)}")
    devices = s.objs("devices", lambda d: _parse_device(d, per_device=per_device))
    counters = s.objs("sharedCounters", _parse_counter_set, max_items=MAX_COUNTER_SETS)
    if devices and counters:
        raise FieldError(s.path, "devices and sharedCounters are mutually exclusive in one slice")
    limit = MAX_DEVICES_PER_SLICE_ADVANCED if any(d.uses_advanced_features() for d in devices) else MAX_DEVICES_PER_SLICE
    if len(devices) > limit:
        raise FieldError(s.at("devices"), f"must have at most {limit} devices, got {len(devices)}")
    seen: set[str] = set()
    for i, d in enumerate(devices):
        if d.name in seen:
            raise FieldError(s.at("devices") + (i, "name"), f"duplicate device name {d.name!r}")
        seen.add(d.name)
    if len({c.name for c in counters}) != len(counters):
        raise FieldError(s.at("sharedCounters"), "counter set names must be unique")
    skip = s.strs("skipNodeOperations", unique=True)
    if "NodePrepareResources" in skip and not ({"NodeUnprepareResources", "*"} & set(skip)):
        raise FieldError(s.at("skipNodeOperations"), "NodePrepareResources may only be skipped together with "
                                                     "NodeUnprepareResources (or \"*\")")
    s.ignore("partitionTypeAttribute")
    s.done()
    r.done()
    return ResourceSlice(meta, driver, PoolRef(pool_name, gen, count), node_name, sel, all_nodes, per_device,
                         devices, counters, skip)


def _parse_counter_set(r: Reader) -> CounterSet:
    name = r.str("name", required=True)
    assert name is not None
    check_dns_label(r.at("name"), name, "counter set name must be a DNS label")
    counters = _counter_map(r, "counters")
    if not counters:
        raise FieldError(r.at("counters"), "required value")
    r.done()
    return CounterSet(name, counters)
