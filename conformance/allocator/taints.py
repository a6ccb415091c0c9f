"""Device taints against a request's tolerations (DRADeviceTaints)."""

from __future__ import annotations

from typing import Sequence

from ..model.claim import Toleration
from ..model.slice import Device, DeviceTaint


def tolerated(tolerations: Sequence[Toleration], d: Device) -> bool:
    """Whether every NoSchedule/NoExecute taint of the device is tolerated."""
    for taint in d.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return False
    return True


def tolerates(t: Toleration, taint: DeviceTaint) -> bool:
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if t.operator in ("", "Equal"):
        return bool((t.value or "") == (taint.value or ""))
    return t.operator == "Exists"
