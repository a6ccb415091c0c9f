"""The driver section of a report: each behaviour of the DRA driver contract for the driver
under test, proven, failed or skipped (why), with the driver's name and version as published.

Pure functions of the results data. Driver-suite cases carry ``behaviour``; the driver's name
and version come from ``environment.backends.<b>.driverUnderTest`` (the cluster backend), else
from the vendor profile in ``environment.vendor``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# the contract's behaviours in report order: KEP-5970's seven, then drakit's, then the optional ones
BEHAVIOURS: tuple[tuple[str, str], ...] = (
    ("registration", "registration with the kubelet"),
    ("slices", "ResourceSlice publishing"),
    ("allocation", "allocation through its DeviceClass by the scheduler"),
    ("prepare", "NodePrepareResources"),
    ("pod-env", "the pod runs with the driver's CDI edits"),
    ("unprepare", "NodeUnprepareResources without failure events or leftovers"),
    ("reuse", "reuse of a claim by a second pod"),
    ("several-pods", "several pods at once"),
    ("plugin-restart", "plugin restart without leaks"),
    ("kubelet-restart", "kubelet restart without leaks"),
    ("admin-access", "admin access"), ("prioritized-list", "prioritized lists"),
    ("partitionable-devices", "partitionable devices"), ("consumable-capacity", "consumable capacity"),
    ("device-status", "device status and network data"), ("device-metadata", "device metadata"),
    ("health", "device health"), ("device-taints", "device taints"), ("binding-conditions", "binding conditions"),
)
# a run exercised the driver when one of these passed: it allocated, prepared or ran something of it
EXERCISING = frozenset({"allocation", "prepare", "pod-env", "unprepare", "reuse", "several-pods"})
_PASSING = frozenset({"passed", "flaky"})


def has_driver_under_test(cases: Iterable[Mapping[str, Any]], environment: Mapping[str, Any] | None) -> bool:
    """A run has a driver under test when it ran driver-suite cases, or its vendor profile names
    a vendor's own driver (not drakit's fake one)."""
    vendor = (environment or {}).get("vendor") or {}
    return vendor.get("fakeDriver") is False or any(c.get("behaviour") for c in cases)


def exercised(cases: Iterable[Mapping[str, Any]]) -> bool:
    """A case of a core behaviour that uses the driver passed, or any passed driver case (a
    vendor's own among them) allocated a device of the driver or ran a pod with it."""
    return any(c.get("status") in _PASSING and (c.get("behaviour") in EXERCISING or c.get("exercised"))
               for c in cases)


def driver_section(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{name, version, exercised, behaviours: [{id, title, status, cases, reason}]}`` or None
    when the run has no driver under test. A behaviour is ``proven`` when a case of it passed and
    none failed, ``failed`` when one failed or errored (a finding when all such cases are
    optional), ``error`` when the harness could not run them, ``skipped`` with the skip messages, ``not-run``
    when no case was collected."""
    cases = list(results.get("cases") or [])
    environment = results.get("environment") or {}
    if not has_driver_under_test(cases, environment):
        return None
    info: Mapping[str, Any] = next((b["driverUnderTest"] for b in (environment.get("backends") or {}).values()
                                    if isinstance(b, Mapping) and b.get("driverUnderTest")), {})
    name = info.get("name") or ", ".join((environment.get("vendor") or {}).get("drivers") or []) or "unknown"
    rows = [row for bid, title in BEHAVIOURS if (row := _row(bid, title, cases)) is not None]
    out = {"name": name, "version": info.get("version") or "not published", "exercised": exercised(cases),
           "behaviours": rows}
    confs = list(dict.fromkeys(c["configuration"] for c in cases if c.get("configuration")))
    if confs:  # profile v2 configurations side by side
        out["configurations"] = []
        for conf in confs:
            mine = [c for c in cases if c.get("configuration") == conf]
            out["configurations"].append({"name": conf, "exercised": exercised(mine), "statuses": {
                bid: row["status"] for bid, title in BEHAVIOURS if (row := _row(bid, title, mine)) is not None}})
    if info.get("registration"):
        out["registration"] = info["registration"]
    return out


def _row(bid: str, title: str, cases: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One behaviour's status over ``cases`` (None: an optional behaviour no case checks)."""
    mine = [c for c in cases if c.get("behaviour") == bid]
    failing = [c for c in mine if c["status"] in ("failed", "error", "xfail")]
    passing = [c for c in mine if c["status"] in _PASSING]
    if failing:
        optional = all(c.get("profile") == "optional" and c["status"] == "failed" for c in failing)
        status = "finding" if optional else "error" if all(c["status"] == "error" for c in failing) else "failed"
        reason = "; ".join(((c.get("failure") or {}).get("summary") or c["status"]).splitlines()[0] for c in failing)
    elif passing:
        status, reason = "proven", ""
    elif mine:
        status = "skipped"
        reason = "; ".join(f"[{(c.get('skip') or {}).get('category', 'other')}] {(c.get('skip') or {}).get('message', '')}"
                           for c in mine)
    else:
        if bid not in {b for b, _ in BEHAVIOURS[:10]}:
            return None  # an optional behaviour no case of this run checks
        status, reason = "not-run", "no case of this behaviour was run"
    return {"id": bid, "title": title, "status": status, "reason": reason,
            "cases": [f"{c['id']} [{c.get('backend', '-')}]" for c in mine]}


def driver_reasons(cases: Iterable[Mapping[str, Any]], environment: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The run-level verdict reason ``driver-not-exercised`` (``reports.verdict``), or none: the
    run has a driver under test and no case allocated, prepared or ran anything of it."""
    cases = list(cases)
    if not has_driver_under_test(cases, environment) or exercised(cases):
        return []
    vendor = (environment or {}).get("vendor") or {}
    name = ", ".join(vendor.get("drivers") or []) or "the driver under test"
    left = [c for c in cases if c.get("behaviour") in EXERCISING]
    why = ("no driver-suite case exercising it passed" if left else
           "no driver-suite case ran (run conformance/suites/driver)")
    return [{"code": "driver-not-exercised",
             "message": f"no case exercised {name}: {why}; a run that tested nothing of the driver is never PASS",
             "count": len(left), "cases": [{"id": str(c["id"]), "backend": str(c.get("backend", "-"))} for c in left]}]
