"""The pytest plugin: collects ``*.case.yaml`` files and runs each case on each backend.

Collection is deterministic (file order, document order, a fixed backend order) and never talks
to a target, so ``-n 2`` workers agree with the controller. A case file that cannot be loaded
becomes an item that errors with one ``file:line: path: message`` line: the other cases still
run and every result reaches ``results.json``.

The vendor profile (``--drakit-vendor``) names the driver under test. A case that needs powers
only drakit's fake driver has is skipped as ``needs-fake-driver`` when that driver is a vendor's
own, and a case using a placeholder the profile does not define as ``not-applicable``
(:mod:`drakit.conformance.spec.needs`). A kubeconfig that cannot be used is a usage error before any
case runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator, NoReturn

import pytest

from .cases.loader import MAX_BYTES, CaseIds, LoadResult, load_file, parse_size
from .spec.case import Case
from .spec.needs import vendor_unmet
from .cases.budget import CaseOverBudget, budget_of, seconds_option, time_budget
from .failuretext import render_failure
from .cases.runner import Outcome, run_case
from .casedirs import pytest_collect_directory  # noqa: F401 - a hook of this plugin (the folder collector)
from .errors import LoadError
from .features import FEATURES, parse_gates
from .interrupt import INTERRUPTS, install_in
from .results import ResultsCollector, bound_strings

BACKEND_ORDER = ("reference", "cluster")
SUFFIX = ".case.yaml"
_BACKENDS = pytest.StashKey[dict[str, Any]]()
_PROFILE = pytest.StashKey[dict[str, str]]()
_VENDOR = pytest.StashKey[Any]()  # fake_driver.profile.VendorProfile
_VOCABULARY = pytest.StashKey[frozenset[str]]()
_COLLECTOR = pytest.StashKey[ResultsCollector]()
_CASE_IDS = pytest.StashKey[CaseIds]()
_MAX_BYTES = pytest.StashKey[int]()
_LOCK_DIR = pytest.StashKey[str]()
_UNUSABLE = pytest.StashKey[str]()  # why the cluster backend cannot be used, in a run with the reference too


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("drakit", "drakit DRA conformance")
    g.addoption("--drakit-backend", default="reference",
                help="comma-separated backends to run the cases on: reference, cluster (default: reference)")
    g.addoption("--drakit-feature-gates", default="",
                help="feature gates of the reference backend on top of the 1.37 defaults, e.g. DRAListTypeAttributes=true")
    g.addoption("--drakit-vendor", "--drakit-profile", dest="drakit_vendor", default=None,
                help="vendor profile YAML naming the driver under test, its classes and attribute names; it resolves "
                     "${driver.*}, ${class.*}, ${attr.*} (default: the fake drivers'). With a vendor's own driver the "
                     "cluster's ResourceSlices are used and cases needing the fake driver are skipped")
    g.addoption("--drakit-out", default=None, help="write results.json, junit.xml and report.html to this folder")
    g.addoption("--drakit-no-node-side", action="store_true",
                help="reference backend: do not prepare claims through the fake drivers' gRPC sockets")
    g.addoption("--drakit-kubeconfig", default=None,
                help="cluster backend: kubeconfig of the cluster under test (default: $KUBECONFIG, then ~/.kube/config)")
    g.addoption("--drakit-context", default=None,
                help="cluster backend: kubeconfig context to use (default: the file's current-context)")
    g.addoption("--drakit-install-driver", action="store_true",
                help="cluster backend: install drakit's fake driver (fake_driver.deploy) for the run and remove it "
                     "after; without it drakit installs nothing cluster-wide beyond each case's own objects")
    g.addoption("--drakit-driver-image", default=None,
                help="cluster backend: the fake driver image for --drakit-install-driver (default: drakit/fake-driver:<version>)")
    g.addoption("--drakit-cluster", default=None, choices=(None, "local"),
                help="cluster backend: start drakit's local control plane (upstream 1.37 binaries + kwok) for the run")
    g.addoption("--drakit-keep-on-failure", action="store_true",
                help="cluster backend: leave a failed case's namespace and objects in place")
    g.addoption("--drakit-max-case-size", default=None, metavar="SIZE",
                help="refuse case files larger than this, e.g. 4MiB (default: 1 MiB)")
    g.addoption("--drakit-shard", default=None, metavar="I/N",
                help="run only the i-th of N shards of the selected cases (conformance.shards); results.json "
                     "records the whole plan, for 'drakit report --merge'")
    g.addoption("--drakit-shard-lock", default=None, metavar="NAMESPACE/NAME",
                help="cluster backend, --drakit-shard i/N: the Lease the run's shards share to keep cluster-wide "
                     "cases alone (default: $DRAKIT_SHARD_LOCK, else default/drakit-shard-lock)")
    g.addoption("--drakit-case-timeout", default=None, type=seconds_option, metavar="SECONDS",
                help="the time budget of every case, overriding its own and the default sized from its steps")
    g.addoption("--drakit-handle-signals", action="store_true",
                help="SIGINT/SIGTERM stop the cases, clean up what drakit started and record the run as "
                     "interrupted (drakit run sets it; see conformance.interrupt)")


def feature_marker(feature_id: str) -> str:
    return "feature_" + feature_id.replace("-", "_")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "dra_feature(id): the DRA feature (registry id) a case exercises")
    config.addinivalue_line("markers", "profile_required: a case every conformant target must pass")
    config.addinivalue_line("markers", "profile_optional: a case that does not decide the verdict")
    for b in BACKEND_ORDER:
        config.addinivalue_line("markers", f"backend_{b}: runs on the {b} backend")
    for f in FEATURES:
        config.addinivalue_line("markers", f"{feature_marker(f.id)}: DRA feature {f.id} (KEP-{f.kep})")
    backends = [b.strip() for b in config.getoption("--drakit-backend").split(",") if b.strip()]
    unknown = [b for b in backends if b not in BACKEND_ORDER]
    if unknown or not backends:
        raise pytest.UsageError(f"--drakit-backend: unknown backend {', '.join(unknown) or '(none)'}; use reference, cluster")
    try:
        gates = parse_gates(config.getoption("--drakit-feature-gates"))
    except ValueError as exc:
        raise pytest.UsageError(f"--drakit-feature-gates: {exc}") from None
    from drakit.fake_driver.profile import load_profile, load_vendor_profile
    try:
        vendor = load_vendor_profile(config.getoption("--drakit-vendor"))
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(f"vendor profile: {exc}") from None
    config.stash[_VENDOR] = vendor
    config.stash[_PROFILE] = vendor.placeholders()
    config.stash[_VOCABULARY] = frozenset(load_profile())  # the keys drakit's own cases may use
    config.stash[_CASE_IDS] = CaseIds()  # every process collects all files in the same order
    size = config.getoption("--drakit-max-case-size")
    try:
        config.stash[_MAX_BYTES] = parse_size(size) if size is not None else MAX_BYTES
    except ValueError as exc:
        raise pytest.UsageError(f"--max-case-size: {exc}") from None
    if "cluster" in backends:
        _check_cluster_options(config, vendor)
    shard = _shard(config)
    if shard is not None:
        from .shardselect import ShardSelect
        config.pluginmanager.register(ShardSelect(shard, config.getoption("--drakit-out")), "drakit-shard")
    config.stash[_BACKENDS] = {"names": [b for b in BACKEND_ORDER if b in backends], "gates": gates, "instances": {}}
    if config.getoption("--drakit-handle-signals"):
        install_in(config)
    if not hasattr(config, "workerinput"):
        os.environ.pop("PYTEST_XDIST_WORKER", None)  # inherited from a test worker that started this run
        collector = ResultsCollector(config, gates=gates, backends=config.stash[_BACKENDS]["names"], vendor=vendor,
                                     shard=shard)
        config.stash[_COLLECTOR] = collector
        config.pluginmanager.register(collector, "drakit-results")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """On the xdist controller of a run whose workers share one cluster (the cluster backend
    through a kubeconfig): one folder for the run's cluster lock (``backends.clusterlock``),
    given to every worker, removed at the end (a killed run's: by the next run's sweep)."""
    config = node.config
    if "cluster" not in config.stash[_BACKENDS]["names"] or config.getoption("--drakit-cluster") == "local":
        return
    if _LOCK_DIR not in config.stash:
        import shutil
        import tempfile
        from drakit.clusters.leftovers import claim
        folder = tempfile.mkdtemp(prefix="drakit-lock-")
        claim(Path(folder))
        config.stash[_LOCK_DIR] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    node.workerinput["drakit_lock_dir"] = config.stash[_LOCK_DIR]


def _shard(config: pytest.Config) -> Any:
    """The ``--drakit-shard`` of the run (None: the whole run); a bad value is a usage error."""
    text = config.getoption("--drakit-shard")
    if text is None:
        return None
    from .shards import parse_shard
    try:
        return parse_shard(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--shard: {exc}") from None


def _check_cluster_options(config: pytest.Config, vendor: Any) -> None:
    """Usage errors of the cluster options, found before anything connects (no traceback)."""
    opt = config.getoption
    local = opt("--drakit-cluster") == "local"
    if local and (opt("--drakit-kubeconfig") or opt("--drakit-context")):
        raise pytest.UsageError("--cluster local starts its own cluster: drop --kubeconfig/--context")
    if opt("--drakit-install-driver"):
        if not vendor.fake:
            raise pytest.UsageError(f"--install-driver installs drakit's fake driver, but the vendor profile "
                                    f"{vendor.name!r} names {', '.join(vendor.driver_names)}")
        if local:
            raise pytest.UsageError("--install-driver needs nodes that run containers; the local cluster's "
                                    "kwok nodes do not (its fake hardware is published per case)")
    if not local:
        from .backends.kubeconfig import KubeconfigError, resolve_kubeconfig
        try:
            resolve_kubeconfig(opt("--drakit-kubeconfig"), opt("--drakit-context"))
        except KubeconfigError as exc:
            if "reference" not in [b.strip() for b in opt("--drakit-backend").split(",")]:
                raise pytest.UsageError(str(exc)) from None
            config.stash[_UNUSABLE] = str(exc)  # the reference cases still run; each cluster case errors with it


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name.endswith(SUFFIX):
        return CaseFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """The cases are collected (and the results collector knows them): a signal ``drakit run``
    held since its start stops the run here, before its first case."""
    INTERRUPTS.release()


@pytest.hookimpl(trylast=True, optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """The same on an xdist controller, which collects nothing itself: a worker's collection
    names the run's cases."""
    INTERRUPTS.release()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop what the backends started (clusters, fake nodes, an installed driver) before the
    results are written, so a signal during that teardown is recorded in them; from here on a
    signal no longer interrupts anything."""
    INTERRUPTS.enter("teardown")
    for inst in session.config.stash[_BACKENDS]["instances"].values():
        close = getattr(inst, "close", None)
        if close is None:
            continue
        note = getattr(inst, "teardown_note", lambda: None)()
        if note:
            INTERRUPTS.say(f"drakit: {note}")
        close()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the process's last case, what a backend's environment can only say at the end (the
    cluster backend: how many kubelets it started, how many hardware changes running ones
    took) rides on that item's teardown report, to be merged into the environment sent first."""
    if nextitem is not None or not isinstance(item, CaseItem):
        return
    for name, inst in item.config.stash[_BACKENDS]["instances"].items():
        update = getattr(inst, "environment_update", None)
        if update is not None:
            item.user_properties.append(("drakit-environment-update", json.dumps(
                {"backend": name, "process": getattr(item.config, "workerinput", {}).get("workerid", "main"),
                 "environment": update()}, default=str)))


def _backend(config: pytest.Config, name: str, case: Case | None = None) -> Any:
    """The backend instance ``name``, made for the first ``case`` it runs when there is none."""
    state = config.stash[_BACKENDS]
    inst = state["instances"].get(name)
    if inst is None:
        if name == "reference":
            from .backends.reference import ReferenceBackend
            inst = ReferenceBackend(state["gates"], node_side=not config.getoption("--drakit-no-node-side"))
            from .backends.noderuntime import shutdown
            config.add_cleanup(shutdown)
        else:
            from .backends.base import HarnessError
            from .backends.cluster import ClusterBackend
            if _UNUSABLE in config.stash:
                raise HarnessError(config.stash[_UNUSABLE])
            try:
                inst = ClusterBackend(config, vendor=config.stash[_VENDOR], first=case)
            except HarnessError as exc:  # nothing can run on this cluster: stop with the one line
                if "reference" in state["names"]:  # ... but the reference cases beside them still run
                    config.stash[_UNUSABLE] = str(exc)
                    raise
                message = f"drakit: cluster backend: {exc}"
                if config.pluginmanager.get_plugin("terminalreporter") is None:  # drakit run: say it here
                    capman = config.pluginmanager.get_plugin("capturemanager")
                    with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
                        sys.stderr.write(message + "\n")
                pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)
        state["instances"][name] = inst
    return inst


class CaseFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        try:
            display = str(self.path.relative_to(self.config.rootpath))
        except ValueError:
            display = str(self.path)
        try:
            loaded = self.config.stash[_CASE_IDS].admit(load_file(
                self.path, self.config.stash[_PROFILE], display=display, vocabulary=self.config.stash[_VOCABULARY],
                max_bytes=self.config.stash[_MAX_BYTES]))
        except Exception as exc:  # noqa: BLE001 - a loader bug: this file errors, the others still run
            from .crash import report_bug
            loaded = LoadResult((), (LoadError(display, None, report_bug(exc, context=f"loading {display}")),))
        if loaded.errors:
            yield LoadErrorItem.from_parent(self, name=f"load-error[{display}]", errors=loaded.errors)
        backends = self.config.stash[_BACKENDS]["names"]
        vendor = self.config.stash[_VENDOR]
        confs = [c.name for c in vendor.under_test.configurations] if vendor is not None and vendor.under_test else []
        for plain in loaded.cases:
            # profile v2 configurations: the driver suite's cases run once in each (``case@conf``)
            variants = [dataclasses.replace(plain, id=f"{plain.id}@{c}", configuration=c) for c in confs] \
                if confs and "driver" in plain.features else [plain]
            for case, backend in ((v, b) for v in variants for b in backends):
                if backend not in case.backends:
                    continue
                item = CaseItem.from_parent(self, name=f"{case.id}[{backend}]", case=case, backend=backend)
                for f in case.features:
                    item.add_marker(pytest.mark.dra_feature(f))
                    item.add_marker(getattr(pytest.mark, feature_marker(f)))
                item.add_marker(getattr(pytest.mark, f"backend_{backend}"))
                item.add_marker(getattr(pytest.mark, f"profile_{case.profile}"))
                group = cluster_group(case, self.config.getoption("--drakit-cluster") == "local") if backend == "cluster" else None
                if group is not None:
                    item.add_marker(pytest.mark.xdist_group(group))
                yield item


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The driver suite's cases of each profile configuration together, in configuration order
    (the driver's nodes restart with each configuration once); every other item keeps its place."""
    slots = [i for i, it in enumerate(items) if isinstance(it, CaseItem) and it.case.configuration]
    if not slots:
        return
    order: dict[str, int] = {}
    for i in slots:
        order.setdefault(items[i].case.configuration, len(order))  # type: ignore[attr-defined]
    moved = sorted((items[i] for i in slots), key=lambda it: order[it.case.configuration])  # type: ignore[attr-defined]
    for i, it in zip(slots, moved):
        items[i] = it


def cluster_group(case: Case, local: bool) -> str | None:
    """The xdist group of a cluster case under ``-n N`` (None: any worker). With ``--cluster
    local`` each worker has its own cluster, and a case with gates off runs on the worker's
    alternate local cluster: the cases of one gate set stay on one worker, so that alternate
    starts once, and so do the driver suite's (its driver's own nodes). On a shared cluster
    the cases spread over the workers (their cluster-scoped names carry the worker's prefix;
    cluster-wide ones run alone: ``backends.clusterlock``)."""
    if local and "driver" in case.features:  # the driver's own nodes start once, on one worker
        return "drakit-driver-suite"
    if local and any(v is False for v in case.feature_gates.values()) or local and case.scheduler_gates:
        return "drakit-gates-" + ",".join(f"{g}={str(v).lower()}" for g, v in sorted(case.feature_gates.items())) + (
            "-scheduler-" + ",".join(f"{g}={str(v).lower()}" for g, v in sorted(case.scheduler_gates.items()))
            if case.scheduler_gates else "")
    return None


class CaseFailed(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class CaseItem(pytest.Item):
    def __init__(self, *, case: Case, backend: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case
        self.backend = backend

    def _record(self, **extra: Any) -> None:
        c = self.case
        data = {"id": c.id, "backend": self.backend, "title": c.title, "description": c.description,
                "features": list(c.features), "profile": c.profile, "file": c.file, "line": c.line,
                "steps": [], "failure": None, **({"behaviour": c.behaviour} if c.behaviour else {}),
                **({"configuration": c.configuration} if c.configuration else {}), **extra}
        self.user_properties.append(("drakit", json.dumps(bound_strings(data), sort_keys=True, default=str)))

    def _error(self, summary: str) -> CaseFailed:
        """Record a case the harness could not run as an error (results are never lost) and
        return the exception that fails the item."""
        self._record(outcome="error", failure={"summary": summary, "detail": "", "yaml": None, "expected": None,
                                               "actual": None, "diff": None, "diagnostics": None})
        return CaseFailed(summary)

    def setup(self) -> None:
        self._setup_failure: str | None = None
        try:
            backend = _backend(self.config, self.backend, self.case)
            self._record_environment(backend)
            unmet = vendor_unmet(self.case, self.config.stash[_VENDOR]) or backend.unmet(self.case)
        except pytest.exit.Exception:  # the backend cannot serve any case: the session stops, one line said
            raise
        except Exception as exc:  # noqa: BLE001 - any harness failure becomes this case's error
            # failed in runtest, where the item's own one-line rendering applies (a setup
            # failure would be rendered by pytest, traceback and all)
            self._setup_failure = f"harness: the {self.backend} backend is not available: {_one_line(exc)}"
            return
        if unmet:
            self._record(outcome="skipped")
            pytest.skip(f"[{unmet[0]}] {unmet[1]}")

    def _record_environment(self, backend: Any) -> None:
        """Send the backend's environment (version, provider, gates...) to the controller once per
        process, riding on this item's report."""
        sent = self.config.stash[_BACKENDS].setdefault("environment-sent", set())
        describe = getattr(backend, "environment", None)
        if describe is None or self.backend in sent:
            return
        sent.add(self.backend)
        self.user_properties.append(("drakit-environment", json.dumps({"backend": self.backend,
                                                                       "environment": describe()}, default=str)))

    def runtest(self) -> None:
        if INTERRUPTS.interrupted:  # a signal came between cases and was not raised (a shield)
            raise KeyboardInterrupt(INTERRUPTS.signal)
        if getattr(self, "_setup_failure", None):
            raise self._error(self._setup_failure)
        try:
            session = _backend(self.config, self.backend, self.case).open(self.case)
        except Exception as exc:  # noqa: BLE001 - any harness failure becomes this case's error
            if INTERRUPTS.interrupted:  # the signal broke the set-up: the case did not run
                raise KeyboardInterrupt(INTERRUPTS.signal) from None
            raise self._error(f"harness: setting up the case failed: {_one_line(exc)}") from None
        seconds, how = budget_of(self.case, self.backend, self.config.getoption("--drakit-case-timeout"))
        try:
            with time_budget(seconds, how):
                outcome = run_case(self.case, session)
        except CaseOverBudget as exc:  # ran over while the runner was reporting a failure
            outcome = Outcome("error", [], {"summary": f"timeout: {exc}", "detail": "", "yaml": None, "expected": None,
                                            "actual": None, "diff": None, "diagnostics": None})
        except KeyboardInterrupt:  # SIGINT/SIGTERM: remove the case's objects, then stop the run
            self._stop_interrupted(session)
        except Exception as exc:  # noqa: BLE001 - a bug in the runner: the case is an error, never lost
            if INTERRUPTS.interrupted:  # the signal surfaced as some other error inside the case
                self._stop_interrupted(session)
            from .crash import report_bug
            with contextlib.suppress(Exception):
                session.close(failed=True)
            raise self._error(report_bug(exc, context=f"case {self.case.id} [{self.backend}]")) from None
        if INTERRUPTS.interrupted and outcome.status != "passed":
            # A signal came while the case ran and something on the way (a library turning the
            # KeyboardInterrupt into its own error, a shielded block, another thread) kept it
            # from stopping the case: what the case saw then says nothing about the target. It
            # is a case not run, never a failure.
            self._stop_interrupted(session)
        failure = outcome.failure
        status = outcome.status
        extra: dict[str, Any] = {}
        if status == "passed" and "driver" in self.case.features:  # what the case did with the driver
            with contextlib.suppress(Exception):
                done = session.driver_exercise()
                if done:
                    extra["exercised"] = done
        try:
            session.close(failed=status != "passed")
        except Exception as exc:  # noqa: BLE001 - the outcome stands; the cleanup failure is said too
            if status == "passed":
                status = "error"
                failure = {"summary": f"harness: cleaning up after the case failed: {_one_line(exc)}", "detail": "",
                           "yaml": None, "expected": None, "actual": None, "diff": None, "diagnostics": None}
        self._record(outcome=status, steps=[s.to_json() for s in outcome.steps], failure=failure, **extra)
        if status != "passed":
            raise CaseFailed(render_failure(self.case, failure or {}))

    def _stop_interrupted(self, session: Any) -> NoReturn:
        """Remove the case's objects without being broken by a second signal, then stop the run
        (pytest records the case as not run)."""
        with INTERRUPTS.shield(), contextlib.suppress(Exception):
            session.close(failed=False)
        raise KeyboardInterrupt(INTERRUPTS.signal or "interrupted")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed):
            return excinfo.value.text
        from .crash import report_bug  # anything else escaping the item is a drakit bug
        return report_bug(excinfo.value, context=f"case {self.case.id} [{self.backend}]")

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"{self.case.id} [{self.backend}]"


class LoadErrorItem(pytest.Item):
    """The problems of one case file that did not (wholly) load: one results entry per file,
    whose id is the file; the summary is the first problem, the detail lists them all."""

    def __init__(self, *, errors: tuple[LoadError, ...], **kw: Any) -> None:
        super().__init__(**kw)
        self.errors = errors
        self.error = errors[0]

    def runtest(self) -> None:
        summary = str(self.error)
        if len(self.errors) > 1:
            summary += f" (and {len(self.errors) - 1} more problems in this file)"
        detail = "\n".join(str(e) for e in self.errors) if len(self.errors) > 1 else ""
        self.user_properties.append(("drakit", json.dumps(bound_strings({
            "id": self.error.file, "backend": "-", "title": "case file could not be loaded", "description": "",
            "features": [], "profile": "required", "file": self.error.file, "line": self.error.line or 0, "steps": [],
            "outcome": "error", "failure": {"summary": summary, "detail": detail, "yaml": None, "expected": None,
                                            "actual": None, "diff": None, "diagnostics": None}}))))
        raise CaseFailed("\n".join([summary] + [str(e) for e in self.errors[1:]]))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, (self.error.line or 1) - 1, f"load error {self.error.file}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
