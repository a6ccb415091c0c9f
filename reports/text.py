"""The terminal summary: a compact feature × backend matrix, the failures and the verdict line.

Plain ASCII layout (symbols of ambiguous terminal width would break the columns); status is
always a word, and colour, when asked for, only adds ANSI SGR codes around it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reports import (
    STATUSES,
    backend_order,
    clean_strings,
    count_statuses,
    feature_matrix,
    first_line,
    rollup,
    sorted_cases,
)

__all__ = ["render_summary"]

MAX_FAILURES = 10
_SGR = {"passed": "32", "failed": "1;31", "error": "1;35", "skipped": "90", "xfail": "34",
        "flaky": "33", "no cases": "90", "pass": "1;32", "fail": "1;31", "incomplete": "1;33"}
_LABEL = {"passed": "passed", "failed": "FAILED", "error": "ERROR", "skipped": "skipped",
          "xfail": "xfail", "flaky": "flaky", "no cases": "-"}
_EXTRA = (("error", "err"), ("xfail", "xfail"), ("flaky", "flaky"))


def _paint(text: str, key: str, color: bool) -> str:
    return f"\x1b[{_SGR[key]}m{text}\x1b[0m" if color and key in _SGR else text


def _cell(counts: Mapping[str, int]) -> tuple[str, str, str]:
    """(status key, label, counts text) for one matrix cell."""
    status = rollup(counts)
    if status == "no cases":
        return status, _LABEL[status], ""
    text = f"{counts['passed']}/{counts['failed']}/{counts['skipped']}"
    text += "".join(f" +{counts[s]} {abbr}" for s, abbr in _EXTRA if counts[s])
    return status, _LABEL[status], text


def _table(rows: Sequence[Sequence[tuple[str, str | None]]], color: bool) -> list[str]:
    """Left-aligned columns; each cell is (text, colour key or None). Padding ignores colour codes."""
    widths = [max(len(row[i][0]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [_paint(text, key, color) if key else text for text, key in row]
        pads = [" " * (w - len(text)) for (text, _), w in zip(row, widths)]
        lines.append("  ".join(c + p for c, p in zip(cells, pads)).rstrip())
    return lines


def render_summary(results: Mapping[str, Any], *, color: bool) -> str:
    """A few lines for the terminal. Pure: same results and flag, same text.

    Control characters from the results (an ESC in a case id, say) are shown as symbols, so
    the file can never drive the terminal.
    """
    results = clean_strings(results)
    run = results["run"]
    backends = backend_order(results)
    cells = feature_matrix(results)
    ordered = sorted_cases(results)
    lines = [f"drakit run {run['id']}: {len(ordered)} case{'s' if len(ordered) != 1 else ''} on "
             f"{', '.join(backends)} in {run['wallSeconds']:.2f} s", ""]

    header: list[tuple[str, str | None]] = [("feature", None), ("KEP", None), ("stage", None)]
    header += [(b, None) for b in backends]
    rows = [header]
    empty = []
    for feature in results["features"]:
        per_backend = [count_statuses(cells[(feature["id"], b)]) for b in backends]
        if not any(sum(c.values()) for c in per_backend):
            empty.append(feature["id"])
            continue
        row: list[tuple[str, str | None]] = [
            (feature["id"], None), (f"KEP-{feature['kep']}", None), (feature["stage"], None)]
        for counts in per_backend:
            status, label, text = _cell(counts)
            row.append((f"{label} {text}".rstrip(), status))
        rows.append(row)
    if len(rows) > 1:
        lines += _table(rows, color)
        lines.append("cells: status passed/failed/skipped (+err, +xfail, +flaky when present)")
    featureless = [c for c in ordered if not c["features"]]
    if featureless:
        lines.append(f"not in any feature: {len(featureless)} case{'s' if len(featureless) != 1 else ''}")
    if empty:
        lines.append(f"no cases: {', '.join(empty)}")

    broken = [c for c in ordered if c["status"] in ("failed", "error")]
    if broken:
        lines += ["", "failures:"]
        for case in broken[:MAX_FAILURES]:
            label = _paint(_LABEL[case["status"]], case["status"], color)
            lines.append(f"  {label} {case['id']} [{case['backend']}]: {first_line(case['failure']['summary'])}")
            if case.get("rerun"):
                lines.append(f"    rerun: {case['rerun']}")
        if len(broken) > MAX_FAILURES:
            lines.append(f"  ... and {len(broken) - MAX_FAILURES} more in report.html")

    summary = results["summary"]
    counts = ", ".join(_paint(f"{summary[s]} {s}", s, color and summary[s] > 0) for s in STATUSES)
    verdict = results["verdict"]
    lines += ["", f"{summary['total']} cases: {counts}",
              f"verdict: {_paint(verdict['result'].upper(), verdict['result'], color)}",
              f"rule: {verdict['rule']}"]
    return "\n".join(lines) + "\n"
