"""A device's capacity request policy, node-allocatable mappings and skipped node operations
(ResourceSlice validation, continued)."""

from __future__ import annotations

from typing import Any, Mapping

from ..quantity import Quantity
from .common import Errs, as_dict, as_list
from .errs import child, forbidden, index, invalid, key, not_found, required
from .verdict import FieldErr

NODE_ALLOCATABLE = ("cpu", "memory", "ephemeral-storage")


def _q(v: Any) -> Quantity | None:
    try:
        return Quantity(str(v))
    except Exception:  # noqa: BLE001 - decoding refuses what is not a quantity
        return None


def request_policy(value: Any, policy: dict[str, Any], path: str, gates: Mapping[str, bool]) -> Errs:
    cap = _q(value)
    if cap is None:
        return []
    vv, vr = as_list(policy.get("validValues")), policy.get("validRange")
    if vv and vr is not None:
        return [forbidden(path, 'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time')]
    default = _q(policy["default"]) if policy.get("default") is not None else None
    errs: Errs = []
    if vv:
        if default is None:
            return [required(child(path, "default"), "required when validValues is defined")]
        qs = [_q(v) for v in vv]
        vpath = child(path, "validValues")
        for i in range(len(qs) - 1):
            a, b = qs[i], qs[i + 1]
            if a is not None and b is not None and a.compare(b) > 0:
                errs.append(invalid(index(vpath, i + 1), b.canonical(), "values must be sorted in ascending order"))
        found = False
        if len(qs) > 10:  # validateSet stops early, so the default is never found
            errs.append(FieldErr("FieldValueTooMany", vpath, "must have at most 10 items", value=len(qs)))
        else:
            found = any(q is not None and q.compare(default) == 0 for q in qs)
            seen: set[Any] = set()
            for i, q in enumerate(qs):
                if q is None:
                    continue
                if q.compare(cap) > 0:
                    errs.append(invalid(index(vpath, i), q.canonical(), f"option is larger than capacity value: {cap.canonical()}"))
                k = q._value if gates.get("DRAFractionalCapacityRange") else -(-q._value // 1)  # noqa: SLF001
                if k in seen:
                    errs.append(FieldErr("FieldValueDuplicate", index(vpath, i), "", value=str(k)))
                seen.add(k)
        if not found:
            errs.append(invalid(vpath, default.canonical(), "default value is not valid according to the requestPolicy"))
        return errs
    if vr is not None:
        if default is None:
            return [required(child(path, "default"), "required when validRange is defined")]
        r = as_dict(vr)
        rpath = child(path, "validRange")
        lo = _q(r["min"]) if r.get("min") is not None else None
        if lo is None:
            return [required(child(rpath, "min"), "required when validRange is defined")]
        if lo.compare(cap) > 0:
            errs.append(invalid(child(rpath, "min"), lo.canonical(), f"min is larger than capacity value: {cap.canonical()}"))
        if default.compare(lo) < 0:
            errs.append(invalid(child(rpath, "default"), default.canonical(), f"default is less than min: {lo.canonical()}"))
        hi = _q(r["max"]) if r.get("max") is not None else None
        if hi is not None:
            if lo.compare(hi) > 0:
                errs.append(invalid(child(rpath, "max"), lo.canonical(), f"min is larger than max: {hi.canonical()}"))
            if hi.compare(cap) > 0:
                errs.append(invalid(child(rpath, "max"), hi.canonical(), f"max is larger than capacity value: {cap.canonical()}"))
            if default.compare(hi) > 0:
                errs.append(invalid(child(rpath, "default"), default.canonical(), f"default is more than max: {hi.canonical()}"))
        step = _q(r["step"]) if r.get("step") is not None else None
        if step is not None:
            if step.compare(Quantity("0")) <= 0:
                errs.append(invalid(child(rpath, "step"), step.canonical(), "must be greater than zero"))
            else:
                added = lo._value + step._value  # noqa: SLF001
                if added > cap._value:  # noqa: SLF001
                    errs.append(invalid(child(rpath, "step"), step.canonical(),
                                        f"one step {Quantity.from_number(added, lo.format).canonical()} is larger than capacity value: {cap.canonical()}"))
                for v in (default, hi):
                    if v is None:
                        continue
                    sv, mv, vv_ = (-(-x._value // 1) for x in (step, lo, v))  # noqa: SLF001
                    if (vv_ - mv) % sv != 0:
                        errs.append(invalid(child(rpath, "step"), v.canonical(),
                                            f"value is not a multiple of a given step ({step.canonical()}) from ({lo.canonical()})"))
    return errs


def node_allocatable(mappings: dict[str, Any], capacities: dict[str, Any], path: str) -> Errs:
    from .errs import unordered
    return unordered(_node_allocatable(mappings, capacities, path))


def _node_allocatable(mappings: dict[str, Any], capacities: dict[str, Any], path: str) -> Errs:
    errs: Errs = []
    for name, m in mappings.items():
        kp = key(path, name)
        m = as_dict(m)
        if name not in NODE_ALLOCATABLE and not name.startswith("hugepages-"):
            errs.append(invalid(kp, name, "must be a node allocatable resource name"))
        if m.get("mapping") is None and m.get("overhead") is None:
            errs.append(required(kp, "at least one of mapping or overhead must be set"))
        mp = m.get("mapping")
        if isinstance(mp, dict):
            p = child(kp, "mapping")
            if mp.get("capacityKey") is not None:
                ck = mp["capacityKey"]
                if ck == "":
                    errs.append(invalid(child(p, "capacityKey"), "", "capacityKey must not be an empty string"))
                elif ck not in capacities:
                    errs.append(not_found(child(p, "capacityKey"), ck))
                if mp.get("capacityMultiplier") is None:
                    errs.append(required(child(p, "capacityMultiplier"), "capacityKey is required when capacityKey is set".replace(
                        "capacityKey is required", "capacityMultiplier is required"), covered=True))
                elif (_q(mp["capacityMultiplier"]) or Quantity("1")).compare(Quantity("0")) <= 0:
                    errs.append(invalid(child(p, "capacityMultiplier"), str(mp["capacityMultiplier"]), "must be positive"))
            if mp.get("deviceMultiplier") is not None and (_q(mp["deviceMultiplier"]) or Quantity("1")).compare(Quantity("0")) <= 0:
                errs.append(invalid(child(p, "deviceMultiplier"), str(mp["deviceMultiplier"]), "must be positive"))
            if mp.get("capacityMultiplier") is not None and mp.get("capacityKey") is None:
                errs.append(required(child(p, "capacityKey"), "capacityKey is required when capacityMultiplier is set", covered=True))
            if mp.get("capacityKey") is not None and mp.get("deviceMultiplier") is not None:
                errs.append(invalid(p, "{capacityKey, deviceMultiplier}", "must specify exactly one of: `capacityKey`, `deviceMultiplier`",
                                    covered=True))
        oh = m.get("overhead")
        if isinstance(oh, dict):
            p = child(kp, "overhead")
            if oh.get("perPod") is None and oh.get("perContainer") is None:
                errs.append(invalid(p, "", "at least one of perPod or perContainer must be set"))
            else:
                for f in ("perPod", "perContainer"):
                    q = _q(oh[f]) if oh.get(f) is not None else None
                    if q is not None and q.compare(Quantity("0")) < 0:
                        errs.append(invalid(child(p, f), q.canonical(), "must be non-negative"))
    return errs


def skip_node_operations(ops: list[Any], path: str) -> Errs:
    s = set(ops)
    if "NodePrepareResources" in s and "NodeUnprepareResources" not in s and "All" not in s:
        return [invalid(path, ops, "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped")]
    return []
