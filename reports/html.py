"""The HTML report: one self-contained file rendered server-side from a results dict.

:func:`build_view` turns the results into plain display data (every string already cleaned of
control characters, credentials dropped, long logs cut); ``templates/report.html.j2`` lays it
out with Jinja2 autoescaping on, so no value from the results file can become markup.
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

from reports import (
    SKIP_CATEGORIES,
    SYMBOLS,
    backend_order,
    clean_strings,
    count_statuses,
    feature_matrix,
    is_load_error,
    reason_line,
    redact,
    redact_command,
    rollup,
    sorted_cases,
    verdict_reasons,
)

__all__ = ["render_html", "build_view", "TEXT_LIMIT"]

TEXT_LIMIT = 32 * 1024  # characters of one log, detail or object dump kept in the page
SLOWEST = 10
MAX_DECIDERS = 20  # cases listed under the verdict banner
VERDICT_SYMBOLS = {"pass": "✔", "fail": "✘", "incomplete": "◐"}

_TEMPLATES = Path(__file__).parent / "templates"
def _cut(text: str, limit: int = TEXT_LIMIT) -> tuple[str, int]:
    """The first *limit* characters of *text* and how many were left out."""
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


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


def _matrix(data: Mapping[str, Any], backends: list[str]) -> list[dict[str, Any]]:
    cells = feature_matrix(data)
    rows = []
    for feature in data["features"]:
        row_cells = []
        for backend in backends:
            cases = cells[(feature["id"], backend)]
            counts = count_statuses(cases)
            extra = [(s, counts[s]) for s in ("error", "xfail", "flaky") if counts[s]]
            row_cells.append({**_status(rollup(counts)), "backend": backend, "counts": counts,
                              "extra": extra, "cases": [_ref(c) for c in cases]})
        rows.append({**feature, "cells": row_cells})
    return rows


def _failure(case: Mapping[str, Any]) -> dict[str, Any]:
    failure = case["failure"]
    detail, detail_cut = _cut(failure["detail"])
    view: dict[str, Any] = {**_ref(case), "title": case["title"], "file": case["file"],
                            "line": case["line"], "summary": failure["summary"], "detail": detail,
                            "detail_cut": detail_cut, "rerun": case["rerun"],
                            "load_error": is_load_error(case), "yaml": None, "expected": None,
                            "actual": None, "diff": [], "diagnostics": None,
                            "steps": [_step(s) for s in case["steps"]]}
    excerpt = failure.get("yaml")
    if excerpt:
        view["yaml"] = {"file": excerpt["file"], "rows": [
            {"no": excerpt["startLine"] + i, "text": text,
             "mark": excerpt["startLine"] + i == excerpt["markLine"]}
            for i, text in enumerate(excerpt["lines"])]}
    for side in ("expected", "actual"):
        if failure.get(side) is not None:
            view[side] = _cut(_pretty(failure[side]))[0]
    if failure.get("diff"):
        view["diff"] = [{"text": line, "css": _diff_css(line)}
                        for line in _cut(failure["diff"])[0].splitlines()]
    if failure.get("diagnostics"):
        view["diagnostics"] = _diagnostics(failure["diagnostics"])
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
    if isinstance(obj, Mapping) and isinstance(obj.get("metadata"), Mapping):
        meta = obj["metadata"]
        name = "/".join(str(meta[k]) for k in ("namespace", "name") if meta.get(k))
        return f"{obj.get('kind', 'object')} {name}".strip()
    return f"object {index + 1}"


def _diagnostics(diag: Mapping[str, Any]) -> dict[str, Any]:
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
    for name, text in logs.items():
        body, cut = _cut(_pretty(text))
        log_views.append({"name": name, "text": body, "cut": cut})
    return {
        "objects": [{"label": _object_label(o, i), "text": _cut(_pretty(o))[0]} for i, o in enumerate(objects)],
        "events": [e if isinstance(e, str) else json.dumps(e, ensure_ascii=False) for e in events],
        "logs": log_views,
        "other": [{"key": k, "text": _cut(_pretty(v))[0]} for k, v in diag.items()
                  if k not in ("objects", "events", "logs")],
    }


def _skips(cases: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    groups = []
    for category in SKIP_CATEGORIES:
        by_message: dict[str, list[dict[str, Any]]] = {}
        for case in cases:
            if case["status"] == "skipped" and case["skip"]["category"] == category:
                by_message.setdefault(case["skip"]["message"], []).append(_ref(case))
        if by_message:
            groups.append({"category": category, "count": sum(map(len, by_message.values())),
                           "messages": [{"message": m, "cases": refs} for m, refs in by_message.items()]})
    return groups


def _environment(data: Mapping[str, Any], backends: list[str]) -> dict[str, Any]:
    run = data["run"]
    env = data["environment"]
    withheld = 0
    backend_views = []
    for name in backends:
        info = env["backends"].get(name)
        if info is None:
            continue
        extra, dropped = redact({k: v for k, v in info.items()
                                 if k not in ("kind", "kubernetesVersion", "featureGates")})
        withheld += dropped
        backend_views.append({
            "name": name, "kind": info["kind"], "version": info["kubernetesVersion"],
            "gates": sorted(info["featureGates"].items()),
            "extra": [(k, _cut(_pretty(v))[0]) for k, v in extra.items()]})
    other, dropped = redact({k: v for k, v in env.items()
                             if k not in ("backends", "hardwareProfile", "drivers")})
    withheld += dropped
    return {
        "run": [("Run id", run["id"]), ("Started", run["startedAt"]), ("Finished", run["finishedAt"]),
                ("Wall time", _secs(run["wallSeconds"])),
                ("Command", shlex.join(redact_command(run["command"]))),
                ("drakit", run["kitVersion"]), ("Python", run["python"]), ("pytest", run["pytest"]),
                ("Workers", str(run["workers"]))],
        "backends": backend_views,
        "hardware": env["hardwareProfile"],
        "drivers": env["drivers"],
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


def build_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the template shows, as plain data. Pure: same results, same view."""
    data = clean_strings(results)
    backends = backend_order(data)
    ordered = sorted_cases(data)
    verdict = data["verdict"]
    result, deciders = verdict_reasons(ordered)
    required = [c for c in ordered if c["profile"] == "required"]
    return {
        "run_id": data["run"]["id"],
        "kit_version": data["run"]["kitVersion"],
        "backends": backends,
        "verdict": {"result": verdict["result"], "rule": verdict["rule"],
                    "symbol": VERDICT_SYMBOLS[verdict["result"]],
                    "deciders": [{**_ref(c), "reason": reason_line(c)} for c in deciders[:MAX_DECIDERS]]
                    if result == verdict["result"] else [],
                    "more_deciders": max(0, len(deciders) - MAX_DECIDERS) if result == verdict["result"] else 0},
        "summary": data["summary"],
        "required": {"total": len(required), **count_statuses(required)},
        "matrix": _matrix(data, backends),
        "unassigned": [_ref(c) for c in ordered if not c["features"]],
        "failures": [_failure(c) for c in ordered if c["status"] in ("failed", "error")],
        "known": [{**_ref(c), "reason": reason_line(c)} for c in ordered if c["status"] in ("xfail", "flaky")],
        "skips": _skips(ordered),
        "cases": [{**_ref(c), **_status(c["status"]), "title": c["title"], "features": c["features"],
                   "profile": c["profile"], "duration": _secs(c["durationSeconds"]),
                   "reason": reason_line(c)} for c in ordered],
        "environment": _environment(data, backends),
        "timing": _timing(data, ordered, backends),
        "statuses": [_status(s) for s in SYMBOLS if s != "no cases"],
    }


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
