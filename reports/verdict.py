"""The verdict of a run: the rule, its reasons, and the code that applies it (here and only here).

Pure; re-exported by :mod:`drakit.reports`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


VERDICT_RULE = (
    "pass when every required case passed (flaky counts as passed) on each backend that ran it, "
    "skips as not-applicable, needs-fake-driver, no-node-side, backend or feature-disabled (the target runs "
    "other gate values than the case is about) aside; fail when a required case failed, errored "
    "or is xfail, or a case file did not load; incomplete when no required case ran, a required "
    "case was skipped for any other reason (gate-unknown among them; a driver case skipped as inventory "
    "aside when another case of its behaviour passed), or the run says why it "
    "cannot be trusted whole (interrupted by a signal, no case exercised the driver); fail wins "
    "over incomplete, and verdict.reasons lists every reason"
)
_PASSING = frozenset({"passed", "flaky"})
_FAILING = frozenset({"failed", "error", "xfail"})
_IGNORED_SKIPS = frozenset({"not-applicable", "needs-fake-driver", "no-node-side", "backend", "feature-disabled"})

#: The codes of ``verdict.reasons`` and the result each one forces. The first four are derived
#: from the cases (and recomputed whenever the cases change); the others are facts about the run
#: that the cases cannot show, kept as they are by :func:`run_reasons` when results are merged or
#: re-rendered. A code this table does not know (a newer drakit's) counts as ``incomplete``.
VERDICT_REASON_CODES: dict[str, str] = {
    "case-failed": "fail",             # a required case failed, errored or is xfail
    "load-error": "fail",              # a case file did not load
    "required-skipped": "incomplete",  # a required case was skipped for a reason that does not make it inapplicable
    "nothing-ran": "incomplete",       # no required case passed: the run tested nothing
    "interrupted": "incomplete",       # SIGINT/SIGTERM stopped the run: signal, phase, the cases not run
    "driver-not-exercised": "incomplete",  # no case exercised the driver under test
    "shard": "incomplete",             # one shard's results (drakit run --shard i/N): a part of a run
    "shard-missing": "incomplete",     # merged shards: cases of the plan in no shard's results (shards named)
    "case-doubled": "incomplete",      # merged shards: a case in more than one shard's results
    "unfinished": "incomplete",        # written as a run starts, replaced at its end: still running, or killed
}
CASE_REASON_CODES = frozenset({"case-failed", "load-error", "required-skipped", "nothing-ran"})
MAX_REASON_CASES = 1000  # case references listed under one reason


def is_load_error(case: Mapping[str, Any]) -> bool:
    """A case file that did not load is reported as an error case whose id is the file path."""
    return case.get("status") == "error" and case.get("id") == case.get("file")


def verdict_reasons(cases: Iterable[Mapping[str, Any]]) -> tuple[str, list[Mapping[str, Any]]]:
    """Apply :data:`VERDICT_RULE` to the cases alone: the result and the cases that decided it
    (empty for pass). Run-level reasons (an interrupt) are :func:`compute_verdict`'s."""
    cases = list(cases)
    required = [c for c in cases if c.get("profile") == "required"]
    failing = [c for c in cases if is_load_error(c)
               or (c.get("profile") == "required" and c["status"] in _FAILING)]
    if failing:
        return "fail", failing
    blocked = _blocking(required)
    ran = [c for c in required if c["status"] in _PASSING]
    if blocked or not ran:
        return "incomplete", blocked
    return "pass", []


def _blocking(required: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Required cases skipped for a reason that does not make them inapplicable. A driver case
    skipped as ``inventory`` is not among them when another case of its behaviour passed on its
    backend: the behaviour was proven on the devices the driver has (two cases of one behaviour
    for differently shaped devices, of which the driver publishes one)."""
    proven = {(c.get("behaviour"), c.get("backend")) for c in required if c.get("behaviour") and c["status"] in _PASSING}
    return [c for c in required if c["status"] == "skipped"
            and (c.get("skip") or {}).get("category") not in _IGNORED_SKIPS
            and not ((c.get("skip") or {}).get("category") == "inventory" and (c.get("behaviour"), c.get("backend")) in proven)]


def case_ref(case: Mapping[str, Any]) -> dict[str, str]:
    """How a reason names a case: its id and backend."""
    return {"id": str(case["id"]), "backend": str(case.get("backend", "-"))}


def _case_reasons(cases: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    required = [c for c in cases if c.get("profile") == "required"]
    reasons: list[dict[str, Any]] = []

    def add(code: str, hits: list[Mapping[str, Any]], message: str) -> None:
        if hits:
            reasons.append({"code": code, "message": message, "count": len(hits),
                            "cases": [case_ref(c) for c in hits[:MAX_REASON_CASES]]})

    loads = [c for c in cases if is_load_error(c)]
    add("load-error", loads, f"{len(loads)} case file(s) did not load")
    failing = [c for c in required if c["status"] in _FAILING and not is_load_error(c)]
    add("case-failed", failing, f"{len(failing)} required case(s) failed, errored or are xfail")
    blocked = _blocking(required)
    add("required-skipped", blocked, f"{len(blocked)} required case(s) skipped for a reason other than "
                                     f"not-applicable, needs-fake-driver, no-node-side, backend or feature-disabled")
    if not any(c["status"] in _PASSING for c in required):
        reasons.append({"code": "nothing-ran", "message": "no required case passed: the run tested nothing",
                        "count": 0, "cases": []})
    return reasons


def run_reasons(verdict: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The run-level reasons of an existing ``verdict`` block (those the cases cannot show again:
    an interrupt, a driver no case exercised), to carry into a recomputed verdict."""
    return [dict(r) for r in (verdict or {}).get("reasons") or [] if r.get("code") not in CASE_REASON_CODES]


def compute_verdict(cases: Iterable[Mapping[str, Any]],
                    extra_reasons: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The ``verdict`` block of a results file: ``result``, ``rule`` and ``reasons`` (the
    reasons derived from *cases*, then *extra_reasons*: run-level facts such as an interrupt,
    each ``{"code", "message", ...}``). fail when a reason forces fail, else incomplete when any
    reason exists, else pass."""
    reasons = _case_reasons(list(cases)) + [dict(r) for r in extra_reasons]
    effects = {VERDICT_REASON_CODES.get(str(r["code"]), "incomplete") for r in reasons}
    result = "fail" if "fail" in effects else "incomplete" if effects else "pass"
    return {"result": result, "rule": VERDICT_RULE, "reasons": reasons}


def recompute_verdict(results: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict of a results dict worked out again, the one way every reader of results does
    it (``drakit report``, ``--merge``, ``--compare``): the reasons the cases show derived from
    the cases, ``driver-not-exercised`` from the cases and the environment, and only the reasons
    nothing in the file can show again (an interrupt, a shard) kept as the file states them."""
    from drakit.reports.driver import driver_reasons
    kept = [r for r in run_reasons(results.get("verdict")) if r.get("code") != "driver-not-exercised"]
    return compute_verdict(results["cases"], kept + driver_reasons(results["cases"], results.get("environment")))


def trusted_verdict(results: Mapping[str, Any]) -> dict[str, Any]:
    """*results* with :func:`recompute_verdict`'s verdict in place of the one it stores (a file
    edited to say ``pass`` above failed cases says ``fail`` again). When the stored result differs,
    the verdict carries it as ``stored``, for the one line that says so (:func:`verdict_note`)."""
    verdict = recompute_verdict(results)
    stored = (results.get("verdict") or {}).get("result")
    if stored != verdict["result"]:
        verdict["stored"] = stored
    return {**results, "verdict": verdict}


def verdict_note(results: Mapping[str, Any], source: str = "results.json") -> str | None:
    """The one line saying that the verdict shown is not the one *source* stores, or None."""
    verdict = results["verdict"]
    if "stored" not in verdict:
        return None
    return (f"{source} says {str(verdict['stored']).upper()} but its cases say {verdict['result'].upper()}: "
            f"the verdict shown is recomputed from the cases")
