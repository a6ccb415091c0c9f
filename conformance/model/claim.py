"""ResourceClaim, ResourceClaimTemplate and DeviceClass specs (resource.k8s.io/v1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import FieldError
from ..quantity import Quantity
from .meta import ObjectMeta, parse_meta
from .reader import Reader, check_dns_label, check_dns_subdomain, check_fully_qualified_name, check_qualified_name

MAX_REQUESTS = 32
MAX_CONSTRAINTS = 32
MAX_CONFIGS = 32
MAX_SELECTORS = 32
MAX_SUBREQUESTS = 8
MAX_TOLERATIONS = 16
MAX_OPAQUE_BYTES = 10 * 1024
MAX_CEL_LENGTH = 10 * 1024
MAX_DERIVED_ATTRIBUTES = 32
ALLOCATION_RESULTS_MAX = 32
MODES = ("ExactCount", "All")
TOLERATION_OPERATORS = ("Exists", "Equal")


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str | None = None
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None

    def to_wire(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.key is not None:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value is not None:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


@dataclass(frozen=True, slots=True)
class OpaqueConfig:
    driver: str
    parameters: Any = field(hash=False, compare=False)

    def to_wire(self) -> dict[str, object]:
        return {"opaque": {"driver": self.driver, "parameters": self.parameters}}


@dataclass(frozen=True, slots=True)
class DerivedAttribute:
    name: str
    expression: str


@dataclass(frozen=True, slots=True, eq=False)
class DeviceRequestSpec:
    """The body shared by ``exactly`` and a ``firstAvailable`` entry."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[Toleration, ...] = ()
    capacity: dict[str, Quantity] | None = None
    derived_attributes: tuple[DerivedAttribute, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class DeviceRequest:
    name: str
    exactly: DeviceRequestSpec | None = None
    first_available: tuple[DeviceRequestSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    requests: tuple[str, ...]
    opaque: OpaqueConfig


@dataclass(frozen=True, slots=True, eq=False)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    config: tuple[ClaimConfig, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class ResourceClaim:
    meta: ObjectMeta
    spec: ClaimSpec

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def ref(self) -> str:
        """``namespace/name`` (or ``name``), as upstream renders a claim in messages."""
        return f"{self.meta.namespace}/{self.meta.name}" if self.meta.namespace else self.meta.name


@dataclass(frozen=True, slots=True, eq=False)
class ResourceClaimTemplate:
    meta: ObjectMeta
    claim_labels: dict[str, str]
    claim_annotations: dict[str, str]
    spec: ClaimSpec


@dataclass(frozen=True, slots=True, eq=False)
class DeviceClass:
    meta: ObjectMeta
    selectors: tuple[str, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()
    extended_resource_name: str | None = None

    @property
    def name(self) -> str:
        return self.meta.name


# --- parsing --------------------------------------------------------------------------------

def _selectors(r: Reader, key: str = "selectors") -> tuple[str, ...]:
    out: list[str] = []
    for item, path in r.items(key, max_items=MAX_SELECTORS):
        s = Reader(item, path)
        c = s.obj("cel", required=True)
        s.done()
        assert c is not None
        expr = c.str("expression", required=True)
        c.done()
        assert expr is not None
        if len(expr.encode()) > MAX_CEL_LENGTH:
            raise FieldError(c.at("expression"), f"must be at most {MAX_CEL_LENGTH} bytes, got {len(expr.encode())}")
        from ..cel import validate_expression
        problem = validate_expression(expr)
        if problem:
            raise FieldError(c.at("expression"), problem if problem.startswith("compilation failed") else f"compilation failed: {problem}")
        out.append(expr)
    return tuple(out)


def _toleration(r: Reader) -> Toleration:
    key = r.str("key")
    op = r.str("operator", default="Equal")
    value = r.str("value")
    effect = r.str("effect")
    secs = r.int("tolerationSeconds")
    r.done()
    assert op is not None
    if op not in TOLERATION_OPERATORS:
        raise FieldError(r.at("operator"), f"unsupported value {op!r}: one of Exists, Equal")
    if op == "Exists" and value:
        raise FieldError(r.at("value"), "must be empty when operator is Exists")
    if key is None and op != "Exists":
        raise FieldError(r.at("operator"), "must be Exists when key is empty")
    if effect is not None and effect not in ("NoSchedule", "NoExecute"):
        raise FieldError(r.at("effect"), f"unsupported value {effect!r}: one of NoSchedule, NoExecute")
    if secs is not None and effect != "NoExecute":
        raise FieldError(r.at("tolerationSeconds"), "only allowed with effect NoExecute")
    return Toleration(key, op, value, effect, secs)


def _request_body(r: Reader, name: str, *, sub: bool) -> DeviceRequestSpec:
    cls = r.str("deviceClassName", required=True)
    assert cls is not None
    check_dns_subdomain(r.at("deviceClassName"), cls)
    selectors = _selectors(r)
    mode = r.str("allocationMode", default="ExactCount")
    assert mode is not None
    if mode not in MODES:
        raise FieldError(r.at("allocationMode"), f"unsupported value {mode!r}: one of ExactCount, All")
    count = r.int("count")
    if count == 0:
        count = None  # an omitted integer: 0 is the same as unset, and ExactCount defaults to 1
    if mode == "All" and count is not None:
        raise FieldError(r.at("count"), "must not be set when allocationMode is All")
    if count is not None and count < 0:
        raise FieldError(r.at("count"), "must be greater than zero")
    admin = None
    if not sub:
        admin = r.bool("adminAccess")
    tolerations = r.objs("tolerations", _toleration, max_items=MAX_TOLERATIONS)
    capacity = None
    cap = r.obj("capacity")
    if cap is not None:
        reqs = cap.raw("requests") or {}
        if not isinstance(reqs, dict):
            raise FieldError(cap.at("requests"), "must be an object")
        capacity = {}
        for k, v in reqs.items():
            check_qualified_name(cap.at("requests") + (k,), str(k))
            try:
                capacity[str(k)] = Quantity.from_yaml(v)
            except (ValueError, TypeError) as exc:
                raise FieldError(cap.at("requests") + (k,), f"invalid quantity {v!r}: {exc}") from None
        cap.done()
    derived = tuple(
        DerivedAttribute(*_derived(Reader(item, path)))
        for item, path in r.items("derivedAttributes", max_items=MAX_DERIVED_ATTRIBUTES)
    )
    if len({d.name for d in derived}) != len(derived):
        raise FieldError(r.at("derivedAttributes"), "derived attribute names must be unique")
    r.done()
    return DeviceRequestSpec(name, cls, selectors, mode, 1 if count is None and mode == "ExactCount" else (count or 0),
                             admin, tolerations, capacity, derived)


def _derived(r: Reader) -> tuple[str, str]:
    name = r.str("name", required=True)
    expr = r.str("expression", required=True)
    r.done()
    assert name is not None and expr is not None
    check_fully_qualified_name(r.at("name"), name)
    if len(expr.encode()) > MAX_CEL_LENGTH:
        raise FieldError(r.at("expression"), f"must be at most {MAX_CEL_LENGTH} bytes, got {len(expr.encode())}")
    from ..cel import CelCompileError
    from ..cel._compile import compile_value_expression
    try:
        compile_value_expression(expr)
    except CelCompileError as exc:
        text = str(exc).split("\n")[0]
        raise FieldError(r.at("expression"), text if text.startswith("compilation failed") else f"compilation failed: {text}") from None
    return name, expr


def _request(r: Reader) -> DeviceRequest:
    name = r.str("name", required=True)
    assert name is not None
    check_dns_label(r.at("name"), name)
    ex = r.obj("exactly")
    fa = list(r.items("firstAvailable", max_items=MAX_SUBREQUESTS))
    r.done()
    if (ex is None) == (not fa):
        raise FieldError(r.path, "exactly one of exactly or firstAvailable is required")
    if ex is not None:
        n = ex.str("name")
        if n is not None:
            raise FieldError(ex.at("name"), "unknown field")
        return DeviceRequest(name, exactly=_request_body(ex, name, sub=False))
    subs: list[DeviceRequestSpec] = []
    for item, path in fa:
        s = Reader(item, path)
        sname = s.str("name", required=True)
        assert sname is not None
        check_dns_label(s.at("name"), sname)
        if any(x.name == sname for x in subs):
            raise FieldError(s.at("name"), f"duplicate subrequest name {sname!r}")
        subs.append(_request_body(s, sname, sub=True))
    return DeviceRequest(name, first_available=tuple(subs))


def _check_request_refs(r: Reader, refs: tuple[str, ...], requests: dict[str, frozenset[str]]) -> None:
    """``req`` names a request; ``req/sub`` a subrequest of a firstAvailable request."""
    for i, ref in enumerate(refs):
        base, sep, sub = ref.partition("/")
        ok = base in requests and (not sep or sub in requests[base])
        if not ok:
            raise FieldError(r.at("requests") + (i,), f"must be the name of a request in the claim or the name of a "
                                                      f"request and a subrequest separated by '/': {ref!r}")


def _constraint(r: Reader, request_names: dict[str, frozenset[str]]) -> Constraint:
    reqs = r.strs("requests", max_items=MAX_REQUESTS, unique=True)
    match = r.str("matchAttribute")
    distinct = r.str("distinctAttribute")
    r.done()
    _check_request_refs(r, reqs, request_names)
    if match is None and distinct is None:
        raise FieldError(r.path, "one of matchAttribute or distinctAttribute is required")
    for key, value in (("matchAttribute", match), ("distinctAttribute", distinct)):
        if value is not None:
            check_fully_qualified_name(r.at(key), value)
    return Constraint(reqs, match, distinct)


def _opaque(r: Reader, *, required: bool = True) -> OpaqueConfig:
    o = r.obj("opaque", required=required)
    assert o is not None
    driver = o.str("driver", required=True)
    assert driver is not None
    check_dns_subdomain(o.at("driver"), driver, 63)
    params = o.raw("parameters")
    if params is None:
        raise FieldError(o.at("parameters"), "required value")
    import json
    if len(json.dumps(params)) > MAX_OPAQUE_BYTES:
        raise FieldError(o.at("parameters"), f"must be at most {MAX_OPAQUE_BYTES} bytes")
    o.done()
    return OpaqueConfig(driver, params)


def _config(r: Reader, request_names: dict[str, frozenset[str]]) -> ClaimConfig:
    reqs = r.strs("requests", max_items=MAX_REQUESTS, unique=True)
    _check_request_refs(r, reqs, request_names)
    opaque = _opaque(r)
    r.done()
    return ClaimConfig(reqs, opaque)


def parse_claim_spec(r: Reader) -> ClaimSpec:
    d = r.obj("devices")
    r.done()
    if d is None:
        return ClaimSpec()
    requests = d.objs("requests", _request, max_items=MAX_REQUESTS)
    names = [q.name for q in requests]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise FieldError(d.at("requests") + (i, "name"), f"duplicate request name {n!r}")
    name_set = {q.name: frozenset(s.name for s in q.first_available) for q in requests}
    constraints = d.objs("constraints", lambda x: _constraint(x, name_set), max_items=MAX_CONSTRAINTS)
    config = d.objs("config", lambda x: _config(x, name_set), max_items=MAX_CONFIGS)
    d.done()
    used = {c.match_attribute or c.distinct_attribute for c in constraints}
    for i, q in enumerate(requests):
        specs = [(q.exactly, ("exactly",))] if q.exactly else [(x, ("firstAvailable", j)) for j, x in enumerate(q.first_available)]
        for spec, where in specs:
            for k, a in enumerate(spec.derived_attributes if spec else ()):
                if a.name not in used:
                    raise FieldError(d.at("requests") + (i,) + where + ("derivedAttributes", k, "name"),
                                     f"derived attribute {a.name!r} is not used by any matchAttribute or distinctAttribute constraint")
    return ClaimSpec(requests, constraints, config)


def parse_resource_claim(r: Reader) -> ResourceClaim:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=True)
    s = r.obj("spec", required=True)
    assert s is not None
    spec = parse_claim_spec(s)
    r.ignore("status")
    r.done()
    return ResourceClaim(meta, spec)


def parse_resource_claim_template(r: Reader) -> ResourceClaimTemplate:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=True)
    s = r.obj("spec", required=True)
    assert s is not None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    m = s.obj("metadata")
    if m is not None:
        labels = m.str_map("labels")
        annotations = m.str_map("annotations")
        m.done()
    inner = s.obj("spec", required=True)
    assert inner is not None
    spec = parse_claim_spec(inner)
    s.done()
    r.done()
    return ResourceClaimTemplate(meta, labels, annotations, spec)


def parse_device_class(r: Reader) -> DeviceClass:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=False)
    s = r.obj("spec")
    selectors: tuple[str, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()
    ext = None
    if s is not None:
        selectors = _selectors(s)
        config = tuple(_opaque(Reader(item, path)) for item, path in s.items("config", max_items=MAX_CONFIGS))
        ext = s.str("extendedResourceName")
        s.done()
        from .pod import is_extended_resource_name
        if ext is not None and not is_extended_resource_name(ext):
            raise FieldError(s.at("extendedResourceName"), f"Invalid value: {ext!r}: must be a valid extended resource name")
    r.done()
    return DeviceClass(meta, selectors, config, ext)
