"""ObjectMeta and the core/v1 NodeSelector, with node matching."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import FieldError
from .reader import Reader, check_dns_subdomain, check_label_key, check_label_value


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    annotations: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    creation_timestamp: str | None = None


def parse_meta(r: Reader, *, namespaced: bool,
               name_check: Callable[..., str] = check_dns_subdomain) -> ObjectMeta:
    m = r.obj("metadata", required=True)
    assert m is not None
    name = m.str("name")
    generate = m.str("generateName")
    if name is None and generate is None:
        raise FieldError(m.at("name"), "required value")
    if name is not None:
        name_check(m.at("name"), name)
    ns = m.str("namespace")
    if ns is not None and not namespaced:
        raise FieldError(m.at("namespace"), "not allowed on a cluster-scoped object")
    labels = m.str_map("labels")
    for k, v in labels.items():
        check_label_key(m.at("labels") + (k,), k)
        check_label_value(m.at("labels") + (k,), v)
    ann = m.str_map("annotations")
    uid = m.str("uid")
    ts = m.str("creationTimestamp")
    m.ignore("resourceVersion", "generation", "ownerReferences", "finalizers", "managedFields",
             "deletionTimestamp", "deletionGracePeriodSeconds")
    m.done()
    return ObjectMeta(name or generate or "", ns, uid, labels, ann, ts)


# --- NodeSelector -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, object]:
        out: dict[str, object] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def to_wire(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.match_expressions:
            out["matchExpressions"] = [x.to_wire() for x in self.match_expressions]
        if self.match_fields:
            out["matchFields"] = [x.to_wire() for x in self.match_fields]
        return out


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[SelectorTerm, ...]

    def to_wire(self) -> dict[str, object]:
        return {"nodeSelectorTerms": [t.to_wire() for t in self.terms]}


_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _parse_requirement(r: Reader, fields: bool) -> Requirement:
    key = r.str("key", required=True)
    op = r.str("operator", required=True)
    values = r.strs("values")
    r.done()
    assert key is not None and op is not None
    if op not in _OPS:
        raise FieldError(r.at("operator"), f"unsupported operator {op!r}; one of {', '.join(_OPS)}")
    if op in ("In", "NotIn") and not values:
        raise FieldError(r.at("values"), f"must be non-empty for operator {op}")
    if op in ("Exists", "DoesNotExist") and values:
        raise FieldError(r.at("values"), f"must be empty for operator {op}")
    if op in ("Gt", "Lt"):
        if len(values) != 1 or not values[0].lstrip("-").isdigit():
            raise FieldError(r.at("values"), f"operator {op} needs exactly one integer value")
    if fields:
        if key != "metadata.name":
            raise FieldError(r.at("key"), "matchFields only supports metadata.name")
        if op not in ("In", "NotIn") or len(values) != 1:
            raise FieldError(r.at("values"), "matchFields needs In or NotIn with exactly one value")
    return Requirement(key, op, values)


def parse_node_selector(r: Reader) -> NodeSelector:
    terms = r.objs("nodeSelectorTerms", _parse_term, required=True)
    r.done()
    return NodeSelector(terms)


def _parse_term(r: Reader) -> SelectorTerm:
    exprs = r.objs("matchExpressions", lambda x: _parse_requirement(x, False))
    flds = r.objs("matchFields", lambda x: _parse_requirement(x, True))
    r.done()
    return SelectorTerm(exprs, flds)


def _requirement_matches(req: Requirement, value: str | None) -> bool:
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    if req.operator == "DoesNotExist":
        return value is None
    if value is None:
        return False
    try:
        have, want = int(value), int(req.values[0])
    except ValueError:
        return False
    return have > want if req.operator == "Gt" else have < want


def selector_matches(sel: NodeSelector, node_name: str, labels: dict[str, str]) -> bool:
    """Terms are ORed; requirements inside a term are ANDed; an empty term matches nothing."""
    for term in sel.terms:
        if not term.match_expressions and not term.match_fields:
            continue
        if all(_requirement_matches(q, labels.get(q.key)) for q in term.match_expressions) and all(
            _requirement_matches(q, node_name) for q in term.match_fields
        ):
            return True
    return False


def node_name_selector(node_name: str) -> NodeSelector:
    return NodeSelector((SelectorTerm(match_fields=(Requirement("metadata.name", "In", (node_name,)),)),))
