"""The corpus's unschedulable pods, explained: every ``podUnschedulable`` expectation of the bundled
suites, run on the reference backend, with the explanation of that pod at the moment the
expectation holds. ``python -m tests.explain.corpus`` prints the table the test checks."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator

from drakit.conformance.backends.reference import ReferenceBackend
from drakit.conformance.cases import runner
from drakit.conformance.cases.loader import load_file
from drakit.conformance.explain.failures import session_gates
from drakit.conformance.explain.run import explain_pod
from drakit.conformance.explain.state import KINDS, load_store
from drakit.fake_driver.profile import load_profile

VERBOSE = bool(os.environ.get("DRAKIT_CORPUS_VERBOSE"))
SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"


def first_check(e: dict[str, Any]) -> str:
    """The kind of the reason an explanation gives first."""
    if e["verdict"] == "error":
        return (e.get("refusal") or {}).get("check") or "error"
    if e["verdict"] != "unschedulable":
        return e["verdict"]
    return str(e["summary"]["check"])


def explained() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(case id, pod, explanation) for each podUnschedulable expectation that holds."""
    profile = load_profile()
    backend = ReferenceBackend()
    seen: list[tuple[str, str, dict[str, Any]]] = []
    original = runner.CHECKS["podUnschedulable"]
    case_id = ""

    def watched(s: Any, body: dict[str, Any]) -> None:
        original(s, body)  # raises when the expectation does not hold (yet)
        objects = [dict(o, kind=kind) for kind in KINDS for o in s.list(kind)]
        store = load_store(objects)
        pod = store.get("Pod", body["pod"], s.namespace)
        assert pod is not None
        seen.append((case_id, body["pod"], explain_pod(store, pod, session_gates(s))))

    runner.CHECKS["podUnschedulable"] = watched
    try:
        for path in sorted(SUITES.rglob("*.case.yaml")):
            if "podUnschedulable" not in path.read_text(encoding="utf-8"):
                continue
            for case in load_file(path, profile).cases:
                if backend.unmet(case) is not None:
                    continue
                case_id = case.id
                if VERBOSE:
                    print(f"# {case_id}", file=sys.stderr, flush=True)
                session = backend.open(case)
                try:
                    runner.run_case(case, session)
                finally:
                    session.close(failed=False)
                yield from seen
                seen.clear()
    finally:
        runner.CHECKS["podUnschedulable"] = original


if __name__ == "__main__":
    for cid, pod, e in explained():
        print(f"    ({cid!r}, {pod!r}): {first_check(e)!r},  # {(e.get('summary') or {}).get('reason') or e['message']}"[:220])
