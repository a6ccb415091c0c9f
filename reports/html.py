"""The HTML report: one self-contained file rendered server-side from a results dict.

:func:`build_view` turns the results into plain display data (credentials dropped, long texts
cut, and then every string of it cleaned of control characters: cleaning the view rather than
the results keeps megabytes of logs from being scanned only to be cut);
``templates/report.html.j2`` lays it out with Jinja2 autoescaping on, so no value from the
results file can become markup.

Size budget: the page for a run of 1,000 cases stays under :data:`SIZE_BUDGET` bytes, however
many fail and however large their logs. Passing cases get one table row; a matrix cell lists at
most :data:`MATRIX_CELL_CASES` cases; the first :data:`MAX_DETAILED_FAILURES` failures are shown
in full and the rest in short form; the texts of the full ones (detail, expected, actual, diff,
objects, logs) share :data:`DETAIL_BUDGET` characters, each cut to between :data:`MIN_TEXT` and
:data:`TEXT_LIMIT` characters with a visible note. The full text always stays in
``results.json``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from drakit.reports import (
    SKIP_CATEGORIES,
    SYMBOLS,
    backend_order,
    clean_strings,
    count_statuses,
    divergences,
    feature_matrix,
    first_line,
    is_load_error,
    matrix_backends,
    reason_line,
    redact,
    redact_command,
    rollup,
    run_reasons,
    sorted_cases,
    verdict_reasons,
)
from drakit.reports.timeline import timeline_view

__all__ = ["render_html", "build_view", "jinja_environment", "TEXT_LIMIT", "SIZE_BUDGET"]

SIZE_BUDGET = 2 * 1024 * 1024  # bytes of report.html for a run of 1,000 cases (tests hold us to it)
TEXT_LIMIT = 16 * 1024  # most characters of one failure text (log, detail, object dump) in the page
MIN_TEXT = 512  # fewest characters of one failure text, however many failures share the budget
DETAIL_BUDGET = 384 * 1024  # characters that all failure texts of one report share
MAX_DETAILED_FAILURES = 50  # failures shown in full; later ones in short form (summary, source, rerun)
MATRIX_CELL_CASES = 25  # cases listed in one matrix cell (the rest are in the all-cases table)
SLOWEST = 10
MAX_DECIDERS = 20  # cases listed under the verdict banner
SHOWN_DECIDERS = 3  # of them, shown without opening a list (the failures follow the banner)
MAX_REASON_REFS = 200  # cases listed under a run-level verdict reason (an interrupt's not-run cases)
OPEN_SKIP_GROUP = 25  # skip groups with at most this many cases start expanded
MAX_EVENTS = 50  # events listed per failure
VERDICT_SYMBOLS = {"pass": "✔", "fail": "✘", "incomplete": "◐"}

_TEMPLATES = Path(__file__).parent / "templates"


def _cut(text: str, limit: int = TEXT_LIMIT) -> tuple[str, int]:
    """The first *limit* characters of *text* and how many were left out."""
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def _cut_log(text: str, limit: int) -> tuple[str, int]:
    """A log cut to about *limit* characters: its first quarter and its end (where the error
    usually is), with a marker line where the middle was. Returns the text and how many
    characters were left out."""
    if len(text) <= limit:
        return text, 0
    head = text[: limit // 4]
    tail = text[len(text) - (limit - len(head)):]
    left_out = len(text) - len(head) - len(tail)
    return f"{head}\n[... {left_out} characters cut here; the full log is in results.json ...]\n{tail}", left_out


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def _secs(seconds: float) -> str:
    return f"{seconds:.3f} s"


def case_anchor(case: Mapping[str, Any]) -> str:
    """A stable, URL-safe anchor for one (case, backend) row."""
    key = f"{case['id']}\0{case['backend']}"
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{case['id']}--{case['backend']}").strip("-")[:80]
    digest = hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:8]
    return f"case-{slug}-{digest}"


def _ref(case: Mapping[str, Any]) -> dict[str, Any]:
    return {"anchor": case_anchor(case), "id": case["id"], "backend": case["backend"],
            "status": case["status"], "symbol": SYMBOLS[case["status"]]}


def _status(status: str) -> dict[str, str]:
    return {"status": status, "symbol": SYMBOLS[status], "css": status.replace(" ", "-")}


def _matrix(data: Mapping[str, Any], backends: list[str], divergent: set[str]) -> list[dict[str, Any]]:
    cells = feature_matrix(data)
    rows = []
    for feature in data["features"]:
        row_cells = []
        ids: set[str] = set()
        for backend in backends:
            cases = cells[(feature["id"], backend)]
            ids.update(c["id"] for c in cases)
            counts = count_statuses(cases)
            extra = [(s, counts[s]) for s in ("error", "xfail", "flaky") if counts[s]]
            row_cells.append({**_status(rollup(counts)), "backend": backend, "counts": counts,
                              "extra": extra, "total": len(cases),
                              "cases": [_ref(c) for c in cases[:MATRIX_CELL_CASES]]})
        rows.append({**feature, "cells": row_cells, "divergent": len(ids & divergent),
                     "empty": all(c["total"] == 0 for c in row_cells)})
    return rows


def _backend_heads(data: Mapping[str, Any], backends: list[str]) -> list[dict[str, str]]:
    """Matrix column heads: the backend name, and its kind and version when the run reports them."""
    heads = []
    for name in backends:
        info = data["environment"]["backends"].get(name) or {}
        sub = " ".join(str(info[k]) for k in ("kind", "kubernetesVersion") if info.get(k) and info.get(k) != name)
        heads.append({"name": name, "sub": sub})
    return heads


def _divergences(data: Mapping[str, Any], backends: list[str]) -> dict[str, Any]:
    found = divergences(data)
    used = [b for b in backends if any(b in per_backend for _, per_backend in found)]
    rows = []
    for cid, per_backend in found:
        first = next(iter(per_backend.values()))
        cells = []
        for backend in used:
            case = per_backend.get(backend)
            cells.append(None if case is None else {**_ref(case), **_status(case["status"]),
                                                    "reason": reason_line(case)})
        rows.append({"id": cid, "title": first["title"], "cells": cells})
    return {"backends": used, "rows": rows}


def _text_blocks(failure: Mapping[str, Any]) -> int:
    """How many cut-able texts a failure shows (they share :data:`DETAIL_BUDGET`)."""
    diag = failure.get("diagnostics") or {}
    objects = diag.get("objects") or []
    logs = diag.get("logs") or {}
    n = 1 + sum(failure.get(k) is not None for k in ("expected", "actual")) + bool(failure.get("diff"))
    n += len(objects) if isinstance(objects, list) else 1
    n += len(logs) if isinstance(logs, Mapping) else 1
    return n + sum(k not in ("objects", "events", "logs") for k in diag)


def _failure(case: Mapping[str, Any], limit: int, *, full: bool) -> dict[str, Any]:
    """One failure; *full* False gives the short form (summary, source, rerun) that failures
    past :data:`MAX_DETAILED_FAILURES` get."""
    failure = case["failure"]
    view: dict[str, Any] = {**_ref(case), "title": case["title"], "file": case["file"],
                            "line": case["line"], "summary": first_line(failure["summary"]), "detail": "",
                            "detail_cut": 0, "rerun": case["rerun"], "full": full,
                            "load_error": is_load_error(case), "yaml": None, "expected": None,
                            "expected_cut": 0, "actual": None, "actual_cut": 0, "diff": [],
                            "diff_cut": 0, "diagnostics": None, "steps": []}
    if not full:
        return view
    detail = failure["detail"]
    if first_line(failure["summary"]) != failure["summary"].strip():  # a long or multi-line summary: all of it here
        detail = failure["summary"].strip() + ("\n\n" + detail if detail else "")
    view["detail"], view["detail_cut"] = _cut(detail, limit)
    view["steps"] = [_step(s) for s in case["steps"]]
    excerpt = failure.get("yaml")
    if excerpt:
        view["yaml"] = {"file": excerpt["file"], "rows": [
            {"no": excerpt["startLine"] + i, "text": text,
             "mark": excerpt["startLine"] + i == excerpt["markLine"]}
            for i, text in enumerate(excerpt["lines"])]}
    for side in ("expected", "actual"):
        if failure.get(side) is not None:
            view[side], view[f"{side}_cut"] = _cut(_pretty(failure[side]), limit)
    if failure.get("diff"):
        diff, view["diff_cut"] = _cut(failure["diff"], limit)
        view["diff"] = [{"text": line, "css": _diff_css(line)} for line in diff.splitlines()]
    if failure.get("diagnostics"):
        view["diagnostics"] = _diagnostics(failure["diagnostics"], limit)
    return view


def _step(step: Mapping[str, Any]) -> dict[str, Any]:
    status = step["status"]
    symbol = SYMBOLS.get(status, "–")  # "not-run" has no report-wide symbol
    return {**step, "status": status, "symbol": symbol, "css": status,
            "duration": _secs(step["durationSeconds"])}


def _diff_css(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "dh"
    if line.startswith("@@"):
        return "dk"
    return {"+": "da", "-": "dd"}.get(line[:1], "dc")


def _object_label(obj: Any, index: int) -> str:
    """``Kind namespace/name`` from ``metadata`` (or from top-level ``name`` / ``namespace``,
    as the reference backend's snapshots have them); ``object N`` when there is neither."""
    if isinstance(obj, Mapping):
        meta: Mapping[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), Mapping) else obj
        name = "/".join(str(meta[k]) for k in ("namespace", "name") if meta.get(k))
        if name or obj.get("kind"):
            return f"{obj.get('kind', 'object')} {name}".strip()
    return f"object {index + 1}"


def _diagnostics(diag: Mapping[str, Any], limit: int) -> dict[str, Any]:
    objects = diag.get("objects") or []
    if not isinstance(objects, list):
        objects = [objects]
    events = diag.get("events") or []
    if not isinstance(events, list):
        events = [events]
    logs = diag.get("logs") or {}
    if not isinstance(logs, Mapping):
        logs = {"logs": logs}
    log_views = []
    driver_log = diag.get("driverLog")
    shown_driver_log = isinstance(driver_log, Mapping) and isinstance(driver_log.get("lines"), list)
    if isinstance(driver_log, Mapping) and shown_driver_log:
        body, cut = _cut_log("\n".join(str(x) for x in driver_log["lines"]), limit)
        log_views.append({"name": f"driver log while the case ran ({driver_log.get('errors', 0)} error line(s) first; "
                                  f"files: {', '.join(str(f) for f in driver_log.get('files') or [])})",
                          "text": body, "cut": cut})
    for name, text in logs.items():
        body, cut = _cut_log(_pretty(text), limit)
        log_views.append({"name": name, "text": body, "cut": cut})
    object_views = []
    for i, obj in enumerate(objects):
        body, cut = _cut(_pretty(obj), limit)
        object_views.append({"label": _object_label(obj, i), "text": body, "cut": cut})
    other = []
    for key, value in diag.items():
        if key not in ("objects", "events", "logs") and not (key == "driverLog" and shown_driver_log):
            body, cut = _cut(_pretty(value), limit)
            other.append({"key": key, "text": body, "cut": cut})
    event_lines = [e if isinstance(e, str) else json.dumps(e, ensure_ascii=False) for e in events]
    return {
        "objects": object_views,
        "events": [_cut(e, limit)[0] for e in event_lines[:MAX_EVENTS]],
        "more_events": max(0, len(event_lines) - MAX_EVENTS),
        "logs": log_views,
        "other": other,
    }


def _skips(cases: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    groups = []
    for category in SKIP_CATEGORIES:
        by_message: dict[str, list[dict[str, Any]]] = {}
        for case in cases:
            if case["status"] == "skipped" and case["skip"]["category"] == category:
                by_message.setdefault(first_line(case["skip"]["message"]), []).append(_ref(case))
        if by_message:
            count = sum(map(len, by_message.values()))
            groups.append({"category": category, "count": count, "open": count <= OPEN_SKIP_GROUP,
                           "messages": [{"message": m, "cases": refs} for m, refs in by_message.items()]})
    return groups


def _gate_value(value: Any) -> str:
    return "unknown" if value is None else "true" if value else "false"


def _environment(data: Mapping[str, Any], backends: list[str]) -> dict[str, Any]:
    run = data["run"]
    env = data["environment"]
    withheld = 0
    backend_views = []
    defaults = {g: "true" if f.get("defaultOn") else "false" for f in data["features"] for g in f.get("gates") or []}
    for name in backends:
        info = env["backends"].get(name)
        if info is None:
            continue
        shown, dropped = redact({k: v for k, v in info.items() if k not in ("kind", "kubernetesVersion", "featureGates")})
        withheld += dropped
        sources = shown.pop("featureGateSources", None)
        sources = sources if isinstance(sources, Mapping) else {}
        served = shown.pop("servedApis", None)
        backend_views.append({
            "name": name, "kind": info["kind"], "version": info["kubernetesVersion"],
            "provider": shown.pop("provider", None), "context": shown.pop("context", None),
            "cluster": shown.pop("cluster", None),
            "served": [str(a) for a in served] if isinstance(served, list) else None,
            "gates": [(g, _gate_value(info["featureGates"].get(g)), defaults.get(g, "—"), str(sources.get(g, "")))
                      for g in sorted(set(info["featureGates"]) | set(sources))],
            "extra": [(k, _cut(_pretty(v))[0]) for k, v in shown.items()]})
    other, dropped = redact({k: v for k, v in env.items()
                             if k not in ("backends", "hardwareProfile", "drivers", "vendor")})
    withheld += dropped
    vendor = env.get("vendor") if isinstance(env.get("vendor"), Mapping) else None
    return {
        "run": [("Run id", run["id"]), ("Started", run["startedAt"]), ("Finished", run["finishedAt"]),
                ("Wall time", _secs(run["wallSeconds"])),
                ("Command", shlex.join(redact_command(run["command"]))),
                ("drakit", run["kitVersion"]), ("Python", run["python"]), ("pytest", run["pytest"]),
                ("Workers", str(run["workers"]))],
        "backends": backend_views,
        "hardware": env["hardwareProfile"],
        "drivers": env["drivers"],
        "vendor": None if vendor is None else {
            "name": str(vendor.get("name", "")), "file": vendor.get("file"),
            "fake": bool(vendor.get("fakeDriver")), "drivers": [str(d) for d in vendor.get("drivers") or []]},
        "other": [(k, _cut(_pretty(v))[0]) for k, v in other.items()],
        "withheld": withheld,
    }


def _timing(data: Mapping[str, Any], ordered: list[Mapping[str, Any]], backends: list[str]) -> dict[str, Any]:
    total = sum(c["durationSeconds"] for c in ordered)
    wall = data["run"]["wallSeconds"]
    slowest = sorted(ordered, key=lambda c: -c["durationSeconds"])[:SLOWEST]  # stable: ties keep report order
    per_backend = [(b, _secs(sum(c["durationSeconds"] for c in ordered if c["backend"] == b))) for b in backends]
    return {"wall": _secs(wall), "sum": _secs(total), "workers": data["run"]["workers"],
            "speedup": f"{total / wall:.2f}×" if wall > 0 else "n/a", "per_backend": per_backend,
            "slowest": [{**_ref(c), "duration": _secs(c["durationSeconds"])} for c in slowest]}


def _run_reason(reason: Mapping[str, Any]) -> dict[str, Any]:
    """A run-level verdict reason (an interrupt) with at most MAX_REASON_REFS of its cases."""
    cases = [{"id": str(c["id"]), "backend": str(c["backend"])} for c in (reason.get("cases") or [])[:MAX_REASON_REFS]]
    count = int(reason.get("count") or len(reason.get("cases") or []))
    return {"code": str(reason["code"]), "message": str(reason["message"]), "count": count, "cases": cases,
            "more": max(0, count - len(cases))}


def build_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the template shows, as plain data. Pure: same results, same view."""
    data = results  # raw: the finished view is cleaned of control characters at the end
    backends = backend_order(data)
    columns = matrix_backends(data)
    ordered = sorted_cases(data)
    verdict = data["verdict"]
    result, deciders = verdict_reasons(ordered)
    required = [c for c in ordered if c["profile"] == "required"]
    broken = [c for c in ordered if c["status"] in ("failed", "error")]
    blocks = sum(_text_blocks(c["failure"]) for c in broken[:MAX_DETAILED_FAILURES])
    limit = max(MIN_TEXT, min(TEXT_LIMIT, DETAIL_BUDGET // max(1, blocks)))
    diverging = _divergences(data, backends)
    view: dict[str, Any] = clean_strings({
        "run_id": data["run"]["id"],
        "kit_version": data["run"]["kitVersion"],
        "backends": backends,
        "columns": _backend_heads(data, columns),
        "verdict": {"result": verdict["result"], "rule": verdict["rule"], "stored": verdict.get("stored"),
                    "symbol": VERDICT_SYMBOLS[verdict["result"]],
                    "deciders": [{**_ref(c), "reason": reason_line(c)} for c in deciders[:MAX_DECIDERS]]
                    if result == verdict["result"] else [],
                    "more_deciders": max(0, len(deciders) - MAX_DECIDERS) if result == verdict["result"] else 0,
                    "run_reasons": [_run_reason(r) for r in run_reasons(verdict)]},
        "summary": data["summary"],
        "driver": data.get("driver"),
        "required": {"total": len(required), **count_statuses(required)},
        "matrix": _matrix(data, columns, {d["id"] for d in diverging["rows"]}),
        "unassigned": [_ref(c) for c in ordered if not c["features"]],
        "divergences": diverging,
        "failures": [_failure(c, limit, full=i < MAX_DETAILED_FAILURES) for i, c in enumerate(broken)],
        "short_failures": max(0, len(broken) - MAX_DETAILED_FAILURES),
        "text_limit": limit,
        "known": [{**_ref(c), "reason": reason_line(c)} for c in ordered if c["status"] in ("xfail", "flaky")],
        "skips": _skips(ordered),
        "cases": [{**_ref(c), **_status(c["status"]), "title": c["title"], "features": c["features"],
                   "profile": c["profile"], "duration": _secs(c["durationSeconds"]),
                   "reason": reason_line(c)} for c in ordered],
        "environment": _environment(data, backends),
        "timing": _timing(data, ordered, backends),
        "statuses": [_status(s) for s in SYMBOLS if s != "no cases"],
        "timeline": timeline_view(dict(data), {(c["id"], c["backend"]): case_anchor(c) for c in ordered}),
        "shown_deciders": SHOWN_DECIDERS,
    })
    return view


def jinja_environment() -> jinja2.Environment:
    """The report templates' Jinja2 environment (autoescape on, undefined names are errors)."""
    return _environment_jinja()


@lru_cache(maxsize=1)
def _environment_jinja() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(results: Mapping[str, Any]) -> str:
    """The complete report page for *results* (already validated) as a string."""
    return _environment_jinja().get_template("report.html.j2").render(**build_view(results))
