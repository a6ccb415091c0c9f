"""The report's timeline: lanes per worker, set-up and teardown visible, failures always drawn,
short cases merged so the picture stays small, and a text summary that says the same."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from drakit.reports import load_results
from drakit.reports.html import render_html
from drakit.reports.timeline import MIN_BAR_PX, WIDTH, timeline_view

FIXTURES = Path(__file__).parent / "fixtures" / "results"


def _case(i: int, worker: str, start: float, length: float, status: str = "passed") -> dict[str, Any]:
    return {"id": f"f/case-{i}", "backend": "reference", "status": status,
            "timeline": {"worker": worker, "setup": [start, start + 0.01], "call": [start + 0.01, start + 0.01 + length],
                         "teardown": [start + 0.01 + length, start + 0.02 + length]}}


def _results(cases: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    return {"run": {"wallSeconds": wall}, "cases": cases}


def test_lanes_are_the_run_then_each_worker_in_order() -> None:
    cases = [_case(1, "gw1", 1.0, 2.0), _case(2, "gw10", 1.0, 2.0), _case(3, "gw0", 1.0, 2.0), _case(4, "gw2", 4.0, 2.0)]
    view = timeline_view(_results(cases, 10.0))
    assert view is not None
    assert [lane["name"] for lane in view["lanes"]] == ["run", "gw0", "gw1", "gw2", "gw10"]
    assert [s["worker"] for s in view["summary"]] == ["gw0", "gw1", "gw2", "gw10"]
    # start-up (before the first case at 1 s) and wrap-up (after the last, 6.02 s, to 10 s) are drawn
    titles = [b["title"] for b in view["bars"]]
    assert any(t.startswith("start-up before the first case: 1.00 s") for t in titles)
    assert any(t.startswith("wrap-up after the last case: 3.98 s") for t in titles)


def test_a_long_case_shows_its_setup_call_and_teardown() -> None:
    case = _case(1, "main", 0.5, 5.0)
    case["timeline"]["setup"] = [0.5, 2.5]  # e.g. a cluster started for the first case
    case["timeline"]["call"] = [2.5, 7.5]
    case["timeline"]["teardown"] = [7.5, 9.0]
    view = timeline_view(_results([case], 10.0))
    assert view is not None
    bar = next(b for b in view["bars"] if b["title"].startswith("f/case-1"))
    assert [r["css"] for r in bar["rects"]] == ["tl-setup", "tl-call tl-passed", "tl-teardown"]
    widths = [r["w"] for r in bar["rects"]]
    assert widths[0] * 2.5 == widths[1] or abs(widths[1] / widths[0] - 2.5) < 0.01
    assert "setup 2.00 s; case 5.00 s; teardown 1.50 s" in bar["title"]
    assert view["summary"][0] == {"worker": "main", "cases": 1, "setup": "2.00 s", "call": "5.00 s",
                                  "teardown": "1.50 s", "idle": "1.50 s"}


def test_short_cases_merge_but_a_failure_is_always_drawn_and_linked() -> None:
    cases = [_case(i, "gw0", 1.0 + i * 0.001, 0.0005) for i in range(500)]
    cases.insert(250, _case(999, "gw0", 1.25, 0.0001, status="failed"))
    view = timeline_view(_results(cases, 100.0), {("f/case-999", "reference"): "anchor-999"})
    assert view is not None
    failed = [b for b in view["bars"] if "f/case-999" in b["title"]]
    assert len(failed) == 1 and failed[0]["href"] == "anchor-999"
    assert any("tl-failed" in r["css"] and r["w"] >= MIN_BAR_PX for r in failed[0]["rects"])
    merged = [b for b in view["bars"] if "short case(s)" in b["title"]]
    assert len(merged) == 2  # before and after the failure
    assert sum(int(b["title"].split()[0]) for b in merged) == 500


def test_the_picture_stays_small_however_many_cases() -> None:
    cases = [_case(i, f"gw{i % 4}", 0.1 + (i // 4) * 0.05, 0.04) for i in range(20_000)]
    view = timeline_view(_results(cases, 300.0))
    assert view is not None
    assert len(view["bars"]) <= 4 * WIDTH / MIN_BAR_PX + 2


def test_results_without_times_give_no_timeline_and_say_so() -> None:
    results = load_results(FIXTURES / "mixed.json")
    assert timeline_view(results) is not None
    old = copy.deepcopy(results)
    for case in old["cases"]:
        case.pop("timeline", None)
    assert timeline_view(old) is None
    assert "records no case times per worker" in render_html(old)
    page = render_html(results)
    assert '<svg class="timeline"' in page and "<title>" in page.split('<svg class="timeline"')[1]
