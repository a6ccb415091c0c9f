"""Lint rule: a case never names one of drakit's fake drivers (or their classes) except through a
placeholder. A case that writes ``gpu.acme.example.com`` into a manifest or an expected error
holds only for the bundled profile: run with a vendor's profile, it fails a correct driver."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from drakit.conformance.cases.placeholders import PATTERN
from drakit.conformance.yamlmarks import line_of, load_documents
from drakit.fake_driver.profile import load_vendor_profile

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"


def fake_names() -> set[str]:
    profile = load_vendor_profile()
    return set(profile.driver_names) | {name for _, name in profile.classes}


def strings(value: Any, path: tuple[object, ...] = ()) -> Iterator[tuple[tuple[object, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield path + (key,), str(key)
            yield from strings(inner, path + (key,))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from strings(inner, path + (i,))


def named_outside_placeholders(text: str, file: str, names: set[str]) -> list[str]:
    found = []
    for start, doc in load_documents(text, file):
        for path, value in strings(doc):
            bare = PATTERN.sub("", value)
            for name in sorted(names):
                if name in bare:
                    found.append(f"{file}:{line_of(doc, path) or start}: {name}")
    return found


def test_no_case_names_a_fake_driver_outside_placeholders() -> None:
    names = fake_names()
    assert "gpu.acme.example.com" in names and "gpu.example.com" in names
    files = sorted(SUITES.rglob("*.case.yaml"))
    assert len(files) > 20
    found = [hit for f in files for hit in named_outside_placeholders(f.read_text(), str(f.relative_to(SUITES)), names)]
    assert not found, "cases must name drivers and classes through placeholders (${driver.gpu}, ${class.gpu}):\n" \
        + "\n".join(found)


def test_the_rule_sees_a_name_in_an_expected_error_and_not_in_a_placeholder() -> None:
    names = fake_names()
    bad = 'id: x/y\nsteps:\n  - expectError: "Duplicate value: {\\"deviceClassName\\":\\"gpu.acme.example.com\\"}"\n'
    assert named_outside_placeholders(bad, "x.case.yaml", names) == ["x.case.yaml:3: gpu.acme.example.com"]
    good = 'id: x/y\nsteps:\n  - expectError: "Duplicate value: {\\"deviceClassName\\":\\"${class.gpu}\\"}"\n'
    assert named_outside_placeholders(good, "x.case.yaml", names) == []
