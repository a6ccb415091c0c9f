"""matchAttribute and distinctAttribute, in scalar mode and (with list-type attributes) set mode.

Set-mode matchAttribute keeps the running intersection of the devices currently held, recomputed
on removal, which is the documented semantics (the July-2026 upstream snapshot did not widen the
intersection again after backtracking; see docs/findings.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..attributes import AttributeValue
from ..model.slice import Device
from .types import DeviceID


def lookup_attribute(device: Device, driver: str, name: str) -> AttributeValue | None:
    """``domain/id`` first as written, then as the bare id when the domain is the driver's."""
    v = device.attributes.get(name)
    if v is not None:
        return v
    dom, _, ident = name.partition("/")
    if dom == driver:
        return device.attributes.get(ident)
    return None


def _typed_set(v: AttributeValue | None) -> tuple[str, frozenset[object]] | None:
    if v is None or v.kind is None:
        return None
    elems = v.elements()
    if not elems:
        return None
    return (v.element_kind or "", frozenset(elems))


def _scalar_key(v: AttributeValue) -> tuple[str, object]:
    return (v.kind or "", v.value)


@dataclass(slots=True)
class ConstraintTracker:
    attribute: str
    requests: tuple[str, ...]
    distinct: bool
    list_mode: bool
    held: list[tuple[DeviceID, AttributeValue]] = field(default_factory=list)

    def applies(self, request: str, sub: str | None) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (sub is not None and f"{request}/{sub}" in self.requests)

    def add(self, dev_id: DeviceID, v: AttributeValue | None) -> bool:
        """Hold the device if its value of the attribute keeps the constraint satisfied."""
        if v is None or v.kind is None:
            return False
        ok = self._accepts_distinct(v) if self.distinct else self._accepts_match(v)
        if ok:
            self.held.append((dev_id, v))
        return ok

    def remove(self, dev_id: DeviceID) -> None:
        for i in range(len(self.held) - 1, -1, -1):
            if self.held[i][0] == dev_id:
                del self.held[i]
                return

    def _accepts_match(self, v: AttributeValue) -> bool:
        if not self.held:
            return True if not self.list_mode else _typed_set(v) is not None
        if not self.list_mode:
            ref = self.held[0][1]
            return not v.is_list and _scalar_key(ref) == _scalar_key(v)
        mine = _typed_set(v)
        if mine is None:
            return False
        kind, running = mine
        for _, other in self.held:
            s = _typed_set(other)
            if s is None or s[0] != kind:
                return False
            running = running & s[1]
        return bool(running)

    def _accepts_distinct(self, v: AttributeValue) -> bool:
        if not self.list_mode:
            # Scalars conflict only with an equal scalar of the same kind; a list value is only
            # accepted as the first device of the constraint.
            if v.is_list:
                return not self.held
            return all(other.is_list or _scalar_key(other) != _scalar_key(v) for _, other in self.held)
        mine = _typed_set(v)
        if mine is None:
            return False
        for _, other in self.held:
            s = _typed_set(other)
            if s is not None and s[0] == mine[0] and s[1] & mine[1]:
                return False
        return True


@dataclass(frozen=True, slots=True)
class GroupIntersection:
    """The rolling intersection of compatibility groups of the devices drawing on one counter set.

    Devices without groups only go with devices without groups; devices with groups need at least
    one group shared by every grouped device already there.
    """

    has_members: bool = False
    all_empty: bool = False
    groups: frozenset[str] = frozenset()

    def admits(self, groups: frozenset[str]) -> bool:
        if not self.has_members:
            return True
        if not groups:
            return self.all_empty
        if self.all_empty:
            return False
        return bool(self.groups & groups)

    def add(self, groups: frozenset[str]) -> "GroupIntersection":
        if not self.has_members:
            return GroupIntersection(True, not groups, groups)
        if self.all_empty or not groups:
            return self
        return GroupIntersection(True, False, self.groups & groups)
