"""The DRA-relevant part of Pod validation (pkg/apis/core/validation): ``spec.resourceClaims``
and each container's ``resources.claims``, plus the container basics a pod manifest needs
(name, image) and the amounts of its resources (``podresources``). Other pod fields are the API
server's business; the reference does not judge them."""

from __future__ import annotations

from typing import Any, Mapping

from .common import Errs, as_dict, as_list, dns_label
from .errs import child, duplicate, index, invalid, not_found, required
from .meta import validate_object_meta
from .names import name_is_dns_subdomain
from .podresources import container_requirements, pod_level
from .verdict import GoRepr, go_json


def _claim_repr(claim: dict[str, Any]) -> GoRepr:
    """The internal core.PodResourceClaim as json.Marshal prints it (no JSON tags: Go field names)."""
    out: dict[str, Any] = {"Name": claim.get("name") or "", "ResourceClaimName": claim.get("resourceClaimName"),
                           "ResourceClaimTemplateName": claim.get("resourceClaimTemplateName")}
    return GoRepr(go_json(out, sort_keys=False))


def pod_resource_claims(claims: list[Any], path: str) -> Errs:
    errs: Errs = []
    seen: set[str] = set()
    for i, c in enumerate(claims):
        c = as_dict(c)
        p = index(path, i)
        name = c.get("name") or ""
        if not name:
            errs.append(required(child(p, "name")))
        elif name in seen:
            errs.append(duplicate(child(p, "name"), name))
        else:
            errs += dns_label(name, child(p, "name"))
            seen.add(name)
        rc, rct = c.get("resourceClaimName"), c.get("resourceClaimTemplateName")
        if rc is not None and rct is not None:
            errs.append(invalid(p, _claim_repr(c), "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
        if rc is None and rct is None:
            errs.append(invalid(p, _claim_repr(c), "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
        if rc is not None:
            errs += [invalid(child(p, "resourceClaimName"), rc, m) for m in name_is_dns_subdomain(rc, False)]
        if rct is not None:
            errs += [invalid(child(p, "resourceClaimTemplateName"), rct, m) for m in name_is_dns_subdomain(rct, False)]
    return errs


def container_claims(claims: list[Any], pod_claims: set[str], path: str) -> Errs:
    errs: Errs = []
    names: list[str] = []
    for i, c in enumerate(claims):
        c = as_dict(c)
        p = index(path, i)
        name = c.get("name") or ""
        if not name:
            errs.append(required(p))
            continue
        if name in names:
            errs.append(duplicate(p, name))
        else:
            key = name
            req = c.get("request") or ""
            if req:
                errs += dns_label(req, child(p, "request"))
                key += "/" + req
            if key in names:
                errs.append(duplicate(p, key))
            elif not req:
                for k in names:
                    if "/" in k and k.split("/", 1)[0] == name:
                        errs.append(duplicate(p, name))
            names.append(key)
        if name not in pod_claims:
            detail = "must be one of the names in pod.spec.resourceClaims"
            detail += " which is empty" if not pod_claims else ": " + ", ".join(sorted(pod_claims))
            e = not_found(p, name)
            errs.append(type(e)(e.type, e.field, detail, value=name))
    return errs


def _containers(containers: list[Any], pod_claims: set[str], path: str) -> Errs:
    errs: Errs = []
    seen: set[str] = set()
    for i, c in enumerate(containers):
        c = as_dict(c)
        p = index(path, i)
        name = c.get("name") or ""
        if not name:
            errs.append(required(child(p, "name")))
        else:
            errs += dns_label(name, child(p, "name"))
            if name in seen:
                errs.append(duplicate(child(p, "name"), name))
            seen.add(name)
        if not c.get("image"):
            errs.append(required(child(p, "image")))
        errs += container_requirements(c, p)
        res = as_dict(c.get("resources"))
        errs += container_claims(as_list(res.get("claims")), pod_claims, child(p, "resources", "claims"))
    return errs


def validate_pod(obj: dict[str, Any], gates: Mapping[str, bool]) -> Errs:
    spec = as_dict(obj.get("spec"))
    errs = validate_object_meta(as_dict(obj.get("metadata")), True)
    claims = as_list(spec.get("resourceClaims"))
    pod_claims = {str(as_dict(c).get("name")) for c in claims if as_dict(c).get("name")}
    errs += pod_resource_claims(claims, "spec.resourceClaims")
    containers = as_list(spec.get("containers"))
    if not containers:
        errs.append(required("spec.containers"))
    errs += _containers(containers, pod_claims, "spec.containers")
    errs += _containers(as_list(spec.get("initContainers")), pod_claims, "spec.initContainers")
    errs += pod_level(spec)
    return errs
