"""Strict semantic versions (semver 2.0.0), as Kubernetes' CEL library and DRA parse them.

:meth:`Semver.parse` accepts exactly ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``: numeric parts
without leading zeros and within uint64, dot-separated pre-release identifiers (numeric ones
without leading zeros) and build identifiers of ``[0-9A-Za-z-]``. Error messages follow the Go
library Kubernetes uses, so ``attribute X: parse semantic version: <message>`` reads the same.

With ``normalize=True`` the input is first made tolerant the way the CEL function
``semver(string, true)`` does it: one leading ``v`` is removed, leading zeros are dropped from
the three dot-separated parts, and a missing minor or patch is filled with ``0`` (a shortened
version may then not carry pre-release or build data).

Precedence (:meth:`Semver.compare`) ignores build metadata, and so do ``==`` and ``hash``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

MAX_UINT64 = 2**64 - 1

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")

PreReleaseId = Union[int, str]


@dataclass(frozen=True, slots=True, eq=False)
class Semver:
    """A parsed version. ``pre`` holds ints for numeric identifiers and strs for the others."""

    major: int
    minor: int
    patch: int
    pre: tuple[PreReleaseId, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, normalize: bool = False) -> Semver:
        """Parse ``text``; ``ValueError`` with the Go library's message when it is not valid."""
        if not isinstance(text, str):
            raise TypeError(f"version must be str, not {type(text).__name__}")
        return _parse_strict(_normalized(text) if normalize else text)

    @classmethod
    def is_valid(cls, text: str, normalize: bool = False) -> bool:
        try:
            cls.parse(text, normalize)
        except ValueError:
            return False
        return True

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by semver precedence."""
        for mine, theirs in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if mine != theirs:
                return 1 if mine > theirs else -1
        return _compare_pre(self.pre, other.pre)

    def core(self) -> str:
        """The version without build metadata (the part precedence and equality look at)."""
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        return text

    def __str__(self) -> str:
        return self.core() + ("+" + ".".join(self.build) if self.build else "")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __le__(self, other: Semver) -> bool:
        return self.compare(other) <= 0

    def __gt__(self, other: Semver) -> bool:
        return self.compare(other) > 0

    def __ge__(self, other: Semver) -> bool:
        return self.compare(other) >= 0


def _compare_pre(mine: tuple[PreReleaseId, ...], theirs: tuple[PreReleaseId, ...]) -> int:
    if not mine or not theirs:
        # A version without pre-release ranks above one with it.
        return (not mine) - (not theirs)
    for a, b in zip(mine, theirs):
        result = _compare_identifier(a, b)
        if result:
            return result
    return (len(mine) > len(theirs)) - (len(mine) < len(theirs))


def _compare_identifier(a: PreReleaseId, b: PreReleaseId) -> int:
    a_num, b_num = isinstance(a, int), isinstance(b, int)
    if a_num != b_num:
        return -1 if a_num else 1  # numeric identifiers rank below alphanumeric ones
    return (a > b) - (a < b)  # type: ignore[operator]


def _only(text: str, allowed: frozenset[str]) -> bool:
    return all(ch in allowed for ch in text)


def _has_leading_zero(text: str) -> bool:
    return len(text) > 1 and text[0] == "0"


def _parse_uint(text: str) -> int:
    if not text or not _only(text, _NUMBERS):
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    value = int(text)
    if value > MAX_UINT64:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def _parse_number(text: str, what: str) -> int:
    if not _only(text, _NUMBERS):
        raise ValueError(f"Invalid character(s) found in {what} number {_quote(text)}")
    if _has_leading_zero(text):
        raise ValueError(f"{what.capitalize()} number must not contain leading zeroes {_quote(text)}")
    return _parse_uint(text)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _parse_pre_release(text: str) -> PreReleaseId:
    if not text:
        raise ValueError("Prerelease is empty")
    if _only(text, _NUMBERS):
        if _has_leading_zero(text):
            raise ValueError(f"Numeric PreRelease version must not contain leading zeroes {_quote(text)}")
        return _parse_uint(text)
    if _only(text, _ALPHANUM):
        return text
    raise ValueError(f"Invalid character(s) found in prerelease {_quote(text)}")


def _parse_build(text: str) -> str:
    if not text:
        raise ValueError("Build meta data is empty")
    if not _only(text, _ALPHANUM):
        raise ValueError(f"Invalid character(s) found in build meta data {_quote(text)}")
    return text


def _parse_strict(text: str) -> Semver:
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major = _parse_number(parts[0], "major")
    minor = _parse_number(parts[1], "minor")
    rest = parts[2]
    if "+" in rest:
        rest, _, build_text = rest.partition("+")
        build_ids = build_text.split(".")
    else:
        build_ids = []
    pre_ids: list[str] = []
    if "-" in rest:
        rest, _, pre_text = rest.partition("-")
        pre_ids = pre_text.split(".")
    patch = _parse_number(rest, "patch")
    pre = tuple(_parse_pre_release(p) for p in pre_ids)
    build = tuple(_parse_build(b) for b in build_ids)
    return Semver(major, minor, patch, pre, build)


def _normalized(text: str) -> str:
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or stripped[0] not in _NUMBERS:
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)
