"""Checks shared by the DRA kinds (pkg/apis/resource/validation): names, sets, slices, maps,
tolerations and taints, qualified names."""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable

from .errs import child, duplicate, index, invalid, key, mark, not_supported, required, too_long, too_many, unordered
from .names import blen, is_dns1123_subdomain_caseless, is_c_identifier, is_dns1123_label, is_dns1123_subdomain, is_label_value, is_qualified_name
from .verdict import FieldErr

Errs = list[FieldErr]
MAX_DOMAIN = 63
MAX_ID = 32
ATTRIBUTE_KEY_MAX = MAX_DOMAIN + 1 + MAX_ID
TAINT_EFFECTS = ["NoExecute", "NoSchedule", "None"]


def dns_label(value: str, path: str, dv: bool = False) -> Errs:
    """``dv``: declarative validation's ShortName (covered checks), whose length message says bytes."""
    errs = [invalid(path, value, m, origin="format=k8s-short-name", covered=dv) for m in is_dns1123_label(value, dv)]
    return errs


def dv_dns_label(value: str, path: str) -> Errs:
    return dns_label(value, path, True)


def dns_subdomain(value: str, path: str, dv: bool = False) -> Errs:
    return [invalid(path, value, m, origin="format=k8s-long-name", covered=dv) for m in is_dns1123_subdomain(value, dv)]


def driver_name(name: str, path: str, covered: bool = False) -> Errs:
    """ValidateCSIDriverName (with the *Covered options when ``covered``)."""
    if not name:
        return [required(path, covered=covered)]
    errs: Errs = []
    if blen(name) > 63:
        errs.append(too_long(path, 63, covered=covered))
    if covered:  # declarative validation's LongNameCaseless replaces the hand-written message
        errs += [invalid(path, name, m, covered=True) for m in is_dns1123_subdomain_caseless(name, True)]
    else:
        errs += [invalid(path, name, m) for m in is_dns1123_subdomain(name.lower())]
    return errs


def pool_name(name: str, path: str) -> Errs:
    if not name:
        return [required(path)]
    errs: Errs = []
    if blen(name) > 253:
        errs.append(too_long(path, 253))
    for part in name.split("/"):
        errs += dns_subdomain(part, path)
    return errs


def device_class_name(name: str, path: str, dv: bool = False) -> Errs:
    if not name:
        return [required(path, covered=dv)]
    return dns_subdomain(name, path, dv)


def label_name(name: str, path: str) -> Errs:
    return [invalid(path, name, m, origin="format=k8s-label-key") for m in is_qualified_name(name)]


def label_value(value: str, path: str) -> Errs:
    return [invalid(path, value, m) for m in is_label_value(value)]


def items(values: list[Any], each: Callable[[Any, str], Errs], path: str, *, items_covered: bool = False) -> Errs:
    errs: Errs = []
    for i, v in enumerate(values):
        e = each(v, index(path, i))
        errs += mark(e) if items_covered else e
    return errs


def slice_(values: list[Any], max_size: int, each: Callable[[Any, str], Errs], path: str, *,
           size_covered: bool = False) -> Errs:
    if max_size >= 0 and len(values) > max_size:
        return [too_many(path, len(values), max_size, covered=size_covered)]
    return items(values, each, path)


GO_FIELD_ORDER = ("name", "exactly", "firstAvailable", "deviceClassName", "selectors", "allocationMode", "count",
                  "adminAccess", "tolerations", "capacity", "derivedAttributes", "cel", "expression", "key", "operator",
                  "value", "effect", "tolerationSeconds", "requests", "counterSet", "counters", "compatibilityGroups")


def go_ordered(v: Any) -> Any:
    """A wire value with object keys in Go struct field order (as json.Marshal writes a struct)."""
    if isinstance(v, dict):
        rank = {k: i for i, k in enumerate(GO_FIELD_ORDER)}
        return {k: go_ordered(v[k]) for k in sorted(v, key=lambda k: (rank.get(k, len(rank)), k))}
    if isinstance(v, list):
        return [go_ordered(x) for x in v]
    return v


def _item_repr(v: Any) -> Any:
    from .verdict import GoRepr, go_json
    if isinstance(v, (dict, list)):
        return GoRepr(go_json(go_ordered(v), sort_keys=False))
    return v


def set_(values: list[Any], max_size: int, each: Callable[[Any, str], Errs], key_of: Callable[[Any], Hashable],
         path: str, *, size_covered: bool = False, unique_covered: bool = False) -> Errs:
    """validateSet. When uniqueness is covered, declarative validation reports the duplicate with
    the whole item as the value (ValSliceUnique)."""
    if max_size >= 0 and len(values) > max_size:
        return [too_many(path, len(values), max_size, covered=size_covered)]
    errs = items(values, each, path)
    dups: Errs = []
    seen: set[Hashable] = set()
    for i, v in enumerate(values):
        k = key_of(v)
        if k in seen:
            dups.append(duplicate(index(path, i), _item_repr(v) if unique_covered else k, covered=unique_covered))
        else:
            seen.add(k)
    # declarative validation checks uniqueness before it walks the items
    return dups + errs if unique_covered else errs + dups


def truncate(s: str, max_len: int) -> str:
    max_len = max(max_len, 16)
    if blen(s) <= max_len:
        return s
    remaining = max_len - 3
    b = s.encode()
    return (b[: (remaining + 1) // 2] + b"..." + b[len(b) - remaining // 2:]).decode("utf-8", "replace")


def map_(m: dict[str, Any], max_size: int, trunc: int, check_key: Callable[[str, str], Errs],
         each: Callable[[Any, str], Errs], path: str, *, keys_covered: bool = False) -> Errs:
    if max_size >= 0 and len(m) > max_size:
        return [too_many(path, len(m), max_size)]
    errs: Errs = []
    for k, v in m.items():
        ke = check_key(k, path)
        errs += mark(ke) if keys_covered else ke
        errs += each(v, key(path, truncate(k, trunc)))
    return unordered(errs)


def c_identifier(ident: str, path: str) -> Errs:
    errs: Errs = []
    if blen(ident) > MAX_ID:
        errs.append(too_long(path, MAX_ID))
    errs += [invalid(path, ident, m) for m in is_c_identifier(ident)]
    return errs


def qualified_name(name: str, path: str) -> Errs:
    parts = name.split("/")
    errs: Errs = []
    if len(parts) == 1:
        errs += c_identifier(parts[0], path)
    elif len(parts) == 2:
        if not parts[0]:
            errs.append(invalid(path, "", "the domain must not be empty"))
        else:
            errs += driver_name(parts[0], path)
        if not parts[1]:
            errs.append(invalid(path, "", "the name must not be empty"))
        else:
            errs += c_identifier(parts[1], path)
    return errs


def fully_qualified_name(name: str, path: str) -> Errs:
    errs = qualified_name(name, path)
    if "/" not in name:
        errs.append(invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash"))
    return [FieldErr(e.type, e.field, e.detail, value=e.value, body=e.body, origin="format=k8s-resource-fully-qualified-name",
                     declarative=e.declarative) for e in errs]


def toleration(t: dict[str, Any], path: str) -> Errs:
    errs: Errs = []
    k = t.get("key") or ""
    if k:
        errs += mark(label_name(k, child(path, "key")))
    op = t.get("operator") or ""
    value = t.get("value") or ""
    if op == "Exists":
        if value:
            errs.append(invalid(child(path, "value"), value, "must be empty for operator `Exists`"))
    elif op == "Equal":
        errs += label_value(value, child(path, "value"))
    elif op == "":
        errs.append(required(child(path, "operator"), covered=True))
    else:
        errs.append(not_supported(child(path, "operator"), op, ["Equal", "Exists"], covered=True))
    eff = t.get("effect") or ""
    if eff and eff not in TAINT_EFFECTS:
        errs.append(not_supported(child(path, "effect"), eff, TAINT_EFFECTS, covered=True))
    return errs


def taint(t: dict[str, Any], old: dict[str, Any] | None, path: str) -> Errs:
    errs = label_name(t.get("key") or "", child(path, "key"))
    value = t.get("value") or ""
    if value:
        errs += label_value(value, child(path, "value"))
    eff = t.get("effect") or ""
    if old is None or (old.get("effect") or "") != eff:
        if not eff:
            errs.append(required(child(path, "effect"), covered=True))
        elif eff not in TAINT_EFFECTS:
            errs.append(not_supported(child(path, "effect"), eff, TAINT_EFFECTS, covered=True))
    return errs


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def as_dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def each_str(values: Iterable[Any]) -> list[str]:
    return [v if isinstance(v, str) else str(v) for v in values]


def dv_fully_qualified_name(name: str, path: str) -> Errs:
    """validate.ResourceFullyQualifiedName (declarative; replaces the covered hand-written check)."""
    from .names import is_dns1123_subdomain
    errs: Errs = []
    parts = name.split("/")

    def c_id(ident: str) -> Errs:
        e: Errs = []
        if blen(ident) > MAX_ID:
            e.append(too_long(path, MAX_ID, covered=True))
        e += [invalid(path, ident, m, covered=True) for m in is_c_identifier(ident)]
        return e
    if len(parts) == 1:
        errs += c_id(parts[0])
    elif len(parts) == 2:
        if not parts[0]:
            errs.append(invalid(path, "", "prefix must not be empty", covered=True))
        else:
            if blen(parts[0]) > 63:
                errs.append(too_long(path, 63, covered=True))
            errs += [invalid(path, parts[0], "prefix: " + m, covered=True) for m in is_dns1123_subdomain(parts[0], True)]
        if not parts[1]:
            errs.append(invalid(path, "", "name must not be empty", covered=True))
        else:
            errs += c_id(parts[1])
    if "/" not in name:
        errs.append(invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash", covered=True))
    return errs


def _semantic(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: x for k, x in ((k, _semantic(x)) for k, x in v.items()) if x not in ({}, [], None)}
    if isinstance(v, list):
        return [_semantic(x) for x in v]
    return v


def semantic_equal(a: Any, b: Any) -> bool:
    """apiequality.Semantic.DeepEqual on wire data: an empty list or map equals an absent one."""
    return bool(_semantic(a) == _semantic(b))
