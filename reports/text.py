"""The terminal output: the progress line while cases run, then a compact feature × backend
matrix, the failures and the verdict line.

Plain ASCII layout (symbols of ambiguous terminal width would break the columns); status is
always a word, and colour, when asked for, only adds ANSI SGR codes around it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drakit.reports import (
    STATUSES,
    clean_text,
    clean_strings,
    count_statuses,
    divergences,
    feature_matrix,
    first_line,
    matrix_backends,
    rollup,
    shorten_middle,
    sorted_cases,
    without_failure_payloads,
)
from drakit.reports.names import clean_name

__all__ = ["render_summary", "progress_line", "PROGRESS_STATUSES"]

MAX_FAILURES = 10
MAX_LINE = 500  # a failure's summary in the list (its middle left out beyond that); all of it is in results.json
MAX_DIVERGENCES = 5
PROGRESS_STATUSES = ("passed", "failed", "error", "skipped")
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


def progress_line(done: int, total: int | None, counts: Mapping[str, int], *, color: bool) -> str:
    """One progress line: ``[ 37/70]  36 passed  1 failed  0 error  0 skipped``. Pure.

    *counts* is keyed by the statuses of :data:`PROGRESS_STATUSES` (missing keys count 0);
    *total* is None while it is not known yet. Non-zero failed/error counts are painted.
    """
    width = len(str(total)) if total else 1
    head = f"[{done:>{width}}/{total}]" if total else f"[{done}]"
    parts = [_paint(f"{counts.get(s, 0)} {s}", s, color and counts.get(s, 0) > 0 and s in ("failed", "error"))
             for s in PROGRESS_STATUSES]
    return f"{head}  " + "  ".join(parts)


def render_summary(results: Mapping[str, Any], *, color: bool, matrix: bool = True, rule: bool = False) -> str:
    """A few lines for the terminal. Pure: same results and flags, same text.

    ``matrix=False`` (``drakit run --quiet``) leaves out the run line and the feature matrix:
    only failures, divergences and the verdict remain. ``rule=True`` (``drakit run -v``) adds
    the rule the verdict follows. Control characters from the results (an
    ESC in a case id, say) are shown escaped, so the file can never drive the terminal.
    """
    results = clean_strings(without_failure_payloads(results))
    run = results["run"]
    backends = matrix_backends(results)
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
    if not matrix:
        lines = []

    diverging = divergences(results)
    if diverging:
        lines += ["", f"divergences: {len(diverging)} case{'s' if len(diverging) != 1 else ''} "
                      f"with different statuses on different backends"]
        for cid, by_backend in diverging[:MAX_DIVERGENCES]:
            statuses = ", ".join(f"{b} {_paint(_LABEL[c['status']], c['status'], color)}"
                                 for b, c in by_backend.items())
            lines.append(f"  {clean_name(cid)}: {statuses}")
        if len(diverging) > MAX_DIVERGENCES:
            lines.append(f"  ... and {len(diverging) - MAX_DIVERGENCES} more in report.html")

    broken = [c for c in ordered if c["status"] in ("failed", "error")]
    if broken:
        lines += ["", "failures:"]
        for case in broken[:MAX_FAILURES]:
            label = _paint(_LABEL[case["status"]], case["status"], color)
            # the summary's first line whole, then its middle left out (first_line alone would cut its end)
            summary = first_line(case['failure']['summary'], limit=len(case['failure']['summary']) + 1)
            lines.append(f"  {label} {clean_name(case['id'])} [{clean_name(case['backend'])}]: "
                         f"{shorten_middle(summary, MAX_LINE)}")
            if case.get("rerun"):
                lines.append(f"    rerun: {clean_name(case['rerun'])}")
        if len(broken) > MAX_FAILURES:
            lines.append(f"  ... and {len(broken) - MAX_FAILURES} more in report.html")

    driver = results.get("driver")
    if driver:
        lines += ["", f"driver under test: {clean_text(driver['name'])} (version {clean_text(driver['version'])})"
                  + ("" if driver["exercised"] else ": NOT EXERCISED (no case allocated, prepared or ran anything of it)")]
        if driver.get("registration"):
            lines.append(f"  plugin registration: {clean_text(driver['registration'])}")
        confs = driver.get("configurations") or []
        if confs:
            lines.append("  configurations: " + ", ".join(clean_text(k["name"]) for k in confs))
        for row in driver["behaviours"]:
            why = f": {first_line(clean_text(row['reason']))}" if row["reason"] else ""
            per = (" [" + " | ".join(k["statuses"].get(row["id"], "not-run") for k in confs) + "]") if confs else ""
            lines.append(f"  {row['status']:8} {row['title']}{per}{why}")

    summary = results["summary"]
    totals = ", ".join(_paint(f"{summary[s]} {s}", s, color and summary[s] > 0) for s in STATUSES)
    verdict = results["verdict"]
    lines += ["", f"{summary['total']} cases: {totals}",
              f"verdict: {_paint(verdict['result'].upper(), verdict['result'], color)}"
              + (f" (recomputed from the cases: the file says {str(verdict['stored']).upper()})" if verdict.get("stored") else "")]
    lines += [f"  - {r['message']}" for r in verdict.get("reasons") or []]
    if rule:
        lines.append(f"rule: {verdict['rule']}")
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines) + "\n"
