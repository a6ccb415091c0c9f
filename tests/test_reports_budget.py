"""The size budget of report.html: a run of 1,000 cases, with failures carrying large logs, renders
to less than ``reports.html.SIZE_BUDGET`` (2 MiB), with every cut shown as such.

The run is synthetic (built here, deterministic) so the test needs no target and takes seconds.
"""

from __future__ import annotations

import copy
import functools
import time
from pathlib import Path
from typing import Any

import pytest

from drakit.reports import compute_summary, compute_verdict, load_results, validate_results
from drakit.reports.html import MAX_DETAILED_FAILURES, SIZE_BUDGET, render_html
from drakit.reports.junit import render_junit

FIXTURES = Path(__file__).parent / "fixtures" / "results"
CASES = 1000
LOG_LINES = 12_000  # about 1 MB of log per failing case


@functools.lru_cache(maxsize=None)
def big_log(lines: int = LOG_LINES) -> str:
    """About 100 bytes a line, hostile markup included, and the interesting line last."""
    body = "".join(f"I1129 10:{i // 60 % 60:02d}:{i % 60:02d} plugin.go:{i % 900}] step {i} "
                   f"<script>alert({i})</script> prepared claim-{i % 7}\n" for i in range(lines))
    return body + "E1129 11:00:00 plugin.go:1] FATAL device gpu-3 vanished\n"


def synthetic_run(cases: int = CASES, fail_every: int = 8) -> dict[str, Any]:
    """``cases`` results over two backends: 1 in *fail_every* failed or errored (each with a
    ~1 MB log, a smaller one, an object dump and a long detail), 1 in 10 of the others skipped,
    the rest passed. Same output every call."""
    base = load_results(FIXTURES / "mixed.json")
    features = [f["id"] for f in base["features"]]
    template = next(c for c in base["cases"] if c["status"] == "failed" and c["failure"].get("diagnostics"))
    out = []
    for n in range(cases):
        i, side = divmod(n, 2)
        backend = ("reference", "cluster")[side]
        feature = features[i % len(features)]
        case = {
            "id": f"{feature}/synthetic-{i:04d}", "backend": backend,
            "nodeid": f"{feature}/synthetic.case.yaml::{feature}/synthetic-{i:04d}[{backend}]",
            "title": f"Synthetic case {i} of the {feature} feature", "description": "generated",
            "features": [feature], "profile": "required" if i % 3 else "optional",
            "file": f"conformance/suites/{feature}/synthetic.case.yaml", "line": 1 + i,
            "status": "passed", "skip": None, "durationSeconds": round(0.01 * (i % 17), 3),
            "steps": [{"name": "apply", "kind": "apply", "line": 2 + i, "status": "passed", "durationSeconds": 0.01}],
            "failure": None,
            "rerun": f"drakit run conformance/suites/{feature}/synthetic.case.yaml -k {feature}/synthetic-{i:04d} "
                     f"--backend {backend} -n 0",
        }
        if n % fail_every == 3 % fail_every:
            failure = copy.deepcopy(template["failure"])
            failure["diagnostics"]["logs"] = {"driver": big_log(), "kubelet": big_log(2_000)}
            failure["diagnostics"]["objects"] = [{"kind": "ResourceSlice", "metadata": {"name": f"slice-{n}"},
                                                  "spec": {"devices": [{"name": f"gpu-{d}"} for d in range(400)]}}]
            failure["detail"] = "step failed\n" * 3000
            case.update(status="error" if n % 16 == 11 else "failed", failure=failure)
        elif n % 10 == 5:
            case.update(status="skipped", skip={"category": "inventory", "message": f"needs {i % 5 + 2} GPUs"})
        out.append(case)
    base["cases"] = out
    base["summary"] = compute_summary(out)
    base["verdict"] = compute_verdict(out)
    validate_results(base)
    return base


@pytest.mark.parametrize("fail_every", [8, 1], ids=["one-in-eight-fails", "every-case-fails"])
def test_a_thousand_case_report_stays_under_the_size_budget(fail_every: int) -> None:
    results = synthetic_run(fail_every=fail_every)
    assert results["summary"]["total"] == CASES
    broken = results["summary"]["failed"] + results["summary"]["error"]
    assert broken == CASES // fail_every
    t0 = time.perf_counter()
    html = render_html(results)
    seconds = time.perf_counter() - t0
    size = len(html.encode("utf-8"))
    raw_logs = sum(len(log) for c in results["cases"] if c["failure"]
                   for log in c["failure"]["diagnostics"]["logs"].values())
    print(f"\n1,000-case report, {broken} failing: {size:,} bytes (budget {SIZE_BUDGET:,}), "
          f"{raw_logs:,} characters of logs in results.json, rendered in {seconds:.2f} s")
    assert size < SIZE_BUDGET
    # every failure is there and expanded; the full ones keep each log's head and last line and
    # say where they were cut; the short ones say why they are short
    detailed = min(broken, MAX_DETAILED_FAILURES)
    assert html.count('<details open class="failure') == broken
    assert html.count("characters cut here; the full log is in results.json") == 2 * detailed
    assert html.count("FATAL device gpu-3 vanished") == 2 * detailed
    assert "✂ cut:" in html
    if broken > MAX_DETAILED_FAILURES:
        assert f"the other {broken - MAX_DETAILED_FAILURES} in short form" in html
    assert "<script>alert(" not in html


def test_junit_of_a_thousand_cases_is_bounded_too() -> None:
    xml = render_junit(synthetic_run())
    assert len(xml.encode("utf-8")) < 2 * SIZE_BUDGET  # failure bodies are cut at 8 KiB each


def test_a_100_kb_failure_message_does_not_widen_the_page() -> None:
    """One unbroken 100 KB line as a failure summary and as a skip message: lists and headings
    show a cut first line, the long text only appears in a wrapping ``pre`` block, cut to the
    text limit, and the page's stylesheet wraps anything else that is long."""
    from html.parser import HTMLParser

    from drakit.reports import compute_summary, compute_verdict
    results = load_results(FIXTURES / "mixed.json")
    failing = next(c for c in results["cases"] if c["status"] == "failed")
    failing["failure"] = {**failing["failure"], "summary": "x" * 100_000}
    skipped = next(c for c in results["cases"] if c["status"] == "skipped")
    skipped["skip"] = {"category": "other", "message": "y" * 100_000}
    results["summary"], results["verdict"] = compute_summary(results["cases"]), compute_verdict(results["cases"])
    html = render_html(results)

    class Runs(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.stack: list[str] = []
            self.longest_outside_pre = 0

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag not in ("br", "meta", "link", "input", "img", "hr", "wbr"):
                self.stack.append(tag)

        def handle_endtag(self, tag: str) -> None:
            while self.stack and self.stack.pop() != tag:
                pass

        def handle_data(self, data: str) -> None:
            if "pre" not in self.stack and "style" not in self.stack:
                longest = max((len(w) for w in data.split()), default=0)
                self.longest_outside_pre = max(self.longest_outside_pre, longest)

    runs = Runs()
    runs.feed(html)
    assert runs.longest_outside_pre <= 320, runs.longest_outside_pre  # REASON_LIMIT and a bracket or two
    assert "x" * 1000 in html  # the message is there, in a pre block, cut to the text limit
    assert "x" * 100_000 not in html and len(html) < 400_000
    # long tokens wrap inside their box; words are never broken to narrow a table column
    assert "overflow-wrap: break-word" in html and "anywhere" not in html
