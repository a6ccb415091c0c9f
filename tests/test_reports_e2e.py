"""End to end: real ``drakit run`` runs (the bundled suites plus one case that fails on purpose),
their terminal output, their reports rendered the same at ``-n 0`` and ``-n 2``, and the report
opened in a real browser (headless Chromium from Debian, ``apt-get install -y chromium``).

The two runs happen once per test session and worker (a module fixture), under different
``PYTHONHASHSEED`` values. The browser test skips, saying why, when ``/usr/bin/chromium`` is
absent; it saves screenshots at 1400 and 800 px wide to ``$DRAKIT_ARTIFACTS`` (default: the run's output folder) and
prints the path.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from drakit.reports import load_results
from drakit.reports.html import render_html
from drakit.reports.junit import render_junit
from drakit.reports.text import render_summary
from tests.test_reports import junit_schema

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
FAILING_CASE = """\
# Fails on purpose: the claim asks for one GPU, the expectation says two.
id: drakit-selftest/deliberately-failing
title: Deliberately failing case for the report tests <b>not bold</b>
features: [core]
description: The expectation is wrong on purpose, so the report has a failure to show.
hardware:
  nodes:
    - {name: node-a, shape: small-1gpu}
steps:
  - apply:
      - apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: one-gpu}
        spec:
          devices:
            requests:
              - {name: gpu, exactly: {deviceClassName: "${class.gpu}"}}
      - apiVersion: v1
        kind: Pod
        metadata: {name: user}
        spec:
          resourceClaims: [{name: gpu, resourceClaimName: one-gpu}]
          containers: [{name: main, image: registry.k8s.io/pause:3.10, resources: {claims: [{name: gpu}]}}]
  - name: the claim holds two devices (it cannot)
    expect:
      - allocated: {claim: one-gpu, count: 2}
"""
FIXED_TIME = "2026-01-01T00:00:00Z"


def drakit(*args: str, cwd: Path, seed: str = "0") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    env.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def normalise(results: dict[str, Any]) -> dict[str, Any]:
    """A results dict with everything that differs between two runs of the same cases fixed:
    the run id and times, the command line and worker count, every duration and the timeline."""
    r = copy.deepcopy(results)
    r["run"].update(id="r-normalised", startedAt=FIXED_TIME, finishedAt=FIXED_TIME, wallSeconds=1.0,
                    command=["drakit", "run"], workers=0)
    for case in r["cases"]:
        case["durationSeconds"] = 0.0
        case.pop("timeline", None)  # which worker ran a case, and when
        for step in case["steps"]:
            step["durationSeconds"] = 0.0
    return r


class Runs:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.outputs: dict[str, subprocess.CompletedProcess[str]] = {}

    def results(self, workers: str) -> dict[str, Any]:
        return load_results(self.base / f"out-n{workers}" / "results.json")


def _make_runs(base: Path) -> None:
    (base / "selftest").mkdir(exist_ok=True)
    (base / "selftest" / "deliberate.case.yaml").write_text(FAILING_CASE, encoding="utf-8")
    suites = ROOT / "conformance" / "suites"
    for workers, seed in (("0", "1"), ("2", "2")):
        res = drakit("run", str(suites), "selftest", "--out", f"out-n{workers}", "-n", workers,
                     cwd=base, seed=seed)
        (base / f"run-n{workers}.json").write_text(json.dumps(
            {"returncode": res.returncode, "stdout": res.stdout, "stderr": res.stderr}), encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The two runs, made once per test session: under pytest-xdist the workers share them
    through a lock in the session's common temp folder (pytest-xdist's documented recipe)."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if uid is None:
        base = tmp_path_factory.mktemp("e2e")
        _make_runs(base)
    else:
        import fcntl
        base = tmp_path_factory.getbasetemp().parent / f"drakit-e2e-{uid}"
        base.mkdir(exist_ok=True)
        with open(base / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (base / "run-n2.json").exists():
                _make_runs(base)
    out = Runs(base)
    for workers in ("0", "2"):
        saved = json.loads((base / f"run-n{workers}.json").read_text(encoding="utf-8"))
        res = subprocess.CompletedProcess(["drakit", "run"], saved["returncode"], saved["stdout"], saved["stderr"])
        assert res.returncode == 1, res.stdout + res.stderr  # the deliberate failure
        out.outputs[workers] = res
    return out


def test_reports_of_real_runs_are_the_same_at_n0_and_n2(runs: Runs) -> None:
    one, two = runs.results("0"), runs.results("2")
    assert one["run"]["workers"] == 0 and two["run"]["workers"] == 2
    assert len(one["cases"]) > 50 and one["summary"]["failed"] == 1
    a, b = normalise(one), normalise(two)
    assert a == b  # same cases, same order, same details
    assert render_html(a) == render_html(b)
    assert render_junit(a) == render_junit(b)
    assert render_summary(a, color=False) == render_summary(b, color=False)
    # the files the runs wrote are those renderings (of the unnormalised results)
    for workers, results in (("0", one), ("2", two)):
        out = runs.base / f"out-n{workers}"
        assert (out / "report.html").read_text(encoding="utf-8") == render_html(results)
        assert (out / "junit.xml").read_text(encoding="utf-8") == render_junit(results)
        junit_schema().validate(str(out / "junit.xml"))


def test_run_output_is_plain_without_a_terminal(runs: Runs) -> None:
    for workers, res in runs.outputs.items():
        out = res.stdout
        assert "\r" not in out and "\x1b" not in out, workers  # no terminal: no rewriting, no colour
        lines = out.splitlines()
        total = len(runs.results(workers)["cases"])
        progress = [line for line in lines if line.startswith("[")]
        assert 5 <= len(progress) <= 11 and progress[-1].startswith(f"[{total}/{total}]")
        assert progress[-1].endswith(f"{total - 1} passed  1 failed  0 error  0 skipped")
        assert ("FAILED drakit-selftest/deliberately-failing [reference]: "
                "claim one-gpu: expected 2 allocated devices, got 1") in lines
        assert "failure details (1 of 1):" in lines
        assert "  > 26 |       - allocated: {claim: one-gpu, count: 2}" in lines  # the YAML excerpt
        assert not any(line.startswith("[gw") for line in lines)  # no xdist worker headers
        assert any(line.startswith("core ") and "KEP-4381" in line for line in lines)  # the matrix
        assert "verdict: FAIL" in lines
        assert "    rerun: drakit run selftest/deliberate.case.yaml -k drakit-selftest/deliberately-failing " \
               "--backend reference -n 0" in lines
        assert lines[-1] == (f"drakit: wrote out-n{workers}/results.json, out-n{workers}/junit.xml, "
                             f"out-n{workers}/report.html")
        assert "short test summary" not in out and "=====" not in out  # pytest's own output is off


def test_quiet_run_prints_failures_and_verdict_only(runs: Runs) -> None:
    res = drakit("run", "selftest", "--out", "out-quiet", "-q", cwd=runs.base)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert not any(line.startswith("[") for line in lines)  # no progress
    assert not any("KEP-4381" in line for line in lines)  # no matrix
    assert "failures:" in lines and "verdict: FAIL" in lines
    assert "failure details" not in res.stdout


def test_rerun_command_from_the_report_reruns_the_case(runs: Runs) -> None:
    case = next(c for c in runs.results("0")["cases"] if c["status"] == "failed")
    args = case["rerun"].split()
    assert args[:2] == ["drakit", "run"]
    res = drakit(*args[1:], "--out", "out-rerun", cwd=runs.base)
    assert res.returncode == 1, res.stdout + res.stderr
    again = load_results(runs.base / "out-rerun" / "results.json")
    assert [(c["id"], c["status"]) for c in again["cases"]] == [(case["id"], "failed")]


# ------------------------------------------------------------------------------------ browser

class Dom(HTMLParser):
    """What the browser test checks in the DOM Chromium serialised after loading the page."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.feature_rows: list[str] = []
        self.columns: list[str] = []
        self.failures: list[dict[str, str | None]] = []
        self.verdict_text = ""
        self.filter_visible = False
        self._in_verdict_h2 = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and a.get("data-feature"):
            self.feature_rows.append(a["data-feature"] or "")
        if tag == "th" and a.get("data-column"):
            self.columns.append(a["data-column"] or "")
        if tag == "details" and "failure" in (a.get("class") or ""):
            self.failures.append(a)
        if tag == "h2" and not self.verdict_text:
            self._in_verdict_h2 = True
        if tag == "p" and a.get("id") == "case-filter":
            self.filter_visible = "hidden" not in a

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._in_verdict_h2 = False

    def handle_data(self, data: str) -> None:
        if self._in_verdict_h2:
            self.verdict_text += data


def chromium(*args: str, user_data: Path) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={user_data}"]
    return subprocess.run([str(CHROMIUM), *flags, *args], capture_output=True, text=True, timeout=180)


# A script added to a copy of the page (never to the report itself): where the first failure and
# the timeline are laid out, and whether anything but a .wide box is wider than the window.
PROBE = """<script>
(function () {
  var w = document.documentElement.clientWidth, over = [];
  document.querySelectorAll("body *").forEach(function (e) {
    if (e.getBoundingClientRect().right > w + 1 && !e.closest(".wide")) { over.push(e.tagName + "." + e.className); }
  });
  var f = document.querySelector("details.failure > summary"), tl = document.querySelector("svg.timeline");
  document.body.setAttribute("data-probe", JSON.stringify({
    width: w, overflowing: over.slice(0, 10), scrollWidth: document.documentElement.scrollWidth,
    failure: f ? f.getBoundingClientRect().bottom : null, timeline: tl ? tl.getBoundingClientRect().height : null}));
})();
</script>"""


def probe(report: Path, width: int, tmp_path: Path) -> dict[str, Any]:
    """Layout facts of *report* opened at *width* x 900 in headless Chromium."""
    copy_ = tmp_path / f"probe-{width}.html"
    copy_.write_text(report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    res = chromium("--dump-dom", f"--window-size={width},900", copy_.as_uri(), user_data=tmp_path / f"probe-profile-{width}")
    assert res.returncode == 0, res.stderr[-2000:]
    start = res.stdout.index('data-probe="') + len('data-probe="')
    raw = res.stdout[start:res.stdout.index('"', start)]
    return json.loads(raw.replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs headless Chromium at /usr/bin/chromium "
                                                   "(Debian: apt-get install -y chromium)")
def test_report_of_a_real_run_in_a_browser(runs: Runs, tmp_path: Path) -> None:
    report = runs.base / "out-n2" / "report.html"
    results = runs.results("2")
    res = chromium("--dump-dom", report.as_uri(), user_data=tmp_path / "profile")
    assert res.returncode == 0 and "</html>" in res.stdout, res.stderr[-2000:]
    dom = Dom(res.stdout)
    assert sorted(dom.feature_rows) == sorted(f["id"] for f in results["features"])  # a row per feature
    assert set(dom.columns) == {"reference"}
    assert dom.verdict_text.strip().endswith(f"Verdict: {results['verdict']['result'].upper()}")
    broken = [c for c in results["cases"] if c["status"] in ("failed", "error")]
    assert len(dom.failures) == len(broken) == 1
    assert all("open" in f for f in dom.failures)  # failures are expanded
    assert dom.filter_visible  # the page's script ran (the status filter is shown)
    assert "claim one-gpu: expected 2 allocated devices, got 1" in res.stdout

    # a failing run's first failure is on the first screen at 1400 x 900; no width needs a
    # horizontal scroll of the page (wide tables scroll in their own box); the timeline is drawn
    wide, narrow = probe(report, 1400, tmp_path), probe(report, 800, tmp_path)
    assert wide["failure"] is not None and wide["failure"] < 900, wide
    for layout in (wide, narrow):
        assert not layout["overflowing"] and layout["scrollWidth"] <= layout["width"], layout
        assert layout["timeline"] and layout["timeline"] > 40, layout

    artifacts = Path(os.environ.get("DRAKIT_ARTIFACTS") or runs.base / "out-n2")
    artifacts.mkdir(parents=True, exist_ok=True)
    for width in (1400, 800):
        shot = artifacts / f"report-{width}x900.png"
        res = chromium(f"--screenshot={shot}", f"--window-size={width},900", report.as_uri(),
                       user_data=tmp_path / f"profile-{width}")
        assert res.returncode == 0 and shot.exists() and shot.stat().st_size > 10_000, res.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        print(f"\nbrowser screenshot of the report at {width} x 900: {shot}")
    if artifacts != runs.base / "out-n2":
        shutil.copy2(report, artifacts / "report.html")


def test_report_merges_node_check_cases_into_a_run(runs: Runs) -> None:
    fixture = load_results(ROOT / "tests" / "fixtures" / "results" / "mixed.json")
    node_cases = [c for c in fixture["cases"] if c["backend"] == "node-plugin"]
    (runs.base / "node-check.json").write_text(json.dumps(node_cases), encoding="utf-8")
    res = drakit("report", "out-n0/results.json", "--merge", "node-check.json", "--out", "out-merged", cwd=runs.base)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(res.stdout.splitlines()) == [f"wrote out-merged/{n}" for n in ("junit.xml", "report.html", "results.json")]
    merged = load_results(runs.base / "out-merged" / "results.json")
    assert merged["summary"]["total"] == runs.results("0")["summary"]["total"] + 2
    html = (runs.base / "out-merged" / "report.html").read_text(encoding="utf-8")
    assert 'data-column="node-plugin"' in html and "node-plugin/metadata-file-written" in html
    res = drakit("report", "out-n0/results.json", "--merge", "missing.json", cwd=runs.base)
    assert res.returncode == 2 and "--merge missing.json" in res.stderr
