"""Small builders for allocator tests: wire-form dicts in, parsed model objects out."""

from __future__ import annotations

from typing import Any

from drakit.conformance.allocator import AllocatedState, Allocator, Features, NodeInfo
from drakit.conformance.model import parse_object


def device(name: str, attrs: dict[str, Any] | None = None, caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if attrs:
        d["attributes"] = {k: _attr(v) for k, v in attrs.items()}
    if caps:
        d["capacity"] = {k: (v if isinstance(v, dict) else {"value": str(v)}) for k, v in caps.items()}
    d.update(extra)
    return d


def _attr(v: Any) -> dict[str, Any]:
    if isinstance(v, dict):
        return v
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, list):
        kind = "bools" if isinstance(v[0], bool) else "ints" if isinstance(v[0], int) else "strings"
        return {kind: v}
    return {"string": v}


def rslice(name: str, devices: list[dict[str, Any]], *, driver: str = "a.example.com", pool: str = "p1",
           node: str | None = "n1", gen: int = 1, count: int = 1, **spec: Any) -> Any:
    s: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": gen, "resourceSliceCount": count}}
    if node and not any(k in spec for k in ("allNodes", "nodeSelector", "perDeviceNodeSelection")):
        s["nodeName"] = node
    if devices:
        s["devices"] = devices
    s.update(spec)
    return parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": s})


def dclass(name: str, *selectors: str, config: list[dict[str, Any]] | None = None) -> Any:
    spec: dict[str, Any] = {}
    if selectors:
        spec["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if config:
        spec["config"] = config
    return parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec})


def req(name: str, cls: str = "any", **body: Any) -> dict[str, Any]:
    sel = body.pop("selectors", None)
    if sel:
        body["selectors"] = [{"cel": {"expression": e}} for e in ([sel] if isinstance(sel, str) else sel)]
    return {"name": name, "exactly": {"deviceClassName": cls, **body}}


def sub(name: str, cls: str = "any", **body: Any) -> dict[str, Any]:
    sel = body.pop("selectors", None)
    if sel:
        body["selectors"] = [{"cel": {"expression": e}} for e in ([sel] if isinstance(sel, str) else sel)]
    return {"name": name, "deviceClassName": cls, **body}


def first(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None,
          config: list[dict[str, Any]] | None = None, namespace: str = "ns") -> Any:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": name, "namespace": namespace}, "spec": {"devices": devices}})


ANY = dclass("any")
CLASS_A = dclass("a", 'device.driver == "a.example.com"')


def allocate(slices: list[Any], claims: list[Any], *, classes: list[Any] | None = None, node: str = "n1",
             labels: dict[str, str] | None = None, features: Features | None = None,
             allocated: AllocatedState | None = None) -> list[list[str]] | None:
    """Allocate and return, per claim, ``request -> driver/pool/device`` strings (None: no fit)."""
    result = allocate_raw(slices, claims, classes=classes, node=node, labels=labels, features=features, allocated=allocated)
    if result is None:
        return None
    return [[f"{d.request}->{d.pool}/{d.device}" for d in r.devices] for r in result]


def allocate_raw(slices: list[Any], claims: list[Any], *, classes: list[Any] | None = None, node: str = "n1",
                 labels: dict[str, str] | None = None, features: Features | None = None,
                 allocated: AllocatedState | None = None) -> Any:
    cls = {c.name: c for c in (classes or [ANY, CLASS_A])}
    counter = iter(range(1000))
    alloc = Allocator(features or Features(), cls, slices, allocated, share_ids=lambda: f"share-{next(counter)}")
    return alloc.allocate(NodeInfo(node, labels or {}), claims)
