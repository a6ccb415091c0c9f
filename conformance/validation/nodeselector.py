"""core/v1 NodeSelector validation (corevalidation.ValidateNodeSelector)."""

from __future__ import annotations

from typing import Any

from .common import Errs, as_dict, as_list, label_name
from .errs import child, forbidden, index, invalid, required
from .names import is_label_value, name_is_dns_subdomain


def _requirement(r: dict[str, Any], path: str) -> Errs:
    errs: Errs = []
    op = r.get("operator") or ""
    values = as_list(r.get("values"))
    if op in ("In", "NotIn"):
        if not values:
            errs.append(required(child(path, "values"), "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            errs.append(forbidden(child(path, "values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(required(child(path, "values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        errs.append(invalid(child(path, "operator"), op, "not a valid selector operator"))
    errs += label_name(r.get("key") or "", child(path, "key"))
    for i, v in enumerate(values):
        errs += [invalid(index(child(path, "values"), i), v, m, origin="format=k8s-label-value") for m in is_label_value(str(v))]
    return errs


def _field_requirement(r: dict[str, Any], path: str) -> Errs:
    errs: Errs = []
    op = r.get("operator") or ""
    values = as_list(r.get("values"))
    if op in ("In", "NotIn"):
        if len(values) != 1:
            errs.append(required(child(path, "values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
    else:
        errs.append(invalid(child(path, "operator"), op, "not a valid selector operator"))
    if r.get("key") != "metadata.name":
        errs.append(invalid(child(path, "key"), r.get("key") or "", "not a valid field selector key"))
    else:
        for i, v in enumerate(values):
            errs += [invalid(index(child(path, "values"), i), v, m) for m in name_is_dns_subdomain(str(v), False)]
    return errs


def node_selector(sel: dict[str, Any], path: str) -> Errs:
    terms_path = child(path, "nodeSelectorTerms")
    terms = as_list(sel.get("nodeSelectorTerms"))
    if not terms:
        return [required(terms_path, "must have at least one node selector term")]
    errs: Errs = []
    for i, t in enumerate(terms):
        t = as_dict(t)
        tp = index(terms_path, i)
        for j, r in enumerate(as_list(t.get("matchExpressions"))):
            errs += _requirement(as_dict(r), index(child(tp, "matchExpressions"), j))
        for j, r in enumerate(as_list(t.get("matchFields"))):
            errs += _field_requirement(as_dict(r), index(child(tp, "matchFields"), j))
    return errs


def internal_terms(raw: Any) -> Any:
    """The internal []core.NodeSelectorTerm as json.Marshal prints it (Go field names, nil as null)."""

    from .verdict import GoRepr, go_json

    def req(r: Any) -> dict[str, Any]:
        r = as_dict(r)
        return {"Key": r.get("key") or "", "Operator": r.get("operator") or "",
                "Values": list(r["values"]) if isinstance(r.get("values"), list) else None}

    def lst(v: Any) -> Any:
        return [req(x) for x in v] if isinstance(v, list) else None
    if not isinstance(raw, list):
        return None
    terms = [{"MatchExpressions": lst(as_dict(t).get("matchExpressions")), "MatchFields": lst(as_dict(t).get("matchFields"))}
             for t in raw]
    return GoRepr(go_json(terms, sort_keys=False))
