"""ResourceSlice validation (hand-written part of pkg/apis/resource/validation, upstream's order)."""

from __future__ import annotations

import re
from typing import Any, Mapping

from .common import (ATTRIBUTE_KEY_MAX, Errs, as_dict, as_list, dns_label, dv_dns_label, semantic_equal, driver_name, label_name, map_,
                     qualified_name, set_, slice_, taint)
from .errs import child, duplicate, forbidden, index, invalid, mark, required, too_long
from .meta import validate_object_meta, validate_object_meta_update
from .names import blen, name_is_dns_subdomain
from .nodeselector import internal_terms, node_selector
from .capacity import node_allocatable, request_policy, skip_node_operations
from .common import pool_name
from .verdict import FieldErr

MAX_DEVICES = 128
MAX_DEVICES_ADVANCED = 64
MAX_ATTRS_AND_CAPS = 32
MAX_ATTR_VALUES = 48
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_CONSUMPTIONS = 2
MAX_COUNTERS_PER_CONSUMPTION = 32
MAX_TAINTS = 16
MAX_BINDING = 4
_N = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
SEMVER = re.compile(rf"^{_N}\.{_N}\.{_N}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?$")


def node_name(name: str, path: str) -> Errs:
    return [invalid(path, name, m) for m in name_is_dns_subdomain(name, False)]


def _string_value(v: str, path: str) -> Errs:
    return [too_long(path, 64)] if blen(v) > 64 else []


def _version_value(v: str, path: str) -> Errs:
    errs: Errs = []
    if not SEMVER.match(v) or v.endswith("\n"):
        errs.append(invalid(path, v, "must be a string compatible with semver.org spec 2.0.0"))
    if blen(v) > 64:
        errs.append(too_long(path, 64))
    return errs


def device_attribute(a: Any, path: str) -> Errs:
    a = as_dict(a)
    errs: Errs = []
    n = 0
    for k in ("bool", "int"):
        if a.get(k) is not None:
            n += 1
    if a.get("string") is not None:
        n += 1
        errs += _string_value(str(a["string"]), child(path, "string"))
    if a.get("version") is not None:
        n += 1
        errs += _version_value(str(a["version"]), child(path, "version"))
    for k in ("bools", "ints", "strings", "versions"):
        if a.get(k) is None:
            continue
        n += 1
        vals = as_list(a[k])
        if not vals:
            errs.append(invalid(child(path, k), vals, "must not be empty if specified"))
        for i, item in enumerate(vals):
            if k == "strings":
                errs += mark(_string_value(str(item), index(child(path, k), i)))
            elif k == "versions":
                errs += _version_value(str(item), index(child(path, k), i))
    # The union check is declarative validation's, which counts an empty list as unset.
    names = [k for k in ("int", "bool", "string", "version") if a.get(k) is not None]
    names += [k for k in ("ints", "bools", "strings", "versions") if as_list(a.get(k))]
    del n
    union = "`int`, `bool`, `string`, `version`, `ints`, `bools`, `strings`, `versions`"
    if not names:
        errs.append(invalid(path, "", "must specify one of: " + union, covered=True, origin="union"))
    elif len(names) > 1:
        errs.append(invalid(path, "{" + ", ".join(names) + "}", "must specify exactly one of: " + union, covered=True,
                            origin="union"))
    return errs


def _capacity_single(c: Any, path: str) -> Errs:
    if as_dict(c).get("requestPolicy") is not None:
        return [forbidden(child(path, "requestPolicy"), "allowMultipleAllocations must be true")]
    return []


def _attribute_values(device: dict[str, Any]) -> int:
    n = 0
    for a in as_dict(device.get("attributes")).values():
        a = as_dict(a)
        lists = [as_list(a.get(k)) for k in ("bools", "ints", "strings", "versions")]
        total = sum(len(x) for x in lists)
        n += total if total else 1
    return n


def binding_parameters(conds: list[Any], fails: list[Any], path: str, raw: tuple[Any, Any] = (None, None)) -> Errs:
    """``raw``: the fields as written (an empty list prints as [], an absent one as null)."""
    errs = slice_(conds, MAX_BINDING, lambda c, p: label_name(str(c), p), child(path, "bindingConditions"), size_covered=True)
    errs += slice_(fails, MAX_BINDING, lambda c, p: label_name(str(c), p), child(path, "bindingFailureConditions"),
                   size_covered=True)
    seen: set[str] = set()
    for i, c in enumerate(conds):
        if c in seen:
            errs.append(duplicate(index(child(path, "bindingConditions"), i), c))
        seen.add(c)
    fseen: set[str] = set()
    for i, c in enumerate(fails):
        if c in fseen:
            errs.append(duplicate(index(child(path, "bindingFailureConditions"), i), c))
        fseen.add(c)
        if c in conds:
            errs.append(invalid(index(child(path, "bindingFailureConditions"), i), c,
                                "bindingFailureConditions must not overlap with bindingConditions"))
    if not conds and fails:
        errs.append(invalid(child(path, "bindingConditions"), raw[0] if isinstance(raw[0], list) else None,
                            "bindingConditions are required to use bindingFailureConditions"))
    if not fails and conds:
        errs.append(invalid(child(path, "bindingFailureConditions"), raw[1] if isinstance(raw[1], list) else None,
                            "bindingFailureConditions are required to use bindingConditions"))
    return errs


def _counter_consumption(c: Any, path: str) -> Errs:
    c = as_dict(c)
    errs: Errs = []
    cs = c.get("counterSet") or ""
    if not cs:
        errs.append(required(child(path, "counterSet"), covered=True))
    else:
        errs += dns_label(cs, child(path, "counterSet"), dv=True)
    counters = as_dict(c.get("counters"))
    if not counters:
        errs.append(required(child(path, "counters"), covered=True))
    else:
        errs += map_(counters, MAX_COUNTERS_PER_CONSUMPTION, 63, dv_dns_label, lambda v, p: [], child(path, "counters"),
                     keys_covered=True)
    return errs


def device(d: Any, old: dict[str, Any] | None, path: str, per_device: Any, gates: Mapping[str, bool] | None = None) -> Errs:
    gates = gates or {}
    d = as_dict(d)
    errs = dns_label(d.get("name") or "", child(path, "name"))
    attrs, caps = as_dict(d.get("attributes")), as_dict(d.get("capacity"))
    if len(attrs) + len(caps) > MAX_ATTRS_AND_CAPS:
        errs.append(invalid(path, len(attrs) + len(caps), f"the total number of attributes and capacities must not exceed {MAX_ATTRS_AND_CAPS}"))
    nvals = _attribute_values(d)
    if nvals > MAX_ATTR_VALUES:
        errs.append(invalid(path, nvals, f"the total number of attribute values must not exceed {MAX_ATTR_VALUES}"))
    errs += map_(attrs, -1, ATTRIBUTE_KEY_MAX, qualified_name, device_attribute, child(path, "attributes"))
    if old is None or not semantic_equal(old.get("capacity"), caps):
        def multi(c: Any, p: str) -> Errs:
            c = as_dict(c)
            if c.get("requestPolicy") is None:
                return []
            return request_policy(c.get("value"), as_dict(c["requestPolicy"]), child(p, "requestPolicy"), gates)
        errs += map_(caps, -1, ATTRIBUTE_KEY_MAX, qualified_name,
                     multi if d.get("allowMultipleAllocations") is True else _capacity_single,
                     child(path, "capacity"))
    if old is None or not semantic_equal(old.get("taints"), d.get("taints")):
        errs += slice_(as_list(d.get("taints")), MAX_TAINTS, lambda t, p: taint(as_dict(t), None, p), child(path, "taints"))
    errs += set_(as_list(d.get("consumesCounters")), MAX_CONSUMPTIONS, _counter_consumption,
                 lambda c: as_dict(c).get("counterSet") or "", child(path, "consumesCounters"),
                 size_covered=True, unique_covered=True)
    if per_device is True:
        set_fields = []
        if d.get("nodeName") is not None:
            if d["nodeName"]:
                set_fields.append("`nodeName`")
                errs += node_name(d["nodeName"], child(path, "nodeName"))
            else:
                errs.append(invalid(child(path, "nodeName"), "", "must not be empty"))
        if d.get("nodeSelector") is not None:
            set_fields.append("`nodeSelector`")
            errs += node_selector(as_dict(d["nodeSelector"]), child(path, "nodeSelector"))
        if d.get("allNodes") is not None:
            if d["allNodes"]:
                set_fields.append("`allNodes`")
            else:
                errs.append(invalid(child(path, "allNodes"), False, "must be either unset or set to true"))
        msg = ("exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` "
               "is set to true in the ResourceSlice spec")
        if not set_fields:
            errs.append(required(path, msg))
        elif len(set_fields) > 1:
            errs.append(invalid(path, "{" + ", ".join(set_fields) + "}", msg))
    elif any(d.get(k) is not None for k in ("nodeName", "nodeSelector", "allNodes")):
        errs.append(invalid(path, None, "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                                        "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
    errs += binding_parameters(as_list(d.get("bindingConditions")), as_list(d.get("bindingFailureConditions")), path,
                               (d.get("bindingConditions"), d.get("bindingFailureConditions")))
    errs += node_allocatable(as_dict(d.get("nodeAllocatableResources")), caps, child(path, "nodeAllocatableResources"))
    # declarative: compatibilityGroups (maxItems 2, DNS labels)
    for i, cc in enumerate(as_list(d.get("consumesCounters"))):
        groups = as_list(as_dict(cc).get("compatibilityGroups"))
        gp = child(index(child(path, "consumesCounters"), i), "compatibilityGroups")
        if len(groups) > 2:
            errs.append(FieldErr("FieldValueTooMany", gp, "must have at most 2 items", value=len(groups), declarative=True))
        else:
            for j, g in enumerate(groups):
                errs += dns_label(str(g), index(gp, j), dv=True)
    return errs


def _counter_set(cs: Any, path: str) -> Errs:
    cs = as_dict(cs)
    errs: Errs = []
    name = cs.get("name") or ""
    errs += [required(child(path, "name"), covered=True)] if not name else dns_label(name, child(path, "name"), dv=True)
    counters = as_dict(cs.get("counters"))
    if not counters:
        errs.append(required(child(path, "counters"), covered=True))
    else:
        errs += map_(counters, MAX_COUNTERS_PER_SET, 63, dv_dns_label, lambda v, p: [], child(path, "counters"), keys_covered=True)
    return errs


def _advanced(spec: dict[str, Any]) -> bool:
    for d in as_list(spec.get("devices")):
        d = as_dict(d)
        if as_list(d.get("taints")) or as_list(d.get("consumesCounters")):
            return True
        if any(as_dict(a).get(k) is not None for a in as_dict(d.get("attributes")).values()
               for k in ("bools", "ints", "strings", "versions")):
            return True
    return False


def slice_spec(spec: dict[str, Any], old: dict[str, Any] | None, path: str, gates: Mapping[str, bool]) -> Errs:
    errs = driver_name(spec.get("driver") or "", child(path, "driver"))
    pool = as_dict(spec.get("pool"))
    pp = child(path, "pool")
    errs += pool_name(pool.get("name") or "", child(pp, "name"))
    count = pool.get("resourceSliceCount") or 0
    if count <= 0:
        errs.append(invalid(child(pp, "resourceSliceCount"), count, "must be greater than zero"))
    gen = pool.get("generation") or 0
    if gen < 0:
        errs.append(invalid(child(pp, "generation"), gen, "must be greater than or equal to zero"))
    if old is not None:
        old_pool = as_dict(old.get("pool"))
        for new_v, old_v, p in ((pool.get("name"), old_pool.get("name"), child(pp, "name")),
                                (spec.get("driver"), old.get("driver"), child(path, "driver")),
                                (spec.get("nodeName"), old.get("nodeName"), child(path, "nodeName"))):
            if new_v != old_v:
                errs.append(invalid(p, new_v, "field is immutable"))
    set_fields: list[str] = []
    if spec.get("nodeName") is not None:
        if spec["nodeName"]:
            set_fields.append("`nodeName`")
            errs += node_name(spec["nodeName"], child(path, "nodeName"))
        else:
            errs.append(invalid(child(path, "nodeName"), "", "must be either unset or set to a non-empty string"))
    if spec.get("nodeSelector") is not None:
        set_fields.append("`nodeSelector`")
        sel = as_dict(spec["nodeSelector"])
        errs += node_selector(sel, child(path, "nodeSelector"))
        terms = as_list(sel.get("nodeSelectorTerms"))
        if len(terms) != 1:
            errs.append(invalid(child(path, "nodeSelector", "nodeSelectorTerms"), internal_terms(sel.get("nodeSelectorTerms")),
                                "must have exactly one node selector term"))
    for f in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(f) is not None:
            if spec[f]:
                set_fields.append(f"`{f}`")
            else:
                errs.append(invalid(child(path, f), False, "must be either unset or set to true"))
    one = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not set_fields:
        errs.append(required(path, one))
    elif len(set_fields) > 1:
        errs.append(invalid(path, "{" + ", ".join(set_fields) + "}", one + ", but multiple fields are set"))
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        errs.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    old_devices = {as_dict(d).get("name"): as_dict(d) for d in as_list((old or {}).get("devices"))}
    errs += set_(as_list(spec.get("devices")), MAX_DEVICES_ADVANCED if _advanced(spec) else MAX_DEVICES,
                 lambda d, p: device(d, old_devices.get(as_dict(d).get("name")) if old is not None else None, p,
                                     spec.get("perDeviceNodeSelection"), gates),
                 lambda d: as_dict(d).get("name") or "", child(path, "devices"))
    errs += set_(as_list(spec.get("sharedCounters")), MAX_COUNTER_SETS, _counter_set, lambda c: as_dict(c).get("name") or "",
                 child(path, "sharedCounters"), size_covered=True, unique_covered=True)
    errs += skip_node_operations(as_list(spec.get("skipNodeOperations")), child(path, "skipNodeOperations"))
    return errs


def validate_resource_slice(obj: dict[str, Any], gates: Mapping[str, bool]) -> list[FieldErr]:
    errs = validate_object_meta(as_dict(obj.get("metadata")), False)
    return errs + slice_spec(as_dict(obj.get("spec")), None, "spec", gates)


def validate_resource_slice_update(obj: dict[str, Any], old: dict[str, Any], gates: Mapping[str, bool]) -> list[FieldErr]:
    errs = validate_object_meta_update(as_dict(obj.get("metadata")), as_dict(old.get("metadata")))
    return errs + slice_spec(as_dict(obj.get("spec")), as_dict(old.get("spec")), "spec", gates)
