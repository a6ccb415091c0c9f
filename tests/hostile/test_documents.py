"""Blank YAML documents are skipped the way kubectl and other YAML tools skip them (issue 25:
a trailing ``---`` failed the whole file with 'a case document must be a mapping')."""

from __future__ import annotations

import pytest

from drakit.conformance.cases.loader import load_text
from drakit.fake_driver.profile import load_profile

from .inputs import VALID

OTHER = VALID.replace("hostile/valid", "hostile/other")
LAYOUTS = {  # name -> (text, cases loaded)
    "trailing separator": (VALID + "---\n", 1),
    "leading separator": ("---\n" + VALID, 1),
    "separators around": ("---\n" + VALID + "---\n---\n", 1),
    "a comment-only document between": (VALID + "---\n# nothing here\n---\n" + OTHER, 2),
    "document end markers": (VALID + "...\n---\n" + OTHER + "...\n", 2),
    "CRLF line ends": ((VALID + "---\n").replace("\n", "\r\n"), 1),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_blank_documents_are_skipped(name: str) -> None:
    text, count = LAYOUTS[name]
    loaded = load_text(text, "x.case.yaml", load_profile())
    assert [str(e) for e in loaded.errors] == []
    assert len(loaded.cases) == count


def test_an_explicit_null_document_is_still_an_error() -> None:
    loaded = load_text(VALID + "--- null\n", "x.case.yaml", load_profile())
    assert [str(e) for e in loaded.errors] == ["x.case.yaml:15: a case document must be a mapping"]
