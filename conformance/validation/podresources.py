"""The quantity part of Pod resource validation (pkg/apis/core/validation, 1.37): every amount
in a container's ``resources`` (containers and init containers), the pod-level ``resources``
and ``overhead`` is not negative, integer resources are whole numbers, and a request is at most
its limit (equal to it for resources that cannot be overcommitted). Also the defaulting the API
server does before it: a container's requests default to its limits.

Not modelled (the API server's business, not DRA's): resource *names*, hugepages rules and the
pod-level defaulting from aggregated container requests (PodLevelResources), so an error about a
pod-level amount that upstream derives from the containers is not reported here."""

from __future__ import annotations

import re
from typing import Any

from ..quantity import Quantity
from .common import Errs, as_dict, as_list
from .errs import child, forbidden, invalid, key, required, unordered

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_ZERO = Quantity("0")


def _native(name: str) -> bool:
    """IsNativeResource: no domain, or a ``kubernetes.io/`` one."""
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    """IsExtendedResourceName: not native, not ``requests.``-prefixed, and ``requests.<name>`` is a
    qualified name."""
    if _native(name) or name.startswith("requests."):
        return False
    prefix, _, rest = ("requests." + name).partition("/")
    return (len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix) is not None and 0 < len(rest) <= 63
            and _NAME_PART.match(rest) is not None)


def _overcommit(name: str) -> bool:
    """IsOvercommitAllowed: native and not hugepages."""
    return _native(name) and not name.startswith("hugepages-")


def _quantity(v: Any) -> Quantity | None:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        return None
    try:
        return Quantity(str(v))
    except ValueError:
        return None  # not a quantity: refused when the object is decoded, not here


def _amount(name: str, q: Quantity, path: str) -> Errs:
    """ValidateResourceQuantityValue."""
    if q.compare(_ZERO) < 0:
        return [invalid(path, q.canonical(), "must be greater than or equal to 0")]
    if _extended(name) and not q.is_integer():
        return [invalid(path, q.canonical(), "must be an integer")]
    return []


def requirements(res: Any, path: str, *, limits_only: bool = False) -> Errs:
    """The quantities of one ResourceRequirements (limits first, then requests, as upstream)."""
    res = as_dict(res)
    lims = {str(k): q for k, v in as_dict(res.get("limits")).items() if (q := _quantity(v)) is not None}
    reqs = {} if limits_only else {str(k): q for k, v in as_dict(res.get("requests")).items() if (q := _quantity(v)) is not None}
    lim_path, req_path = child(path, "limits"), child(path, "requests")
    errs: Errs = []
    for name, q in lims.items():
        errs += _amount(name, q, key(lim_path, name))
    for name, q in reqs.items():
        errs += _amount(name, q, key(req_path, name))
        lim = lims.get(name)
        if lim is not None:
            if q.compare(lim) != 0 and not _overcommit(name):
                errs.append(invalid(req_path, q.canonical(), f"must be equal to {name} limit of {lim.canonical()}"))
            elif q.compare(lim) > 0:
                errs.append(invalid(req_path, q.canonical(), f"must be less than or equal to {name} limit of {lim.canonical()}"))
        elif not _overcommit(name):
            errs.append(required(lim_path, "Limit must be set for non overcommitable resources"))
    errs = unordered(errs)  # upstream walks Go maps
    names = set(lims) | set(reqs)
    if not limits_only and not names & {"cpu", "memory"} and any(n.startswith("hugepages-") for n in names):
        errs.append(forbidden(path, "HugePages require cpu or memory"))
    return errs


def container_requirements(c: Any, path: str) -> Errs:
    return requirements(as_dict(c).get("resources"), child(path, "resources"))


def pod_level(spec: dict[str, Any]) -> Errs:
    """``spec.resources`` and ``spec.overhead`` (validated as limits, under ``spec.overhead.limits``)."""
    errs: Errs = []
    if isinstance(spec.get("resources"), dict):
        errs += requirements(spec["resources"], "spec.resources")
    if isinstance(spec.get("overhead"), dict):
        errs += requirements({"limits": spec["overhead"]}, "spec.overhead", limits_only=True)
    return errs


def default_requests(spec: Any) -> None:
    """SetDefaults_Pod: a container's missing requests default to its limits."""
    for k in ("initContainers", "containers"):
        for c in as_list(as_dict(spec).get(k)):
            res = as_dict(as_dict(c).get("resources"))
            limits = res.get("limits")
            if isinstance(limits, dict) and limits:
                reqs = res.setdefault("requests", {})
                if isinstance(reqs, dict):
                    for name, v in limits.items():
                        reqs.setdefault(name, v)


__all__ = ["container_requirements", "default_requests", "pod_level", "requirements"]
