"""Compare two runs: what changed between an OLD and a NEW ``results.json``.

:func:`compare_results` is a pure function of the two results dicts; :func:`render_compare_text`
and :func:`render_compare_html` render its answer. ``drakit report --compare OLD NEW`` prints the
text, writes ``compare.html`` and exits 1 when anything newly fails (:func:`gate_exit_code`).

A case is identified by (case id, backend), as in the results file. For two cases present in
both runs:

- **newly failing**: failed or error now, and neither before;
- **newly passing**: passed or flaky now, and neither before;
- **newly skipped**: skipped now, and not before;
- **still failing**: failed or error in both runs (listed, never gating);
- **other changes**: any other change of status (passed to flaky, passed to xfail, ...).

A case only in NEW is **added**; one that fails is newly failing too, so a new case cannot slip a
failure past the gate. A case only in OLD is **removed** (listed, never gating: removing a case
is a change of the suite, reviewed in code). ``xfail`` is a known failure, so passed to xfail is
an other change, not a new failure. Feature rows whose rolled-up status changed on a backend and
the environment fields that differ (kit, Python, pytest, backend versions, gates, drivers) are
listed as well, for vendors comparing two driver versions or two clusters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drakit.reports import (
    SYMBOLS,
    backend_order,
    clean_strings,
    count_statuses,
    feature_matrix,
    matrix_backends,
    reason_line,
    rollup,
    sorted_cases,
    without_failure_payloads,
)

__all__ = ["compare_results", "render_compare_text", "render_compare_html", "gate_exit_code",
           "CHANGE_GROUPS"]

_BAD = frozenset({"failed", "error"})
_GOOD = frozenset({"passed", "flaky"})

# (key in the comparison, heading) in the order every renderer shows them.
CHANGE_GROUPS: tuple[tuple[str, str], ...] = (
    ("newlyFailing", "Newly failing"),
    ("newlyPassing", "Newly passing"),
    ("newlySkipped", "Newly skipped"),
    ("otherChanges", "Other status changes"),
    ("added", "Added cases"),
    ("removed", "Removed cases"),
    ("vanished", "Required cases that passed, now missing or skipped"),
    ("stillFailing", "Still failing"),
)


def _entry(case: Mapping[str, Any] | None, before: Mapping[str, Any] | None) -> dict[str, Any]:
    """One changed case: identity from the newer side, both statuses and reasons."""
    side = case if case is not None else before
    assert side is not None
    return {
        "id": side["id"], "backend": side["backend"], "title": side["title"],
        "old": before["status"] if before is not None else None,
        "new": case["status"] if case is not None else None,
        "oldReason": reason_line(before) if before is not None else "",
        "newReason": reason_line(case) if case is not None else "",
        "rerun": case.get("rerun") if case is not None else None,
    }


def _run_info(results: Mapping[str, Any]) -> dict[str, Any]:
    run = results["run"]
    return {"id": run["id"], "startedAt": run["startedAt"], "kitVersion": run["kitVersion"],
            "verdict": results["verdict"]["result"], "summary": dict(results["summary"]),
            "backends": backend_order(results)}


def _environment_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, str]]:
    """Fields of the run and environment that differ, as (field, old, new) texts."""
    def show(value: Any) -> str:
        if value is None:
            return "(none)"
        if isinstance(value, list):
            return ", ".join(map(str, value)) or "(none)"
        return str(value)

    changes: list[dict[str, str]] = []

    def note(field: str, a: Any, b: Any) -> None:
        if a != b:
            changes.append({"field": field, "old": show(a), "new": show(b)})

    for key in ("kitVersion", "python", "pytest"):
        note(f"run.{key}", old["run"][key], new["run"][key])
    note("environment.hardwareProfile", old["environment"]["hardwareProfile"], new["environment"]["hardwareProfile"])
    note("environment.drivers", sorted(old["environment"]["drivers"]), sorted(new["environment"]["drivers"]))
    ob, nb = old["environment"]["backends"], new["environment"]["backends"]
    for name in list(ob) + [b for b in nb if b not in ob]:
        a, b = ob.get(name), nb.get(name)
        if a is None or b is None:
            note(f"backend {name}", "present" if a else None, "present" if b else None)
            continue
        for key in ("kind", "kubernetesVersion", "provider", "context", "servedApis"):
            note(f"backend {name}: {key}", a.get(key), b.get(key))
        ga, gb = a["featureGates"], b["featureGates"]
        for gate in sorted(set(ga) | set(gb)):
            note(f"backend {name}: gate {gate}", ga.get(gate), gb.get(gate))
    return changes


def _feature_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, str]]:
    """Feature × backend cells whose rolled-up status differs (features of the NEW registry)."""
    old_cells, new_cells = feature_matrix(old), feature_matrix(new)
    backends = list(dict.fromkeys(matrix_backends(new) + matrix_backends(old)))
    changes = []
    for feature in new["features"]:
        for backend in backends:
            a = rollup(count_statuses(old_cells.get((feature["id"], backend), [])))
            b = rollup(count_statuses(new_cells.get((feature["id"], backend), [])))
            if a != b:
                changes.append({"feature": feature["id"], "kep": feature["kep"], "backend": backend,
                                "old": a, "new": b})
    return changes


def compare_results(old: Mapping[str, Any], new: Mapping[str, Any], *, allow_removed: bool = False) -> dict[str, Any]:
    """What changed from *old* to *new* (both valid results dicts). Pure; deterministic order:
    NEW's report order for cases present in NEW, then OLD's report order for removed ones.

    ``vanished``: the required cases that passed in OLD and are missing or skipped in NEW; they
    fail the gate unless *allow_removed* (a suite shrunk on purpose, a smaller selection)."""
    old = clean_strings(without_failure_payloads(old))
    new = clean_strings(without_failure_payloads(new))
    before = {(c["id"], c["backend"]): c for c in sorted_cases(old)}
    groups: dict[str, list[dict[str, Any]]] = {key: [] for key, _ in CHANGE_GROUPS}
    unchanged = 0
    seen = set()
    for case in sorted_cases(new):
        key = (case["id"], case["backend"])
        seen.add(key)
        prev = before.get(key)
        status = case["status"]
        if prev is None:
            groups["added"].append(_entry(case, None))
            if status in _BAD:
                groups["newlyFailing"].append(_entry(case, None))
            continue
        was = prev["status"]
        if status in _BAD and was in _BAD:
            groups["stillFailing"].append(_entry(case, prev))
        elif status in _BAD:
            groups["newlyFailing"].append(_entry(case, prev))
        elif status in _GOOD and was not in _GOOD:
            groups["newlyPassing"].append(_entry(case, prev))
        elif status == "skipped" and was != "skipped":
            groups["newlySkipped"].append(_entry(case, prev))
        elif status != was:
            groups["otherChanges"].append(_entry(case, prev))
        else:
            unchanged += 1
    groups["removed"] = [_entry(None, c) for key, c in before.items() if key not in seen]
    newly = len(groups["newlyFailing"])
    now = {(c["id"], c["backend"]): c for c in new["cases"]}
    vanished = [_entry(now.get(key), c) for key, c in before.items()
                if c.get("profile") == "required" and c["status"] in _GOOD
                and (key not in now or now[key]["status"] == "skipped")]
    groups["vanished"] = vanished
    gating = newly + (0 if allow_removed else len(vanished))
    return {
        "old": _run_info(old),
        "new": _run_info(new),
        **groups,
        "unchanged": unchanged,
        "features": _feature_changes(old, new),
        "environment": _environment_changes(old, new),
        "gate": {"result": "fail" if gating else "pass", "allowRemoved": allow_removed,
                 "rule": "fail when a case fails or errors in NEW that did not in OLD (new cases included)"
                         + ("" if allow_removed else ", or when a required case that passed in OLD is missing or "
                                                     "skipped in NEW (--allow-removed accepts that)")
                         + "; pass otherwise"},
    }


def gate_exit_code(comparison: Mapping[str, Any]) -> int:
    """1 when the gate fails (something newly fails, or a required case that passed vanished
    without ``allow_removed``), else 0: the exit code of ``drakit report --compare``."""
    return 1 if comparison["gate"]["result"] == "fail" else 0


# ------------------------------------------------------------------------------------ text

_SGR = {"failed": "1;31", "error": "1;35", "passed": "32", "flaky": "33", "skipped": "90", "xfail": "34",
        "fail": "1;31", "pass": "1;32"}
MAX_LINES = 20  # cases listed per group on the terminal


def _paint(text: str, key: str | None, color: bool) -> str:
    return f"\x1b[{_SGR[key]}m{text}\x1b[0m" if color and key in _SGR else text


def render_compare_text(comparison: Mapping[str, Any], *, color: bool = False) -> str:
    """The comparison for a terminal or a CI log. Pure."""
    old, new = comparison["old"], comparison["new"]
    lines = [f"drakit compare: OLD {old['id']} ({old['verdict']}, {old['summary']['total']} cases) -> "
             f"NEW {new['id']} ({new['verdict']}, {new['summary']['total']} cases)"]
    for key, heading in CHANGE_GROUPS:
        entries = comparison[key]
        if not entries:
            continue
        lines += ["", f"{heading.lower()}: {len(entries)}"]
        for e in entries[:MAX_LINES]:
            now = e["new"] or "gone"
            was = "new case" if e["old"] is None else f"was {e['old']}"
            reason = f": {e['newReason']}" if e["newReason"] else (
                f"; before: {e['oldReason']}" if e["oldReason"] else "")
            lines.append(f"  {_paint(now, e['new'], color)} {e['id']} [{e['backend']}] ({was}){reason}")
        if len(entries) > MAX_LINES:
            lines.append(f"  ... and {len(entries) - MAX_LINES} more in compare.html")
        if key == "vanished":
            lines.append("  (allowed by --allow-removed)" if comparison["gate"].get("allowRemoved") else
                         "  (these fail the gate; --allow-removed accepts a suite or selection shrunk on purpose)")
    if comparison["features"]:
        lines += ["", f"feature rows changed: {len(comparison['features'])}"]
        for f in comparison["features"][:MAX_LINES]:
            lines.append(f"  {f['feature']} [{f['backend']}]: {f['old']} -> {f['new']}")
    if comparison["environment"]:
        lines += ["", f"environment changed: {len(comparison['environment'])}"]
        for e in comparison["environment"][:MAX_LINES]:
            lines.append(f"  {e['field']}: {e['old']} -> {e['new']}")
    vanished = comparison.get("vanished") or []
    allowed = comparison["gate"].get("allowRemoved", False)
    newly = len(comparison["newlyFailing"])
    gate = comparison["gate"]["result"]
    why = f"{newly} newly failing" + (f", {len(vanished)} required passing cases gone" if vanished and not allowed else "")
    lines += ["", f"unchanged: {comparison['unchanged']}",
              f"gate: {_paint(gate.upper(), gate, color)} ({why})"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ HTML

def _status_view(status: str | None) -> dict[str, str] | None:
    if status is None:
        return None
    return {"status": status, "symbol": SYMBOLS[status], "css": status}


def build_compare_view(comparison: Mapping[str, Any]) -> dict[str, Any]:
    """Display data for ``compare.html`` (strings were cleaned by :func:`compare_results`)."""
    groups = []
    for key, heading in CHANGE_GROUPS:
        rows = [{**e, "old_st": _status_view(e["old"]), "new_st": _status_view(e["new"])} for e in comparison[key]]
        groups.append({"key": key, "heading": heading, "rows": rows})
    features = [{**f, "old_st": _status_view(f["old"] if f["old"] != "no cases" else None),
                 "new_st": _status_view(f["new"] if f["new"] != "no cases" else None)}
                for f in comparison["features"]]
    return {"old": comparison["old"], "new": comparison["new"], "groups": groups,
            "features": features, "environment": comparison["environment"],
            "unchanged": comparison["unchanged"], "gate": comparison["gate"],
            "newly_failing": len(comparison["newlyFailing"]),
            "vanished": 0 if comparison["gate"].get("allowRemoved") else len(comparison.get("vanished") or [])}


def render_compare_html(comparison: Mapping[str, Any]) -> str:
    """``compare.html``: one self-contained page, autoescaped."""
    from drakit.reports.html import jinja_environment

    template = jinja_environment().get_template("compare.html.j2")
    return template.render(**build_compare_view(comparison))
