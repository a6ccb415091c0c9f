"""Strict semver parsing, tolerant normalisation and precedence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drakit.conformance.semver import Semver


@pytest.mark.parametrize("text, parts, pre, build", [
    ("0.0.0", (0, 0, 0), (), ()),
    ("1.2.3", (1, 2, 3), (), ()),
    ("10.20.30", (10, 20, 30), (), ()),
    ("1.2.3-alpha", (1, 2, 3), ("alpha",), ()),
    ("1.2.3-alpha.1", (1, 2, 3), ("alpha", 1), ()),
    ("1.2.3-0.3.7", (1, 2, 3), (0, 3, 7), ()),
    ("1.2.3-x-y-z.--", (1, 2, 3), ("x-y-z", "--"), ()),
    ("1.2.3+build.5", (1, 2, 3), (), ("build", "5")),
    ("1.2.3-rc.1+build.01", (1, 2, 3), ("rc", 1), ("build", "01")),
    ("1.2.3+a-b", (1, 2, 3), (), ("a-b",)),
    ("18446744073709551615.0.0", (2**64 - 1, 0, 0), (), ()),
])
def test_parse_valid(text: str, parts: tuple[int, int, int], pre: tuple[object, ...], build: tuple[str, ...]) -> None:
    v = Semver.parse(text)
    assert (v.major, v.minor, v.patch) == parts
    assert v.pre == pre
    assert v.build == build
    assert str(v) == text


@pytest.mark.parametrize("text, message", [
    ("", "Version string empty"),
    ("1", "No Major.Minor.Patch elements found"),
    ("1.2", "No Major.Minor.Patch elements found"),
    ("v1.2.3", 'Invalid character(s) found in major number "v1"'),
    ("1.x.3", 'Invalid character(s) found in minor number "x"'),
    ("1.2.x", 'Invalid character(s) found in patch number "x"'),
    ("01.2.3", 'Major number must not contain leading zeroes "01"'),
    ("1.02.3", 'Minor number must not contain leading zeroes "02"'),
    ("1.2.03", 'Patch number must not contain leading zeroes "03"'),
    ("1..3", 'strconv.ParseUint: parsing "": invalid syntax'),
    ("18446744073709551616.0.0", 'strconv.ParseUint: parsing "18446744073709551616": value out of range'),
    ("1.2.3-", "Prerelease is empty"),
    ("1.2.3-a..b", "Prerelease is empty"),
    ("1.2.3-01", 'Numeric PreRelease version must not contain leading zeroes "01"'),
    ("1.2.3-a_b", 'Invalid character(s) found in prerelease "a_b"'),
    ("1.2.3+", "Build meta data is empty"),
    ("1.2.3+a..b", "Build meta data is empty"),
    ("1.2.3+a_b", 'Invalid character(s) found in build meta data "a_b"'),
    ("1.2.3.4", 'Invalid character(s) found in patch number "3.4"'),
    (" 1.2.3", 'Invalid character(s) found in major number " 1"'),
    # The patch number is checked before the pre-release, as upstream does.
    ("1.2.x-01", 'Invalid character(s) found in patch number "x"'),
])
def test_parse_invalid(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        Semver.parse(text)
    assert str(err.value) == message
    assert not Semver.is_valid(text)


@pytest.mark.parametrize("text, normalized", [
    ("v1.2.3", "1.2.3"),
    ("1", "1.0.0"),
    ("v1", "1.0.0"),
    ("1.2", "1.2.0"),
    ("01.02.03", "1.2.3"),
    ("v1.02.003-rc.1", "1.2.3-rc.1"),
    ("00.0.0", "0.0.0"),
    ("1.2.0-0", "1.2.0-0"),
    ("1.2.00-alpha", "1.2.0-alpha"),
])
def test_normalize(text: str, normalized: str) -> None:
    assert str(Semver.parse(text, normalize=True)) == normalized
    assert Semver.is_valid(text, normalize=True)


@pytest.mark.parametrize("text", ["1.2-alpha", "1+build", "vv1.2.3", "1.2.3-01", ""])
def test_normalize_invalid(text: str) -> None:
    with pytest.raises(ValueError):
        Semver.parse(text, normalize=True)


def test_normalize_short_version_message() -> None:
    with pytest.raises(ValueError, match="short version cannot contain PreRelease/Build meta data"):
        Semver.parse("1.2-rc", normalize=True)


def test_precedence_chain() -> None:
    # The example chain of the semver 2.0.0 specification, lowest first.
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
             "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"]
    versions = [Semver.parse(v) for v in chain]
    for lower, higher in zip(versions, versions[1:]):
        assert lower.compare(higher) == -1
        assert higher.compare(lower) == 1
        assert lower < higher and higher > lower and lower <= higher and higher >= lower
    assert sorted(reversed(versions)) == versions


def test_numeric_ordering_not_lexical() -> None:
    assert Semver.parse("1.10.0") > Semver.parse("1.9.0")
    assert Semver.parse("1.0.0-rc.10") > Semver.parse("1.0.0-rc.9")
    assert Semver.parse("1.0.0-1") < Semver.parse("1.0.0-a")   # numeric ranks below alphanumeric


def test_equality_ignores_build() -> None:
    a, b = Semver.parse("1.2.3+a"), Semver.parse("1.2.3+b")
    assert a == b and hash(a) == hash(b) and a.compare(b) == 0
    assert str(a) != str(b)
    assert a.core() == "1.2.3"
    assert Semver.parse("1.2.3-rc.1+x").core() == "1.2.3-rc.1"
    assert Semver.parse("1.2.3") != Semver.parse("1.2.3-rc.1")
    assert Semver.parse("1.2.3") != "1.2.3"


def test_rejects_non_string() -> None:
    with pytest.raises(TypeError):
        Semver.parse(123)  # type: ignore[arg-type]


_numbers = st.integers(min_value=0, max_value=10**6)


@settings(deadline=None)
@given(_numbers, _numbers, _numbers, st.lists(st.one_of(_numbers, st.from_regex(r"[a-z][a-z0-9-]{0,5}", fullmatch=True)),
                                               max_size=3))
def test_round_trip(major: int, minor: int, patch: int, pre: list[object]) -> None:
    text = f"{major}.{minor}.{patch}" + ("-" + ".".join(str(p) for p in pre) if pre else "")
    v = Semver.parse(text)
    assert str(v) == text
    assert Semver.parse(str(v)) == v


@settings(deadline=None)
@given(_numbers, _numbers, _numbers, _numbers, _numbers, _numbers)
def test_core_order_matches_tuples(a: int, b: int, c: int, x: int, y: int, z: int) -> None:
    left, right = Semver(a, b, c), Semver(x, y, z)
    expected = ((a, b, c) > (x, y, z)) - ((a, b, c) < (x, y, z))
    assert left.compare(right) == expected
