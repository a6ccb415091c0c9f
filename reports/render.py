"""Write the reports of a results dict: ``report.html`` and ``junit.xml`` (the package's one
function with output I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drakit.reports import validate_results
from drakit.reports.html import render_html
from drakit.reports.junit import render_junit


def render_all(results: Mapping[str, Any], out_dir: Path) -> dict[str, Path]:
    """Validate *results*, then write ``report.html`` and ``junit.xml`` into *out_dir*.

    Returns ``{"html": path, "junit": path}``. ``results.json`` itself is the caller's to write.
    """
    validate_results(results)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for key, name, text in (("html", "report.html", render_html(results)),
                            ("junit", "junit.xml", render_junit(results))):
        target = out_dir / name
        target.write_text(text, encoding="utf-8", newline="\n")
        written[key] = target
    return written
