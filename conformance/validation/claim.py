"""ResourceClaim, ResourceClaimTemplate and DeviceClass validation (hand-written part of
pkg/apis/resource/validation, in upstream's order)."""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..cel import check_new_expression
from .common import (Errs, as_dict, as_list, device_class_name, driver_name, dv_fully_qualified_name, semantic_equal, set_, slice_,
                     toleration)
from .errs import child, forbidden, index, internal, invalid, not_supported, required, too_long, too_many
from .meta import validate_object_meta, validate_object_meta_update, validate_object_meta_with_errors, validate_template_meta
from .names import blen
from .common import dns_label
from .verdict import FieldErr

MAX_REQUESTS = 32
MAX_CONSTRAINTS = 32
MAX_CONFIGS = 32
MAX_SELECTORS = 32
MAX_FIRST_AVAILABLE = 8
OPAQUE_MAX = 10 * 1024
DERIVED_TOTAL_MAX_COST = 1_000_000
EXTENDED_RESOURCE_NATIVE_PREFIXES = ("kubernetes.io/", "requests.")


class Opts:
    def __init__(self, gates: Mapping[str, bool], stored: bool = False, constraint_attrs: dict[str, set[str]] | None = None) -> None:
        self.gates = gates
        self.stored = stored
        self.constraint_attrs = constraint_attrs or {}


def cel_expression(expr: Any, path: str, opts: Opts, derived: bool = False) -> Errs:
    if opts.stored:
        return []
    expr = expr if isinstance(expr, str) else ""
    if blen(expr) > 10 * 1024:
        return [too_long(path, 10 * 1024)]
    issue = check_new_expression(expr, consumable_capacity=opts.gates.get("DRAConsumableCapacity", False),
                                 list_attributes=opts.gates.get("DRAListTypeAttributes", False), derived=derived)
    if issue is None:
        return []
    if issue.type == "FieldValueForbidden":
        return [forbidden(path, issue.detail)]
    if issue.type == "FieldValueTooLong":
        return [too_long(path, 10 * 1024)]
    if issue.type == "InternalError":  # a pattern upstream compiles when it makes the program
        return [internal(path, issue.detail)]
    if not expr.strip() and issue.type == "FieldValueInvalid":
        return [required(path, "expression is empty")] if False else [invalid(path, expr, issue.detail)]
    return [invalid(path, expr, issue.detail)]


def selector(sel: Any, path: str, opts: Opts) -> Errs:
    cel = as_dict(sel).get("cel")
    if cel is None:
        return [required(child(path, "cel"))]
    return cel_expression(as_dict(cel).get("expression", ""), child(path, "cel", "expression"), opts)


def selectors(sels: Any, path: str, opts: Opts) -> Errs:
    return slice_(as_list(sels), MAX_SELECTORS, lambda s, p: selector(s, p, opts), path, size_covered=True)


def allocation_mode(mode: str, count: int, mode_path: str, count_path: str) -> Errs:
    if mode == "All":
        if count != 0:
            return [invalid(count_path, count, "must not be specified when allocationMode is 'All'")]
    elif mode == "ExactCount":
        if count <= 0:
            return [invalid(count_path, count, "must be greater than zero")]
    else:
        return [not_supported(mode_path, mode, ["All", "ExactCount"], covered=True)]
    return []


def _constraint_uses(attr: str, req: str, attrs: dict[str, set[str]]) -> bool:
    if attr in attrs.get("", set()) or attr in attrs.get(req, set()):
        return True
    parent, sep, _ = req.partition("/")
    return bool(sep) and attr in attrs.get(parent, set())


def derived_attributes(values: Any, path: str, opts: Opts, request_name: str) -> Errs:
    def one(a: Any, p: str) -> Errs:
        a = as_dict(a)
        errs: Errs = []
        name = a.get("name") or ""
        if name and not _constraint_uses(name, request_name, opts.constraint_attrs):
            errs.append(invalid(child(p, "name"), name, "must be referenced by at least one matchAttribute or "
                                "distinctAttribute constraint targeting this request"))
        if a.get("expression"):
            errs += cel_expression(a["expression"], child(p, "expression"), opts, derived=True)
        return errs
    values = as_list(values)
    errs = set_(values, -1, one, lambda a: as_dict(a).get("name") or "", path)
    if len(values) > 32:  # declarative (standard) maxItems short-circuits the declarative item checks
        return errs + [too_many(path, len(values), 32, covered=True)]
    for i, a in enumerate(values):
        name = as_dict(a).get("name")
        if name:
            errs += dv_fully_qualified_name(name, child(index(path, i), "name"))
    return errs


def _request_body(body: dict[str, Any], path: str, opts: Opts, name: str, *, sub: bool) -> Errs:
    errs: Errs = []
    if sub:
        errs += device_class_name(body.get("deviceClassName") or "", child(path, "deviceClassName"), dv=True)
    else:
        errs += device_class_name(body.get("deviceClassName") or "", child(path, "deviceClassName"))
    errs += selectors(body.get("selectors"), child(path, "selectors"), opts)
    errs += derived_attributes(body.get("derivedAttributes"), child(path, "derivedAttributes"), opts, name)
    count = body.get("count") or 0
    errs += allocation_mode(body.get("allocationMode") or "", count if isinstance(count, int) else 0,
                            child(path, "allocationMode"), child(path, "count"))
    for i, t in enumerate(as_list(body.get("tolerations"))):
        errs += toleration(as_dict(t), index(child(path, "tolerations"), i))
    return errs


def _first_available(first: list[Any], path: str, opts: Opts, name: str) -> Errs:
    def sub(s: Any, p: str) -> Errs:
        s = as_dict(s)
        return dns_label(s.get("name") or "", child(p, "name")) + _request_body(s, p, opts, f"{name}/{s.get('name') or ''}", sub=True)
    return set_(first, MAX_FIRST_AVAILABLE, sub, lambda s: as_dict(s).get("name") or "", child(path, "firstAvailable"),
                size_covered=True, unique_covered=True)


def device_request(req: Any, path: str, opts: Opts) -> Errs:
    req = as_dict(req)
    name = req.get("name") or ""
    errs = dns_label(name, child(path, "name"))
    first = as_list(req.get("firstAvailable"))
    exactly = req.get("exactly")
    n = (1 if first else 0) + (1 if exactly is not None else 0)
    if n == 0:
        errs.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif n > 1:
        errs.append(invalid(path, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
        # The hand-written checks stop here; declarative validation still walks both fields.
        errs += [e for e in _request_body(as_dict(exactly), child(path, "exactly"), opts, name, sub=False) if e.declarative]
        errs += [e for e in _first_available(first, path, opts, name) if e.declarative]
    elif first:
        errs += _first_available(first, path, opts, name)
    else:
        errs += _request_body(as_dict(exactly), child(path, "exactly"), opts, name, sub=False)
    return errs


def request_names(claim: dict[str, Any]) -> dict[str, set[str] | None]:
    out: dict[str, set[str] | None] = {}
    for r in as_list(claim.get("requests")):
        r = as_dict(r)
        first = as_list(r.get("firstAvailable"))
        out[r.get("name") or ""] = {as_dict(s).get("name") or "" for s in first} if first else None
    return out


def _has(names: dict[str, set[str] | None], ref: str) -> bool:
    seg = ref.split("/")
    if len(seg) > 2 or seg[0] not in names:
        return False
    return len(seg) == 1 or seg[1] in (names[seg[0]] or set())


REF_MSG = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"


def request_ref(ref: str, path: str, names: dict[str, set[str] | None]) -> Errs:
    seg = ref.split("/")
    if len(seg) > 2:
        return [invalid(path, ref, REF_MSG)]
    errs: Errs = []
    for s in seg:
        errs += dns_label(s, path)
    if not _has(names, ref):
        errs.append(invalid(path, ref, REF_MSG))
    return errs


def raw_extension(raw: Any, path: str, stored: bool, max_len: int) -> Errs:
    if raw is None:
        return [required(path)]
    text = json.dumps(raw, separators=(",", ":"))
    if not stored and len(text.encode()) > max_len:
        return [too_long(path, max_len)]
    if not isinstance(raw, dict):
        return [invalid(path, "<value omitted>", "must be a valid JSON object")]
    return []


def device_configuration(cfg: dict[str, Any], path: str, stored: bool) -> Errs:
    opaque = cfg.get("opaque")
    if opaque is None:
        return [required(child(path, "opaque"))]
    opaque = as_dict(opaque)
    p = child(path, "opaque")
    return driver_name(opaque.get("driver") or "", child(p, "driver"), covered=True) + \
        raw_extension(opaque.get("parameters"), child(p, "parameters"), stored, OPAQUE_MAX)


def device_constraint(c: Any, path: str, names: dict[str, set[str] | None], gates: Mapping[str, bool]) -> Errs:
    c = as_dict(c)
    errs = set_(as_list(c.get("requests")), MAX_REQUESTS, lambda r, p: request_ref(str(r), p, names), str,
                child(path, "requests"), size_covered=True, unique_covered=True)
    if c.get("matchAttribute") is not None:
        errs += dv_fully_qualified_name(c["matchAttribute"], child(path, "matchAttribute"))
    elif c.get("distinctAttribute") is not None:
        errs += dv_fully_qualified_name(c["distinctAttribute"], child(path, "distinctAttribute"))
    elif gates.get("DRAConsumableCapacity"):
        errs.append(required(path, 'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set'))
    else:
        errs.append(required(child(path, "matchAttribute")))
    return errs


def constraint_attributes(constraints: list[Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for c in constraints:
        c = as_dict(c)
        attr = c.get("matchAttribute") if c.get("matchAttribute") is not None else c.get("distinctAttribute")
        if attr is None:
            continue
        for r in as_list(c.get("requests")) or [""]:
            out.setdefault(str(r), set()).add(attr)
    return out


def device_claim(devices: Any, path: str, gates: Mapping[str, bool], stored: bool = False) -> Errs:
    devices = as_dict(devices)
    names = request_names(devices)
    opts = Opts(gates, stored, constraint_attributes(as_list(devices.get("constraints"))))
    errs = set_(as_list(devices.get("requests")), MAX_REQUESTS, lambda r, p: device_request(r, p, opts),
                lambda r: as_dict(r).get("name") or "", child(path, "requests"), size_covered=True, unique_covered=True)
    errs += slice_(as_list(devices.get("constraints")), MAX_CONSTRAINTS,
                   lambda c, p: device_constraint(c, p, names, gates), child(path, "constraints"), size_covered=True)

    def config(c: Any, p: str) -> Errs:
        c = as_dict(c)
        e = set_(as_list(c.get("requests")), MAX_REQUESTS, lambda r, q: request_ref(str(r), q, names), str,
                 child(p, "requests"), size_covered=True, unique_covered=True)
        return e + device_configuration(c, p, stored)
    errs += slice_(as_list(devices.get("config")), MAX_CONFIGS, config, child(path, "config"), size_covered=True)
    return errs


def _validate_claim_meta(meta: dict[str, Any]) -> Errs:
    return validate_object_meta(meta, True)


def validate_resource_claim(obj: dict[str, Any], gates: Mapping[str, bool]) -> Errs:
    spec = as_dict(obj.get("spec"))
    return _validate_claim_meta(as_dict(obj.get("metadata"))) + device_claim(spec.get("devices"), "spec.devices", gates)


def immutable(new: Any, old: Any, path: str, *, covered: bool = False) -> Errs:
    """ValidateImmutableField; when covered, declarative validation's error (value null) replaces it."""
    if not semantic_equal(new, old):
        from .common import _item_repr
        return [invalid(path, None if covered else _item_repr(new), "field is immutable", covered=covered)]
    return []


def validate_resource_claim_update(obj: dict[str, Any], old: dict[str, Any], gates: Mapping[str, bool]) -> Errs:
    meta, old_meta = as_dict(obj.get("metadata")), as_dict(old.get("metadata"))
    errs = _validate_claim_meta(meta) + validate_object_meta_update(meta, old_meta)
    return errs + immutable(obj.get("spec"), old.get("spec"), "spec", covered=True)


def validate_resource_claim_template(obj: dict[str, Any], gates: Mapping[str, bool]) -> Errs:
    spec = as_dict(obj.get("spec"))
    errs = validate_object_meta(as_dict(obj.get("metadata")), True)
    errs += validate_template_meta(as_dict(spec.get("metadata")), "spec.metadata")
    return errs + device_claim(as_dict(spec.get("spec")).get("devices"), "spec.spec.devices", gates)


def validate_resource_claim_template_update(obj: dict[str, Any], old: dict[str, Any], gates: Mapping[str, bool]) -> Errs:
    """The strategy validates the new template as on create, then the update."""
    from .internal import internal_repr
    errs = validate_resource_claim_template(obj, gates)
    errs += validate_object_meta_update(as_dict(obj.get("metadata")), as_dict(old.get("metadata")))
    if not semantic_equal(obj.get("spec"), old.get("spec")):
        errs.append(invalid("spec", internal_repr(obj.get("spec"), "TemplateSpec"), "field is immutable"))
    return errs


def is_extended_resource_name(name: str) -> bool:
    from .names import is_qualified_name
    if name.startswith(("kubernetes.io/",)) or "/" not in name:
        return False
    if name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


def validate_device_class(obj: dict[str, Any], gates: Mapping[str, bool], old: dict[str, Any] | None = None) -> Errs:
    meta = as_dict(obj.get("metadata"))
    from .names import is_dns1123_subdomain
    errs = validate_object_meta_with_errors(meta, False, lambda p, n: [invalid(p, n, m, covered=True, origin="format=k8s-long-name")
                                                                      for m in is_dns1123_subdomain(n, True)])
    if old is not None:
        errs += validate_object_meta_update(meta, as_dict(old.get("metadata")))
    spec = as_dict(obj.get("spec"))
    old_spec = as_dict(old.get("spec")) if old is not None else None
    stored = old_spec is not None and semantic_equal(spec.get("selectors"), old_spec.get("selectors"))
    opts = Opts(gates, stored)
    errs += slice_(as_list(spec.get("selectors")), MAX_SELECTORS, lambda s, p: selector(s, p, opts), "spec.selectors",
                   size_covered=True)
    cstored = old_spec is not None and semantic_equal(spec.get("config"), old_spec.get("config"))
    errs += slice_(as_list(spec.get("config")), MAX_CONFIGS, lambda c, p: device_configuration(as_dict(c), p, cstored),
                   "spec.config", size_covered=True)
    ern = spec.get("extendedResourceName")
    if ern is not None:
        errs += extended_resource_name(ern, "spec.extendedResourceName")
    return errs


def extended_resource_name(val: str, path: str) -> Errs:
    """validate.ExtendedResourceName (declarative, replaces the hand-written check)."""
    from .names import is_qualified_name
    errs: Errs = []
    if "/" not in val:
        errs.append(invalid(path, val, "a name must be a domain-prefixed path, such as 'example.com/my-prop'", covered=True))
    elif "kubernetes.io/" in val:
        errs.append(invalid(path, val, 'must not have "kubernetes.io/" domain', covered=True))
    if val.startswith("requests."):
        errs.append(invalid(path, val, 'must not have "requests." prefix', covered=True))
    errs += [invalid(path, val, m, covered=True) for m in is_qualified_name("requests." + val, True)]
    return errs


__all__ = ["validate_resource_claim", "validate_resource_claim_update", "validate_resource_claim_template",
           "validate_resource_claim_template_update", "validate_device_class", "device_claim", "FieldErr"]
