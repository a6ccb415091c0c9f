"""Typed views of the store the scheduler needs, parsed once per resourceVersion."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..allocator import AllocatedState, Features
from ..model import parse_object
from ..model.claim import DeviceClass, ResourceClaim
from ..model.slice import ResourceSlice
from ..model.taintrule import DeviceTaintRule
from ..quantity import Quantity
from .store import ObjectStore


class ParsedCache:
    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, str], tuple[str, Any]] = {}

    def get(self, obj: dict[str, Any]) -> Any:
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        rv = meta["resourceVersion"]
        hit = self._cache.get(key)
        if hit is not None and hit[0] == rv:
            return hit[1]
        parsed = parse_object(_without_status(obj))
        self._cache[key] = (rv, parsed)
        return parsed


def _without_status(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "status"}


def classes(store: ObjectStore, cache: ParsedCache) -> dict[str, DeviceClass]:
    return {o["metadata"]["name"]: cache.get(o) for o in store.list("DeviceClass")}


def slices_with_taint_rules(store: ObjectStore, cache: ParsedCache, gates: Mapping[str, bool]) -> list[ResourceSlice]:
    """All slices, with the taints of DeviceTaintRules appended after the driver's own (as the
    scheduler's slice tracker does when DRADeviceTaintRules is on)."""
    slices: list[ResourceSlice] = [cache.get(o) for o in store.list("ResourceSlice")]
    if not (gates.get("DRADeviceTaints") and gates.get("DRADeviceTaintRules")):
        return slices
    rules: list[DeviceTaintRule] = [cache.get(o) for o in store.list("DeviceTaintRule")]
    if not rules:
        return slices
    out = []
    for s in slices:
        # A rule without spec.deviceSelector selects nothing (1.37.2 slice tracker).
        matching = [r for r in rules if r.has_selector and (r.driver is None or r.driver == s.driver)
                    and (r.pool is None or r.pool == s.pool.name)]
        if not matching:
            out.append(s)
            continue
        devices = []
        for d in s.devices:
            extra = tuple(r.taint for r in matching if r.device is None or r.device == d.name)
            devices.append(dataclasses.replace(d, taints=d.taints + extra) if extra else d)
        out.append(dataclasses.replace(s, devices=tuple(devices)))
    return out


def allocated_state(claims: list[dict[str, Any]], features: Features, skip: set[str] | None = None) -> AllocatedState:
    st = AllocatedState()
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation")
        if not alloc or (skip and c["metadata"]["uid"] in skip):
            continue
        for r in (alloc.get("devices") or {}).get("results") or []:
            if r.get("adminAccess"):
                continue
            dev = (r["driver"], r["pool"], r["device"])
            share = r.get("shareID")
            if features.consumable_capacity and share:
                st.shares.add((dev, share))
                consumed = r.get("consumedCapacity") or {}
                if consumed:
                    agg = st.capacity.setdefault(dev, {})
                    for k, v in consumed.items():
                        q = Quantity.parse(v)
                        agg[k] = agg[k] + q if k in agg else q
            else:
                st.devices.add(dev)
    return st


def claim_model(cache: ParsedCache, obj: dict[str, Any]) -> ResourceClaim:
    return cache.get(obj)


DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


def extended_resource_classes(store: ObjectStore) -> dict[str, str]:
    """Extended-resource name -> DeviceClass name, as the scheduler's class resolver sees it:
    every class under ``deviceclass.resource.kubernetes.io/<class>``, plus its
    ``spec.extendedResourceName``; when several classes claim one name the newest
    (creationTimestamp) wins, ties going to the lexicographically smallest class name."""
    out: dict[str, str] = {}
    claimed: dict[str, tuple[str, str]] = {}
    for c in store.list("DeviceClass"):
        name = c["metadata"]["name"]
        out[DEVICE_CLASS_PREFIX + name] = name
        ext = (c.get("spec") or {}).get("extendedResourceName")
        if not ext:
            continue
        ts = c["metadata"].get("creationTimestamp") or ""
        have = claimed.get(ext)
        if have is None or ts > have[0] or (ts == have[0] and name < have[1]):
            claimed[ext] = (ts, name)
    for ext, (_, name) in claimed.items():
        out[ext] = name
    return out
