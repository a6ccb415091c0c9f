"""``drakit lint --vendor``: which cases of the driver suite apply to the profile's driver, and
for each that does not, why (not declared, uses what the profile does not define, needs
drakit's fake driver, needs drakit's own nodes). Every driver case needs a cluster (--backend
cluster); the lines say where each one runs."""

from __future__ import annotations

from typing import Any, Iterable

from .backends.drivertarget import _OPTIONAL, LOCAL_ONLY
from .spec.needs import vendor_unmet


def driver_lines(cases: Iterable[Any], vendor: Any) -> list[str]:
    """One line per driver-suite case: ``applies`` or ``skipped``, its id and why."""
    rows = []
    for case in cases:
        if "driver" not in case.features:
            continue
        ok, why = _applies(case, vendor)
        rows.append((ok, case.id, why))
    if not rows:
        return []
    width = max(len(i) for _, i, _ in rows)
    applies = sum(1 for ok, _, _ in rows if ok)
    dut = vendor.under_test
    lines = [f"driver suite for {dut.driver if dut else 'no driver under test'}: {applies} of {len(rows)} cases apply "
             f"(all need a cluster: --backend cluster)"]
    lines += [f"  {'applies' if ok else 'skipped'}  {cid.ljust(width)}  {why}" for ok, cid, why in rows]
    return lines


def _declared(dut: Any) -> set[str]:
    found = set(dut.optional)
    for conf in dut.configurations:
        found |= set(conf.optional if conf.optional is not None else dut.optional)
    return found


def _applies(case: Any, vendor: Any) -> tuple[bool, str]:
    dut = vendor.under_test
    if dut is None:
        return False, "the profile names no driver under test (driverUnderTest)"
    behaviour = case.behaviour
    if behaviour in _OPTIONAL and behaviour not in _declared(dut):
        return False, f"not declared: add {behaviour} to driverUnderTest.optional if your driver does it"
    unmet = vendor_unmet(case, vendor)
    if unmet is not None:
        category, message = unmet
        return False, f"{category}: {message}"
    startable = dut.plugin is not None or vendor.fake
    if behaviour == "plugin-restart" and dut.plugin is None:
        why = ("drakit's fake driver runs inside drakit and cannot be restarted alone" if vendor.fake else
               "needs drakit's nodes: the profile has no driverUnderTest.plugin for drakit to start (and restart) it with")
        return False, why
    if behaviour == "kubelet-restart" and vendor.fake and dut.plugin is None:
        return True, "drakit's local cluster only, on real kubelet nodes (as root): the fake driver's kubelet restarts"
    if behaviour in LOCAL_ONLY:
        if startable:
            return True, f"drakit's local cluster only: {LOCAL_ONLY[behaviour]}"
        return False, (f"needs drakit's nodes: {LOCAL_ONLY[behaviour]}, and the profile has no driverUnderTest.plugin "
                       f"to start the driver there with")
    if behaviour in _OPTIONAL:
        return True, "declared under driverUnderTest.optional; on a cluster where the driver runs"
    return True, "the driver contract; on a cluster where the driver runs" + (
        "" if startable else " (your cluster: --kubeconfig K; drakit cannot start it without driverUnderTest.plugin)")
