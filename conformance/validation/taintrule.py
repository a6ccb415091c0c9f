"""DeviceTaintRule and ResourcePoolStatusRequest validation."""

from __future__ import annotations

from typing import Any, Mapping

from .common import as_dict, dns_label, driver_name, pool_name, taint
from .errs import child, invalid, required
from .meta import validate_object_meta, validate_object_meta_update
from .names import DNS1123_SUBDOMAIN_FMT, blen
from .verdict import FieldErr
import re


def validate_device_taint_rule(obj: dict[str, Any], gates: Mapping[str, bool], old: dict[str, Any] | None) -> list[FieldErr]:
    meta = as_dict(obj.get("metadata"))
    errs = validate_object_meta(meta, False) if old is None else validate_object_meta_update(meta, as_dict(old.get("metadata")))
    spec = as_dict(obj.get("spec"))
    old_spec = as_dict(old.get("spec")) if old is not None else None
    sel = spec.get("deviceSelector")
    if isinstance(sel, dict):
        p = "spec.deviceSelector"
        if sel.get("driver") is not None:
            errs += driver_name(sel["driver"], child(p, "driver"))
        if sel.get("pool") is not None:
            errs += pool_name(sel["pool"], child(p, "pool"))
        if sel.get("device") is not None:
            errs += dns_label(sel["device"], child(p, "device"))
    errs += taint(as_dict(spec.get("taint")), as_dict(old_spec.get("taint")) if old_spec is not None else None, "spec.taint")
    return errs


_CASELESS = re.compile("^(?i:" + DNS1123_SUBDOMAIN_FMT + ")$")
_CASELESS_MSG = ("an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start and end "
                 "with an alphanumeric character")


def validate_pool_status_request(obj: dict[str, Any], gates: Mapping[str, bool], old: dict[str, Any] | None) -> list[FieldErr]:
    meta = as_dict(obj.get("metadata"))
    errs = validate_object_meta(meta, False) if old is None else validate_object_meta_update(meta, as_dict(old.get("metadata")))
    spec = as_dict(obj.get("spec"))
    dv: list[FieldErr] = []
    if old is not None:
        from .common import semantic_equal
        if not semantic_equal(obj.get("spec"), old.get("spec")):
            dv.append(FieldErr("FieldValueInvalid", "spec", "field is immutable", value=None, origin="immutable", declarative=True))
        return errs + dv
    driver = spec.get("driver") or ""
    if not driver:
        dv.append(required("spec.driver", covered=True))
    else:
        from .names import is_dns1123_subdomain_caseless
        dv += [invalid("spec.driver", driver, m, covered=True) for m in is_dns1123_subdomain_caseless(driver, True)]
    if spec.get("poolName") is not None:
        dv += dv_pool_name(spec["poolName"], "spec.poolName")
    limit = spec.get("limit")
    if limit is None:
        dv.append(required("spec.limit", covered=True))
    elif isinstance(limit, int):
        if limit > 1000:
            dv.append(invalid("spec.limit", limit, "must be less than or equal to 1000", covered=True))
        if limit < 1:
            dv.append(invalid("spec.limit", limit, "must be greater than or equal to 1", covered=True))
    return errs + dv


def _omit() -> Any:
    from .verdict import OMIT
    return OMIT


def dv_pool_name(val: str, path: str) -> list[FieldErr]:
    """validate.ResourcePoolName (declarative)."""
    from .errs import too_long
    from .names import is_dns1123_subdomain
    errs: list[FieldErr] = []
    if blen(val) > 253:
        errs.append(too_long(path, 253, covered=True))
    for i, part in enumerate(val.split("/")):
        if not part:
            errs.append(invalid(path, val, f"segment {i}: must not be empty", covered=True))
            continue
        errs += [invalid(path, part, f"segment {i}: " + m, covered=True) for m in is_dns1123_subdomain(part, True)]
    return errs
