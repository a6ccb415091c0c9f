"""Loading the upstream allocator table (``cases/*.yaml``) and checking an outcome against an entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from drakit.conformance.oracle.compare import Outcome, comparable_error_text, error_kind, normalise_result

CASES_DIR = Path(__file__).resolve().parent / "cases"
ENTRY_KEYS = {"name", "features", "node", "classes", "slices", "claims", "allocated", "expect", "upstreamSteps",
              "upstreamChannels", "renamed", "notPorted", "knownIssue"}


def load_cases() -> list[dict[str, Any]]:
    """Every entry of every theme file, with ``theme`` added; fails loudly on a malformed entry."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for path in sorted(CASES_DIR.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        theme = doc["theme"]
        for entry in doc["cases"]:
            unknown = set(entry) - ENTRY_KEYS
            if unknown:
                raise ValueError(f"{path.name}: {entry.get('name')}: unknown keys {sorted(unknown)}")
            if entry["name"] in seen:
                raise ValueError(f"{path.name}: duplicate case name {entry['name']}")
            seen.add(entry["name"])
            exp = entry["expect"]
            if sum(k in exp for k in ("results", "unsatisfiable", "error")) != 1:
                raise ValueError(f"{path.name}: {entry['name']}: expect needs exactly one of results, unsatisfiable, error")
            out.append({**entry, "theme": theme})
    return out


def expected_outcome(entry: dict[str, Any]) -> Outcome:
    exp = entry["expect"]
    if "results" in exp:
        return Outcome("ok", [normalise_result(r) for r in exp["results"]])
    if exp.get("unsatisfiable"):
        return Outcome("unsatisfiable")
    err = exp["error"]
    return Outcome("error", error=err["text"], per_node=bool(err.get("perNode")))


def check(entry: dict[str, Any], got: Outcome, *, who: str) -> list[str]:
    """Differences between ``got`` and the entry's expectation (empty: it matches)."""
    want = expected_outcome(entry)
    problems: list[str] = []
    if got.status != want.status:
        return [f"{who}: expected {want.summary()}, got {got.summary()}"]
    if want.status == "ok":
        if got.devices() != want.devices():
            problems.append(f"{who}: devices {got.devices()}, expected {want.devices()}")
        elif got.results != want.results:
            for i, (a, b) in enumerate(zip(got.results or [], want.results or [])):
                for key in ("devices", "nodeSelector"):
                    if a.get(key) != b.get(key):
                        problems.append(f"{who}: claim #{i} {key}: got {a.get(key)}, expected {b.get(key)}")
    elif want.status == "error":
        err = entry["expect"]["error"]
        kind = error_kind(got.error or "")
        if kind != err["kind"] or got.per_node != want.per_node:
            problems.append(f"{who}: error kind {kind}{' (per node)' if got.per_node else ''}, expected {err['kind']}"
                            f"{' (per node)' if want.per_node else ''}: {got.error!r}")
        elif err.get("match") == "prefix":
            if not (got.error or "").startswith(err["text"]):
                problems.append(f"{who}: error text {got.error!r} does not start with {err['text']!r}")
        elif comparable_error_text(kind, got.error) != comparable_error_text(kind, err["text"]):
            problems.append(f"{who}: error text {got.error!r}, expected {err['text']!r}")
    return problems
