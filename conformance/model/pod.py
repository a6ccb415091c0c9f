"""The parts of core/v1 Pod and Node that DRA touches. Other pod fields are kept as given and
left to the API server (or ignored by the reference backend)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import FieldError
from .meta import ObjectMeta, parse_meta
from .reader import Reader, check_dns_label, check_dns_subdomain


@dataclass(frozen=True, slots=True)
class PodClaimRef:
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@dataclass(frozen=True, slots=True)
class ContainerClaims:
    container: str
    claims: tuple[tuple[str, str | None], ...]  # (pod claim entry, request)
    requests: dict[str, str] = field(hash=False)
    limits: dict[str, str] = field(default_factory=dict, hash=False)
    init: bool = False                  # an init container (listed before the regular ones)
    restart_policy: str | None = None   # "Always" makes an init container a sidecar


@dataclass(frozen=True, slots=True, eq=False)
class Pod:
    meta: ObjectMeta
    node_name: str | None
    resource_claims: tuple[PodClaimRef, ...]
    containers: tuple[ContainerClaims, ...]
    node_selector: dict[str, str]
    scheduling_gates: tuple[str, ...] = ()
    scheduling_group: str | None = None          # spec.schedulingGroup.podGroupName (GenericWorkload)
    pod_requests: dict[str, str] = field(default_factory=dict, hash=False)  # spec.resources.requests
    pod_limits: dict[str, str] = field(default_factory=dict, hash=False)    # spec.resources.limits
    overhead: dict[str, str] = field(default_factory=dict, hash=False)      # spec.overhead

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True)
class Node:
    meta: ObjectMeta
    allocatable: dict[str, str] = field(hash=False)
    declared_features: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name


def _claim_ref(r: Reader) -> PodClaimRef:
    name = r.str("name", required=True)
    assert name is not None
    check_dns_label(r.at("name"), name)
    rc = r.str("resourceClaimName")
    rt = r.str("resourceClaimTemplateName")
    r.done()
    if (rc is None) == (rt is None):
        raise FieldError(r.path, "exactly one of resourceClaimName or resourceClaimTemplateName is required")
    return PodClaimRef(name, rc, rt)


def _container(r: Reader, claim_names: set[str], *, init: bool = False) -> ContainerClaims:
    name = r.str("name", required=True)
    assert name is not None
    claims: list[tuple[str, str | None]] = []
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    restart = r.str("restartPolicy")
    res = r.obj("resources")
    if res is not None:
        for item, path in res.items("claims"):
            c = Reader(item, path)
            cn = c.str("name", required=True)
            rq = c.str("request")
            c.done()
            assert cn is not None
            if cn not in claim_names:
                raise FieldError(c.at("name"), f"must match the name of an entry in spec.resourceClaims: {cn!r}")
            claims.append((cn, rq))
        raw = res.raw("requests") or {}
        if not isinstance(raw, dict):
            raise FieldError(res.at("requests"), "must be an object")
        requests = {str(k): str(v) for k, v in raw.items()}
        raw_limits = res.raw("limits") or {}
        if not isinstance(raw_limits, dict):
            raise FieldError(res.at("limits"), "must be an object")
        limits = {str(k): str(v) for k, v in raw_limits.items()}
        _check_resources(res.path, requests, limits)
        res.done()
    for key in list(r.data):
        r.raw(key)
    return ContainerClaims(name, tuple(claims), requests, limits, init, restart)


def is_extended_resource_name(name: str) -> bool:
    """Upstream IsExtendedResourceName: not native (unprefixed or under ``kubernetes.io/``), not
    ``requests.``-prefixed, and ``requests.<name>`` must be a qualified name."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, rest = ("requests." + name).partition("/")
    import re
    if len(prefix) > 253 or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z", prefix):
        return False
    return bool(rest) and len(rest) <= 63 and re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z", rest) is not None


def _check_resources(path: tuple[object, ...], requests: dict[str, str], limits: dict[str, str]) -> None:
    """The parts of container resource validation that DRA-backed extended resources meet:
    quantities parse, extended resources are whole numbers and request equals limit."""
    from ..quantity import Quantity
    for section, values in (("requests", requests), ("limits", limits)):
        for k, v in values.items():
            try:
                q = Quantity.parse(v)
            except ValueError as exc:
                raise FieldError(path + (section, k), f"invalid quantity {v!r}: {exc}") from None
            if is_extended_resource_name(k) and not q.is_integer():
                raise FieldError(path + (section, k), f"Invalid value: {v!r}: must be an integer")
    for k in requests:
        if is_extended_resource_name(k) and k in limits and Quantity.parse(requests[k]) != Quantity.parse(limits[k]):
            raise FieldError(path + ("requests", k), f"Invalid value: {requests[k]!r}: must be equal to {k} limit of {limits[k]}")
        if is_extended_resource_name(k) and k not in limits:
            raise FieldError(path + ("limits",), "Required value: Limit must be set for non overcommitable resources")


def parse_pod(r: Reader) -> Pod:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=True, name_check=check_dns_label)
    s = r.obj("spec", required=True)
    assert s is not None
    node_name = s.str("nodeName")
    refs = s.objs("resourceClaims", _claim_ref)
    names = [x.name for x in refs]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise FieldError(s.at("resourceClaims") + (i, "name"), f"duplicate name {n!r}")
    containers = s.objs("containers", lambda c: _container(c, set(names)), required=True)
    init = s.objs("initContainers", lambda c: _container(c, set(names), init=True))
    selector = s.str_map("nodeSelector")
    gates = tuple(str(g.get("name")) for g, _ in s.items("schedulingGates") if isinstance(g, dict))
    group = None
    sg = s.obj("schedulingGroup")
    if sg is not None:
        group = sg.str("podGroupName")
        sg.done()
        if group is None:
            raise FieldError(sg.path, "Required value: exactly one of podGroupName must be set")
        check_dns_subdomain(sg.at("podGroupName"), group)
    pod_requests: dict[str, str] = {}
    pod_limits: dict[str, str] = {}
    pres = s.obj("resources")
    if pres is not None:
        pod_requests = {str(k): str(v) for k, v in (pres.raw("requests") or {}).items()}
        pod_limits = {str(k): str(v) for k, v in (pres.raw("limits") or {}).items()}
        for key in list(pres.data):
            pres.raw(key)
    overhead = {str(k): str(v) for k, v in (s.raw("overhead") or {}).items()}
    for key in list(s.data):
        s.raw(key)
    r.ignore("status")
    r.done()
    return Pod(meta, node_name, refs, init + containers, selector, gates, group, pod_requests, pod_limits, overhead)


def parse_node(r: Reader) -> Node:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=False)
    s = r.obj("spec")
    if s is not None:
        for key in list(s.data):
            s.raw(key)
    st = r.obj("status")
    alloc: dict[str, str] = {}
    if st is not None:
        raw = st.raw("allocatable") or {}
        alloc = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        declared = tuple(st.strs("declaredFeatures"))
        for key in list(st.data):
            st.raw(key)
    else:
        declared = ()
    r.done()
    return Node(meta, alloc, declared)
