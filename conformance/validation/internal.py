"""Bad values that upstream reports as internal Go types: ``json.Marshal`` of a struct without
JSON tags prints Go field names in declaration order, nil pointers and slices as ``null`` and
empty strings and zeros as they are. Used where a hand-written check reports a whole internal
struct (a template spec that must not change)."""

from __future__ import annotations

from typing import Any

from .verdict import GoRepr, go_json

# type -> [(wire name, Go name, type)]; a type starting with "[]" is a list, "map" a map of
# strings, "*" a pointer to a scalar, "raw" a RawExtension, "meta" inline ObjectMeta (tagged).
TYPES: dict[str, list[tuple[str, str, str]]] = {
    "TemplateSpec": [("metadata", "", "meta"), ("spec", "Spec", "ClaimSpec")],
    "ClaimSpec": [("devices", "Devices", "DeviceClaim")],
    "DeviceClaim": [("requests", "Requests", "[]DeviceRequest"), ("constraints", "Constraints", "[]DeviceConstraint"),
                    ("config", "Config", "[]ClaimConfig")],
    "DeviceRequest": [("name", "Name", "string"), ("exactly", "Exactly", "*Exact"), ("firstAvailable", "FirstAvailable", "[]Sub")],
    "Exact": [("deviceClassName", "DeviceClassName", "string"), ("selectors", "Selectors", "[]Selector"),
              ("allocationMode", "AllocationMode", "string"), ("count", "Count", "int"), ("adminAccess", "AdminAccess", "*"),
              ("tolerations", "Tolerations", "[]Toleration"), ("capacity", "Capacity", "*Capacity"),
              ("derivedAttributes", "DerivedAttributes", "[]Derived")],
    "Sub": [("name", "Name", "string"), ("deviceClassName", "DeviceClassName", "string"), ("selectors", "Selectors", "[]Selector"),
            ("allocationMode", "AllocationMode", "string"), ("count", "Count", "int"), ("tolerations", "Tolerations", "[]Toleration"),
            ("capacity", "Capacity", "*Capacity"), ("derivedAttributes", "DerivedAttributes", "[]Derived")],
    "Selector": [("cel", "CEL", "*CEL")],
    "CEL": [("expression", "Expression", "string")],
    "Toleration": [("key", "Key", "string"), ("operator", "Operator", "string"), ("value", "Value", "string"),
                   ("effect", "Effect", "string"), ("tolerationSeconds", "TolerationSeconds", "*")],
    "Capacity": [("requests", "Requests", "map")],
    "Derived": [("name", "Name", "string"), ("expression", "Expression", "string")],
    "DeviceConstraint": [("requests", "Requests", "[]string"), ("matchAttribute", "MatchAttribute", "*"),
                         ("distinctAttribute", "DistinctAttribute", "*")],
    "ClaimConfig": [("requests", "Requests", "[]string"), ("opaque", "Opaque", "*Opaque")],
    "Opaque": [("driver", "Driver", "string"), ("parameters", "Parameters", "raw")],
}
_ZERO = {"string": "", "int": 0}


def _value(v: Any, t: str) -> Any:
    if t.startswith("[]"):
        if not isinstance(v, list):
            return None
        inner = t[2:]
        return [_value(x, inner) if inner in TYPES or inner in _ZERO else x for x in v]
    if t.startswith("*"):
        inner = t[1:]
        if v is None:
            return None
        return _struct(v, inner) if inner in TYPES else v
    if t == "map":
        return dict(sorted(v.items())) if isinstance(v, dict) else None
    if t == "raw":
        return v
    if t in TYPES:
        return _struct(v if isinstance(v, dict) else {}, t)
    return v if v is not None else _ZERO.get(t)


def _struct(v: dict[str, Any], t: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for wire, go, ft in TYPES[t]:
        if ft == "meta":
            for k, x in sorted((v.get(wire) or {}).items()) if isinstance(v.get(wire), dict) else []:
                if x not in (None, "", {}, [], 0):
                    out[k] = x
            continue
        out[go] = _value(v.get(wire), ft)
    return out


def internal_repr(value: Any, type_name: str) -> GoRepr:
    return GoRepr(go_json(_struct(value if isinstance(value, dict) else {}, type_name), sort_keys=False))
