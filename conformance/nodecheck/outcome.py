"""One node-check case's outcome: its steps, failure or skip, as a results.json case entry.

A check raises :class:`CheckFailed` (the driver did something wrong) or :class:`CheckSkipped`
(the check could not apply: no claims, a service the plugin does not advertise); anything else
it raises is a broken check, recorded as ``error``. ``render_text`` is the plain summary; a
failed ``optional`` case is shown as a FINDING: it is reported, but does not fail the run.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

BACKEND = "node-plugin"


class CheckFailed(Exception):
    def __init__(self, summary: str, detail: str = "", expected: Any = None, actual: Any = None) -> None:
        super().__init__(summary)
        self.summary, self.detail, self.expected, self.actual = summary, detail, expected, actual


class CheckSkipped(Exception):
    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category, self.message = category, message


class CaseRun:
    """Collects one case's steps and outcome; ``to_json`` gives a results.json case."""

    def __init__(self, case_id: str, title: str, features: tuple[str, ...], profile: str,
                 description: str, driver: str, source: str = "", rerun: str = "") -> None:
        self.id, self.title, self.features, self.profile = case_id, title, features, profile
        self.description = description
        self.driver, self.source, self.rerun = driver, source, rerun
        self.status = "passed"
        self.steps: list[dict[str, Any]] = []
        self.failure: dict[str, Any] | None = None
        self.skip_info: dict[str, str] | None = None
        self.notes: list[str] = []
        self.duration = 0.0

    @contextmanager
    def step(self, name: str, kind: str = "check") -> Iterator[None]:
        t0 = time.monotonic()
        entry = {"name": name, "kind": kind, "line": None, "status": "passed", "durationSeconds": 0.0}
        self.steps.append(entry)
        try:
            yield
        except CheckSkipped:
            entry["status"] = "skipped"
            raise
        except BaseException:
            entry["status"] = "failed"
            raise
        finally:
            entry["durationSeconds"] = round(time.monotonic() - t0, 6)

    def record(self, name: str, kind: str, status: str) -> None:
        """A step whose work happened elsewhere (e.g. in the shared claim lifecycle)."""
        self.steps.append({"name": name, "kind": kind, "line": None, "status": status,
                           "durationSeconds": 0.0})

    def note(self, text: str) -> None:
        self.notes.append(text)

    def skip(self, category: str, message: str) -> None:
        self.status = "skipped"
        self.skip_info = {"category": category, "message": message}

    def execute(self, check: Callable[[CaseRun], None]) -> None:
        t0 = time.monotonic()
        try:
            check(self)
        except CheckSkipped as err:
            self.skip(err.category, err.message)
        except CheckFailed as err:
            self.status = "failed"
            self.failure = {"summary": err.summary, "detail": err.detail or err.summary}
            if err.expected is not None:
                self.failure["expected"] = err.expected
            if err.actual is not None:
                self.failure["actual"] = err.actual
        except Exception as err:  # the checker broke, or the plugin misbehaved unexpectedly
            self.status = "error"
            self.failure = {"summary": f"{type(err).__name__}: {err}",
                            "detail": traceback.format_exc()}
        for entry in self.steps:
            if entry["status"] == "passed" and self.status == "skipped":
                entry["status"] = "skipped"
        self.duration = time.monotonic() - t0

    def to_json(self) -> dict[str, Any]:
        description = self.description + ("" if not self.notes else " Note: " + " ".join(self.notes))
        return {
            "id": self.id, "backend": BACKEND,
            "nodeid": f"node-check::{self.id}[{self.driver}]",
            "title": self.title, "description": description, "features": list(self.features),
            "profile": self.profile, "file": self.source, "line": None,
            "status": self.status, "skip": self.skip_info,
            "durationSeconds": round(self.duration, 6), "steps": self.steps,
            "failure": self.failure, "rerun": self.rerun or None,
        }


def is_finding(case: dict[str, Any]) -> bool:
    """A failed optional case: something a correct driver may do, worth knowing."""
    return case["profile"] == "optional" and case["status"] in ("failed", "error")


def decides_failure(case: dict[str, Any]) -> bool:
    """A required case that failed or errored: the run fails."""
    return case["profile"] == "required" and case["status"] in ("failed", "error")


def render_text(cases: Sequence[dict[str, Any]], driver: str, header: Sequence[str] = ()) -> str:
    marks = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}
    lines = [f"drakit node-check: driver {driver}", *(f"  {h}" for h in header)]
    for case in cases:
        mark = "FINDING" if is_finding(case) else marks.get(case["status"], case["status"].upper())
        lines.append(f"  {mark:7} {case['id']:32} {case['title']}")
        if case["status"] in ("failed", "error") and case["failure"]:
            for detail in case["failure"]["detail"].splitlines()[:8]:
                lines.append(f"            {detail}")
        elif case["status"] == "skipped" and case["skip"]:
            lines.append(f"            [{case['skip']['category']}] {case['skip']['message']}")
        elif " Note: " in case.get("description", ""):
            lines.append(f"            note: {case['description'].split(' Note: ', 1)[1]}")
    counts = Counter(c["status"] for c in cases)
    findings = sum(1 for c in cases if is_finding(c))
    failed = sum(1 for c in cases if decides_failure(c) and c["status"] == "failed")
    errors = sum(1 for c in cases if decides_failure(c) and c["status"] == "error")
    lines.append(f"{counts.get('passed', 0)} passed, {failed} failed, {errors} errors, "
                 f"{counts.get('skipped', 0)} skipped, {findings} findings")
    return "\n".join(lines) + "\n"
