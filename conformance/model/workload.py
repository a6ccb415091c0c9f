"""PodGroup and Workload (``scheduling.k8s.io/v1beta1``), the parts DRA touches.

API shape: ``k8s.io/api`` v0.37.2 ``scheduling/v1beta1``: ``PodGroup.spec.{workloadRef,
schedulingPolicy{basic|gang{minCount}}, resourceClaims[≤4]{name, resourceClaimName |
resourceClaimTemplateName}}``, ``PodGroup.status.resourceClaimStatuses[]{name,
resourceClaimName}``; ``Workload.spec.podGroupTemplates[≤8]{name, schedulingPolicy,
resourceClaims[≤4]}``. Pods join a group with ``spec.schedulingGroup.podGroupName``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FieldError
from .meta import ObjectMeta, parse_meta
from .reader import Reader, check_dns_label, check_dns_subdomain

MAX_GROUP_CLAIMS = 4
MAX_POD_GROUP_TEMPLATES = 8
API_VERSION = "scheduling.k8s.io/v1beta1"


@dataclass(frozen=True, slots=True)
class PodGroupClaim:
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class PodGroup:
    meta: ObjectMeta
    policy: str                      # basic | gang
    min_count: int | None
    resource_claims: tuple[PodGroupClaim, ...] = ()
    workload: str | None = None
    template: str | None = None


@dataclass(frozen=True, slots=True)
class PodGroupTemplate:
    name: str
    policy: str
    min_count: int | None
    resource_claims: tuple[PodGroupClaim, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class Workload:
    meta: ObjectMeta
    templates: tuple[PodGroupTemplate, ...]


def _policy(r: Reader, key: str = "schedulingPolicy") -> tuple[str, int | None]:
    p = r.obj(key, required=True)
    assert p is not None
    basic = p.obj("basic")
    gang = p.obj("gang")
    p.done()
    if (basic is None) == (gang is None):
        raise FieldError(p.path, "must specify exactly one of: `basic`, `gang`")
    if basic is not None:
        basic.done()
        return "basic", None
    assert gang is not None
    n = gang.int("minCount", required=True)
    gang.done()
    assert n is not None
    if n < 1:
        raise FieldError(gang.at("minCount"), f"Invalid value: {n}: must be greater than or equal to 1")
    return "gang", n


def _claim(r: Reader) -> PodGroupClaim:
    name = r.str("name", required=True)
    assert name is not None
    check_dns_label(r.at("name"), name)
    rc = r.str("resourceClaimName")
    rt = r.str("resourceClaimTemplateName")
    r.done()
    if (rc is None) == (rt is None):
        raise FieldError(r.path, "must specify exactly one of: `resourceClaimName`, `resourceClaimTemplateName`")
    for key, v in (("resourceClaimName", rc), ("resourceClaimTemplateName", rt)):
        if v is not None:
            check_dns_subdomain(r.at(key), v)
    return PodGroupClaim(name, rc, rt)


def _claims(r: Reader) -> tuple[PodGroupClaim, ...]:
    claims = r.objs("resourceClaims", _claim, max_items=MAX_GROUP_CLAIMS)
    seen: set[str] = set()
    for i, c in enumerate(claims):
        if c.name in seen:
            raise FieldError(r.at("resourceClaims") + (i, "name"), f"Duplicate value: {c.name!r}")
        seen.add(c.name)
    return claims


def parse_pod_group(r: Reader) -> PodGroup:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=True)
    s = r.obj("spec", required=True)
    assert s is not None
    workload = template = None
    ref = s.obj("workloadRef")
    if ref is not None:
        workload = ref.str("workloadName", required=True)
        template = ref.str("templateName", required=True)
        ref.done()
    policy, n = _policy(s)
    claims = _claims(s)
    s.ignore("schedulingConstraints", "disruptionMode", "priorityClassName", "priority", "preemptionPolicy",
             "parentCompositePodGroupName")
    s.done()
    r.ignore("status")
    r.done()
    return PodGroup(meta, policy, n, claims, workload, template)


def _template(r: Reader) -> PodGroupTemplate:
    name = r.str("name", required=True)
    assert name is not None
    check_dns_label(r.at("name"), name)
    policy, n = _policy(r)
    claims = _claims(r)
    r.ignore("schedulingConstraints", "disruptionMode", "priorityClassName", "priority", "preemptionPolicy")
    r.done()
    return PodGroupTemplate(name, policy, n, claims)


def parse_workload(r: Reader) -> Workload:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=True)
    s = r.obj("spec", required=True)
    assert s is not None
    templates = s.objs("podGroupTemplates", _template, max_items=MAX_POD_GROUP_TEMPLATES)
    names = [t.name for t in templates]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise FieldError(s.at("podGroupTemplates") + (i, "name"), f"Duplicate value: {n!r}")
    s.ignore("controllerRef", "compositePodGroupTemplates")
    s.done()
    r.done()
    return Workload(meta, templates)
