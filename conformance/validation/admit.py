"""The admission pipeline of one write, as the API server runs it: decode (unknown fields are a
``BadRequest``), default, PrepareForCreate / PrepareForUpdate (status reset, gate-off fields
dropped), validate (hand-written checks first, then those declarative validation reports), and
the verdict with ``errors.NewInvalid``'s message. Pure: no I/O, no clock (the caller passes the
time stamp that defaulting writes)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..errors import FieldError
from ..yamlmarks import copy_tree
from .claim import (validate_device_class, validate_resource_claim, validate_resource_claim_template,
                    validate_resource_claim_template_update, validate_resource_claim_update)
from .common import as_dict, as_list
from .errs import forbidden
from .fieldgates import drop_disabled_fields
from .pod import validate_pod
from .slices import validate_resource_slice, validate_resource_slice_update
from .taintrule import validate_device_taint_rule, validate_pool_status_request
from .verdict import FieldErr, Verdict, invalid_message, qualified_kind

ADMIN_LABEL = "resource.kubernetes.io/admin-access"

# (apiVersion, kind) -> served kinds of the admission model.
KINDS = {("resource.k8s.io/v1", "ResourceClaim"), ("resource.k8s.io/v1", "ResourceClaimTemplate"),
         ("resource.k8s.io/v1", "DeviceClass"), ("resource.k8s.io/v1", "ResourceSlice"),
         ("resource.k8s.io/v1", "DeviceTaintRule"), ("resource.k8s.io/v1alpha3", "ResourcePoolStatusRequest"),
         ("v1", "Pod")}
NAMESPACED = {"ResourceClaim", "ResourceClaimTemplate", "Pod"}
RESET_STATUS_ON_CREATE = {"ResourceClaim", "DeviceTaintRule", "ResourcePoolStatusRequest"}


def _default_request(body: dict[str, Any]) -> None:
    if not body.get("allocationMode"):
        body["allocationMode"] = "ExactCount"
    if body.get("count") == 0:
        del body["count"]
    if body["allocationMode"] == "ExactCount" and not body.get("count"):
        body["count"] = 1
    for t in as_list(body.get("tolerations")):
        if isinstance(t, dict) and not t.get("operator"):
            t["operator"] = "Equal"


def default_claim_spec(spec: Any) -> None:
    for req in as_list(as_dict(as_dict(spec).get("devices")).get("requests")):
        if not isinstance(req, dict):
            continue
        if isinstance(req.get("exactly"), dict):
            _default_request(req["exactly"])
        for sub in as_list(req.get("firstAvailable")):
            if isinstance(sub, dict):
                _default_request(sub)


def default_taints(obj: dict[str, Any], stamp: str) -> None:
    kind = obj.get("kind")
    if kind == "ResourceSlice":
        for d in as_list(as_dict(obj.get("spec")).get("devices")):
            for t in as_list(as_dict(d).get("taints")):
                if isinstance(t, dict) and not t.get("timeAdded"):
                    t["timeAdded"] = stamp
    elif kind == "DeviceTaintRule":
        t = as_dict(obj.get("spec")).get("taint")
        if isinstance(t, dict) and not t.get("timeAdded"):
            t["timeAdded"] = stamp


def _canonical(q: Any, problems: list[str]) -> Any:
    from ..quantity import Quantity
    if isinstance(q, bool) or not isinstance(q, (str, int, float)):
        return q
    try:
        return Quantity(str(q)).canonical()
    except ValueError as exc:  # decoding refuses it: the first one is the answer
        problems.append(str(exc))
        return q


def _canonical_map(m: Any, problems: list[str]) -> None:
    if isinstance(m, dict):
        for k in list(m):
            m[k] = _canonical(m[k], problems) if not isinstance(m[k], dict) else m[k]


def canonical_quantities(obj: dict[str, Any]) -> str | None:
    """Quantities are stored in canonical form (``1000m`` is ``1``), as the API server writes them.
    Returns why the first one that is no quantity cannot be decoded (None: all are quantities)."""
    problems: list[str] = []
    kind = obj.get("kind")
    spec = as_dict(obj.get("spec"))
    if kind == "ResourceClaimTemplate":
        spec = as_dict(spec.get("spec"))
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        for req in as_list(as_dict(spec.get("devices")).get("requests")):
            bodies = [as_dict(req).get("exactly")] + as_list(as_dict(req).get("firstAvailable"))
            for b in bodies:
                _canonical_map(as_dict(as_dict(as_dict(b).get("capacity")).get("requests")), problems)
    elif kind == "ResourceSlice":
        for d in as_list(spec.get("devices")):
            for c in as_dict(as_dict(d).get("capacity")).values():
                c = as_dict(c)
                if "value" in c:
                    c["value"] = _canonical(c["value"], problems)
                pol = as_dict(c.get("requestPolicy"))
                if "default" in pol:
                    pol["default"] = _canonical(pol["default"], problems)
                if isinstance(pol.get("validValues"), list):
                    pol["validValues"] = [_canonical(v, problems) for v in pol["validValues"]]
                _canonical_map(as_dict(pol.get("validRange")), problems)
            for cc in as_list(as_dict(d).get("consumesCounters")):
                for v in as_dict(as_dict(cc).get("counters")).values():
                    if isinstance(v, dict) and "value" in v:
                        v["value"] = _canonical(v["value"], problems)
        for cs in as_list(spec.get("sharedCounters")):
            for v in as_dict(as_dict(cs).get("counters")).values():
                if isinstance(v, dict) and "value" in v:
                    v["value"] = _canonical(v["value"], problems)
    elif kind == "Pod":
        for c in as_list(spec.get("initContainers")) + as_list(spec.get("containers")):
            res = as_dict(as_dict(c).get("resources"))
            _canonical_map(as_dict(res.get("limits")), problems)
            _canonical_map(as_dict(res.get("requests")), problems)
        _canonical_map(as_dict(as_dict(spec.get("resources")).get("limits")), problems)
        _canonical_map(as_dict(as_dict(spec.get("resources")).get("requests")), problems)
        _canonical_map(as_dict(spec.get("overhead")), problems)
    return problems[0] if problems else None


def apply_defaults(obj: dict[str, Any], stamp: str) -> None:
    """What decoding defaults (SetObjectDefaults_*) for the kinds the reference models."""
    kind = obj.get("kind")
    if kind == "ResourceClaim":
        default_claim_spec(obj.get("spec"))
    elif kind == "ResourceClaimTemplate":
        default_claim_spec(as_dict(obj.get("spec")).get("spec"))
    elif kind in ("ResourceSlice", "DeviceTaintRule"):
        default_taints(obj, stamp)
    elif kind == "ResourcePoolStatusRequest" and isinstance(obj.get("spec"), dict):
        obj["spec"].setdefault("limit", 100)
    elif kind == "Pod":
        from .podresources import default_requests
        default_requests(obj.get("spec"))


def admin_access_errors(obj: dict[str, Any], namespace_labels: Mapping[str, str] | None) -> list[FieldErr]:
    """resourceutils.AuthorizedForAdmin: the path is the claim's even inside a template."""
    spec = as_dict(obj.get("spec"))
    if obj.get("kind") == "ResourceClaimTemplate":
        spec = as_dict(spec.get("spec"))
    for i, req in enumerate(as_list(as_dict(spec.get("devices")).get("requests"))):
        exactly = as_dict(req).get("exactly")
        if isinstance(exactly, dict) and exactly.get("adminAccess") is True:
            if (namespace_labels or {}).get(ADMIN_LABEL) != "true":
                return [forbidden(f"spec.devices.requests[{i}].adminAccess",
                                  f"admin access to devices requires the `{ADMIN_LABEL}: true` label on the containing namespace")]
            return []
    return []


Validator = Callable[..., list[FieldErr]]


def _validate(obj: dict[str, Any], old: dict[str, Any] | None, gates: Mapping[str, bool],
              namespace_labels: Mapping[str, str] | None) -> list[FieldErr]:
    kind = obj.get("kind")
    if kind == "ResourceClaim":
        if old is None:
            return admin_access_errors(obj, namespace_labels) + validate_resource_claim(obj, gates)
        return validate_resource_claim_update(obj, old, gates)
    if kind == "ResourceClaimTemplate":
        if old is None:
            return admin_access_errors(obj, namespace_labels) + validate_resource_claim_template(obj, gates)
        return validate_resource_claim_template_update(obj, old, gates)
    if kind == "DeviceClass":
        return validate_device_class(obj, gates, old)
    if kind == "ResourceSlice":
        return validate_resource_slice(obj, gates) if old is None else validate_resource_slice_update(obj, old, gates)
    if kind == "DeviceTaintRule":
        return validate_device_taint_rule(obj, gates, old)
    if kind == "ResourcePoolStatusRequest":
        return validate_pool_status_request(obj, gates, old)
    if kind == "Pod":
        return validate_pod(obj, gates)
    return []


def order(errors: list[FieldErr]) -> list[FieldErr]:
    """Hand-written errors first, without repeats (merging them with declarative validation's
    goes through ``ErrorList.Filter``, which drops repeated messages); then the errors
    declarative validation reports."""
    seen: set[str] = set()
    hand: list[FieldErr] = []
    for e in errors:
        if not e.declarative and e.message() not in seen:
            seen.add(e.message())
            hand.append(e)
    return hand + [e for e in errors if e.declarative]


def _unknown_field(obj: dict[str, Any]) -> str | None:
    """The path of an unknown field, as strict decoding names it, or None.

    The typed model knows every field; it stops at its first complaint, so a complaint that is
    not about an unknown field is cleared (a list cut to its limit, the value removed, a missing
    value filled in) and the object read again, until it reads or an unknown field shows."""
    import re

    from ..errors import format_path
    from ..model import parse_object
    probe = copy_tree(obj)
    seen: set[tuple[object, ...]] = set()
    for _ in range(64):
        try:
            parse_object(copy_tree(probe))
            return None
        except FieldError as exc:
            if exc.message == "unknown field":
                return format_path(exc.path)
            path = tuple(exc.path)
            while path in seen and len(path) > 1:  # the same complaint again: clear its parent instead
                path = path[:-1]
            seen.add(path)
            if not path or not _clear(probe, path, re.match(r"must have at most (\d+) items", exc.message)):
                return None
        except Exception:  # noqa: BLE001 - the model's other complaints are not decoding errors
            return None
    return None


def _clear(obj: Any, path: tuple[object, ...], too_many: Any) -> bool:
    """Remove the complaint at ``path`` from ``obj``; False when nothing could be changed."""
    parent = obj
    for part in path[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return False
    last = path[-1]
    try:
        value = parent[last]
    except (KeyError, IndexError, TypeError):
        value = None
    if too_many and isinstance(value, list):
        del value[int(too_many.group(1)):]
        return True
    if isinstance(parent, dict):
        if value is None or value == "":
            parent[last] = "x" if last != "count" else 1  # a missing value: any will do
            return True
        if isinstance(value, str) and value != "x":
            parent[last] = "x"  # a malformed name: a plain valid one (the field may be required)
            return True
        del parent[last]
        return True
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        del parent[last]
        return True
    return False


def admit(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None, *, gates: Mapping[str, bool],
          namespace_labels: Mapping[str, str] | None = None, stamp: str = "1970-01-01T00:00:00Z") -> Verdict:
    """The verdict of the API server's admission for ``obj`` (an update of ``old`` when given).
    ``gates`` override the 1.37 defaults."""
    from ..features import DEFAULT_GATES
    gates = {**DEFAULT_GATES, **gates}
    new = copy_tree(dict(obj))
    api, kind = new.get("apiVersion", ""), new.get("kind", "")
    meta = new.setdefault("metadata", {})
    if kind in NAMESPACED and not meta.get("namespace"):
        meta["namespace"] = "default"
    bad = canonical_quantities(new)
    if bad:
        return Verdict(False, status="BadRequest",
                       message=f'{kind} in version "{api.rpartition("/")[2]}" cannot be handled as a {kind}: {bad}')
    unknown = _unknown_field(new)
    if unknown:
        return Verdict(False, status="BadRequest",
                       message=f'{kind} in version "{api.rpartition("/")[2]}" cannot be handled as a {kind}: '
                               f'strict decoding error: unknown field "{unknown}"')
    apply_defaults(new, stamp)
    old_obj = copy_tree(dict(old)) if old is not None else None
    if old_obj is not None:
        apply_defaults(old_obj, stamp)
        old_meta = as_dict(old_obj.get("metadata"))
        for k in ("uid", "creationTimestamp", "resourceVersion"):
            if old_meta.get(k) and not meta.get(k):
                meta[k] = old_meta[k]
        meta.setdefault("resourceVersion", old_meta.get("resourceVersion") or "1")
        if "generation" in old_meta:
            meta["generation"] = old_meta["generation"]  # rest.BeforeUpdate keeps the stored generation
        else:
            meta.pop("generation", None)
        if "status" in old_obj:
            new["status"] = copy_tree(old_obj["status"])
        else:
            new.pop("status", None)
    elif kind in RESET_STATUS_ON_CREATE:
        new.pop("status", None)
    drop_disabled_fields(new, old_obj, gates)
    errors = _validate(new, old_obj, gates, namespace_labels)
    if old_obj is not None:
        from .meta import validate_common_update
        errors = validate_common_update(meta, as_dict(old_obj.get("metadata")), kind in NAMESPACED) + errors
    errors = order(errors)
    if errors:
        return Verdict(False, status="Invalid", message=invalid_message(qualified_kind(api, kind), meta.get("name") or "", errors),
                       errors=tuple(errors))
    return Verdict(True, stored=new)


__all__ = ["admit", "apply_defaults", "default_claim_spec", "KINDS", "order"]
