"""Where a run's time went: one lane per worker, each case's set-up, the case itself and its
teardown as bars, the run's start-up before the first case and wrap-up after the last.

Pure: :func:`timeline_view` turns a results dict into display data (lanes, bars, ticks, a
per-worker summary) that the report's template draws as inline SVG, so the picture needs no
JavaScript, and the summary table says the same in text. The cases' ``timeline`` fields
(``[start, end]`` of each pytest phase, seconds from the run's start) are the only input;
results without them (older files) give no timeline.

Size: a bar narrower than :data:`MIN_BAR_PX` is merged with its lane's neighbours into one
"short cases" bar, so the picture's size is bounded by its width, not by the number of cases;
a failed case is always drawn (at least that wide) and links to its row.
"""

from __future__ import annotations

from typing import Any

WIDTH = 1100  # the SVG's user units (it scales to the page's width)
LABEL_W = 64  # the lane names on the left
LANE_H = 22
TOP = 8
AXIS_H = 28
MIN_BAR_PX = 2.0
PHASES = ("setup", "call", "teardown")


MAX_TICKS = 10


def _nice_step(span: float) -> float:
    """A tick step giving at most :data:`MAX_TICKS` ticks over *span* seconds: a round number of
    seconds, minutes or hours, then of thousands of hours for spans no run has (a results file
    may say anything its schema admits)."""
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200):
        if span / step <= MAX_TICKS:
            return step
    step = 7200.0
    while span / step > MAX_TICKS:
        step *= 10
    return step


def _tick_label(seconds: float, step: float) -> str:
    if step < 1:
        return f"{seconds:.1f} s"
    if seconds >= 120 and step >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _worker_key(name: str) -> tuple[int, int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (0 if name == "main" else 1, int(digits) if digits else 0, name)


def _fmt(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def _short_bar(pending: dict[str, Any], x: float, y: float, scale: float, worker: str) -> dict[str, Any]:
    """One bar for a run of cases too short to draw one by one."""
    return {"x": x, "y": y, "w": max(round((pending["end"] - pending["start"]) * scale, 1), 1.0), "h": LANE_H - 6,
            "css": "tl-short",
            "title": f"{pending['count']} short case(s) on {worker}, {_fmt(pending['start'])} to {_fmt(pending['end'])}"}


def timeline_view(results: dict[str, Any], anchors: dict[tuple[str, str], str] | None = None) -> dict[str, Any] | None:
    """The timeline's display data, or None when no case recorded when it ran."""
    timed = [c for c in results.get("cases", []) if isinstance(c.get("timeline"), dict)]
    if not timed:
        return None
    ends = [span[1] for c in timed for p in PHASES if (span := c["timeline"].get(p))]
    starts = [span[0] for c in timed for p in PHASES if (span := c["timeline"].get(p))]
    if not ends:
        return None
    wall = max(float(results.get("run", {}).get("wallSeconds") or 0.0), max(ends))
    wall = wall if wall > 0 else 1.0
    scale = (WIDTH - LABEL_W - 8) / wall
    workers = sorted({str(c["timeline"].get("worker") or "main") for c in timed}, key=_worker_key)
    lanes = ["run", *workers]
    height = TOP + LANE_H * len(lanes) + AXIS_H

    def x(seconds: float) -> float:
        return round(LABEL_W + seconds * scale, 1)

    bars: list[dict[str, Any]] = []
    first, last = min(starts), max(ends)
    if first > 0:
        bars.append({"x": x(0), "y": TOP + 3, "w": max(round(first * scale, 1), 1.0), "h": LANE_H - 6, "css": "tl-startup",
                     "title": f"start-up before the first case: {_fmt(first)} (collection, start of the backends)"})
    if wall - last > 0.0005:
        bars.append({"x": x(last), "y": TOP + 3, "w": max(round((wall - last) * scale, 1), 1.0), "h": LANE_H - 6,
                     "css": "tl-wrapup", "title": f"wrap-up after the last case: {_fmt(wall - last)} (teardown, results)"})

    summary = []
    for lane, worker in enumerate(workers, start=1):
        y = TOP + lane * LANE_H + 3
        mine = sorted((c for c in timed if str(c["timeline"].get("worker") or "main") == worker),
                      key=lambda c: min(s[0] for p in PHASES if (s := c["timeline"].get(p))))
        totals = dict.fromkeys(PHASES, 0.0)
        pending: dict[str, Any] | None = None  # short cases merged: start, end, count
        for case in mine:
            tl = case["timeline"]
            spans = {p: tl[p] for p in PHASES if tl.get(p)}
            for p, (s, e) in spans.items():
                totals[p] += max(0.0, e - s)
            start = min(s for s, _ in spans.values())
            end = max(e for _, e in spans.values())
            broken = case.get("status") in ("failed", "error")  # a failure is always drawn, however short
            if (end - start) * scale < MIN_BAR_PX and not broken:
                if pending is None:
                    pending = {"start": start, "end": end, "count": 0}
                pending["end"], pending["count"] = max(pending["end"], end), pending["count"] + 1
                continue
            if pending is not None:
                bars.append(_short_bar(pending, x(pending["start"]), y, scale, worker))
                pending = None
            label = f"{case.get('id')} [{case.get('backend')}]: {case.get('status')}"
            parts = "; ".join(f"{'case' if p == 'call' else p} {_fmt(e - s)}" for p, (s, e) in spans.items())
            group = {"title": f"{label}, {parts}, from {_fmt(start)}", "rects": [],
                     "href": (anchors or {}).get((str(case.get("id")), str(case.get("backend"))))}
            for p, (s, e) in spans.items():
                w = round((e - s) * scale, 1)
                if broken and p == "call":
                    w = max(w, MIN_BAR_PX)
                if w < 0.5:
                    continue
                css = f"tl-{p}" if p != "call" else f"tl-call tl-{case.get('status')}"
                group["rects"].append({"x": x(s), "y": y, "w": w, "h": LANE_H - 6, "css": css})
            if group["rects"]:
                bars.append(group)
        if pending is not None:
            bars.append(_short_bar(pending, x(pending["start"]), y, scale, worker))
        busy = sum(totals.values())
        summary.append({"worker": worker, "cases": len(mine), "setup": _fmt(totals["setup"]), "call": _fmt(totals["call"]),
                        "teardown": _fmt(totals["teardown"]), "idle": _fmt(max(0.0, wall - busy))})

    bars = [b if "rects" in b else {"title": b.pop("title"), "href": None, "rects": [b]} for b in bars]
    step = _nice_step(wall)
    count = min(int(wall / step + 1e-9), MAX_TICKS)  # bounded whatever the file says
    ticks = [{"x": x(i * step), "label": _tick_label(round(i * step, 3), step)} for i in range(count + 1)]
    return {
        "width": WIDTH, "height": height, "label_w": LABEL_W, "lane_h": LANE_H, "top": TOP,
        "axis_y": TOP + LANE_H * len(lanes) + 2,
        "lanes": [{"name": name, "y": TOP + i * LANE_H + LANE_H / 2 + 4} for i, name in enumerate(lanes)],
        "bars": bars, "ticks": ticks, "wall": _fmt(wall), "startup": _fmt(first), "wrapup": _fmt(max(0.0, wall - last)),
        "summary": summary,
    }
