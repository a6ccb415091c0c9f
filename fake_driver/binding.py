"""Binding conditions (KEP-5007): the controller side of devices that need an attach step.

A device that must be attached before a pod may bind publishes ``bindingConditions`` (and
``bindingFailureConditions``) in its ResourceSlice; the scheduler copies them into the
allocation result and waits, before binding the pod, until every binding condition is ``True``
in the claim's ``status.devices[].conditions`` (or gives up when a failure condition is
``True``).

- ``with_binding_conditions(slices, devices, ...)`` marks fake devices as needing attachment.
- ``needs_attach(result)`` tells whether an allocation result waits for binding conditions.
- ``binding_status(claim, driver, outcomes, now=...)`` is the pure part of the controller: the
  claim's new ``status.devices`` after attaching (``True``) or failing (an error message) the
  listed devices; entries of other drivers and devices are kept.
- ``BindingController`` applies that through a status writer (``ClaimSource`` compatible). On a
  real cluster the write is cluster work (see ``KubernetesClaimSource.write_device_status``).
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Collection, Mapping, Sequence

from .plugin.claims import ClaimSource
from .status import now_rfc3339

ATTACHED = "drakit.dev/attached"
ATTACH_FAILED = "drakit.dev/attach-failed"
MAX_BINDING_CONDITIONS = 4

DeviceKey = tuple[str, str]  # (pool, device)


def with_binding_conditions(slices: Sequence[dict[str, Any]], devices: Collection[str], *,
                            conditions: Sequence[str] = (ATTACHED,),
                            failure_conditions: Sequence[str] = (ATTACH_FAILED,),
                            binds_to_node: bool = False) -> list[dict[str, Any]]:
    """A copy of ``slices`` where the named devices need attaching before binding."""
    if not conditions or not failure_conditions:
        raise ValueError("binding conditions and failure conditions must be set together")
    if len(conditions) > MAX_BINDING_CONDITIONS or len(failure_conditions) > MAX_BINDING_CONDITIONS:
        raise ValueError(f"at most {MAX_BINDING_CONDITIONS} binding (failure) conditions")
    out = copy.deepcopy(list(slices))
    found: set[str] = set()
    for s in out:
        for device in s["spec"].get("devices", []):
            if device["name"] in devices:
                device["bindingConditions"] = list(conditions)
                device["bindingFailureConditions"] = list(failure_conditions)
                if binds_to_node:
                    device["bindsToNode"] = True
                found.add(device["name"])
    missing = set(devices) - found
    if missing:
        raise ValueError(f"no such device(s) in the slices: {', '.join(sorted(missing))}")
    return out


def needs_attach(result: Mapping[str, Any]) -> bool:
    return bool(result.get("bindingConditions"))


def pending_attachments(claim: Mapping[str, Any], driver: str) -> list[dict[str, Any]]:
    """Allocation results of ``driver`` that wait for binding conditions not yet ``True``."""
    status = claim.get("status") or {}
    allocation = status.get("allocation") or {}
    current = {(e.get("pool"), e.get("device")): e for e in status.get("devices") or []
               if e.get("driver") == driver}
    out = []
    for result in (allocation.get("devices") or {}).get("results") or []:
        if result.get("driver") != driver or not needs_attach(result):
            continue
        entry = current.get((result.get("pool"), result.get("device")), {})
        true = {c.get("type") for c in entry.get("conditions") or [] if c.get("status") == "True"}
        if not set(result["bindingConditions"]) <= true:
            out.append(dict(result))
    return out


def _set_condition(conditions: list[dict[str, Any]], ctype: str, status: str, reason: str,
                   message: str, now: str) -> None:
    for i, cond in enumerate(conditions):
        if cond.get("type") == ctype:
            if cond.get("status") != status:
                conditions[i] = {"type": ctype, "status": status, "reason": reason,
                                 "message": message, "lastTransitionTime": now}
            else:
                conditions[i] = {**cond, "reason": reason, "message": message}
            return
    conditions.append({"type": ctype, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now})


def binding_status(claim: Mapping[str, Any], driver: str,
                   outcomes: Mapping[DeviceKey, bool | str], *, now: str) -> list[dict[str, Any]]:
    """The claim's ``status.devices`` after attach attempts.

    ``outcomes`` maps (pool, device) to ``True`` (attached: binding conditions ``True``, failure
    conditions ``False``) or an error text (failure conditions ``True`` with that message).
    Devices without binding conditions or without an outcome are left alone.
    """
    status = claim.get("status") or {}
    entries = copy.deepcopy(list(status.get("devices") or []))
    results = (((status.get("allocation") or {}).get("devices") or {}).get("results") or [])
    for result in results:
        key = (result.get("pool", ""), result.get("device", ""))
        if result.get("driver") != driver or not needs_attach(result) or key not in outcomes:
            continue
        outcome = outcomes[key]
        entry = next((e for e in entries if e.get("driver") == driver and e.get("pool") == key[0]
                      and e.get("device") == key[1]
                      and e.get("shareID") == result.get("shareID")), None)
        if entry is None:
            entry = {"driver": driver, "pool": key[0], "device": key[1]}
            if result.get("shareID"):
                entry["shareID"] = result["shareID"]
            entries.append(entry)
        conditions = entry.setdefault("conditions", [])
        ok = outcome is True
        message = "device attached" if ok else str(outcome)
        for ctype in result.get("bindingConditions") or []:
            _set_condition(conditions, ctype, "True" if ok else "False",
                           "Attached" if ok else "AttachFailed", message, now)
        for ctype in result.get("bindingFailureConditions") or []:
            _set_condition(conditions, ctype, "False" if ok else "True",
                           "Attached" if ok else "AttachFailed", message, now)
    return entries


class BindingController:
    """Attaches pending devices of one driver and writes the outcome into claim status.

    ``attach(result)`` returns ``None`` on success or an error text. ``writer`` is anything with
    ``write_device_status`` (a ``ClaimSource``); the Kubernetes one is cluster work.
    """

    def __init__(self, driver: str, writer: ClaimSource,
                 attach: Callable[[Mapping[str, Any]], str | None] = lambda result: None,
                 clock: Callable[[], str] = now_rfc3339) -> None:
        self.driver = driver
        self.writer = writer
        self.attach = attach
        self.clock = clock

    def reconcile(self, claim: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """Attach what is pending; returns the written ``status.devices`` or ``None``."""
        pending = pending_attachments(claim, self.driver)
        if not pending:
            return None
        outcomes: dict[DeviceKey, bool | str] = {}
        for result in pending:
            error = self.attach(result)
            outcomes[(result["pool"], result["device"])] = True if error is None else error
        entries = binding_status(claim, self.driver, outcomes, now=self.clock())
        meta = claim["metadata"]
        mine = [e for e in entries if e.get("driver") == self.driver]
        self.writer.write_device_status(meta.get("namespace", ""), meta["name"], meta["uid"],
                                        self.driver, mine)
        return entries
