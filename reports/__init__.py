"""Renderers that turn a drakit ``results.json`` into an HTML report, JUnit XML and a terminal summary.

Everything here is a pure function of the results dict, except :func:`load_results` (reads a
file); :func:`drakit.reports.render.render_all` writes the reports. This package depends on nothing but the
``drakit.results/v1`` schema (``reports/schema/results.v1.json``): the feature registry reaches
it as the ``features`` snapshot inside the results file.

Public API::

    load_results(path) -> dict            parse and validate, verdict recomputed; ResultsError on any problem
    validate_results(obj) -> None         validate an in-memory results dict
    compute_summary(cases) -> dict        the ``summary`` block
    compute_verdict(cases, extra) -> dict the ``verdict`` block (VERDICT_RULE is the rule text;
                                          VERDICT_REASON_CODES the codes of its reasons)
    render.render_all(results, out_dir)   writes report.html and junit.xml
    merge_cases(results, cases) -> dict   add cases of another source (``drakit node-check``)
    compare_results(old, new) -> dict     what changed between two runs (``reports.compare``)

The field-by-field description of the results file is ``reports/SCHEMA.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "SCHEMA_VERSION",
    "STATUSES",
    "SKIP_CATEGORIES",
    "VERDICT_RULE",
    "VERDICT_REASON_CODES",
    "CASE_REASON_CODES",
    "MAX_REASON_CASES",
    "case_ref",
    "is_load_error",
    "verdict_reasons",
    "ResultsError",
    "load_results",
    "validate_results",
    "compute_summary",
    "compute_verdict",
    "recompute_verdict",
    "trusted_verdict",
    "verdict_note",
    "run_reasons",
    "merge_cases",
]

SCHEMA_VERSION = "drakit.results/v1"

STATUSES: tuple[str, ...] = ("passed", "failed", "error", "skipped", "xfail", "flaky")
SKIP_CATEGORIES: tuple[str, ...] = (
    "feature-disabled", "gate-unknown", "api-not-served", "inventory", "held", "needs-fake-driver", "no-node-side",
    "backend", "not-applicable", "other",
)
# Status text is always shown together with a symbol, so colour is never the only signal.
# Every symbol is in the common system fonts (DejaVu, Segoe UI Symbol, Apple Symbols).
SYMBOLS: dict[str, str] = {
    "passed": "✔", "failed": "✘", "error": "⚠", "skipped": "↷", "xfail": "⊘", "flaky": "↻",
    "no cases": "·",
}
# How a group of outcomes rolls up into one label: the first status present wins,
# except that a group holding only skips is "skipped".
ROLLUP_ORDER: tuple[str, ...] = ("failed", "error", "xfail", "flaky", "passed", "skipped")

# ---------------------------------------------------------------------------------------------
# The verdict (reports.verdict: the rule text and the code that applies it).

from drakit.reports.verdict import (  # noqa: E402 - re-exported here, the package's public API
    CASE_REASON_CODES,
    MAX_REASON_CASES,
    VERDICT_REASON_CODES,
    VERDICT_RULE,
    case_ref,
    compute_verdict,
    is_load_error,
    recompute_verdict,
    run_reasons,
    trusted_verdict,
    verdict_note,
    verdict_reasons,
)


def compute_summary(cases: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The ``summary`` block: the total and one count per status."""
    summary = {"total": 0, **{s: 0 for s in STATUSES}}
    for case in cases:
        summary["total"] += 1
        summary[case["status"]] += 1
    return summary


# ---------------------------------------------------------------------------------------------
# Loading and validation.

class ResultsError(ValueError):
    """A results file is unreadable or does not match ``drakit.results/v1``. One line: where, what."""


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    text = resources.files(__name__).joinpath("schema/results.v1.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def validate_results(obj: Any, *, source: str = "results") -> None:
    """Raise :class:`ResultsError` unless *obj* is a valid ``drakit.results/v1`` document.

    Beyond the JSON Schema it checks what a schema cannot: unique (case id, backend) pairs,
    case features that the registry snapshot knows, and a summary that matches the cases.
    """
    import jsonschema  # imported here: only loading and validating need it

    def fail(path: str, message: str) -> NoReturn:
        raise ResultsError(f"{source}: {path}: {_one_line(message)}")

    if not isinstance(obj, dict):
        fail("$", f"expected a JSON object, found {type(obj).__name__}")
    version = obj.get("schemaVersion")
    if version != SCHEMA_VERSION:
        fail("$.schemaVersion", f"unsupported schema version {version!r} (this drakit reads {SCHEMA_VERSION})")
    validator = jsonschema.Draft202012Validator(_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
    if error is not None:
        fail(error.json_path, error.message)

    feature_ids = [f["id"] for f in obj["features"]]
    seen_features: set[str] = set()
    for i, fid in enumerate(feature_ids):
        if fid in seen_features:
            fail(f"$.features[{i}].id", f"feature {fid!r} is listed twice")
        seen_features.add(fid)
    seen_cases: set[tuple[str, str]] = set()
    for i, case in enumerate(obj["cases"]):
        key = (case["id"], case["backend"])
        if key in seen_cases:
            fail(f"$.cases[{i}]", f"case {case['id']!r} on backend {case['backend']!r} appears twice")
        seen_cases.add(key)
        for j, fid in enumerate(case["features"]):
            if fid not in seen_features:
                fail(f"$.cases[{i}].features[{j}]", f"unknown feature {fid!r} (not in $.features)")
        for phase, span in (case.get("timeline") or {}).items():
            if isinstance(span, list) and span[0] > span[1]:
                fail(f"$.cases[{i}].timeline.{phase}", f"ends ({span[1]}) before it starts ({span[0]})")
    expected = compute_summary(obj["cases"])
    for name, count in expected.items():
        if obj["summary"][name] != count:
            fail(f"$.summary.{name}", f"is {obj['summary'][name]} but the cases hold {count}")


def validate_cases(cases: Any, *, source: str) -> None:
    """Raise :class:`ResultsError` unless *cases* is a list of valid results cases (what
    ``drakit node-check`` writes, to be merged into a run)."""
    import jsonschema
    schema = _schema()
    validator = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "type": "array",
                                                 "items": {"$ref": "#/$defs/case"}})
    error = jsonschema.exceptions.best_match(validator.iter_errors(cases))
    if error is not None:
        raise ResultsError(f"{source}: {error.json_path}: {_one_line(error.message)}")


MAX_DEPTH = 100  # results nest about 20 deep (object dumps in diagnostics); the renderers recurse
MAX_BYTES_ENV = "DRAKIT_MAX_RESULTS_SIZE"  # raises the results-file size limit (drakit.conformance.inputs.RESULTS)
NOT_RESULTS = ": not a drakit results file"


def read_json(path: str | Path) -> Any:
    """The JSON data of a results file (or another drakit JSON file, node-check's cases), read
    by drakit's one reader (:mod:`drakit.conformance.inputs`): a regular file, its size bounded
    before it is read, strict UTF-8, no duplicate key, bounded numbers and nesting. Every
    problem is one :class:`ResultsError` naming the file."""
    from drakit.conformance.inputs import RESULTS, InputError, read_json as read
    try:
        return read(path, RESULTS, what=NOT_RESULTS)
    except InputError as exc:
        raise ResultsError(str(exc)) from None


def load_results(path: str | Path) -> dict[str, Any]:
    """Read and validate a results file. Every problem is a :class:`ResultsError` naming the file.

    The verdict is never taken on the file's word: it is recomputed from the cases
    (:func:`trusted_verdict`); where the file says otherwise, ``verdict.stored`` keeps what it
    said and :func:`verdict_note` is the line to show."""
    obj = read_json(path)
    validate_results(obj, source=str(path))
    return trusted_verdict(obj)


def merge_cases(results: Mapping[str, Any], cases: Sequence[Mapping[str, Any]],
                backends: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """*results* with *cases* added, e.g. the ``node-plugin`` cases that ``drakit node-check``
    writes to ``node-check.json``. Pure; the result is validated.

    A case replaces one with the same (id, backend), so merging the same file twice changes
    nothing. A backend the cases name that the environment does not list gets an entry from
    *backends*, else a minimal one (kind = the backend name, no gates). Summary and verdict are
    computed again.
    """
    merged = {**results, "environment": {**results["environment"],
                                         "backends": dict(results["environment"]["backends"])}}
    new_keys = {(c["id"], c["backend"]) for c in cases}
    merged["cases"] = [c for c in results["cases"] if (c["id"], c["backend"]) not in new_keys] + list(cases)
    for name in dict.fromkeys(c["backend"] for c in cases):
        if name not in merged["environment"]["backends"]:
            merged["environment"]["backends"][name] = dict((backends or {}).get(name) or {
                "kind": name, "kubernetesVersion": "not reported", "featureGates": {}})
    merged["summary"] = compute_summary(merged["cases"])
    merged["verdict"] = recompute_verdict(merged)
    validate_results(merged, source="merged results")
    return merged


# ---------------------------------------------------------------------------------------------
# Helpers shared by the renderers (pure).

# C0 and C1 controls, DEL, bidi overrides and isolates (they can make text read differently
# from what it is), and lone surrogates (not encodable as UTF-8).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    # BEL shows as \x07, ESC as \x1b, RLO as \u202e: readable in any font
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean_text(text: str) -> str:
    """A string safe to show as text anywhere: control characters (terminal escapes included)
    and bidi overrides become visible ``\\xNN`` / ``\\uNNNN`` escapes, lone surrogates become
    U+FFFD, CRLF becomes LF; tab and LF stay."""
    return _CONTROL.sub(_picture, text.replace("\r\n", "\n"))


def clean_strings(value: Any) -> Any:
    """A copy of a JSON value (or of display data: tuples too) with :func:`clean_text` applied
    to every string and key."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): clean_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_strings(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clean_strings(v) for v in value)
    return value


def without_failure_payloads(results: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of *results* whose failures keep only their ``summary``: what the terminal
    summary and the run comparison show. Cleaning that copy costs nothing however large the
    logs and object dumps of the run are."""
    cases = [{**c, "failure": {"summary": c["failure"]["summary"]}} if c.get("failure") else c
             for c in results["cases"]]
    return {**results, "cases": cases}


def backend_order(results: Mapping[str, Any]) -> list[str]:
    """Backends in the order the environment lists them, then any others the cases name, sorted."""
    order = list(results["environment"]["backends"])
    extra = sorted({c["backend"] for c in results["cases"]} - set(order))
    return order + extra


def matrix_backends(results: Mapping[str, Any]) -> list[str]:
    """The feature-matrix columns: :func:`backend_order` without pseudo-backends that only hold
    featureless cases (the ``-`` of a case file that did not load)."""
    listed = set(results["environment"]["backends"])
    used = {c["backend"] for c in results["cases"] if c["features"]}
    return [b for b in backend_order(results) if b in listed or b in used]


def sorted_cases(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Cases by the registry position of their first feature (featureless last), id, backend."""
    fpos = {f["id"]: i for i, f in enumerate(results["features"])}
    bpos = {b: i for i, b in enumerate(backend_order(results))}
    nofeature = len(fpos)

    def key(case: Mapping[str, Any]) -> tuple[int, str, int]:
        first = case["features"][0] if case["features"] else None
        return (fpos.get(first, nofeature) if first else nofeature, case["id"], bpos[case["backend"]])

    return sorted(results["cases"], key=key)


def count_statuses(cases: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    for case in cases:
        counts[case["status"]] += 1
    return counts


def rollup(counts: Mapping[str, int]) -> str:
    """One label for a group of outcomes: ``no cases``, or the most serious status present."""
    if not any(counts.values()):
        return "no cases"
    for status in ROLLUP_ORDER:
        if counts.get(status):
            return status
    return "no cases"  # pragma: no cover - every status is in ROLLUP_ORDER


def feature_matrix(results: Mapping[str, Any]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """(feature id, backend) -> the cases exercising that feature on that backend, in report order.

    A case counts under every feature it names (the JUnit file lists it under its first only).
    """
    cells: dict[tuple[str, str], list[Mapping[str, Any]]] = {
        (f["id"], b): [] for f in results["features"] for b in backend_order(results)
    }
    for case in sorted_cases(results):
        for fid in dict.fromkeys(case["features"]):
            cells[(fid, case["backend"])].append(case)
    return cells


def divergences(results: Mapping[str, Any]) -> list[tuple[str, dict[str, Mapping[str, Any]]]]:
    """Case ids that ran on two or more backends with different statuses, in report order:
    ``[(case id, {backend: case})]``. Backends come from :func:`backend_order`."""
    by_id: dict[str, dict[str, Mapping[str, Any]]] = {}
    for case in sorted_cases(results):
        by_id.setdefault(case["id"], {})[case["backend"]] = case
    return [(cid, per_backend) for cid, per_backend in by_id.items()
            if len(per_backend) > 1 and len({c["status"] for c in per_backend.values()}) > 1]


def reason_line(case: Mapping[str, Any]) -> str:
    """The first line of why a case did not simply pass ("" when it did)."""
    if case.get("failure"):
        return first_line(case["failure"]["summary"])
    if case.get("skip"):
        return f"[{case['skip']['category']}] {first_line(case['skip']['message'])}"
    return ""


REASON_LIMIT = 300  # characters of a summary line shown in lists, tables and the terminal


def first_line(text: str, limit: int = REASON_LIMIT) -> str:
    """The first line of *text*, cut to *limit* characters (with "…"): a one-line summary is
    what lists show, however long the message (the whole text stays in results.json)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def shorten(text: str, limit: int, where: str = "results.json") -> str:
    """*text* cut to *limit* characters, saying how much more there is and where it is kept."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters in {where})"


def shorten_middle(text: str, limit: int, where: str = "results.json") -> str:
    """*text* kept to about *limit* characters by leaving out its middle, saying how much and
    where it is kept. A message's explanation is at its end (``... Syntax error: mismatched
    input ')' expecting {...}``, ``... got 1``), so the end is kept whole and the start (what
    and where) as far as it fits."""
    if len(text) <= limit:
        return text
    tail = limit * 3 // 5
    head = limit - tail
    return f"{text[:head]} [... {len(text) - limit:,} characters left out, all in {where} ...] {text[-tail:]}"


_CREDENTIAL_KEY = re.compile(
    r"token|passw(or)?d|passphrase|secret|authori[sz]ation|clientkey|privatekey|apikey|bearer|"
    r"credential|cookie|sessionkey"
)
_CREDENTIAL_FLAG = re.compile(r"^(--?[\w.-]*(token|password|passwd|secret|authorization|client-key|"
                              r"bearer|credential|api-key|private-key)[\w.-]*)(=.*)?$", re.IGNORECASE)
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")
REDACTED = "REDACTED"


def _mask_string(text: str) -> str:
    """Bearer tokens and the user:password part of URLs replaced by REDACTED."""
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def is_credential_key(key: str) -> bool:
    """Keys named like token, password, secret, authorization, client-key, bearer (any spelling)."""
    return bool(_CREDENTIAL_KEY.search(re.sub(r"[^a-z0-9]", "", key.lower())))


def redact(value: Any) -> tuple[Any, int]:
    """Drop credential-like keys anywhere in *value*; mask bearer tokens and URL passwords in strings.

    Returns the cleaned copy and how many keys were dropped.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        dropped = 0
        for key, item in value.items():
            if is_credential_key(str(key)):
                dropped += 1
                continue
            out[key], n = redact(item)
            dropped += n
        return out, dropped
    if isinstance(value, list):
        items = [redact(item) for item in value]
        return [v for v, _ in items], sum(n for _, n in items)
    if isinstance(value, str):
        return _mask_string(value), 0
    return value, 0


def redact_command(argv: Sequence[str]) -> list[str]:
    """A command line with the values of credential-like flags masked."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append(REDACTED)
            mask_next = False
            continue
        m = _CREDENTIAL_FLAG.match(arg)
        if m and m.group(3):
            out.append(f"{m.group(1)}={REDACTED}")
        elif m:
            out.append(arg)
            mask_next = True
        else:
            out.append(_mask_string(arg))
    return out
