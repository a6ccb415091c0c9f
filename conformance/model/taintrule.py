"""DeviceTaintRule (resource.k8s.io/v1): a taint applied to devices selected by driver/pool/device."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FieldError
from .meta import ObjectMeta, parse_meta
from .reader import Reader
from .slice import DeviceTaint, _parse_taint


@dataclass(frozen=True, slots=True, eq=False)
class DeviceTaintRule:
    meta: ObjectMeta
    driver: str | None
    pool: str | None
    device: str | None
    taint: DeviceTaint
    has_selector: bool = True  # False: spec.deviceSelector unset, which selects no device at all

    def matches(self, driver: str, pool: str, device: str) -> bool:
        """Upstream ruleMatchesDevice: nil selector -> nothing; unset fields match anything."""
        return self.has_selector and (self.driver is None or self.driver == driver) and (
            self.pool is None or self.pool == pool) and (self.device is None or self.device == device)


def parse_device_taint_rule(r: Reader) -> DeviceTaintRule:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=False)
    s = r.obj("spec", required=True)
    assert s is not None
    sel = s.obj("deviceSelector")
    driver = pool = device = None
    if sel is not None:
        driver, pool, device = sel.str("driver"), sel.str("pool"), sel.str("device")
        sel.done()
    t = s.obj("taint", required=True)
    assert t is not None
    taint = _parse_taint(t)
    s.done()
    r.ignore("status")
    r.done()
    if taint.effect not in ("NoSchedule", "NoExecute", "None"):
        raise FieldError(("spec", "taint", "effect"), f"unsupported value {taint.effect!r}")
    return DeviceTaintRule(meta, driver, pool, device, taint, sel is not None)
