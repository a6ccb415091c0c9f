"""Write the reports of a results dict: ``report.html`` and ``junit.xml`` (the package's one
function with output I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drakit.reports import validate_results
from drakit.reports.html import render_html
from drakit.reports.junit import render_junit
from drakit.reports.safefs import write_file


def render_all(results: Mapping[str, Any], out_dir: Path) -> dict[str, Path]:
    """Validate *results*, then write ``report.html`` and ``junit.xml`` into *out_dir*.

    Returns ``{"html": path, "junit": path}``. ``results.json`` itself is the caller's to write.
    Each file is written by :func:`drakit.reports.safefs.write_file` (never through a link);
    :class:`drakit.reports.safefs.UnsafePath` when *out_dir* refuses one.
    """
    validate_results(results)
    written: dict[str, Path] = {}
    for key, name, text in (("html", "report.html", render_html(results)),
                            ("junit", "junit.xml", render_junit(results))):
        written[key] = write_file(Path(out_dir), name, text, what="--out")  # never through a link
    return written
