"""Tests for ``reports``: schema, verdict rule, HTML, JUnit and text renderers.

Fixtures live in ``tests/fixtures/results/*.json`` (fixed times and ids, so output is stable):

- ``all-passed.json``  one backend, every case passed (verdict pass)
- ``incomplete.json``  required cases skipped (verdict incomplete)
- ``mixed.json``       three backends (reference, cluster, and node-plugin as ``drakit
                       node-check`` writes it); failures, an error, a load error, skips of
                       every category, xfail, flaky, divergences between backends; hostile
                       strings and credentials in it on purpose

Golden files ``tests/golden/report.html`` and ``tests/golden/junit.xml`` are the rendering of
``mixed.json``. After an intended change to the output, regenerate them and review the diff::

    DRAKIT_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_reports.py -q
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]

from drakit import reports  # noqa: E402
from drakit.reports import ResultsError, compute_summary, compute_verdict, load_results, validate_results  # noqa: E402
from drakit.reports.render import render_all  # noqa: E402
from drakit.reports import clean_text, divergences, matrix_backends, redact, redact_command  # noqa: E402
import drakit.reports.html as reports_html  # noqa: E402
from drakit.reports.html import render_html  # noqa: E402
from drakit.reports.junit import NO_FEATURE_SUITE, render_junit  # noqa: E402
from drakit.reports.text import render_summary  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "results"
GOLDEN = Path(__file__).parent / "golden"
FIXTURE_NAMES = ("all-passed", "incomplete", "mixed")
HOSTILE = "<script>alert(1)</script>"
# the decision and the failures first, the matrix after them
SECTIONS = ["verdict", "failures", "divergences", "skips", "matrix", "cases", "timeline", "timing", "environment"]
JUNIT_XSD = Path(__file__).parent / "fixtures" / "junit.xsd"


def section(html: str, sid: str) -> str:
    """The HTML of one ``<section id=...>`` of the report."""
    start = html.index(f'<section id="{sid}"')
    return html[start:html.index("</section>", start)]


def fixture(name: str) -> dict[str, Any]:
    return load_results(FIXTURES / f"{name}.json")


@pytest.fixture
def mixed() -> dict[str, Any]:
    return fixture("mixed")


class Page(HTMLParser):
    """Start tags, attributes, text and script bodies of an HTML page, via the stdlib parser."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)

    def all_text(self) -> str:
        return "".join(self.text)

    def with_attr(self, name: str) -> list[tuple[str, dict[str, str | None]]]:
        return [(t, a) for t, a in self.tags if name in a]


# ------------------------------------------------------------------------------------ schema

@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixtures_are_valid_and_consistent(name: str) -> None:
    results = fixture(name)
    assert results["summary"] == compute_summary(results["cases"])
    assert results["verdict"] == compute_verdict(results["cases"])


def test_fixture_verdicts() -> None:
    assert [fixture(n)["verdict"]["result"] for n in FIXTURE_NAMES] == ["pass", "incomplete", "fail"]


def _case(results: dict[str, Any], status: str) -> int:
    return next(i for i, c in enumerate(results["cases"]) if c["status"] == status)


BROKEN: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("schema-version", lambda r: r.update(schemaVersion="drakit.results/v0"), "$.schemaVersion: unsupported"),
    ("missing-run-id", lambda r: r["run"].pop("id"), "$.run: 'id' is a required property"),
    ("bad-status", lambda r: r["cases"][0].update(status="green"), "$.cases[0].status: 'green' is not one of"),
    ("extra-case-key", lambda r: r["cases"][0].update(colour="red"), "$.cases[0]: Additional properties"),
    ("bad-skip-category", lambda r: r["cases"][_case(r, "skipped")]["skip"].update(category="lazy"),
     ".skip.category: 'lazy' is not one of"),
    ("skipped-without-reason", lambda r: r["cases"][_case(r, "skipped")].update(skip=None),
     ".skip: None is not of type 'object'"),
    ("failed-without-failure", lambda r: r["cases"][_case(r, "failed")].update(failure=None),
     ".failure: None is not of type 'object'"),
    ("bad-time", lambda r: r["run"].update(startedAt="yesterday"), "$.run.startedAt: 'yesterday' does not match"),
    ("negative-duration", lambda r: r["cases"][0].update(durationSeconds=-1), "$.cases[0].durationSeconds: -1 is less"),
    ("bad-verdict", lambda r: r["verdict"].update(result="maybe"), "$.verdict.result: 'maybe' is not one of"),
    ("summary-mismatch", lambda r: r["summary"].update(failed=7), "$.summary.failed: is 7 but the cases hold 3"),
    ("unknown-feature", lambda r: r["cases"][0]["features"].append("time-travel"),
     "$.cases[0].features[1]: unknown feature 'time-travel'"),
    ("duplicate-case", lambda r: r["cases"].append(copy.deepcopy(r["cases"][0])), "appears twice"),
]


@pytest.mark.parametrize("mutate,expected", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_results_are_rejected_with_one_clear_line(
        tmp_path: Path, mixed: dict[str, Any], mutate: Callable[[dict[str, Any]], None], expected: str) -> None:
    mutate(mixed)
    if "duplicate" in expected:
        mixed["summary"] = compute_summary(mixed["cases"])
    path = tmp_path / "results.json"
    path.write_text(json.dumps(mixed), encoding="utf-8")
    with pytest.raises(ResultsError) as info:
        load_results(path)
    message = str(info.value)
    assert message.startswith(f"{path}: $"), message
    assert expected in message
    assert "\n" not in message


def test_validate_results_in_memory(mixed: dict[str, Any]) -> None:
    validate_results(mixed)
    mixed["cases"][0]["status"] = "green"
    with pytest.raises(ResultsError, match=r"^results: \$\.cases\[0\]\.status"):
        validate_results(mixed)
    with pytest.raises(ResultsError, match=r"^results: \$: expected a JSON object"):
        validate_results([])


def test_schema_is_open_where_the_contract_is_open(mixed: dict[str, Any]) -> None:
    mixed["environment"]["nodes"] = [{"name": "n1"}]
    mixed["environment"]["backends"]["cluster"]["containerRuntime"] = "containerd 2.1"
    failed = mixed["cases"][_case(mixed, "failed")]["failure"]
    failed["expected"] = [1, "two", {"three": None}]
    failed["diagnostics"]["anything"] = {"nested": [True]}
    validate_results(mixed)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ResultsError, match=r"nope\.json: cannot read"):
        load_results(missing)
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "schemaVersion": "drakit.results/v1",\n  oops\n}\n', encoding="utf-8")
    with pytest.raises(ResultsError, match=r"bad\.json:3:3: not valid JSON"):
        load_results(bad)


# ------------------------------------------------------------------------------------ verdict

def _c(status: str, profile: str = "required", category: str | None = None, cid: str = "f/x") -> dict[str, Any]:
    return {"id": cid, "file": "suite/x.case.yaml", "status": status, "profile": profile,
            "skip": {"category": category, "message": "m"} if category else None}


@pytest.mark.parametrize("cases,result,codes", [
    ([_c("passed")], "pass", []),
    ([_c("passed"), _c("flaky")], "pass", []),
    ([_c("passed"), _c("failed", "optional"), _c("skipped", "optional", "feature-disabled")], "pass", []),
    ([_c("passed"), _c("skipped", category="not-applicable"), _c("skipped", category="backend")], "pass", []),
    ([_c("passed"), _c("failed")], "fail", ["case-failed"]),
    ([_c("passed"), _c("error")], "fail", ["case-failed"]),
    ([_c("passed"), _c("xfail")], "fail", ["case-failed"]),
    ([_c("passed"), _c("error", "optional", cid="suite/x.case.yaml")], "fail", ["load-error"]),  # a file that did not load
    ([_c("passed"), _c("skipped", category="inventory")], "incomplete", ["required-skipped"]),
    ([_c("passed", "optional")], "incomplete", ["nothing-ran"]),
    ([], "incomplete", ["nothing-ran"]),
])
def test_verdict_rule(cases: list[dict[str, Any]], result: str, codes: list[str]) -> None:
    verdict = compute_verdict(cases)
    assert (verdict["result"], verdict["rule"]) == (result, reports.VERDICT_RULE)
    assert [r["code"] for r in verdict["reasons"]] == codes


def test_run_reasons_make_a_passing_run_incomplete_and_survive_a_merge() -> None:
    """An interrupt (a run-level reason) turns pass into incomplete, a failure still wins, and
    merging other cases into the results keeps the interrupt while the case reasons are redone."""
    interrupted = {"code": "interrupted", "message": "interrupted by SIGTERM during the cases: 1 of 3 cases finished, 2 not run",
                   "signal": "SIGTERM", "phase": "cases", "count": 2,
                   "cases": [{"id": "a/b", "backend": "cluster"}, {"id": "a/c", "backend": "cluster"}]}
    assert compute_verdict([_c("passed")], [interrupted])["result"] == "incomplete"
    assert compute_verdict([_c("passed"), _c("failed")], [interrupted])["result"] == "fail"
    assert compute_verdict([_c("passed")], [{"code": "from-a-newer-drakit", "message": "x"}])["result"] == "incomplete"
    results = fixture("all-passed")
    results["verdict"] = compute_verdict(results["cases"], [interrupted])
    validate_results(results)
    merged = reports.merge_cases(results, [{**results["cases"][0], "id": "extra/case", "backend": "node-plugin",
                                            "status": "failed", "failure": {"summary": "x", "detail": ""}}])
    assert merged["verdict"]["result"] == "fail"
    assert [r["code"] for r in merged["verdict"]["reasons"]] == ["case-failed", "interrupted"]


def test_summary_counts() -> None:
    assert compute_summary([_c("passed"), _c("passed"), _c("xfail")]) == {
        "total": 3, "passed": 2, "failed": 0, "error": 0, "skipped": 0, "xfail": 1, "flaky": 0}


# ------------------------------------------------------------------------------------ golden

def _check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DRAKIT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8", newline="\n")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(list(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                                 f"golden/{name}", "rendered"))[:60])
        pytest.fail(f"{name} differs from the golden file (DRAKIT_UPDATE_GOLDEN=1 to accept):\n{diff}")


def test_golden_html(mixed: dict[str, Any]) -> None:
    _check_golden("report.html", render_html(mixed))


def test_golden_junit(mixed: dict[str, Any]) -> None:
    _check_golden("junit.xml", render_junit(mixed))


def test_render_all_writes_both_reports(tmp_path: Path, mixed: dict[str, Any]) -> None:
    written = render_all(mixed, tmp_path / "out")
    assert written == {"html": tmp_path / "out" / "report.html", "junit": tmp_path / "out" / "junit.xml"}
    assert written["html"].read_text(encoding="utf-8") == render_html(mixed)
    assert written["junit"].read_text(encoding="utf-8") == render_junit(mixed)


def test_render_all_refuses_invalid_results(tmp_path: Path, mixed: dict[str, Any]) -> None:
    del mixed["verdict"]
    with pytest.raises(ResultsError, match="'verdict' is a required property"):
        render_all(mixed, tmp_path)
    assert not (tmp_path / "report.html").exists()


# ------------------------------------------------------------------------------------ determinism

_RENDER_SCRIPT = """
import hashlib, sys
from drakit.reports import load_results
from drakit.reports.html import render_html
from drakit.reports.junit import render_junit
from drakit.reports.text import render_summary
from drakit.reports.compare import compare_results, render_compare_html, render_compare_text
r = load_results(sys.argv[2])
other = load_results(sys.argv[3])
c = compare_results(other, r)
out = render_html(r) + render_junit(r) + render_summary(r, color=True) + render_compare_html(c) + render_compare_text(c)
print(hashlib.sha256(out.encode("utf-8")).hexdigest())
"""


def test_output_is_stable_across_hash_seeds() -> None:
    digests = set()
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", _RENDER_SCRIPT, str(ROOT), str(FIXTURES / "mixed.json"),
                               str(FIXTURES / "all-passed.json")],
                              env=env, capture_output=True, text=True, check=True)
        digests.add(proc.stdout.strip())
    assert len(digests) == 1


def test_output_does_not_depend_on_case_order(mixed: dict[str, Any]) -> None:
    shuffled = copy.deepcopy(mixed)
    random.Random(7).shuffle(shuffled["cases"])  # as a -n 2 run may finish them
    assert render_html(shuffled) == render_html(mixed)
    assert render_junit(shuffled) == render_junit(mixed)
    assert render_summary(shuffled, color=False) == render_summary(mixed, color=False)


# ------------------------------------------------------------------------------------ HTML

def test_html_sections_in_order(mixed: dict[str, Any]) -> None:
    page = Page(render_html(mixed))
    assert [a["id"] for t, a in page.tags if t == "section"] == SECTIONS


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_html_matrix_has_one_row_per_feature(name: str) -> None:
    results = fixture(name)
    html = render_html(results)
    page = Page(section(html, "matrix"))
    rows = [a["data-feature"] for t, a in page.with_attr("data-feature") if t == "tr"]
    # features with cases first, then the ones without (folded), each in registry order
    with_cases = {c_feature for c in results["cases"] for c_feature in c["features"]}
    ids = [f["id"] for f in results["features"]]
    assert rows == [f for f in ids if f in with_cases] + [f for f in ids if f not in with_cases]
    folded = section(html, "matrix").split('<details class="empty-features">', 1)
    assert all(f"data-feature=\"{f}\"" in folded[1] for f in ids if f not in with_cases) if len(folded) > 1 \
        else set(ids) <= with_cases
    columns = [a["data-column"] for t, a in page.with_attr("data-column")]
    tables = 2 if len(folded) > 1 and with_cases & set(ids) else 1
    assert columns == list(results["environment"]["backends"]) * tables
    cells = [a["data-backend"] for t, a in page.with_attr("data-backend") if t == "td"]
    assert cells == list(results["environment"]["backends"]) * len(rows)
    text = page.all_text()
    assert all(f"KEP-{f['kep']}" in text for f in results["features"])


def test_html_matrix_cells(mixed: dict[str, Any]) -> None:
    html = render_html(mixed)
    # extended-resource has no case on either backend; device-status only on the cluster
    row = html.split('data-feature="extended-resource"')[1].split("</tr>")[0]
    assert row.count("no cases") == 3
    row = html.split('data-feature="core"')[1].split("</tr>")[0]
    assert "✔ passed" in row and "✘ failed" in row and "4 passed · 0 failed · 0 skipped" in row


def test_html_links_resolve_and_every_case_has_an_anchor(mixed: dict[str, Any]) -> None:
    page = Page(render_html(mixed))
    ids = {a["id"] for _, a in page.with_attr("id")}
    internal = [a["href"] for t, a in page.tags if t == "a" and (a.get("href") or "").startswith("#")]
    assert internal and all(h[1:] in ids for h in internal)
    rows = [a for t, a in page.tags if t == "tr" and "data-status" in a]
    assert len(rows) == len(mixed["cases"]) == len({a["id"] for a in rows})


def test_html_failure_detail(mixed: dict[str, Any]) -> None:
    html = render_html(mixed)
    page = Page(html)
    failures = [a for t, a in page.tags if t == "details" and "failure" in (a.get("class") or "")]
    assert len(failures) == 5 and all("open" in a for a in failures)
    text = page.all_text()
    assert "steps[1].expect[0]: unknown field 'matchh'" in text  # the load error is shown too
    assert '<tr class="mark"><td class="no">22</td><td>▶</td>' in html
    assert "drakit run conformance/suites/core/match-attribute-constraint.case.yaml" in text
    assert "+{request: gpus, device: gpu-3}" in text


def test_html_statuses_have_text_and_symbol(mixed: dict[str, Any]) -> None:
    text = Page(render_html(mixed)).all_text()
    for label in ("✔ passed", "✘ failed", "⚠ error", "↷ skipped", "⊘ xfail", "↻ flaky"):
        assert label in text


def test_html_groups_skips_by_category(mixed: dict[str, Any]) -> None:
    page = Page(render_html(mixed))
    groups = [a["id"] for t, a in page.tags if t == "details" and (a.get("id") or "").startswith("skips-")]
    used = {c["skip"]["category"] for c in mixed["cases"] if c["status"] == "skipped"}
    assert len(used) >= 6  # the fixture skips in nearly every category
    assert groups == [f"skips-{c}" for c in reports.SKIP_CATEGORIES if c in used]


def test_html_is_self_contained(mixed: dict[str, Any]) -> None:
    html = render_html(mixed)
    page = Page(html)
    assert not [t for t, a in page.tags if t in ("link", "img", "iframe", "object", "embed")]
    assert not [a for t, a in page.tags if t == "script" and "src" in a]
    assert "{{" not in html and "{%" not in html and "Undefined" not in html


EVIL = f"{HOSTILE} \"dq\" 'sq' & &amp; \x07\x1b[31m\x00 \u202eRLO \ud800 </pre></td></table>"


def hostile_results(mixed: dict[str, Any]) -> dict[str, Any]:
    """mixed.json with hostile text in every free-form place the renderers show: run and
    environment fields, a backend's name, gate names, case ids, titles, steps, skip and failure
    texts, YAML source lines, object names, device attributes, events and log lines."""
    r = copy.deepcopy(mixed)
    evil = EVIL
    r["run"]["id"] = evil
    r["run"]["command"].append(evil)
    r["environment"]["hardwareProfile"] = evil
    r["environment"]["drivers"].append(evil)
    r["environment"]["backends"]["cluster"]["kubernetesVersion"] = evil
    r["environment"]["backends"]["cluster"]["featureGates"][evil] = True
    r["environment"]["backends"]["cluster"]["nodes"].append({"name": evil, "labels": {evil: evil}})
    r["environment"][evil] = {evil: evil}
    r["features"][0]["title"] = evil
    r["features"][0]["gates"].append(evil)
    for case in r["cases"]:
        case["title"] = evil
        case["description"] = evil
        case["rerun"] = f"drakit run -k '{evil}'"
        for step in case["steps"]:
            step["name"] = evil
            step["kind"] = evil
        if case["skip"]:
            case["skip"]["message"] = evil
        if case["failure"]:
            failure = case["failure"]
            failure["summary"] = evil
            failure["detail"] = f"line one\n{evil}"
            failure["yaml"] = {"file": evil, "startLine": 3, "markLine": 4,
                               "lines": [f"  - name: {evil}", f"    value: '{evil}'"]}
            failure["expected"] = {"attributes": {evil: {"string": evil}}}
            failure["actual"] = [evil, {"device": evil}]
            failure["diff"] = f"--- expected\n+++ actual\n-{evil}\n+{evil}\n"
            failure["diagnostics"] = {
                "objects": [{"kind": "ResourceSlice", "metadata": {"name": evil, "namespace": evil},
                             "spec": {"devices": [{"name": evil, "attributes": {evil: {"string": evil}}}]}}],
                "events": [f"Warning {evil}", {"reason": evil, "message": evil}],
                "logs": {evil: f"I1129 ok\nE1129 {evil}\n" * 3},
                evil: evil,
            }
    # a backend whose very name is hostile, with a case that diverges from the reference
    core = r["cases"][0]
    core["id"] = f"core/{evil}"
    r["environment"]["backends"][evil] = {"kind": evil, "kubernetesVersion": evil, "featureGates": {evil: False}}
    twin = copy.deepcopy(core)
    twin.update(backend=evil, status="skipped", skip={"category": "other", "message": evil})
    r["cases"].append(twin)
    r["summary"] = compute_summary(r["cases"])
    r["verdict"] = compute_verdict(r["cases"])
    validate_results(r)
    return r


def test_html_escapes_hostile_text(mixed: dict[str, Any]) -> None:
    results = hostile_results(mixed)
    html = render_html(results)
    page = Page(html)
    allowed = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "h4", "p",
               "code", "nav", "a", "main", "section", "span", "strong", "ul", "ol", "li", "table", "thead",
               "tbody", "tr", "th", "td", "br", "details", "summary", "pre", "div", "label", "select",
               "option", "footer", "script",
               # the timeline (inline SVG)
               "svg", "g", "rect", "line", "text"}
    assert {t for t, _ in page.tags} <= allowed
    assert len(page.scripts) == 1 and "alert" not in page.scripts[0]
    assert not [(t, k) for t, a in page.tags for k in a if k.startswith("on")]
    assert not [v for _, a in page.tags for v in a.values() if v and "javascript:" in v.lower()]
    text = page.all_text()
    assert HOSTILE in text  # shown as text...
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # ...because it was escaped
    assert "<script>alert" not in html and "</pre></td></table>" not in html
    assert '"dq"' in text and "'sq'" in text and "& &amp;" in text
    assert "\\x07\\x1b[31m\\x00 \\u202eRLO \ufffd" in text  # control characters made visible
    assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in html)
    assert "\u202e" not in html
    html.encode("utf-8")  # no lone surrogate left
    # the hostile text reached every place it was put: object names, YAML lines, logs, events,
    # device attributes, a backend column and its divergence row
    for needle in (f"ResourceSlice {HOSTILE}", f"value: '{HOSTILE}", f"E1129 {HOSTILE}", f"Warning {HOSTILE}",
                   f'"string": "{HOSTILE}'):
        assert needle in text, needle
    heads = [a["data-column"] for t, a in page.with_attr("data-column")]
    assert heads[-1].startswith(HOSTILE)
    assert any(HOSTILE in (a.get("data-case") or "") for t, a in page.with_attr("data-case"))


def test_junit_survives_hostile_text(mixed: dict[str, Any]) -> None:
    xml = render_junit(hostile_results(mixed))
    junit_schema().validate(xml)
    root = ET.fromstring(xml)
    names = [tc.get("name") or "" for tc in root.iter("testcase")]
    assert any(HOSTILE in n for n in names)
    bodies = [el.text or "" for el in root.iter() if el.tag in ("failure", "error")]
    assert any(HOSTILE in b for b in bodies)
    assert "\x07" not in xml and "\x00" not in xml and "\x1b" not in xml
    assert "<script>" not in xml


def test_text_summary_survives_hostile_text(mixed: dict[str, Any]) -> None:
    out = render_summary(hostile_results(mixed), color=False)
    assert "\x1b" not in out and "\x07" not in out
    assert HOSTILE in out  # terminals do not read markup; shown verbatim


# ------------------------------------------------------------------------------------ JUnit

@functools.lru_cache(maxsize=1)
def junit_schema() -> Any:
    """tests/fixtures/junit.xsd (the Jenkins "junit-10" shape) loaded with xmlschema."""
    import xmlschema  # the test extra: pip install -e '.[test]'
    return xmlschema.XMLSchema(str(JUNIT_XSD))


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_junit_validates_against_the_jenkins_xsd(name: str) -> None:
    junit_schema().validate(render_junit(fixture(name)))


@pytest.mark.parametrize("breakage", [
    ('<testsuites name="drakit"', '<testsuites skipped="1" name="drakit"'),   # not a junit-10 attribute
    ('<testsuite name="core"', '<testsuite'),                                 # name is required
    ('time="0.', 'time="-0.'),                                                 # times are >= 0
    ("</properties>", "</properties><properties/>"),                          # one properties block
    ("<properties>", "<properties><flavour/>"),                               # unknown element
], ids=["testsuites-skipped", "suite-without-name", "negative-time", "two-properties", "unknown-element"])
def test_the_xsd_rejects_what_ci_readers_reject(mixed: dict[str, Any], breakage: tuple[str, str]) -> None:
    xml = render_junit(mixed)
    assert breakage[0] in xml
    assert not junit_schema().is_valid(xml.replace(breakage[0], breakage[1], 1))


def test_junit_structure(mixed: dict[str, Any]) -> None:
    root = ET.fromstring(render_junit(mixed))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    first = {c["features"][0] for c in mixed["cases"] if c["features"]}
    expected = [f["id"] for f in mixed["features"] if f["id"] in first] + [NO_FEATURE_SUITE]
    assert [s.get("name") for s in suites] == expected
    testcases = list(root.iter("testcase"))
    assert len(testcases) == len(mixed["cases"]) == int(root.get("tests") or 0)
    for suite in suites:
        cases = suite.findall("testcase")
        assert int(suite.get("tests") or 0) == len(cases)
        assert {p.get("name") for p in suite.iter("property")} >= {"drakit.version", "python.version",
                                                                   "backend.reference", "backend.cluster"}
        for tc in cases:
            assert tc.get("classname") == (f"drakit.{suite.get('name')}" if suite.get("name") != NO_FEATURE_SUITE
                                           else "drakit")
            assert tc.get("time") is not None
    skipped = list(root.iter("skipped"))
    assert root.get("skipped") is None  # not part of the junit-10 <testsuites>
    assert len(skipped) == mixed["summary"]["skipped"] + mixed["summary"]["xfail"] == sum(
        int(s.get("skipped") or 0) for s in suites)
    assert all((s.get("message") or "").startswith("[") and len(s.get("message") or "") > 3 for s in skipped)
    assert sum((s.get("message") or "").startswith("[xfail] ") for s in skipped) == 1
    failures = list(root.iter("failure"))
    errors = list(root.iter("error"))
    assert (len(failures), len(errors)) == (mixed["summary"]["failed"], mixed["summary"]["error"])
    for el in failures + errors:
        assert el.get("message") and "\n" not in (el.get("message") or "")
        assert "rerun: drakit " in (el.text or "")


def test_junit_gate_properties(mixed: dict[str, Any]) -> None:
    root = ET.fromstring(render_junit(mixed))
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "list-attributes")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["gate.reference.DRAListTypeAttributes"] == "false"
    assert props["gate.cluster.DRAListTypeAttributes"] == "true"
    assert props["feature.kep"] == "KEP-5491"


def test_junit_multi_feature_case_listed_once_under_first_feature(mixed: dict[str, Any]) -> None:
    root = ET.fromstring(render_junit(mixed))
    where = [(s.get("name"), tc.get("name")) for s in root.iter("testsuite") for tc in s.iter("testcase")
             if (tc.get("name") or "").startswith("prioritized-list/")]
    assert where == [("prioritized-list", "prioritized-list/falls-back-to-second-alternative[reference]"),
                     ("prioritized-list", "prioritized-list/falls-back-to-second-alternative[cluster]")]


# ------------------------------------------------------------------------------------ credentials, text

def test_credentials_never_appear(mixed: dict[str, Any]) -> None:
    assert "sekrit" in json.dumps(mixed)  # the fixture does hold them
    for out in (render_html(mixed), render_junit(mixed), render_summary(mixed, color=False)):
        assert "sekrit" not in out
    text = Page(render_html(mixed)).all_text()
    assert "--token REDACTED" in text and "--password=REDACTED" in text
    assert "Bearer REDACTED" in text


def test_text_summary(mixed: dict[str, Any]) -> None:
    plain = render_summary(mixed, color=False)
    assert "\x1b" not in plain
    lines = plain.splitlines()
    assert "verdict: FAIL" in lines
    assert any(line.startswith("core ") and "passed 4/0/0" in line and "FAILED 2/1/1" in line for line in lines)
    assert "no cases: extended-resource" in plain
    colored = render_summary(mixed, color=True)
    assert "\x1b[1;31mFAIL\x1b[0m" in colored
    passing = render_summary(fixture("all-passed"), color=False)
    assert "verdict: PASS" in passing and "failures:" not in passing


# ------------------------------------------------------------------------------------ backends, divergences

def test_matrix_columns_are_the_backends_that_ran_cases(mixed: dict[str, Any]) -> None:
    assert matrix_backends(mixed) == ["reference", "cluster", "node-plugin"]
    # a case file that did not load is reported on the pseudo-backend "-": no matrix column
    broken = next(c for c in mixed["cases"] if reports.is_load_error(c))
    broken["backend"] = "-"
    assert "-" in reports.backend_order(mixed) and matrix_backends(mixed) == ["reference", "cluster", "node-plugin"]
    page = Page(section(render_html(mixed), "matrix"))
    assert [a["data-column"] for _, a in page.with_attr("data-column")][:3] == ["reference", "cluster", "node-plugin"]
    # a backend the environment does not list still gets a column when its cases name features
    extra = copy.deepcopy(mixed["cases"][0])
    extra["backend"] = "kind-cluster"
    mixed["cases"].append(extra)
    assert matrix_backends(mixed)[-1] == "kind-cluster"


def test_node_plugin_column_shows_node_check_results(mixed: dict[str, Any]) -> None:
    html = render_html(mixed)
    head = section(html, "matrix").split("</thead>")[0]
    assert 'data-column="node-plugin">node-plugin<br><span class="ftitle">v1.37.2 (kubelet on kwok-node-0)' in head
    row = section(html, "matrix").split('data-feature="device-metadata"')[1].split("</tr>")[0]
    node_cell = row.split('data-backend="node-plugin"')[1]
    assert "✘ failed" in node_cell and "node-plugin/metadata-file-written" in node_cell
    assert "sekrit-node" not in html  # the node-plugin's registration token is withheld


def test_divergences_pair_up_statuses_of_one_case(mixed: dict[str, Any]) -> None:
    found = divergences(mixed)
    ids = [cid for cid, _ in found]
    assert ids[0] == "core/match-attribute-constraint"
    assert {b: c["status"] for b, c in found[0][1].items()} == {"reference": "passed", "cluster": "failed"}
    assert "derived-attributes/cel-derived-memory" not in ids  # skipped on both: same status
    assert not any(cid.startswith("node-plugin/") for cid in ids)  # ran on one backend only
    page = Page(section(render_html(mixed), "divergences"))
    assert [a["data-case"] for t, a in page.with_attr("data-case") if t == "tr"] == ids
    same = copy.deepcopy(mixed)
    for case in same["cases"]:
        if case["backend"] == "cluster":
            case["status"] = next((c["status"] for c in same["cases"]
                                   if c["id"] == case["id"] and c["backend"] == "reference"), case["status"])
    assert divergences(same) == []


def test_matrix_row_flags_its_divergent_cases(mixed: dict[str, Any]) -> None:
    matrix = section(render_html(mixed), "matrix")
    core = matrix.split('data-feature="core"')[1].split("</tr>")[0]
    assert '<a class="div-mark" href="#divergences">≠ 2 cases differ between backends</a>' in core
    derived = matrix.split('data-feature="derived-attributes"')[1].split("</tr>")[0]
    assert "div-mark" not in derived


def test_big_skip_groups_start_collapsed(mixed: dict[str, Any]) -> None:
    template = next(c for c in mixed["cases"] if c["status"] == "skipped" and c["skip"]["category"] == "inventory")
    for i in range(reports_html.OPEN_SKIP_GROUP):
        twin = copy.deepcopy(template)
        twin["id"] = f"consumable-capacity/twin-{i:02d}"
        mixed["cases"].append(twin)
    page = Page(render_html(mixed))
    groups = {a["id"]: "open" in a for t, a in page.tags if t == "details" and (a.get("id") or "").startswith("skips-")}
    assert groups["skips-inventory"] is False and groups["skips-feature-disabled"] is True


def test_long_texts_are_cut_with_a_visible_note(mixed: dict[str, Any]) -> None:
    failure = mixed["cases"][next(i for i, c in enumerate(mixed["cases"]) if c["status"] == "failed")]["failure"]
    failure["diagnostics"]["logs"] = {"driver": "".join(f"line {i:06d}\n" for i in range(20000)) + "FATAL at the end\n"}
    failure["detail"] = "D" * (reports_html.TEXT_LIMIT + 500)
    html = render_html(mixed)
    text = Page(html).all_text()
    assert "FATAL at the end" in text and "line 000000" in text  # head and tail of the log are kept
    assert "characters cut here; the full log is in results.json" in text
    assert text.count("✂ cut:") == 2
    assert "the full text is in results.json" in text


# ------------------------------------------------------------------------------------ text helpers

def test_clean_text_makes_controls_and_bidi_overrides_visible() -> None:
    assert clean_text("a\x07b\x1b[31m\u202eX\ud800\r\nq\tz\x85") == "a\\x07b\\x1b[31m\\u202eX\ufffd\nq\tz\\x85"


def test_redaction_masks_url_passwords_and_bearer_tokens() -> None:
    value, dropped = redact({"server": "https://admin:hunter2@10.0.0.1:6443", "apiKey": "k",
                             "note": "Authorization: Bearer abcdefgh12345"})
    assert dropped == 1 and value == {"server": "https://REDACTED@10.0.0.1:6443",
                                      "note": "Authorization: Bearer REDACTED"}
    assert redact_command(["drakit", "--server=https://u:p@h", "--token", "t"]) == [
        "drakit", "--server=https://REDACTED@h", "--token", "REDACTED"]


def test_quiet_summary_has_no_matrix(mixed: dict[str, Any]) -> None:
    quiet = render_summary(mixed, color=False, matrix=False)
    full = render_summary(mixed, color=False)
    assert "KEP-4381" in full and "KEP-4381" not in quiet
    assert not quiet.startswith("\n") and quiet.splitlines()[0].startswith("divergences: 9 cases")
    for line in ("verdict: FAIL", "failures:"):
        assert line in quiet.splitlines() and line in full.splitlines()


def test_progress_line() -> None:
    from drakit.reports.text import progress_line
    assert progress_line(7, 70, {"passed": 6, "failed": 1}, color=False) == \
        "[ 7/70]  6 passed  1 failed  0 error  0 skipped"
    assert progress_line(3, None, {}, color=False) == "[3]  0 passed  0 failed  0 error  0 skipped"
    assert "\x1b[1;31m1 failed\x1b[0m" in progress_line(1, 2, {"failed": 1}, color=True)
    assert "\x1b" not in progress_line(1, 2, {"passed": 1}, color=True)  # only trouble is painted


# ------------------------------------------------------------------------------------ merging node-check cases

def test_merge_node_check_cases_adds_a_column(mixed: dict[str, Any]) -> None:
    from drakit.reports import merge_cases
    base = fixture("all-passed")
    node_cases = [c for c in mixed["cases"] if c["backend"] == "node-plugin"]
    merged = merge_cases(base, node_cases)
    assert matrix_backends(merged) == [*base["environment"]["backends"], "node-plugin"]
    assert merged["environment"]["backends"]["node-plugin"] == {
        "kind": "node-plugin", "kubernetesVersion": "not reported", "featureGates": {}}
    assert merged["summary"]["total"] == base["summary"]["total"] + 2
    assert merged["verdict"]["result"] == "pass"  # the failing node case is optional
    assert merge_cases(merged, node_cases) == merged  # merging twice changes nothing
    assert base["summary"]["total"] == len(base["cases"])  # the input is left alone
    with_env = merge_cases(base, node_cases, mixed["environment"]["backends"])
    assert with_env["environment"]["backends"]["node-plugin"]["provider"] == "local"
    required = copy.deepcopy(node_cases)
    required[1]["profile"] = "required"
    assert merge_cases(base, required)["verdict"]["result"] == "fail"
    page = Page(section(render_html(merged), "matrix"))
    assert [a["data-column"] for _, a in page.with_attr("data-column")][-1] == "node-plugin"
    bad = copy.deepcopy(node_cases)
    bad[0]["features"] = ["time-travel"]
    with pytest.raises(ResultsError, match="unknown feature 'time-travel'"):
        merge_cases(base, bad)


def test_an_inventory_skip_is_aside_when_another_case_of_its_behaviour_passed() -> None:
    def case(cid: str, status: str, behaviour: str, category: str | None = None) -> dict[str, Any]:
        c: dict[str, Any] = {"id": cid, "backend": "cluster", "status": status, "profile": "required",
                             "behaviour": behaviour}
        if category:
            c["skip"] = {"category": category, "message": "m"}
        return c
    proven = [case("driver/admin-access", "passed", "admin-access"),
              case("driver/admin-access-shared", "skipped", "admin-access", "inventory")]
    assert compute_verdict(proven)["result"] == "pass"
    alone = [case("driver/prepare", "passed", "prepare"),
             case("driver/admin-access-shared", "skipped", "admin-access", "inventory")]
    assert compute_verdict(alone)["result"] == "incomplete"
    other = [case("driver/admin-access", "passed", "admin-access"),
             case("driver/admin-access-shared", "skipped", "admin-access", "gate-unknown")]
    assert compute_verdict(other)["result"] == "incomplete"


def test_a_failed_driver_case_shows_the_driver_log_in_junit_and_html() -> None:
    from drakit.reports.html import _diagnostics
    from drakit.reports.junit import _failure_body
    log = {"files": ["out/driver-logs/drakit-driver-1-plugin.log"], "errors": 1,
           "lines": ["drakit-driver-1-plugin: E1203 10:00:00 update status: shareID is required",
                     "drakit-driver-1-plugin: I1203 10:00:00 prepared claim"]}
    case = {"id": "driver/consumable-capacity", "backend": "cluster", "file": "optional.case.yaml", "line": 3,
            "failure": {"summary": "pod p2 not running", "detail": "", "diagnostics": {"driverLog": log}}}
    body = _failure_body(case)
    assert "driver log while the case ran (1 error line(s) first):" in body and "shareID is required" in body
    view = _diagnostics({"driverLog": log}, 10_000)
    assert "shareID is required" in view["logs"][0]["text"] and not view["other"]
    assert "drakit-driver-1-plugin.log" in view["logs"][0]["name"]
