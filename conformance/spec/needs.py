"""What a case needs of the driver under test, and whether the run's vendor profile gives it.

Some cases use powers only drakit's fake driver has: they install a chosen inventory of fake
nodes and devices, inject hardware faults, write claim device status as the driver, decide when
binding conditions are met, or taint devices cluster-wide. Against a vendor's own driver (a
profile whose drivers are not drakit's fake ones) drakit must not publish fake hardware or act
as that driver, so such a case is skipped with the category ``needs-fake-driver``.

The needs are derived from the case content (:func:`derive_needs`); the case's ``needs`` field
adds those the content does not show. A case that uses a placeholder the vendor profile does not
define (a NIC case against a GPU-only profile) is skipped as ``not-applicable``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from ..yamlmarks import line_of

NEEDS_FAKE_DRIVER = "needs-fake-driver"
NOT_APPLICABLE = "not-applicable"

POWERS: dict[str, str] = {
    "fake-hardware": "installs fake nodes and devices",
    "fault-injection": "injects hardware faults through the fake driver",
    "driver-status": "writes claim device status as the driver",
    "binding-control": "decides when the driver's binding conditions are met",
    "taint-devices": "taints devices with a DeviceTaintRule",
}
_PUBLISHED_KINDS = {"ResourceSlice": "fake-hardware", "Node": "fake-hardware", "DeviceTaintRule": "taint-devices"}


@dataclass(frozen=True, slots=True)
class Need:
    """One power a case needs, where in the file it shows, and what there shows it."""

    power: str
    line: int
    where: str

    def describe(self) -> str:
        return f"{POWERS[self.power]} ({self.where}, line {self.line})"


def derive_needs(doc: Mapping[str, Any], start: int) -> tuple[Need, ...]:
    """The needs of a case document that passed the schema (first occurrence of each power)."""
    found: dict[str, Need] = {}

    def add(power: str, path: tuple[object, ...], where: str) -> None:
        found.setdefault(power, Need(power, line_of(doc, path) or start, where))

    for i, power in enumerate(doc.get("needs") or ()):
        add(power, ("needs", i), "declared in needs")
    if (doc.get("hardware") or {}).get("nodes"):
        add("fake-hardware", ("hardware", "nodes"), "hardware.nodes")
    for i, step in enumerate(doc.get("steps") or ()):
        if "fault" in step:
            add("fault-injection", ("steps", i), f"steps[{i}] fault")
        elif "driverStatus" in step:
            add("driver-status", ("steps", i), f"steps[{i}] driverStatus")
        elif "apply" in step and "expectError" not in step:
            manifests = step["apply"] if isinstance(step["apply"], list) else [step["apply"]]
            for j, m in enumerate(manifests):
                kind = m.get("kind") if isinstance(m, Mapping) else None
                if kind in _PUBLISHED_KINDS:
                    path = ("steps", i, "apply") + ((j,) if isinstance(step["apply"], list) else ())
                    add(_PUBLISHED_KINDS[kind], path, f"steps[{i}] applies a {kind}")
    return tuple(sorted(found.values(), key=lambda n: n.line))


class _Vendor(Protocol):
    name: str

    @property
    def fake(self) -> bool: ...
    @property
    def driver_names(self) -> tuple[str, ...]: ...


class _Case(Protocol):
    needs: Sequence[Need]
    unresolved: Sequence[str]


def vendor_unmet(case: _Case, vendor: _Vendor) -> tuple[str, str] | None:
    """(category, message) when the case cannot run with this vendor profile, else None."""
    if case.unresolved:
        shown = ", ".join("${" + key + "}" for key in case.unresolved[:3])
        more = f" and {len(case.unresolved) - 3} more" if len(case.unresolved) > 3 else ""
        return NOT_APPLICABLE, f"the vendor profile {vendor.name!r} does not define {shown}{more}"
    if case.needs and not vendor.fake:
        what = "; ".join(n.describe() for n in case.needs)
        return NEEDS_FAKE_DRIVER, (f"the case {what}; the driver under test is "
                                   f"{', '.join(vendor.driver_names)} (vendor profile {vendor.name!r}), "
                                   f"not drakit's fake driver")
    return None
