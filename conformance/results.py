"""Controller-side results: turns pytest reports into one ``results.json`` and the reports.

Works the same with and without pytest-xdist: everything a case knows travels in the report's
``user_properties`` as JSON, and only the controller writes files.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from .features import FEATURES

SCHEMA_VERSION = "drakit.results/v1"
BACKEND_RANK = {"reference": 0, "cluster": 1}
_FEATURE_RANK = {f.id: i for i, f in enumerate(FEATURES)}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _kit_version() -> str:
    try:
        from importlib.metadata import version
        return version("drakit")
    except Exception:
        return "0+unknown"


def parse_skip(longrepr: Any) -> dict[str, str]:
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    text = text.removeprefix("Skipped: ")
    if text.startswith("[") and "]" in text:
        cat, _, msg = text[1:].partition("]")
        return {"category": cat.strip(), "message": msg.strip()}
    return {"category": "other", "message": text}


class ResultsCollector:
    def __init__(self, config: pytest.Config, *, gates: dict[str, bool], backends: list[str]) -> None:
        self.config = config
        self.gates = gates
        self.backends = backends
        self.cases: dict[str, dict[str, Any]] = {}
        self.started = _now()
        self.t0 = 0.0
        self.results: dict[str, Any] | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        import time
        self.t0 = time.monotonic()
        self.started = _now()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = [v for k, v in report.user_properties if k == "drakit"]
        if not props:
            return
        data = json.loads(props[-1])
        entry = self.cases.setdefault(report.nodeid, {"nodeid": report.nodeid, "durationSeconds": 0.0})
        entry["durationSeconds"] = round(entry["durationSeconds"] + float(report.duration), 6)
        outcome = data.pop("outcome", None)
        entry.update(data)
        if report.skipped:
            entry["status"] = "skipped"
            entry["skip"] = parse_skip(report.longrepr)
        elif report.when == "call":
            entry["status"] = "passed" if report.passed else (outcome if outcome in ("failed", "error") else "error")
            entry["skip"] = None
        elif report.failed:
            entry["status"] = "error"
            entry.setdefault("failure", {"summary": f"{report.when} failed", "detail": str(report.longrepr)})

    def build(self, exitstatus: int) -> dict[str, Any]:
        import time
        from reports import compute_summary, compute_verdict
        cases = []
        for entry in self.cases.values():
            entry.setdefault("status", "error")
            entry.setdefault("skip", None)
            entry.setdefault("failure", None)
            b = entry.get("backend", "-")
            entry["rerun"] = (f"drakit run {shlex.quote(entry['file'])} -k {shlex.quote(entry['id'])} --backend {b} -n 0"
                              if b != "-" else f"drakit run {shlex.quote(entry['file'])}")
            cases.append(entry)
        cases.sort(key=lambda c: (min((_FEATURE_RANK.get(f, 99) for f in c.get("features") or []), default=-1),
                                  c["id"], BACKEND_RANK.get(c.get("backend", ""), 9)))
        workers = getattr(self.config.option, "numprocesses", None) or 0
        results = {
            "schemaVersion": SCHEMA_VERSION,
            "run": {"id": "r-" + self.started.replace("-", "").replace(":", "")[:15].lower(), "startedAt": self.started,
                    "finishedAt": _now(), "wallSeconds": round(time.monotonic() - self.t0, 3),
                    "command": list(sys.argv), "kitVersion": _kit_version(), "python": platform.python_version(),
                    "pytest": pytest.__version__, "workers": int(workers) if isinstance(workers, int) else 0},
            "environment": {"backends": {b: self._backend_env(b) for b in self.backends},
                            "hardwareProfile": "drakit-fake", "drivers": sorted(self._drivers())},
            "features": [f.to_json() for f in FEATURES],
            "cases": cases,
        }
        results["summary"] = compute_summary(cases)
        results["verdict"] = compute_verdict(cases)
        return results

    def _backend_env(self, name: str) -> dict[str, Any]:
        if name == "reference":
            return {"kind": "reference", "kubernetesVersion": "v1.37 (drakit reference allocator)",
                    "featureGates": dict(sorted(self.gates.items()))}
        return {"kind": "cluster", "kubernetesVersion": "unknown", "featureGates": {}}

    def _drivers(self) -> set[str]:
        from fake_driver.profile import load_profile
        try:
            prof = load_profile(self.config.getoption("--drakit-profile"))
        except (OSError, ValueError):
            return set()
        return {v for k, v in prof.items() if k.startswith("driver.")}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.cases:
            return
        self.results = self.build(int(exitstatus))
        out = self.config.getoption("--drakit-out")
        if out:
            write_results(self.results, Path(out))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.results is None or not self.cases:
            return
        from reports.text import render_summary
        terminalreporter.write_line("")
        terminalreporter.write(render_summary(self.results, color=terminalreporter.hasmarkup))
        out = self.config.getoption("--drakit-out")
        if out:
            terminalreporter.write_line(f"drakit: wrote {Path(out) / 'results.json'}, junit.xml, report.html")


def write_results(results: dict[str, Any], out: Path) -> dict[str, Path]:
    from reports import render_all
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    files = {"results.json": path}
    files.update(render_all(results, out))
    return files
