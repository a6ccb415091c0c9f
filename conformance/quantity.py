"""Kubernetes ``resource.Quantity`` on exact arithmetic.

A quantity is held as an exact :class:`fractions.Fraction` plus the *format* upstream would
keep with it (``DecimalSI``, ``BinarySI`` or ``DecimalExponent``). The format only matters for
the canonical string form; equality, hashing and ordering are numeric, so
``Quantity("1Gi") == Quantity("1073741824")``.

Parsing follows upstream's scanner and its quirks:

* an optional sign, digits with an optional ``.`` and fraction digits, then a suffix: decimal SI
  (``n u m k M G T P E``), binary SI (``Ki Mi Gi Ti Pi Ei``) or an exponent (``e3``, ``E-2``);
* digit-less numbers count as zero (``"k"``, ``"-"``, ``"."`` and ``"Gi"`` parse as 0, while
  ``"Pi"`` and ``"e-20"`` are rejected, exactly where upstream's slow path rejects them);
* values that are not a whole number of nano units are rounded *away from zero* to one;
* binary values are capped at ``2**63 - 1`` in magnitude, decimal ones are not.

Differences from upstream, on purpose:

* upstream keeps an internal "fast" int64 form or an arbitrary-precision form, and a few of its
  answers depend on which one a value happens to use (``AsInt64``); here every answer depends on
  the numeric value only;
* exponents above ``MAX_EXPONENT`` are refused instead of building astronomically large numbers;
* :meth:`Quantity.canonical` never returns the original text: upstream's ``String()`` echoes
  some inputs verbatim (``"+1"`` stays ``"+1"``), its canonical form gives ``"1"``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Literal, NoReturn, Union

QuantityFormat = Literal["DecimalSI", "BinarySI", "DecimalExponent"]
FORMATS: tuple[QuantityFormat, ...] = ("DecimalSI", "BinarySI", "DecimalExponent")

MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
#: Largest decimal exponent accepted (upstream accepts any int32; such values are useless).
MAX_EXPONENT = 1000

ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
ERR_SUFFIX = "unable to parse quantity's suffix"
ERR_NUMERIC = "unable to parse numeric part of quantity"

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = {exp // 10: suffix for suffix, exp in _BINARY_SUFFIXES.items()} | {0: ""}
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_NANO_PER_UNIT = 10**9
_MAX_INT64_DIGITS = 18  # decimal digits that always fit an int64

Number = Union[int, Fraction]


class Quantity:
    """An immutable Kubernetes quantity. ``Quantity("1500m")`` is the same as ``Quantity.parse``."""

    __slots__ = ("_value", "_format", "_text")

    _value: Fraction
    _format: QuantityFormat
    _text: str

    def __init__(self, text: str) -> None:
        value, fmt = _parse(text)
        _init(self, value, fmt, text)

    # -- construction -------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse a quantity string; ``ValueError`` (with upstream's message) when invalid."""
        return cls(text)

    @classmethod
    def from_number(cls, number: Number, fmt: QuantityFormat = "BinarySI") -> Quantity:
        """A quantity of ``number`` (rounded away from zero to a whole nano unit)."""
        if isinstance(number, bool) or not isinstance(number, (int, Fraction)):
            raise TypeError(f"quantity value must be int or Fraction, not {type(number).__name__}")
        if fmt not in FORMATS:
            raise ValueError(f"unknown quantity format {fmt!r}")
        return _build(_round_to_nano(Fraction(number)), fmt)

    @classmethod
    def from_yaml(cls, raw: object) -> Quantity:
        """Accept what a YAML loader gives for a quantity: a string, an int or a float."""
        if isinstance(raw, Quantity):
            return raw
        if isinstance(raw, bool) or raw is None:
            raise ValueError(f"a quantity must be a string or a number, not {raw!r}")
        if isinstance(raw, int):
            return cls(str(raw))
        if isinstance(raw, float):
            if not math.isfinite(raw):
                raise ValueError(f"a quantity must be finite, not {raw!r}")
            return cls(repr(raw))
        if isinstance(raw, str):
            return cls(raw)
        raise ValueError(f"a quantity must be a string or a number, not {type(raw).__name__}")

    # -- attributes ---------------------------------------------------------------------

    @property
    def value(self) -> Fraction:
        return self._value

    @property
    def format(self) -> QuantityFormat:
        return self._format

    @property
    def text(self) -> str:
        """The string this quantity was parsed from (the canonical form if it was computed)."""
        return self._text

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Quantity is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Quantity is immutable (cannot delete {name!r})")

    def __reduce__(self) -> tuple[Any, tuple[int, int, str, str]]:
        return (_restore, (self._value.numerator, self._value.denominator, self._format, self._text))

    # -- numeric views ------------------------------------------------------------------

    def sign(self) -> int:
        return (self._value > 0) - (self._value < 0)

    def is_integer(self) -> bool:
        return self._value.denominator == 1

    def ceil_int(self) -> int:
        """Upstream ``Value()``: the value rounded up, away from zero, to a whole number."""
        return _ceil_away(self._value)

    def ceil_milli(self) -> Fraction:
        """Upstream ``MilliValue()/1000``: rounded up, away from zero, to a multiple of 0.001."""
        return Fraction(_ceil_away(self._value * 1000), 1000)

    def as_approximate_float(self) -> float:
        return float(self._value)

    # -- arithmetic ---------------------------------------------------------------------

    def __add__(self, other: object) -> Quantity:
        rhs = _coerce(other)
        if rhs is None:
            return NotImplemented
        return _build(self._value + rhs._value, self._result_format(rhs))

    def __radd__(self, other: object) -> Quantity:
        lhs = _coerce(other)
        if lhs is None:
            return NotImplemented
        return lhs + self

    def __sub__(self, other: object) -> Quantity:
        rhs = _coerce(other)
        if rhs is None:
            return NotImplemented
        return _build(self._value - rhs._value, self._result_format(rhs))

    def __rsub__(self, other: object) -> Quantity:
        lhs = _coerce(other)
        if lhs is None:
            return NotImplemented
        return lhs - self

    def __neg__(self) -> Quantity:
        return _build(-self._value, self._format)

    def _result_format(self, other: Quantity) -> QuantityFormat:
        # Upstream: the receiver keeps its format unless it is zero, then it takes the other's.
        return other._format if self._value == 0 else self._format

    # -- comparison ---------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __lt__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value < other._value
        return NotImplemented

    def __le__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value <= other._value
        return NotImplemented

    def __gt__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value > other._value
        return NotImplemented

    def __ge__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value >= other._value
        return NotImplemented

    def compare(self, other: Quantity) -> int:
        """-1, 0 or 1."""
        return (self._value > other._value) - (self._value < other._value)

    # -- strings ------------------------------------------------------------------------

    def canonical(self) -> str:
        """Upstream's canonical string: same suffix family, largest exact suffix."""
        return _canonical(self._value, self._format)

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self._text!r})"


# -- helpers: construction --------------------------------------------------------------


def _init(q: Quantity, value: Fraction, fmt: QuantityFormat, text: str) -> None:
    object.__setattr__(q, "_value", value)
    object.__setattr__(q, "_format", fmt)
    object.__setattr__(q, "_text", text)


def _build(value: Fraction, fmt: QuantityFormat) -> Quantity:
    q = Quantity.__new__(Quantity)
    _init(q, value, fmt, _canonical(value, fmt))
    return q


def _restore(numerator: int, denominator: int, fmt: QuantityFormat, text: str) -> Quantity:
    q = Quantity.__new__(Quantity)
    _init(q, Fraction(numerator, denominator), fmt, text)
    return q


def _coerce(other: object) -> Quantity | None:
    if isinstance(other, Quantity):
        return other
    if isinstance(other, int) and not isinstance(other, bool):
        return _build(Fraction(other), "DecimalSI")
    return None


def _ceil_away(value: Fraction) -> int:
    magnitude = -((-abs(value)) // 1)
    return int(magnitude) if value >= 0 else -int(magnitude)


def _round_to_nano(value: Fraction) -> Fraction:
    if (value * _NANO_PER_UNIT).denominator == 1:
        return value
    return Fraction(_ceil_away(value * _NANO_PER_UNIT), _NANO_PER_UNIT)


# -- helpers: parsing -------------------------------------------------------------------


class _Scan:
    """The pieces upstream's scanner extracts from a quantity string."""

    __slots__ = ("negative", "number", "whole", "fraction", "suffix")

    def __init__(self, negative: bool, number: str, whole: str, fraction: str, suffix: str) -> None:
        self.negative = negative
        self.number = number      # sign, digits and dot as written (upstream's "value")
        self.whole = whole        # integer digits without leading zeros ("0" if none)
        self.fraction = fraction  # digits after the dot
        self.suffix = suffix


def _take_digits(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _DIGITS:
        pos += 1
    return pos


def _scan(text: str) -> _Scan:
    pos = 0
    negative = False
    if text[:1] in ("-", "+"):
        negative = text[0] == "-"
        pos = 1
    while pos < len(text) and text[pos] == "0":
        pos += 1
    if pos == len(text):
        return _Scan(negative, "0", "0", "", "")
    end = _take_digits(text, pos)
    whole = text[pos:end] or "0"
    fraction = ""
    if end < len(text) and text[end] == ".":
        frac_end = _take_digits(text, end + 1)
        fraction = text[end + 1:frac_end]
        end = frac_end
    number = text[:end]
    suffix_end = end
    while suffix_end < len(text) and text[suffix_end] in _SUFFIX_LETTERS:
        suffix_end += 1
    if suffix_end < len(text):
        if text[suffix_end] in "+-":
            suffix_end += 1
        if _take_digits(text, suffix_end) != len(text):
            raise ValueError(ERR_FORMAT)
    return _Scan(negative, number, whole, fraction, text[end:])


def _interpret_suffix(suffix: str) -> tuple[int, int, QuantityFormat]:
    """(base, exponent, format) for a suffix, as upstream's suffixer does."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in "+-" else digits
        if not body or not body.isdigit() or not body.isascii():
            raise ValueError(ERR_SUFFIX)
        exponent = int(digits)
        if not MIN_INT64 <= exponent <= MAX_INT64:
            raise ValueError(ERR_SUFFIX)
        exponent = (exponent + 2**31) % 2**32 - 2**31  # upstream truncates to int32
        return 10, exponent, "DecimalExponent"
    raise ValueError(ERR_SUFFIX)


def _takes_slow_path(scan: _Scan, base: int, exponent: int) -> bool:
    """Whether upstream leaves its int64 fast path (only observable for digit-less input)."""
    digits = len(scan.whole) + len(scan.fraction)
    if base == 10:
        if _MAX_INT64_DIGITS - digits < 0 or exponent - len(scan.fraction) < -9:
            return True
        return False
    if scan.fraction:
        return True
    precision = 15 - len(scan.whole) - int(exponent * 3 / 10) - 1
    if precision < 0:
        return True
    return int(scan.whole + scan.fraction) << exponent > MAX_INT64


def _parse(text: str) -> tuple[Fraction, QuantityFormat]:
    if not isinstance(text, str):
        raise TypeError(f"quantity text must be str, not {type(text).__name__}")
    if text == "":
        raise ValueError(ERR_FORMAT)
    if text == "0":
        return Fraction(0), "DecimalSI"
    scan = _scan(text)
    base, exponent, fmt = _interpret_suffix(scan.suffix)
    slow = _takes_slow_path(scan, base, exponent)
    if slow and not any(ch in _DIGITS for ch in scan.number):
        raise ValueError(ERR_NUMERIC)
    magnitude = _magnitude(scan, base, exponent)
    if slow:
        magnitude = _round_to_nano(magnitude)
        if fmt == "BinarySI" and magnitude > MAX_INT64:
            magnitude = Fraction(MAX_INT64)
        if fmt == "BinarySI" and 0 < magnitude < 1:
            fmt = "DecimalSI"
    return (-magnitude if scan.negative else magnitude), fmt


def _magnitude(scan: _Scan, base: int, exponent: int) -> Fraction:
    mantissa = int(scan.whole + scan.fraction)
    scale = len(scan.fraction)
    if base == 2:
        return Fraction(mantissa << exponent, 10**scale)
    if mantissa == 0:
        return Fraction(0)
    exponent -= scale
    if exponent > MAX_EXPONENT:
        raise ValueError(f"quantity exponent {exponent} is larger than this kit supports ({MAX_EXPONENT})")
    if exponent < -(MAX_EXPONENT + len(str(mantissa))):
        return Fraction(1, _NANO_PER_UNIT)  # rounds up to one nano unit anyway
    return Fraction(mantissa) * Fraction(10) ** exponent


# -- helpers: canonical form ------------------------------------------------------------


def _canonical(value: Fraction, fmt: QuantityFormat) -> str:
    if value == 0:
        return "0"
    if fmt == "BinarySI" and (-1024 < value < 1024 or value.denominator != 1):
        fmt = "DecimalSI"
    if fmt == "BinarySI":
        return _canonical_binary(int(value))
    mantissa, exponent = _decimal_parts(value)
    if fmt == "DecimalSI":
        # Upstream silently drops a suffix it has no name for (exponents above 18).
        return f"{mantissa}{_DECIMAL_BY_EXPONENT.get(exponent, '')}"
    return f"{mantissa}e{exponent}" if exponent else str(mantissa)


def _canonical_binary(number: int) -> str:
    magnitude, power = abs(number), 0
    while magnitude >= 1024 and magnitude % 1024 == 0:
        magnitude //= 1024
        power += 1
    sign = "-" if number < 0 else ""
    return f"{sign}{magnitude}{_BINARY_BY_POWER.get(power, '')}"


def _decimal_parts(value: Fraction) -> tuple[int, int]:
    """(mantissa, exponent) with value == mantissa * 10**exponent and exponent % 3 == 0."""
    rest = value.denominator
    for prime in (2, 5):
        while rest % prime == 0:
            rest //= prime
    if rest != 1:
        raise ValueError(f"{value} has no finite decimal representation")
    exponent = 0
    while value.denominator != 1:
        value *= 10
        exponent -= 1
    mantissa = int(value)
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return mantissa, exponent
