"""The ResourcePoolStatusRequest controller (kube-controller-manager, DRAResourcePoolStatus),
after the 1.37.2 ``pkg/controller/resourcepoolstatusrequest``.

A request without status is computed once from ResourceSlices, ResourceClaims and
DeviceTaintRules: pools of ``spec.driver`` (optionally only ``spec.poolName``) at their newest
generation, sorted by driver and pool, at most ``spec.limit`` listed, ``poolCount`` before the
cut. Per pool: slices seen, devices in total, allocated (each device once, admin access not
counted), unavailable (a NoSchedule/NoExecute taint from the slice or a DeviceTaintRule),
available, the node for node-local pools, and a ``shareableSummary`` for pools with
multi-allocatable devices. The condition is ``Complete`` (reason ``CalculationComplete``).

While any listed pool is incomplete (fewer slices than ``resourceSliceCount``) upstream retries
a few times within a fraction of a second and then gives up, leaving the request without
status; the reference gives up at once. Completed requests are deleted an hour after their
condition, pending ones a day after creation (upstream checks every ten minutes; the reference
checks whenever its clock moves).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..quantity import Quantity
from .clock import parse_time
from .host import ControllerHost


COMPLETED_TTL = timedelta(hours=1)
PENDING_TTL = timedelta(hours=24)
LIMIT_DEFAULT = 100


def _unavailable(driver: str, pool: str, device: dict[str, Any], rules: list[dict[str, Any]]) -> bool:
    if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in device.get("taints") or []):
        return True
    for r in rules:
        taint = (r.get("spec") or {}).get("taint") or {}
        sel = (r.get("spec") or {}).get("deviceSelector")
        if taint.get("effect") not in ("NoSchedule", "NoExecute") or sel is None:
            continue
        if all(sel.get(k) in (None, v) for k, v in (("driver", driver), ("pool", pool), ("device", device["name"]))):
            return True
    return False


def calculate(request: dict[str, Any], slices: list[dict[str, Any]], claims: list[dict[str, Any]],
              rules: list[dict[str, Any]], stamp: str) -> tuple[dict[str, Any], bool]:
    """(status, incomplete): upstream calculatePoolStatus."""
    spec = request.get("spec") or {}
    driver = spec["driver"]
    only = spec.get("poolName")
    mine = [s for s in slices if s["spec"]["driver"] == driver and (not only or s["spec"]["pool"]["name"] == only)]
    newest: dict[str, int] = {}
    for s in mine:
        p = s["spec"]["pool"]
        newest[p["name"]] = max(newest.get(p["name"], -1), p["generation"])
    pools: dict[str, dict[str, Any]] = {}
    for s in mine:
        p = s["spec"]["pool"]
        if p["generation"] < newest[p["name"]]:
            continue
        info = pools.setdefault(p["name"], {"slices": 0, "expected": p["resourceSliceCount"], "devices": [],
                                            "node": s["spec"].get("nodeName") or "", "mixed": False})
        if info["slices"] and (s["spec"].get("nodeName") or "") != info["node"]:
            info["mixed"] = True
        info["slices"] += 1
        info["devices"].extend(s["spec"].get("devices") or [])
    in_use: dict[str, set[str]] = {}
    consumed: dict[str, dict[str, Quantity]] = {}
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation")
        for r in ((alloc or {}).get("devices") or {}).get("results") or []:
            if r.get("adminAccess") or r["driver"] != driver:
                continue
            in_use.setdefault(r["pool"], set()).add(r["device"])
            for k, v in (r.get("consumedCapacity") or {}).items():
                m = consumed.setdefault(r["pool"], {})
                q = Quantity.parse(str(v))
                m[k] = m[k] + q if k in m else q
    out: list[dict[str, Any]] = []
    incomplete = False
    for name in sorted(pools):
        info = pools[name]
        entry: dict[str, Any] = {"driver": driver, "poolName": name, "generation": newest[name]}
        if info["node"] and not info["mixed"]:
            entry["nodeName"] = info["node"]
        if info["slices"] < info["expected"]:
            incomplete = True
            entry["validationError"] = (f"PoolIncomplete: pool {driver}/{name} is incomplete: observed "
                                        f"{info['slices']}/{info['expected']} slices at generation {newest[name]}")[:256]
            out.append(entry)
            continue
        devices = info["devices"]
        used = in_use.get(name, set())
        unavailable = sum(1 for d in devices if _unavailable(driver, name, d, rules))
        entry.update({"resourceSliceCount": info["slices"], "totalDevices": len(devices), "allocatedDevices": len(used),
                      "availableDevices": max(0, len(devices) - len(used) - unavailable), "unavailableDevices": unavailable})
        shareable = [d for d in devices if d.get("allowMultipleAllocations")]
        if shareable:
            totals: dict[str, Quantity] = {}
            for d in shareable:
                for k, cap in (d.get("capacity") or {}).items():
                    q = Quantity.parse(str(cap["value"]))
                    totals[k] = totals[k] + q if k in totals else q
            caps = []
            for k in sorted(totals):
                cons = consumed.get(name, {}).get(k) or Quantity.parse("0")
                avail = totals[k] - cons if totals[k] > cons else Quantity.parse("0")
                caps.append({"name": k, "total": str(totals[k]), "consumed": str(cons), "available": str(avail)})
            summary: dict[str, Any] = {"fullyAvailableDevices": sum(1 for d in shareable if d["name"] not in used),
                                       "partiallyAvailableDevices": sum(1 for d in shareable if d["name"] in used)}
            if caps:
                summary["capacity"] = caps
            entry["shareableSummary"] = summary
        out.append(entry)
    count = len(out)
    limit = spec.get("limit") or LIMIT_DEFAULT
    listed = out[:limit]
    bad = sum(1 for p in listed if p.get("validationError"))
    message = f"Calculated status for {len(listed)} pools" + (f" ({bad} incomplete)" if bad else "")
    status: dict[str, Any] = {"poolCount": count}
    if listed:
        status["pools"] = listed
    status["conditions"] = [{"type": "Complete", "status": "True", "lastTransitionTime": stamp,
                             "reason": "CalculationComplete", "message": message}]
    return status, incomplete


class PoolStatusController:
    def __init__(self, cluster: ControllerHost) -> None:
        self.c = cluster
        self.dropped: set[str] = set()  # requests given up on (incomplete pools)

    def sync(self) -> None:
        if not self.c.gates.get("DRAResourcePoolStatus"):
            return
        store = self.c.store
        now = self.c.clock.now()
        requests = list(store.list("ResourcePoolStatusRequest"))
        for req in requests:
            uid = req["metadata"]["uid"]
            if self._expired(req, now):
                store.delete("ResourcePoolStatusRequest", req["metadata"]["name"])
                self.dropped.discard(uid)
                continue
            if req.get("status") is not None or uid in self.dropped:
                continue
            rules = list(store.list("DeviceTaintRule")) if self.c.gates.get("DRADeviceTaintRules") else []
            status, incomplete = calculate(req, list(store.list("ResourceSlice")), list(store.list("ResourceClaim")),
                                           rules, self.c.clock.stamp())
            if incomplete:
                self.dropped.add(uid)
                continue
            r = store.get("ResourcePoolStatusRequest", req["metadata"]["name"])
            assert r is not None
            r["status"] = status
            store.update(r)

    @staticmethod
    def _expired(req: dict[str, Any], now: Any) -> bool:
        conds = (req.get("status") or {}).get("conditions") or []
        done = next((c for c in conds if c.get("type") in ("Complete", "Failed") and c.get("lastTransitionTime")), None)
        if done is not None:
            return now - parse_time(done["lastTransitionTime"]) >= COMPLETED_TTL
        created = req["metadata"].get("creationTimestamp")
        return bool(created) and now - parse_time(created) >= PENDING_TTL
