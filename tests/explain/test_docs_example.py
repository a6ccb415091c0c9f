"""The example output in docs/guide/explain.md is what the command prints on the saved state in
examples/ (regenerate the block by running the command shown in it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from drakit.conformance.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_output_is_the_commands(capsys: Any, monkeypatch: Any) -> None:
    page = (ROOT / "docs" / "guide" / "explain.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- example:start -->\n```text\n\$ drakit (.*?)\n(.*?)```\n<!-- example:end -->", page, re.S)
    assert block is not None, "the example block is missing from docs/guide/explain.md"
    monkeypatch.chdir(ROOT)
    rc = main(block.group(1).split())
    assert rc == 1
    assert capsys.readouterr().out == block.group(2)


def test_the_readme_shows_the_first_lines_of_it(capsys: Any, monkeypatch: Any) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```text\n\$ drakit (explain .*?)\n(.*?)\.\.\.\n```", readme, re.S)
    assert block is not None, "the explain example is missing from README.md"
    monkeypatch.chdir(ROOT)
    main(block.group(1).split())
    assert capsys.readouterr().out.startswith(block.group(2))
