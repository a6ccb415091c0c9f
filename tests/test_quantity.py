"""Kubernetes quantities: parsing (with upstream's quirks), canonical form, arithmetic."""

from __future__ import annotations

import copy
import pickle
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drakit.conformance.quantity import ERR_FORMAT, ERR_NUMERIC, ERR_SUFFIX, MAX_INT64, Quantity


@pytest.mark.parametrize("text, value, fmt", [
    ("0", Fraction(0), "DecimalSI"),
    ("1", Fraction(1), "DecimalSI"),
    ("-1", Fraction(-1), "DecimalSI"),
    ("+1", Fraction(1), "DecimalSI"),
    ("007", Fraction(7), "DecimalSI"),
    ("1.5", Fraction(3, 2), "DecimalSI"),
    (".5", Fraction(1, 2), "DecimalSI"),
    ("1.", Fraction(1), "DecimalSI"),
    ("1n", Fraction(1, 10**9), "DecimalSI"),
    ("1u", Fraction(1, 10**6), "DecimalSI"),
    ("1500m", Fraction(3, 2), "DecimalSI"),
    ("1k", Fraction(1000), "DecimalSI"),
    ("1M", Fraction(10**6), "DecimalSI"),
    ("1G", Fraction(10**9), "DecimalSI"),
    ("1T", Fraction(10**12), "DecimalSI"),
    ("1P", Fraction(10**15), "DecimalSI"),
    ("1E", Fraction(10**18), "DecimalSI"),
    ("1Ki", Fraction(1024), "BinarySI"),
    ("1Mi", Fraction(2**20), "BinarySI"),
    ("80Gi", Fraction(80 * 2**30), "BinarySI"),
    ("1Ti", Fraction(2**40), "BinarySI"),
    ("1Pi", Fraction(2**50), "BinarySI"),
    ("1Ei", Fraction(2**60), "BinarySI"),
    ("1.5Gi", Fraction(3 * 2**29), "BinarySI"),
    ("1e3", Fraction(1000), "DecimalExponent"),
    ("1E3", Fraction(1000), "DecimalExponent"),
    ("1e+3", Fraction(1000), "DecimalExponent"),
    ("25e-2", Fraction(1, 4), "DecimalExponent"),
    ("1.G", Fraction(10**9), "DecimalSI"),
    # Digit-less numbers are zero where upstream's fast path takes them.
    ("k", Fraction(0), "DecimalSI"),
    ("-", Fraction(0), "DecimalSI"),
    (".", Fraction(0), "DecimalSI"),
    ("Gi", Fraction(0), "BinarySI"),
])
def test_parse_values(text: str, value: Fraction, fmt: str) -> None:
    q = Quantity.parse(text)
    assert q.value == value
    assert q.format == fmt
    assert q.text == text


@pytest.mark.parametrize("text, value", [
    ("0.1n", Fraction(1, 10**9)),           # rounded up to one nano unit
    ("-0.1n", Fraction(-1, 10**9)),         # away from zero
    ("1.0000000001", Fraction(1_000_000_001, 10**9)),
    ("1e-20", Fraction(1, 10**9)),
    ("8Ei", Fraction(MAX_INT64)),           # binary values are capped
    ("10E", Fraction(10**19)),              # decimal ones are not
    ("-8Ei", Fraction(-MAX_INT64)),
])
def test_parse_rounding_and_caps(text: str, value: Fraction) -> None:
    assert Quantity(text).value == value


def test_binary_below_one_becomes_decimal() -> None:
    assert Quantity("0.5Ki").format == "BinarySI"   # 512 is not below one
    q = Quantity("0.0001Ki")
    assert q.format == "DecimalSI"
    assert q.value == Fraction(1024, 10**4)


@pytest.mark.parametrize("text, message", [
    ("", ERR_FORMAT),
    ("abc", ERR_FORMAT),
    ("1 Gi", ERR_FORMAT),
    (" 1", ERR_FORMAT),
    ("1.2.3", ERR_FORMAT),
    ("1Gi ", ERR_FORMAT),
    ("1ki", ERR_SUFFIX),
    ("1K", ERR_SUFFIX),
    ("1e", ERR_SUFFIX),
    ("1e+", ERR_SUFFIX),
    ("1Gii", ERR_SUFFIX),
    ("--1", ERR_SUFFIX),
    ("1e99999999999999999999", ERR_SUFFIX),
    ("Pi", ERR_NUMERIC),
    ("Ei", ERR_NUMERIC),
    ("e-20", ERR_NUMERIC),
])
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        Quantity.parse(text)
    assert str(err.value) == message


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        Quantity(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("text, canonical", [
    ("0", "0"),
    ("1024Mi", "1Gi"),
    ("1536Mi", "1536Mi"),
    ("2048Ki", "2Mi"),
    ("1500m", "1500m"),
    ("0.5", "500m"),
    ("1000", "1k"),
    ("1000m", "1"),
    ("10000", "10k"),
    ("100", "100"),
    ("1010", "1010"),
    ("1.5", "1500m"),
    ("1e3", "1e3"),
    ("1.5e3", "1500"),
    ("10e3", "10e3"),
    ("1e-3", "1e-3"),
    ("100m", "100m"),
    ("-1.5Gi", "-1536Mi"),
    ("512", "512"),
    ("1023Ki", "1023Ki"),
    ("0.1Ki", "102400m"),        # not a whole number: shown in decimal
    ("512Ki", "512Ki"),
    ("1.5Ki", "1536"),           # 1536 is a whole number but not a multiple of 1024
    ("+1", "1"),
    ("01", "1"),
    ("1G", "1G"),
    ("1000E", "1"),              # upstream drops the suffix it has no name for
    (".001Ki", "1024m"),
    ("-.001Ki", "-1024m"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),   # rounded up to whole nano units
    ("307200Ki", "300Mi"),
    ("1025024Mi", "1001Gi"),
    ("0.001T", "1G"),
    ("1080000000n", "1080m"),
    (".001e12", "1e9"),
    ("1000e-12", "1e-9"),
    ("00", "0"),
    ("8Ei", "9223372036854775807"),
])
def test_canonical(text: str, canonical: str) -> None:
    q = Quantity(text)
    assert q.canonical() == canonical
    assert str(q) == canonical


def test_canonical_round_trips_value() -> None:
    for text in ("1536Mi", "1500m", "0.5", "1e3", "-7Ki", "12345678901234u"):
        q = Quantity(text)
        assert Quantity(q.canonical()).value == q.value


def test_numeric_equality_and_hash() -> None:
    assert Quantity("1Gi") == Quantity("1073741824")
    assert Quantity("1000m") == Quantity("1")
    assert hash(Quantity("1Ki")) == hash(Quantity("1024"))
    assert len({Quantity("1k"), Quantity("1000"), Quantity("1e3")}) == 1
    assert Quantity("1") != Quantity("2")
    assert Quantity("1") != "1"


def test_ordering() -> None:
    assert Quantity("999Mi") < Quantity("1Gi") <= Quantity("1024Mi")
    assert Quantity("2") > Quantity("1999m") >= Quantity("1999m")
    assert sorted([Quantity("1G"), Quantity("1Gi"), Quantity("1M")]) == [Quantity("1M"), Quantity("1G"),
                                                                          Quantity("1Gi")]
    assert Quantity("1").compare(Quantity("2")) == -1
    assert Quantity("2").compare(Quantity("2000m")) == 0
    with pytest.raises(TypeError):
        _ = Quantity("1") < 1


@pytest.mark.parametrize("text, ceil_int, ceil_milli", [
    ("1", 1, Fraction(1)),
    ("1.5", 2, Fraction(3, 2)),
    ("1.0001", 2, Fraction(1001, 1000)),
    ("-1.5", -2, Fraction(-3, 2)),
    ("-1.0001", -2, Fraction(-1001, 1000)),
    ("1n", 1, Fraction(1, 1000)),
    ("0", 0, Fraction(0)),
])
def test_ceil(text: str, ceil_int: int, ceil_milli: Fraction) -> None:
    q = Quantity(text)
    assert q.ceil_int() == ceil_int
    assert q.ceil_milli() == ceil_milli


def test_arithmetic() -> None:
    assert Quantity("1Gi") - Quantity("1Mi") == Quantity("1023Mi")
    assert (Quantity("1Gi") - Quantity("1Mi")).canonical() == "1023Mi"
    assert Quantity("1500m") + Quantity("500m") == Quantity("2")
    assert Quantity("1") + 1 == Quantity("2")
    assert 1 + Quantity("1") == Quantity("2")
    assert 5 - Quantity("2") == Quantity("3")
    assert -Quantity("2") == Quantity("-2")
    # The receiver keeps its format unless it is zero.
    assert (Quantity("1Ki") + Quantity("1k")).format == "BinarySI"
    assert (Quantity("0") + Quantity("1Ki")).format == "BinarySI"
    with pytest.raises(TypeError):
        _ = Quantity("1") + 1.5


def test_predicates_and_views() -> None:
    assert Quantity("2k").is_integer()
    assert not Quantity("1500m").is_integer()
    assert Quantity("1500m").as_approximate_float() == 1.5
    assert Quantity("-3").sign() == -1 and Quantity("0").sign() == 0 and Quantity("1n").sign() == 1


def test_from_number() -> None:
    assert Quantity.from_number(3 * 2**30).canonical() == "3Gi"
    assert Quantity.from_number(1500, "DecimalSI").canonical() == "1500"
    assert Quantity.from_number(Fraction(1, 2), "DecimalSI").canonical() == "500m"
    assert Quantity.from_number(Fraction(1, 3), "DecimalSI").value == Fraction(333_333_334, 10**9)
    assert Quantity.from_number(5).canonical() == "5"   # BinarySI below 1024 prints as decimal
    with pytest.raises(ValueError):
        Quantity.from_number(1, "Bogus")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Quantity.from_number(1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("raw, value", [
    (4, Fraction(4)),
    ("4Gi", Fraction(4 * 2**30)),
    (1.5, Fraction(3, 2)),
    (1e3, Fraction(1000)),
    (0, Fraction(0)),
])
def test_from_yaml(raw: object, value: Fraction) -> None:
    assert Quantity.from_yaml(raw).value == value


@pytest.mark.parametrize("raw", [True, None, float("inf"), float("nan"), [1], "1 Gi"])
def test_from_yaml_rejects(raw: object) -> None:
    with pytest.raises(ValueError):
        Quantity.from_yaml(raw)


def test_immutable_and_picklable() -> None:
    q = Quantity("1536Mi")
    with pytest.raises(AttributeError):
        q._value = Fraction(1)
    with pytest.raises(AttributeError):
        q.foo = 1
    for clone in (pickle.loads(pickle.dumps(q)), copy.deepcopy(q)):
        assert clone == q and clone.text == "1536Mi" and clone.format == "BinarySI"
    assert repr(q) == "Quantity('1536Mi')"


@settings(deadline=None)
@given(st.integers(min_value=-(10**9), max_value=10**9), st.sampled_from(["n", "u", "m", "", "k", "M", "G"]))
def test_decimal_canonical_round_trip(mantissa: int, suffix: str) -> None:
    q = Quantity(f"{mantissa}{suffix}")
    again = Quantity(q.canonical())
    assert again == q
    assert again.canonical() == q.canonical()


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=2**40), st.sampled_from(["", "Ki", "Mi", "Gi"]))
def test_binary_canonical_round_trip(mantissa: int, suffix: str) -> None:
    q = Quantity(f"{mantissa}{suffix}")
    assert Quantity(q.canonical()) == q
