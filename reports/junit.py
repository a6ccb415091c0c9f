"""JUnit XML for CI systems, written by us from a results dict (not pytest's ``--junitxml``).

Layout: ``<testsuites>`` holding one ``<testsuite name="<feature id>">`` per feature that has
cases, in registry order. A case is listed once, under its first feature, as
``<testcase classname="drakit.<feature id>" name="<case id>[<backend>]">``; classname + name
stay stable across runs so CI history and flake tracking work. Failed cases carry
``<failure>``, errors ``<error>``, skips ``<skipped message="[category] message">`` and xfail
``<skipped message="[xfail] ...">``. Only elements and attributes of the Jenkins "junit-10"
layout are used (no testcase-level properties, no file/line attributes); the tests validate
every rendering against ``tests/fixtures/junit.xsd``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from drakit.reports import backend_order, first_line, is_load_error, sorted_cases

__all__ = ["render_junit", "NO_FEATURE_SUITE"]

NO_FEATURE_SUITE = "no-feature"  # suite for cases that name no feature (e.g. a file that did not load)
BODY_LIMIT = 8 * 1024  # characters of one failure body; the full text is in report.html / results.json

# Characters XML 1.0 cannot carry at all, even escaped.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """*text* without the characters XML 1.0 forbids."""
    return _XML_ILLEGAL.sub("", text)


def _attr(text: str) -> str:
    """An attribute value on one line, without forbidden characters."""
    return " ".join(xml_text(text).split())


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _cut(text: str) -> str:
    if len(text) <= BODY_LIMIT:
        return text
    return text[:BODY_LIMIT] + f"\n... {len(text) - BODY_LIMIT} more characters in report.html / results.json"


def _failure_body(case: Mapping[str, Any]) -> str:
    failure = case["failure"]
    parts = [failure["summary"], ""]
    where = f"{case['file']}:{case['line']}" if case.get("line") else case["file"]
    parts.append(f"case: {case['id']} [{case['backend']}] at {where}")
    if failure.get("detail"):
        parts += ["", failure["detail"]]
    excerpt = failure.get("yaml")
    if excerpt:
        parts += ["", f"{excerpt['file']}:"]
        for i, line in enumerate(excerpt["lines"]):
            number = excerpt["startLine"] + i
            marker = ">" if number == excerpt["markLine"] else " "
            parts.append(f"{marker}{number:5d} | {line}")
    if failure.get("diff"):
        parts += ["", failure["diff"].rstrip("\n")]
    events = (failure.get("diagnostics") or {}).get("events") or []
    if isinstance(events, list) and events:
        parts += ["", "events:"] + [f"  {e}" for e in events[:20]]
    driver_log = (failure.get("diagnostics") or {}).get("driverLog")
    if isinstance(driver_log, Mapping) and driver_log.get("lines"):
        parts += ["", f"driver log while the case ran ({driver_log.get('errors', 0)} error line(s) first):"]
        parts += [f"  {line}" for line in list(driver_log["lines"])[:40]]
    if case.get("rerun"):
        parts += ["", f"rerun: {case['rerun']}"]
    return xml_text(_cut("\n".join(parts)))


def _suite_properties(results: Mapping[str, Any], feature: Mapping[str, Any] | None,
                      backends: list[str]) -> list[tuple[str, str]]:
    run = results["run"]
    env = results["environment"]["backends"]
    props = [("drakit.version", run["kitVersion"]), ("python.version", run["python"]),
             ("pytest.version", run["pytest"]), ("run.id", run["id"])]
    for name in backends:
        info = env.get(name)
        if info:
            props.append((f"backend.{name}", f"{info.get('kind', '')} {info.get('kubernetesVersion', '')}".strip()))
    if feature is not None:
        props += [("feature.kep", f"KEP-{feature['kep']}"), ("feature.stage", feature["stage"]),
                  ("feature.defaultOn", "true" if feature["defaultOn"] else "false")]
        for name in backends:
            gates = env.get(name, {}).get("featureGates", {})
            for gate in feature["gates"]:
                value = gates.get(gate)
                props.append((f"gate.{name}.{gate}", "unknown" if value is None else str(value).lower()))
    return props


def _testcase(parent: ET.Element, case: Mapping[str, Any], classname: str) -> None:
    el = ET.SubElement(parent, "testcase", {
        "classname": _attr(classname),
        "name": _attr(f"{case['id']}[{case['backend']}]"),
        "time": _seconds(case["durationSeconds"]),
    })
    status = case["status"]
    failure: Mapping[str, Any] = case.get("failure") or {}
    skip: Mapping[str, Any] = case.get("skip") or {}
    if status in ("failed", "error"):
        kind = "failure" if status == "failed" else "error"
        etype = "drakit.LoadError" if is_load_error(case) else f"drakit.{kind}"
        child = ET.SubElement(el, kind, {"message": _attr(first_line(failure["summary"])) or status,
                                          "type": etype})
        child.text = _failure_body(case)
    elif status == "skipped":
        ET.SubElement(el, "skipped", {
            "message": _attr(f"[{skip['category']}] {first_line(skip['message']) or 'no reason given'}"),
            "type": f"drakit.skip.{skip['category']}"})
    elif status == "xfail":
        reason = (first_line(failure["summary"]) if failure else "") or \
                 (first_line(skip["message"]) if skip else "") or "expected failure"
        ET.SubElement(el, "skipped", {"message": _attr(f"[xfail] {reason}"), "type": "drakit.xfail"})
    elif status == "flaky":
        out = ET.SubElement(el, "system-out")
        note = first_line(failure["summary"]) if failure else ""
        out.text = xml_text("flaky: passed on rerun" + (f"; earlier attempt: {note}" if note else ""))


def _counts(cases: list[Mapping[str, Any]]) -> dict[str, str]:
    return {
        "tests": str(len(cases)),
        "failures": str(sum(c["status"] == "failed" for c in cases)),
        "errors": str(sum(c["status"] == "error" for c in cases)),
        "skipped": str(sum(c["status"] in ("skipped", "xfail") for c in cases)),
        "time": _seconds(sum(c["durationSeconds"] for c in cases)),
    }


def build_junit(results: Mapping[str, Any]) -> ET.Element:
    """The ``<testsuites>`` element for *results* (already validated)."""
    backends = backend_order(results)
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for case in sorted_cases(results):
        groups.setdefault(case["features"][0] if case["features"] else NO_FEATURE_SUITE, []).append(case)
    totals = _counts(results["cases"])
    del totals["skipped"]  # the Jenkins (junit-10) layout has no skipped count on <testsuites>
    root = ET.Element("testsuites", {"name": "drakit", **totals})
    suites: list[tuple[str, Mapping[str, Any] | None]] = [
        (f["id"], f) for f in results["features"] if f["id"] in groups]
    if NO_FEATURE_SUITE in groups:
        suites.append((NO_FEATURE_SUITE, None))
    for name, feature in suites:
        cases = groups[name]
        suite = ET.SubElement(root, "testsuite", {"name": name, **_counts(cases),
                                                  "timestamp": results["run"]["startedAt"]})
        props = ET.SubElement(suite, "properties")
        for key, value in _suite_properties(results, feature, backends):
            ET.SubElement(props, "property", {"name": _attr(key), "value": _attr(value)})
        classname = f"drakit.{name}" if feature is not None else "drakit"
        for case in cases:
            _testcase(suite, case, classname)
    return root


def render_junit(results: Mapping[str, Any]) -> str:
    """The JUnit XML document for *results* as a string (UTF-8 declared, indented, LF newlines)."""
    root = build_junit(results)
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
