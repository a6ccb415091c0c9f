"""Controller-side results: turns pytest reports into one ``results.json`` and the reports (the
progress ``drakit run`` prints meanwhile is :mod:`conformance.progress`).

Works the same with and without pytest-xdist: everything a case knows travels in the report's
``user_properties`` as JSON, and only the controller writes files (the plugin here is registered
on the controller only).
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .features import FEATURES
from .interrupt import INTERRUPTS

SCHEMA_VERSION = "drakit.results/v1"
BACKEND_RANK = {"reference": 0, "cluster": 1}
_FEATURE_RANK = {f.id: i for i, f in enumerate(FEATURES)}


MAX_STRING = 256 * 1024  # any one string a case records (a failure's text, a dump) is kept up to this


def bound_strings(value: Any) -> Any:
    """*value* (JSON data) with every string longer than :data:`MAX_STRING` cut, saying so."""
    if isinstance(value, str):
        if len(value) <= MAX_STRING:
            return value
        return f"{value[:MAX_STRING]}... ({len(value) - MAX_STRING:,} more characters not kept)"
    if isinstance(value, dict):
        return {k: bound_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [bound_strings(v) for v in value]
    return value


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _kit_version() -> str:
    try:
        from importlib.metadata import version
        return version("drakit")
    except Exception:
        return "0+unknown"


def node_case(nodeid: str) -> dict[str, str]:
    """``{"id", "backend"}`` of a node id ``path::<case id>[<backend>]`` (a load-error item or
    another test keeps its name, backend ``-``)."""
    name = re.sub(r"@[^\[\]@]*$", "", nodeid.rsplit("::", 1)[-1])  # pytest-xdist's loadgroup appends "@group"
    m = re.fullmatch(r"(.+)\[([a-z-]+)\]", name)
    if m and not name.startswith("load-error["):
        return {"id": m.group(1), "backend": m.group(2)}
    return {"id": name, "backend": "-"}


def parse_skip(longrepr: Any) -> dict[str, str]:
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    text = text.removeprefix("Skipped: ")
    if text.startswith("[") and "]" in text:
        cat, _, msg = text[1:].partition("]")
        return {"category": cat.strip(), "message": msg.strip()}
    return {"category": "other", "message": text}


def drakit_props(report: pytest.TestReport) -> dict[str, Any] | None:
    """The case data an item recorded on its report (the last ``drakit`` user property)."""
    props = [v for k, v in report.user_properties if k == "drakit"]
    return json.loads(str(props[-1])) if props else None


def report_status(report: pytest.TestReport, outcome: str | None) -> str | None:
    """The case status one phase report decides, or None when the phase decides nothing
    (a passed setup or teardown). *outcome* is what the case itself reported, if anything."""
    if report.skipped:
        return "skipped"
    if report.when == "call":
        return "passed" if report.passed else (outcome if outcome in ("failed", "error") else "error")
    if report.failed:
        return "error"
    return None


def merge_env_updates(env: dict[str, Any], updates: list[dict[str, Any]]) -> dict[str, Any]:
    """A backend's environment with what each process could say only at its end merged in, a
    level deep. Each process (xdist worker) counts only its own cases, so counts (integers) of
    several processes are summed; any other value is the last process's."""
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in env.items()}
    for n, update in enumerate(updates):
        for name, part in update.items():
            if not (isinstance(part, dict) and isinstance(merged.get(name), dict)):
                merged[name] = part
                continue
            section = merged[name]
            for k, v in part.items():
                counted = n > 0 and _is_count(v) and _is_count(section.get(k))
                section[k] = section[k] + v if counted else v
    return merged


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class ResultsCollector:
    """Builds ``results.json`` on the controller. A backend that describes itself (the cluster
    backend: version, provider, context, gates and how they were found) sends that description
    on an item's report as the ``drakit-environment`` user property; the reference backend's is
    known here."""

    def __init__(self, config: pytest.Config, *, gates: dict[str, bool], backends: list[str],
                 vendor: Any = None, shard: Any = None) -> None:
        self.config = config
        self.shard = shard  # shards.Shard of --drakit-shard, None for a whole run
        self.gates = gates
        self.backends = backends
        self.vendor = vendor  # fake_driver.profile.VendorProfile (None: the bundled fake drivers')
        self.backend_env: dict[str, dict[str, Any]] = {}
        self.env_updates: dict[str, dict[str, dict[str, Any]]] = {}  # backend -> process -> its update
        self.cases: dict[str, dict[str, Any]] = {}
        self.started = _now()
        self.t0 = 0.0
        self.t0_epoch = time.time()  # report.start/stop are epoch seconds, whichever worker ran the phase
        self.timeline: dict[str, dict[str, Any]] = {}  # nodeid -> worker and [start, end] of each phase
        self.results: dict[str, Any] | None = None
        self.planned: list[str] = []  # node ids of the collected items, to name what an interrupt left out

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.t0 = time.monotonic()
        self.t0_epoch = time.time()
        self.started = _now()

    def _record_phase(self, report: pytest.TestReport) -> None:
        """Where the phase ran and when, as offsets from the session's start (the report's
        timeline: set-up, the case itself and teardown per worker)."""
        start, stop = getattr(report, "start", 0.0), getattr(report, "stop", 0.0)
        if not start or not stop:
            return
        entry = self.timeline.setdefault(report.nodeid, {"worker": str(getattr(report, "worker_id", None) or "main")})
        entry[report.when] = [round(max(0.0, start - self.t0_epoch), 3), round(max(0.0, stop - self.t0_epoch), 3)]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # empty on an xdist controller, which learns the ids below
            self.planned = [item.nodeid for item in session.items]

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.planned = list(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if INTERRUPTS.current == "start-up":
            INTERRUPTS.enter("cases")
        for key, value in report.user_properties:
            if key == "drakit-environment":
                sent = json.loads(str(value))
                self.backend_env[sent["backend"]] = sent["environment"]
            elif key == "drakit-environment-update":  # a process's last case (one per xdist worker)
                sent = json.loads(str(value))
                self.env_updates.setdefault(sent["backend"], {})[sent.get("process", "main")] = sent["environment"]
        self._record_phase(report)
        data = drakit_props(report)
        if data is None:
            return
        entry = self.cases.setdefault(report.nodeid, {"nodeid": report.nodeid, "durationSeconds": 0.0})
        entry["durationSeconds"] = round(entry["durationSeconds"] + float(report.duration), 6)
        outcome = data.pop("outcome", None)
        entry.update(data)
        status = report_status(report, outcome)
        if status is None:
            return
        entry["status"] = status
        if status == "skipped":
            entry["skip"] = parse_skip(report.longrepr)
        elif report.when == "call":
            entry["skip"] = None
        else:
            entry.setdefault("failure", {"summary": f"{report.when} failed", "detail": str(report.longrepr)})

    def _rerun_path(self, file: str) -> str:
        """The case file as the user can type it where they ran drakit: relative to that folder
        when the file is inside it, absolute otherwise."""
        path = self.config.rootpath / file
        try:
            return str(path.relative_to(self.config.invocation_params.dir))
        except ValueError:
            return str(path)

    def build(self, exitstatus: int) -> dict[str, Any]:
        from drakit.reports import compute_summary, compute_verdict, redact, redact_command
        from drakit.reports.names import shell_word
        cases = []
        for entry in self.cases.values():
            entry.setdefault("status", "error")
            entry.setdefault("skip", None)
            entry.setdefault("failure", None)
            b = entry.get("backend", "-")
            where = shell_word(self._rerun_path(entry["file"]))  # one line whatever the file's name holds
            entry["rerun"] = (f"drakit run {where} -k {shell_word(entry['id'])} --backend {b} -n 0"
                              if b != "-" else f"drakit run {where}")
            if entry["nodeid"] in self.timeline:
                entry["timeline"] = self.timeline[entry["nodeid"]]
            cases.append(entry)
        cases.sort(key=lambda c: (min((_FEATURE_RANK.get(f, 99) for f in c.get("features") or []), default=-1),
                                  c["id"], BACKEND_RANK.get(c.get("backend", ""), 9)))
        workers = getattr(self.config.option, "numprocesses", None) or 0
        results = {
            "schemaVersion": SCHEMA_VERSION,
            "run": {"id": "r-" + self.started.replace("-", "").replace(":", "")[:15].lower(), "startedAt": self.started,
                    "finishedAt": _now(), "wallSeconds": round(time.monotonic() - self.t0, 3),
                    "command": redact_command(sys.argv), "kitVersion": _kit_version(), "python": platform.python_version(),
                    "pytest": pytest.__version__, "workers": int(workers) if isinstance(workers, int) else 0},
            # credential-like keys never reach the file (the renderers drop them again)
            "environment": redact({"backends": {b: self._backend_env(b) for b in self.backends},
                                   **self._vendor_env()})[0],
            "features": [f.to_json() for f in FEATURES],
            "cases": cases,
        }
        if self.shard is not None:
            results["run"]["shard"] = read_plan(self.config.getoption("--drakit-out"), self.shard)
        results["summary"] = compute_summary(cases)
        from drakit.reports.driver import driver_reasons, driver_section
        results["verdict"] = compute_verdict(cases, self._run_reasons(cases)
                                             + driver_reasons(cases, results["environment"]))
        section = driver_section(results)
        if section is not None:
            results["driver"] = section
        return results

    def _run_reasons(self, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The verdict reasons the cases cannot show: a shard is a part of a run; an interrupt,
        with the cases it left out."""
        reasons = []
        if self.shard is not None:
            from drakit.reports.shardmerge import shard_reason
            reasons.append(shard_reason(self.shard.index, self.shard.count, len(cases)))
        if not INTERRUPTS.interrupted:
            return reasons
        from drakit.reports import MAX_REASON_CASES
        done = {c["nodeid"] for c in cases}
        not_run = [node_case(n) for n in self.planned if n not in done]
        phase = {"start-up": "at start-up", "cases": "during the cases", "teardown": "during teardown"}[
            INTERRUPTS.phase or "cases"]
        return reasons + [{"code": "interrupted", "signal": INTERRUPTS.signal, "phase": INTERRUPTS.phase or "cases",
                 "message": f"interrupted by {INTERRUPTS.signal} {phase}: {len(cases)} of "
                            f"{max(len(self.planned), len(cases))} cases finished, {len(not_run)} not run",
                 "count": len(not_run), "cases": not_run[:MAX_REASON_CASES]}]

    def _backend_env(self, name: str) -> dict[str, Any]:
        if name == "reference":
            return {"kind": "reference", "kubernetesVersion": "v1.37 (drakit reference allocator)",
                    "provider": "reference", "featureGates": dict(sorted(self.gates.items()))}
        if name in self.backend_env or name in self.env_updates:
            return merge_env_updates(self.backend_env.get(name, {}), list(self.env_updates.get(name, {}).values()))
        # no case reached the cluster (none selected, or the backend could not start)
        return {"kind": "cluster", "kubernetesVersion": "unknown", "featureGates": {}}

    def _vendor_env(self) -> dict[str, Any]:
        """``hardwareProfile``, ``drivers`` and ``vendor`` (name, file name, drivers, whether
        they are drakit's fake drivers) of the run's vendor profile."""
        vendor = self.vendor
        if vendor is None:
            from drakit.fake_driver.profile import load_vendor_profile
            vendor = load_vendor_profile()
        return {"hardwareProfile": vendor.name, "drivers": sorted(vendor.driver_names), "vendor": vendor.describe()}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        out = self.config.getoption("--drakit-out")
        if not self.cases and not out and not INTERRUPTS.interrupted:
            return  # plain pytest without drakit cases: nothing to say
        self.results = self.build(int(exitstatus))
        if out:
            write_results(self.results, Path(out))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """pytest calls ``pytest_sessionfinish`` only once its session has started: a signal during
        that start (xdist sets its workers up there, and a worker the signal kills as it starts
        ends it with an EOFError) left no results at all. That run is the interrupted one; its
        results are written here."""
        out = config.getoption("--drakit-out")
        if self.results is None and out and INTERRUPTS.interrupted:
            self.results = self.build(int(pytest.ExitCode.INTERRUPTED))
            write_results(self.results, Path(out))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.results is None or not self.cases:
            return
        from drakit.reports.text import render_summary
        terminalreporter.write_line("")
        terminalreporter.write(render_summary(self.results, color=terminalreporter.hasmarkup))
        out = self.config.getoption("--drakit-out")
        if out:
            terminalreporter.write_line(f"drakit: wrote {Path(out) / 'results.json'}, junit.xml, report.html")


def read_plan(out: str | None, shard: Any) -> dict[str, Any]:
    """``run.shard`` of a shard's results: the plan ``shardselect`` wrote beside them (removed
    once read). A shard whose processes collected nothing records an empty plan."""
    from .shards import PLAN_FILE
    path = Path(out) / PLAN_FILE if out else None
    data: dict[str, Any] = {"index": shard.index, "count": shard.count, "plan": []}
    if path is not None and path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        finally:
            path.unlink(missing_ok=True)
    return data


#: The folder each ``--out`` actually received its files in (another one when it refused them).
_WRITTEN: dict[str, Path] = {}


def written_folder(out: Path) -> Path:
    """Where :func:`write_results` put the files meant for *out* (*out* itself, normally)."""
    return _WRITTEN.get(str(out), out)


def write_results(results: dict[str, Any], out: Path, *, fallback: bool = True) -> dict[str, Path]:
    """Write ``results.json``, ``junit.xml`` and ``report.html`` into *out*, never through a link
    (:mod:`drakit.reports.safefs`). When *out* refuses them at the end of a run (a link or a
    folder planted there meanwhile) and *fallback* is set, they go to a new private folder in the
    temp dir instead, said in one line, so that a run's results are never lost."""
    from drakit.reports.render import render_all
    from drakit.reports.safefs import UnsafePath, write_file
    text = json.dumps(results, indent=2, sort_keys=False, default=str) + "\n"
    try:
        files = {"results.json": write_file(out, "results.json", text, what="--out")}
        files.update(render_all(results, out))
    except UnsafePath as exc:
        if not fallback:
            raise
        import sys
        import tempfile
        other = Path(tempfile.mkdtemp(prefix="drakit-results-"))
        files = {"results.json": write_file(other, "results.json", text)}
        files.update(render_all(results, other))
        print(f"drakit: {exc}; the results went to {other} instead", file=sys.stderr)
        _WRITTEN[str(out)] = other
    return files


def write_unfinished(out: Path, backends: list[str]) -> dict[str, Path]:
    """The three files as a run starts, with verdict incomplete, case count 0 and the reason
    ``unfinished``; the run's end replaces them. A run killed where it could not write (SIGKILL,
    a power cut, a signal before drakit handles signals) thus never leaves nothing, nor an
    earlier run's report standing for it (issue 32)."""
    from drakit.reports import compute_summary, compute_verdict
    import os
    started = _now()
    results: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "run": {"id": "r-" + started.replace("-", "").replace(":", "")[:15].lower(), "startedAt": started,
                "finishedAt": started, "wallSeconds": 0.0, "command": _command(), "kitVersion": _kit_version(),
                "python": platform.python_version(), "pytest": pytest.__version__, "workers": 0},
        "environment": {"backends": {b: {"kind": b, "kubernetesVersion": "unknown", "featureGates": {}} for b in backends},
                        "hardwareProfile": None, "drivers": []},
        "features": [f.to_json() for f in FEATURES],
        "cases": [],
    }
    results["summary"] = compute_summary([])
    results["verdict"] = compute_verdict([], [{
        "code": "unfinished", "message": f"the run started at {started} (process {os.getpid()}) has not written its "
                                         f"results: it is still running, or it ended before it could (killed, or stopped by an error "
                                         f"said on its console)"}])
    from drakit.reports.render import render_all
    files = render_all(results, out)  # results.json last: once it is there, the other two are this run's too
    from drakit.reports.safefs import write_file
    path = write_file(out, "results.json", json.dumps(results, indent=2) + "\n", what="--out")
    return {"results.json": path, **files}


def _command() -> list[str]:
    from drakit.reports import redact_command
    return list(redact_command(sys.argv))
