"""Planted faults: drakit's fake driver made wrong on purpose, to prove the driver suite finds it.

Switched on with the environment variable ``DRAKIT_FAKE_DRIVER_PLANT`` (comma-separated), read
where the fake driver starts (its kubelet plugin, and the slices drakit publishes for it in the
driver suite). Each fault breaks one behaviour of the DRA driver contract:

======================  ===========================================================  ==================
fault                   what the fake driver then does                               fails
======================  ===========================================================  ==================
no-cdi-spec             prepares and answers CDI ids, but writes no CDI spec         driver/pod-env
leak-on-unprepare       unprepares, but leaves the claim's CDI spec behind           driver/unprepare
unprepare-fails         answers the first unprepare of each claim with a per-claim   driver/unprepare
                        error (the pod stays Terminating until the kubelet's retry,
                        10-15 s later, succeeds; later cases are not hurt)
unprepare-always-fails  answers every unprepare with a per-claim error: the pods     driver/unprepare
                        stay Terminating for good and hold their devices (the
                        failure names the call, the claim and this error within
                        seconds; later cases needing those devices are set aside
                        as ``held``, naming driver/unprepare)
wrong-attribute-type    publishes the ``index`` attribute of its first slice's       driver/slices
                        devices as a string (the profile declares an int)
prepare-other-device    answers NodePrepareResources naming another device of the     driver/prepare
                        pool than the one allocated (its CDI ids unchanged)
env-wrong-value         its CDI edits give each device's environment variable a      driver/pod-env
                        wrong value (the variable is there)
admin-prepare-fails     refuses to prepare a claim with admin access                 driver/admin-access
partition-overcommit    publishes the partitions of a device without the shared      driver/partitionable-
                        counters they consume (they fit beside their full device)    devices
======================  ===========================================================  ==================

What else each fault fails, by design (the planted-fault test, tests/clusters/test_driver_suite.py,
holds each fault to exactly this set): no-cdi-spec fails every case that needs a running
container (a runtime refuses a CDI device it has no spec for: driver/registration, prepare,
pod-env, unprepare, reuse, several-pods, kubelet-restart, and the optional admin-access,
prioritized-list, partitionable-devices, device-metadata and health); both unprepare faults also fail
driver/kubelet-restart and driver/plugin-restart, which check that a claim is unprepared cleanly
after the restart (plugin-restart runs only for a driver started from a plugin command);
env-wrong-value fails every case that reads a container's environment (pod-env, admin-access,
prioritized-list, partitionable-devices); admin-prepare-fails fails driver/admin-access only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV = "DRAKIT_FAKE_DRIVER_PLANT"
FAULTS = ("no-cdi-spec", "leak-on-unprepare", "unprepare-fails", "unprepare-always-fails", "wrong-attribute-type",
          "prepare-other-device", "env-wrong-value", "admin-prepare-fails", "partition-overcommit")


def planted(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The planted faults switched on; an unknown name is a ``ValueError`` with one line."""
    text = (os.environ if environ is None else environ).get(ENV, "")
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    unknown = sorted(names - set(FAULTS))
    if unknown:
        raise ValueError(f"{ENV}: unknown planted fault {unknown[0]!r} (known: {', '.join(FAULTS)})")
    return names


def wrong_attribute_type(slices: list[dict[str, object]], attribute: str = "index") -> list[dict[str, object]]:
    """The slices with ``attribute`` of the first slice's devices turned from int to string."""
    for s in slices[:1]:
        for device in (s.get("spec") or {}).get("devices") or []:  # type: ignore[union-attr]
            attrs = device.get("attributes") or {}
            if isinstance(attrs.get(attribute), dict) and "int" in attrs[attribute]:
                attrs[attribute] = {"string": str(attrs[attribute]["int"])}
    return slices


def partition_overcommit(slices: list[dict[str, object]]) -> list[dict[str, object]]:
    """The slices with only the first device consuming each shared counter set keeping its
    ``consumesCounters`` (the full device): its partitions consume none of the counters they share."""
    seen: set[str] = set()
    for s in slices:
        for device in (s.get("spec") or {}).get("devices") or []:  # type: ignore[union-attr]
            sets = {str(cc.get("counterSet")) for cc in device.get("consumesCounters") or []}
            if sets and sets <= seen:
                device.pop("consumesCounters")
            seen |= sets
    return slices


def answered(faults: frozenset[str], device: str, pools: Mapping[str, str]) -> str:
    """The device a prepare answer names for allocated ``device``: itself, or with the fault
    prepare-other-device the next device (by name) of its pool (``pools``: device -> pool)."""
    if "prepare-other-device" not in faults:
        return device
    same = sorted(n for n, p in pools.items() if p == pools[device])
    return same[(same.index(device) + 1) % len(same)]
