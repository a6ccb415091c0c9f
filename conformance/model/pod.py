"""The parts of core/v1 Pod and Node that DRA touches. Other pod fields are kept as given and
left to the API server (or ignored by the reference backend)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import FieldError
from .meta import ObjectMeta, parse_meta
from .reader import Reader, check_dns_label


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


@dataclass(frozen=True, slots=True, eq=False)
class Pod:
    meta: ObjectMeta
    node_name: str | None
    resource_claims: tuple[PodClaimRef, ...]
    containers: tuple[ContainerClaims, ...]
    node_selector: dict[str, str]
    scheduling_gates: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True)
class Node:
    meta: ObjectMeta
    allocatable: dict[str, str] = field(hash=False)

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


def _container(r: Reader, claim_names: set[str]) -> ContainerClaims:
    name = r.str("name", required=True)
    assert name is not None
    claims: list[tuple[str, str | None]] = []
    requests: dict[str, str] = {}
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
        res.ignore("limits")
        res.done()
    for key in list(r.data):
        r.raw(key)
    return ContainerClaims(name, tuple(claims), requests)


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
    init = s.objs("initContainers", lambda c: _container(c, set(names)))
    selector = s.str_map("nodeSelector")
    gates = tuple(str(g.get("name")) for g, _ in s.items("schedulingGates") if isinstance(g, dict))
    for key in list(s.data):
        s.raw(key)
    r.ignore("status")
    r.done()
    return Pod(meta, node_name, refs, init + containers, selector, gates)


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
        for key in list(st.data):
            st.raw(key)
    r.done()
    return Node(meta, alloc)
