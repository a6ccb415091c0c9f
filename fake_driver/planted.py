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
======================  ===========================================================  ==================

What else each fault fails, by design (the planted-fault test, tests/clusters/test_driver_suite.py,
holds each fault to exactly this set): no-cdi-spec fails every case that needs a running
container (a runtime refuses a CDI device it has no spec for: driver/registration, prepare,
pod-env, unprepare, reuse, several-pods, kubelet-restart, and the optional admin-access,
prioritized-list, partitionable-devices, device-metadata and health); both unprepare faults also fail
driver/kubelet-restart and driver/plugin-restart, which check that a claim is unprepared cleanly
after the restart (plugin-restart runs only for a driver started from a plugin command).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV = "DRAKIT_FAKE_DRIVER_PLANT"
FAULTS = ("no-cdi-spec", "leak-on-unprepare", "unprepare-fails", "unprepare-always-fails", "wrong-attribute-type")


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
