"""Devices an earlier driver case left held: its pods stay Terminating because the kubelet's
NodeUnprepareResources keeps failing, so their claims stay allocated and their devices taken.

A later case of the driver suite is not failed for that ("cannot allocate all claims", a pod
Pending for its whole budget, then its own pods stuck too): while such devices are held, the
driver side sets every later case that runs pods aside (skip category ``held``, which keeps the
verdict from PASS) with a reason naming the earlier case, the kubelet's words and the devices;
driver/unprepare still runs, the case whose failure this is. (Which devices a case's pods would
get is the scheduler's choice, so "enough free devices" cannot be judged beforehand: on
drakit's fake driver every case leaked one and the fifth found none.) A record goes once its
claims are no longer allocated (the driver answered a retry at last).
"""

from __future__ import annotations

from typing import Any


class HeldClaims:
    def __init__(self, api: Any) -> None:
        self.api = api
        self.records: dict[str, tuple[str, str]] = {}  # namespace -> (case id, why its pods stay)

    def add(self, case: str, namespace: str, why: str) -> None:
        """``ClusterSession.on_held``: the case's pods stay after cleanup, for ``why``."""
        self.records[namespace] = (case, why)

    def namespaces(self) -> frozenset[str]:
        return frozenset(self.records)

    def devices(self, driver: str) -> dict[tuple[str, str], str]:
        """(pool, device) of ``driver`` allocated to the held claims -> the case that left them;
        records whose claims are gone or deallocated are dropped."""
        out: dict[tuple[str, str], str] = {}
        for namespace, (case, _) in list(self.records.items()):
            claims = [c for c in self.api.list("ResourceClaim", namespace) if (c.get("status") or {}).get("allocation")]
            if not claims:
                del self.records[namespace]
                continue
            for c in claims:
                for r in ((c["status"]["allocation"].get("devices") or {}).get("results") or []):
                    if r.get("driver") == driver:
                        out[(str(r.get("pool")), str(r.get("device")))] = case
        return out

    def reason(self, held: dict[tuple[str, str], str]) -> str:
        """Why a case is set aside: the cases that hold the devices, the first one's kubelet words."""
        cases = sorted(set(held.values()))
        why = next(w for c, w in self.records.values() if c == cases[0])
        devices = ", ".join(f"{p}/{d}" for p, d in sorted(held)[:5]) + (" ..." if len(held) > 5 else "")
        return (f"set aside: the driver's devices {devices} are held by pods of {', '.join(cases)} that cannot go "
                f"({why}); this case's pods would compete for what is left")
