"""Device attribute values as ResourceSlices carry them.

An attribute holds exactly one of eight typed fields upstream; we keep the kind and its
payload. Versions stay strings here: parsing them as semver is the consumer's job (CEL parses
at evaluation time and turns a bad version into a runtime error, as upstream does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

AttributeKind = Literal["int", "bool", "string", "version", "ints", "bools", "strings", "versions"]
SCALAR_KINDS: tuple[AttributeKind, ...] = ("int", "bool", "string", "version")
LIST_KINDS: tuple[AttributeKind, ...] = ("ints", "bools", "strings", "versions")
ALL_KINDS: tuple[AttributeKind, ...] = SCALAR_KINDS + LIST_KINDS

Scalar = Union[int, bool, str]
Payload = Union[Scalar, tuple[int, ...], tuple[bool, ...], tuple[str, ...], None]


@dataclass(frozen=True, slots=True)
class AttributeValue:
    """One attribute value. ``kind`` is None when no field was set (upstream: unsupported value)."""

    kind: AttributeKind | None
    value: Payload

    @property
    def is_list(self) -> bool:
        return self.kind in LIST_KINDS

    @property
    def element_kind(self) -> str | None:
        """The scalar kind of the value or of its elements: int, bool, string or version."""
        if self.kind is None:
            return None
        return self.kind[:-1] if self.kind in LIST_KINDS else self.kind

    def elements(self) -> tuple[Scalar, ...]:
        """Scalar -> 1-tuple, list -> its elements, unset -> empty."""
        if self.kind is None:
            return ()
        if self.kind in LIST_KINDS:
            assert isinstance(self.value, tuple)
            return self.value
        assert self.value is not None and not isinstance(self.value, tuple)
        return (self.value,)

    def value_count(self) -> int:
        """How many values count toward the 48-per-device limit (list elements count singly)."""
        return len(self.elements()) if self.kind in LIST_KINDS else (0 if self.kind is None else 1)

    def to_wire(self) -> dict[str, object]:
        if self.kind is None:
            return {}
        v = self.value
        return {self.kind: list(v) if isinstance(v, tuple) else v}


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """``dom/id`` -> (dom, id); a bare ``id`` belongs to the driver's own domain."""
    if "/" in name:
        dom, _, ident = name.partition("/")
        return dom, ident
    return driver, name
