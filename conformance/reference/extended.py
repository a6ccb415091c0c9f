"""DRA-backed extended resources of a pod (DRAExtendedResource) and node-allocatable accounting
(DRANodeAllocatableResources): the requests a pod makes, their device mappings and statuses."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

from ..model.pod import is_extended_resource_name
from ..quantity import Quantity
from . import resources as res
from .state import (DEVICE_CLASS_PREFIX)


def is_dra_extended_resource_name(name: str) -> bool:
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_PREFIX)


def extended_requests(pod: dict[str, Any], class_map: Mapping[str, str]) -> dict[str, Fraction]:
    """Non-zero pod-level requests of DRA-backed extended resources, when any maps to a class."""
    reqs = res.pod_requests(pod)
    named = {k: v for k, v in reqs.items() if v != 0 and is_dra_extended_resource_name(k)}
    if not any(k in class_map for k in named):
        return {}
    return named


def _container_list(pod: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int]:
    init = list(pod["spec"].get("initContainers") or [])
    return init + list(pod["spec"].get("containers") or []), len(init)


def _int_request(c: Mapping[str, Any], name: str) -> tuple[int, list[str]]:
    resources = c.get("resources") or {}
    reqs = dict(resources.get("requests") or {})
    for k, v in (resources.get("limits") or {}).items():
        reqs.setdefault(k, v)
    if name not in reqs:
        return 0, sorted(reqs)
    qv = Quantity.parse(str(reqs[name])).value
    return (int(qv) if qv.denominator == 1 else 0), sorted(reqs)


def extended_requests_and_mappings(pod: dict[str, Any], names: list[str], class_map: Mapping[str, str]
                                   ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Upstream createRequestsAndMappings: one request ``container-<i>-request-<j>`` per
    long-lived container and resource; plain init containers reuse later long-lived requests and
    only the largest init shortfall is kept."""
    containers, n_init = _container_list(pod)
    long_lived = [i for i, c in enumerate(containers) if i >= n_init or c.get("restartPolicy") == "Always"]
    short_lived = [i for i in range(n_init) if i not in long_lived]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []

    def make(i: int, name: str, cls: str, reusable: list[dict[str, Any] | None]) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
        count, keys = _int_request(containers[i], name)
        if count == 0:
            return None, []
        maps: list[dict[str, str]] = []
        total = 0
        for r in reusable:
            if r is not None:
                total += r["exactly"]["count"]
                maps.append({"containerName": containers[i]["name"], "resourceName": name, "requestName": r["name"]})
                if total >= count:
                    return None, maps
        req_name = f"container-{i}-request-{keys.index(name)}"
        maps.append({"containerName": containers[i]["name"], "resourceName": name, "requestName": req_name})
        return {"name": req_name, "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount",
                                              "count": count - total}}, maps

    for name in sorted(names):
        cls = class_map.get(name)
        if cls is None:
            continue
        long_reqs: list[dict[str, Any] | None] = [None] * len(containers)
        long_maps: list[dict[str, str]] = []
        for i in long_lived:
            r, m = make(i, name, cls, [])
            long_reqs[i] = r
            long_maps.extend(m)
        best: dict[str, Any] | None = None
        short_names: list[str] = []
        short_maps: list[dict[str, str]] = []
        for i in short_lived:
            r, m = make(i, name, cls, long_reqs[i:])
            if r is not None:
                short_names.append(r["name"])
                if best is None or best["exactly"]["count"] < r["exactly"]["count"]:
                    best = r
            short_maps.extend(m)
        if best is not None and len(set(short_names)) > 1:
            for mapping in short_maps:
                if mapping["requestName"] in short_names and mapping["requestName"] != best["name"]:
                    mapping["requestName"] = best["name"]
        if best is not None:
            requests.append(best)
        requests.extend(r for r in long_reqs if r is not None)
        mappings.extend(long_maps + short_maps)
    requests.sort(key=lambda r: r["name"])
    return requests, mappings


# --- node-allocatable resources -----------------------------------------------------------------

def node_allocatable_statuses(pod: Mapping[str, Any], claims: list[tuple[str, dict[str, Any], dict[str, Any]]],
                              devices: Mapping[tuple[str, str, str], Any]) -> tuple[list[dict[str, Any]], str | None]:
    """``pod.status.nodeAllocatableResourceClaimStatuses`` for the pod's claims (buildNodeAllocatableDRAInfo).
    ``claims``: (pod entry name or "", claim, allocation); ``devices``: id -> model Device."""
    by_claim: dict[str, dict[str, Any]] = {}
    for _entry, claim, alloc in claims:
        mapped: dict[str, Fraction] = {}
        overhead: dict[str, dict[str, Fraction]] = {}
        for r in (alloc.get("devices") or {}).get("results") or []:
            dev = devices.get((r["driver"], r["pool"], r["device"]))
            if dev is None or not dev.node_allocatable:
                continue
            for rname, spec in dev.node_allocatable.items():
                if spec.mapping is not None:
                    m = spec.mapping
                    if m.capacity_key:
                        consumed = r.get("consumedCapacity")
                        if consumed is None:
                            return [], (f"claim {claim['metadata'].get('namespace')}/{claim['metadata']['name']}, device "
                                        f"{r['device']}: ConsumedCapacity is nil, but Capacity key '{m.capacity_key}' is "
                                        f"set in NodeAllocatableResources for resource {rname}")
                        if m.capacity_key in consumed:
                            amount = res.q(consumed[m.capacity_key])
                            if m.capacity_multiplier is not None:
                                amount *= m.capacity_multiplier.value
                            mapped[rname] = mapped.get(rname, Fraction(0)) + amount
                    elif m.device_multiplier is not None:
                        mapped[rname] = mapped.get(rname, Fraction(0)) + m.device_multiplier.value
                if spec.overhead is not None and (spec.overhead.per_pod is not None or spec.overhead.per_container is not None):
                    o = overhead.setdefault(rname, {})
                    if spec.overhead.per_pod is not None:
                        o["perPod"] = o.get("perPod", Fraction(0)) + spec.overhead.per_pod.value
                    if spec.overhead.per_container is not None:
                        o["perContainer"] = o.get("perContainer", Fraction(0)) + spec.overhead.per_container.value
        if mapped or overhead:
            by_claim[claim["metadata"]["name"]] = {
                "resourceClaimName": claim["metadata"]["name"], "containers": [],
                "mapping": [{"name": k, "quantity": _qty(v, k)} for k, v in sorted(mapped.items())],
                "overhead": [{"name": k, **{f: _qty(v[f], k) for f in ("perPod", "perContainer") if f in v}}
                             for k, v in sorted(overhead.items())],
            }
    entry_to_claim = {entry: claim["metadata"]["name"] for entry, claim, _ in claims if entry}
    containers, _ = _container_list(pod)
    for c in containers:
        for ref in (c.get("resources") or {}).get("claims") or []:
            name = entry_to_claim.get(ref.get("name"))
            if name in by_claim and c["name"] not in by_claim[name]["containers"]:
                by_claim[name]["containers"].append(c["name"])
    out = [by_claim[k] for k in sorted(by_claim)]
    for st in out:
        if not st["mapping"]:
            del st["mapping"]
        if not st["overhead"]:
            del st["overhead"]
    return out, None


def _qty(v: Fraction, resource: str) -> str:
    return str(Quantity.from_number(v, "DecimalSI" if resource == "cpu" else "BinarySI"))


def has_mapped_device(alloc: Mapping[str, Any] | None, devices: Mapping[tuple[str, str, str], Any]) -> bool:
    for r in ((alloc or {}).get("devices") or {}).get("results") or []:
        dev = devices.get((r["driver"], r["pool"], r["device"]))
        if dev is not None and any(s.mapping is not None for s in dev.node_allocatable.values()):
            return True
    return False


# --- the scheduler ------------------------------------------------------------------------------
