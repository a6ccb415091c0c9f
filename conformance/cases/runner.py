"""Play one case's steps against one backend session and record what happened.

The runner knows only the :class:`~conformance.backends.base.Session` seam. On a synchronous
target an expectation is checked once; on a real cluster it is polled until ``within``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..backends.base import ApiRejected, HarnessError, Session
from .checks import CHECKS as _CASE_CHECKS
from .checks import ExpectationFailed, claim_name
from .driverchecks import DRIVER_CHECKS
from .nodechecks import NODE_CHECKS

CHECKS = {**_CASE_CHECKS, **NODE_CHECKS, **DRIVER_CHECKS}
from ..spec.case import Case, Step
from .budget import CaseOverBudget, expired, over_budget_text, stand_down
from .placeholders import substitute_runtime

DEFAULT_WITHIN = 60.0
POLL_INTERVAL = 0.25


@dataclass
class StepRecord:
    name: str
    kind: str
    line: int
    status: str = "not-run"
    duration: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "line": self.line, "status": self.status,
                "durationSeconds": round(self.duration, 6)}


@dataclass
class Outcome:
    status: str  # passed | failed | error
    steps: list[StepRecord]
    failure: dict[str, Any] | None = None
    diagnostics: dict[str, Any] | None = None


class _NoExplanation(Exception):
    pass


@dataclass
class _Failure(Exception):
    line: int
    summary: str
    expected: Any = None
    actual: Any = None
    status: str = "failed"
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    final: bool = False  # waiting longer cannot change the outcome
    check: str = ""  # the failed assertion and its body, for its cause (causes.cause)
    body: dict[str, Any] = field(default_factory=dict)


def run_case(case: Case, session: Session, *, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> Outcome:
    records = [StepRecord(s.name, s.kind, s.line) for s in case.steps]
    broken = getattr(session, "contradiction", None)
    if isinstance(broken, str) and broken and records:  # the target's own objects contradict the behaviour: no step can prove it
        records[0].status = "failed"
        return _failed(case, session, records, _Failure(case.steps[0].line, broken, expected=f"devices that give "
                                                        f"{case.behaviour}", actual=broken, final=True))
    for step, rec in zip(case.steps, records):
        t0 = clock()
        try:
            try:
                _run_step(step, session, clock, sleep)
            except Exception:
                # The alarm may have come and been swallowed on the way (the CEL engine turns it
                # into an evaluation error, which fails an expectation): the budget is the cause.
                over = expired()
                if over is not None:
                    raise CaseOverBudget(over) from None
                raise
            over = expired()
            if over is not None:  # the alarm came, and something in the step swallowed it
                raise CaseOverBudget(over)
            rec.status = "passed"
        except _Failure as f:
            rec.status = f.status
            rec.duration = clock() - t0
            return _failed(case, session, records, f)
        except HarnessError as exc:
            rec.status = "error"
            rec.duration = clock() - t0
            return _failed(case, session, records, _Failure(step.line, f"harness: {exc}", status="error"))
        except CaseOverBudget as exc:  # the case stops at this step: an error naming the budget and the step
            stand_down()
            rec.status = "error"
            rec.duration = clock() - t0
            # no explanation: it would schedule again what just ran out of time
            return _failed(case, session, records, _Failure(
                step.line, over_budget_text(str(exc), step.index + 1, step.line), status="error"), explain=False)
        except Exception as exc:  # a bug in drakit: report it with the trace, never lose the result
            rec.status = "error"
            rec.duration = clock() - t0
            from ..crash import report_bug
            return _failed(case, session, records, _Failure(
                step.line, report_bug(exc, context=f"case {case.id}, step {step.index + 1}"), status="error"))
        rec.duration = clock() - t0
    return Outcome("passed", records)


def _failed(case: Case, session: Session, records: list[StepRecord], f: _Failure, explain: bool = True) -> Outcome:
    try:
        diag = session.diagnostics()
    except Exception as exc:  # diagnostics must never hide the failure itself
        diag = {"error": f"collecting diagnostics failed: {exc}"}
    except CaseOverBudget:  # the case ran over its budget, and collecting them over its grace
        diag = {"error": "collecting diagnostics ran over the case's time budget"}
    detail = f.detail
    explained: list[dict[str, Any]] = []
    try:  # why pods still wait for a node (drakit explain), on a copy of what the session reads
        from ..explain.failures import explain_failure
        if not explain:
            raise _NoExplanation
        explained, why = explain_failure(session)
        if explained:
            diag = {**(diag or {}), "explain": explained}
            detail = (detail + "\n\n" if detail else "") + "why pods wait for a node (drakit explain):\n" + why
            f = _with_cel_error(f, why)
    except _NoExplanation:
        pass
    except Exception as exc:  # an explanation must never hide the failure itself
        diag = {**(diag or {}), "explain": {"error": f"explaining failed: {type(exc).__name__}: {exc}"}}
    except CaseOverBudget:  # over the budget while explaining an ordinary failure
        diag = {**(diag or {}), "explain": {"error": "explaining ran over the case's time budget"}}
    if f.check and explain:  # what the cluster, the kubelet and the driver said about it (not after a budget stop)
        from .causes import cause
        try:
            said = cause(session, f.check, f.body, explained)
        except CaseOverBudget:
            said = None
        if said and said not in f.summary:
            import dataclasses
            f = dataclasses.replace(f, summary=f"{f.summary}: {said}")
    failure = {"summary": f.summary, "detail": detail, "yaml": case.excerpt(f.line), "expected": f.expected,
               "actual": f.actual, "diff": _diff(f.expected, f.actual), "diagnostics": diag}
    return Outcome(f.status, records, failure, diag)


def _with_cel_error(f: _Failure, why: str) -> _Failure:
    """A selector's CEL runtime error is the cause a summary such as 'claim c is not allocated'
    leaves out (issue 25: '1/0' or a missing attribute domain showed only that and 'actual: {}'):
    the first such reason of the explanation is added to the summary."""
    if "CEL runtime error" in f.summary:
        return f
    reason = next((line[len("reason: "):] for line in why.splitlines()
                   if line.startswith("reason: ") and "CEL runtime error" in line), None)
    if reason is None:
        return f
    import dataclasses
    return dataclasses.replace(f, summary=f"{f.summary}: {reason}")


def _diff(expected: Any, actual: Any) -> str | None:
    if expected is None or actual is None or isinstance(expected, str) or isinstance(actual, str):
        return None
    import difflib
    import yaml

    def lines(value: Any) -> list[str]:
        # a scalar dumps as a document with an end marker ("2\n...\n"): the marker is YAML's, not the value's
        out = yaml.safe_dump(value, sort_keys=True, default_flow_style=False).splitlines()
        return out[:-1] if out and out[-1] == "..." else out

    a, b = lines(expected), lines(actual)
    return "\n".join(difflib.unified_diff(a, b, "expected", "actual", lineterm="")) or None


def _run_step(step: Step, s: Session, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
    if step.kind == "apply":
        for m in step.manifests:
            obj = substitute_runtime(m, s.namespace, _bound(s))
            what = f"{obj['kind']} {obj['metadata'].get('name') or obj['metadata'].get('generateName', '')}"
            try:
                s.apply(obj)
            except ApiRejected as exc:
                if step.expect_error is None:
                    raise _Failure(step.line, f"{what} was rejected: {exc}", expected="accepted", actual=str(exc)) from None
                if step.expect_error not in str(exc):
                    raise _Failure(step.line, f"{what} was rejected for another reason: {exc}",
                                   expected=step.expect_error, actual=str(exc)) from None
                continue
            if step.expect_error is not None:
                raise _Failure(step.line, f"{what} was accepted, expected a rejection containing {step.expect_error!r}",
                               expected=step.expect_error, actual="accepted")
        return
    if step.kind == "fault":
        assert step.fault is not None
        inject = getattr(s, "inject_fault", None)
        if inject is None:
            raise HarnessError("this backend cannot inject hardware faults (fault steps need the fake driver)")
        try:
            if step.fault.get("clear"):
                clear = getattr(s, "clear_fault", None)
                if clear is None:
                    raise HarnessError("this backend cannot clear hardware faults")
                clear(step.fault["node"], step.fault["device"])
            else:
                inject(step.fault["node"], step.fault["device"], step.fault["kind"], step.fault["effect"])
        except (KeyError, ValueError) as exc:
            raise _Failure(step.line, f"fault injection failed: {exc}", status="error") from None
        return
    if step.kind == "restart":
        assert step.restart is not None
        restart = getattr(s, "restart", None)
        if restart is None:
            raise HarnessError("this backend cannot restart a node's kubelet or driver (restart steps need drakit's node side)")
        r = substitute_runtime(step.restart, s.namespace, _bound(s))
        restart(r["node"], r["component"])
        return
    if step.kind == "advance":
        assert step.seconds is not None
        advance = getattr(s, "advance", None)
        if advance is not None:
            advance(step.seconds)
        else:
            sleep(step.seconds)
        return
    if step.kind == "driverStatus":
        # On a real cluster the scheduler may not have allocated the claim yet, and controllers
        # write the claim concurrently: retry what can still change, like an expect step.
        deadline = clock() + (step.within if step.within is not None else DEFAULT_WITHIN)
        while True:
            try:
                _driver_status(step, s)
                return
            except _NotYet as exc:
                if s.synchronous or clock() >= deadline:
                    raise _Failure(exc.line, exc.summary, exc.expected, exc.actual) from None
            sleep(POLL_INTERVAL)
    if step.kind == "delete":
        for d in step.deletes:
            try:
                s.delete(d["kind"], d["name"])
            except KeyError as exc:
                raise _Failure(step.line, f"cannot delete {d['kind']} {d['name']}: {exc}") from None
        return
    deadline = clock() + (step.within if step.within is not None else DEFAULT_WITHIN)
    while True:
        try:
            for line, name, body in step.assertions:
                try:
                    CHECKS[name](s, substitute_runtime(body, s.namespace, _bound(s)))
                except ExpectationFailed as exc:
                    raise _Failure(line, exc.summary, exc.expected, exc.actual, final=exc.final, check=name,
                                   body=substitute_runtime(body, s.namespace, _bound(s))) from None
            return
        except _Failure as f:
            if s.synchronous or clock() >= deadline or f.final:
                raise
        sleep(POLL_INTERVAL)


def _bound(s: Session) -> dict[str, str]:
    """The inventory values bound for a driver-suite case (``${inv.*}``), if any."""
    return dict(getattr(s, "bindings", None) or {})


class _NotYet(_Failure):
    """A driverStatus step whose claim is not (yet) in the state it needs."""


def _driver_status(step: Step, s: Session) -> None:
    """Write ``status.devices`` of a claim as its driver would: read the claim, replace the
    entries of the named devices (resolved from the allocation for ``request`` items), write
    the whole status back through the status subresource."""
    assert step.status is not None
    body = substitute_runtime(step.status, s.namespace, _bound(s))
    try:
        name = claim_name(s, body["claim"])
    except ExpectationFailed as exc:
        raise _NotYet(step.line, exc.summary, exc.expected, exc.actual) from None
    claim = s.get("ResourceClaim", name)
    if claim is None:
        raise _NotYet(step.line, f"claim {name} does not exist")
    status = dict(claim.get("status") or {})
    results = (((status.get("allocation") or {}).get("devices") or {}).get("results")) or []
    now = getattr(s, "now", None)
    stamp = now() if now is not None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    entries = list(status.get("devices") or [])
    for item in body["devices"]:
        if "request" in item:
            req = item["request"]
            targets = [r for r in results if r["request"] == req or r["request"].split("/", 1)[0] == req]
            if not targets:
                raise _NotYet(step.line, f"claim {name} has no allocated device for request {req!r}",
                               expected=req, actual=[r["request"] for r in results])
            keys = [{"driver": r["driver"], "pool": r["pool"], "device": r["device"],
                     **({"shareID": r["shareID"]} if r.get("shareID") else {})} for r in targets]
        else:
            keys = [{k: item[k] for k in ("driver", "pool", "device", "shareID") if k in item}]
        for key in keys:
            ident = (key["driver"], key["pool"], key["device"], key.get("shareID"))
            entries = [e for e in entries if (e.get("driver"), e.get("pool"), e.get("device"), e.get("shareID")) != ident]
            if item.get("remove"):
                continue
            entry: dict[str, Any] = dict(key)
            if "conditions" in item:
                entry["conditions"] = [{**c, "lastTransitionTime": c.get("lastTransitionTime") or stamp} for c in item["conditions"]]
            for k in ("data", "networkData"):
                if k in item:
                    entry[k] = item[k]
            entries.append(entry)
    if entries:
        status["devices"] = entries
    else:
        status.pop("devices", None)
    update = getattr(s, "update_status", None)
    if update is None:
        raise HarnessError("this backend cannot write status through the status subresource (driverStatus steps)")
    try:
        update("ResourceClaim", name, status)
    except ApiRejected as exc:
        if "the object has been modified" in str(exc):
            raise _NotYet(step.line, f"the status of claim {name} kept changing: {exc}") from None
        if step.expect_error is None:
            raise _Failure(step.line, f"the status of claim {name} was rejected: {exc}", expected="accepted",
                           actual=str(exc)) from None
        if step.expect_error not in str(exc):
            raise _Failure(step.line, f"the status of claim {name} was rejected for another reason: {exc}",
                           expected=step.expect_error, actual=str(exc)) from None
        return
    if step.expect_error is not None:
        raise _Failure(step.line, f"the status of claim {name} was accepted, expected a rejection containing "
                                  f"{step.expect_error!r}", expected=step.expect_error, actual="accepted")
