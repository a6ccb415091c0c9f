"""Typed device attribute values, as the fake drivers publish them.

Kept inside ``fake_hw`` so the emulated hardware depends on nothing else in the project. The
fields (``kind`` and ``value``) match ``drakit.conformance.attributes.AttributeValue``, so a
consumer converts with ``AttributeValue(a.kind, a.value)`` or reads the wire form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

AttrKind = Literal["int", "bool", "string", "version", "ints", "bools", "strings", "versions"]
AttrPayload = Union[int, bool, str, tuple[int, ...], tuple[bool, ...], tuple[str, ...]]
LIST_KINDS = ("ints", "bools", "strings", "versions")


@dataclass(frozen=True, slots=True)
class Attr:
    """One attribute value: its kind (the wire field name) and the payload."""

    kind: AttrKind
    value: AttrPayload

    @property
    def is_list(self) -> bool:
        return self.kind in LIST_KINDS

    def value_count(self) -> int:
        """How many values this adds toward the per-device limit (each list element counts)."""
        return len(self.value) if isinstance(self.value, tuple) else 1

    def to_wire(self) -> dict[str, object]:
        """The ResourceSlice form: ``{"int": 3}``, ``{"ints": [0, 1]}``..."""
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {self.kind: value}
