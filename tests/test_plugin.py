"""The pytest plugin, driven through pytester: collection, outcomes, load errors, xdist."""

from __future__ import annotations

import json

import pytest

# pytester's in-process runs drop modules first imported during a run; a pybind11 extension
# cannot be imported twice, so load the CEL engine before any run.
import drakit.conformance.cel  # noqa: F401

pytest_plugins = ["pytester"]

CASE = """\
id: demo/{name}
title: {name}
features: [core]
hardware:
  nodes: [{{name: node-a, shape: small-1gpu}}]
steps:
  - apply:
      - apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {{name: c}}
        spec:
          devices:
            requests:
              - name: gpu
                exactly: {{deviceClassName: "${{class.gpu}}", count: {count}}}
      - apiVersion: v1
        kind: Pod
        metadata: {{name: p}}
        spec:
          resourceClaims: [{{name: gpu, resourceClaimName: c}}]
          containers: [{{name: main, image: pause}}]
  - expect:
      - podScheduled: {{pod: p}}
      - allocated: {{claim: c, count: {count}}}
"""


def write_cases(pytester: pytest.Pytester) -> None:
    pytester.makefile(".case.yaml", good=CASE.format(name="one", count=1) + "---\n" + CASE.format(name="two", count=1))
    pytester.makefile(".case.yaml", failing=CASE.format(name="too-many", count=2))
    pytester.makefile(".case.yaml", broken=CASE.format(name="broken", count=1).replace("features: [core]", "features: [core]\nbogus: 1"))


def test_outcomes_and_results_json(pytester: pytest.Pytester) -> None:
    write_cases(pytester)
    out = pytester.path / "out"
    res = pytester.runpytest("-p", "no:cacheprovider", "--drakit-out", str(out))
    res.assert_outcomes(passed=2, failed=2)
    text = res.stdout.str()
    assert "broken.case.yaml:4: bogus: unknown field" in text
    assert "claim c is not allocated" in text or "not scheduled" in text
    results = json.loads((out / "results.json").read_text())
    by_id = {(c["id"], c["backend"]): c for c in results["cases"]}
    assert by_id[("demo/one", "reference")]["status"] == "passed"
    assert by_id[("demo/too-many", "reference")]["status"] == "failed"
    assert by_id[("broken.case.yaml", "-")]["status"] == "error"
    assert by_id[("demo/one", "reference")]["features"] == ["core"]
    assert results["verdict"]["result"] == "fail"
    assert (out / "junit.xml").exists() and (out / "report.html").exists()


def test_failure_points_into_the_yaml(pytester: pytest.Pytester) -> None:
    pytester.makefile(".case.yaml", failing=CASE.format(name="too-many", count=2))
    res = pytester.runpytest("-p", "no:cacheprovider")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*pod p is not scheduled*", "*at failing.case.yaml:23 (demo/too-many)*", "*> 23 |*podScheduled*"])


def test_markers_select_by_feature_and_backend(pytester: pytest.Pytester) -> None:
    write_cases(pytester)
    res = pytester.runpytest("-p", "no:cacheprovider", "-m", "feature_core and backend_reference", "--collect-only", "-q")
    assert "3 tests collected" in res.stdout.str() or "3/4 tests collected" in res.stdout.str()


ORDER_CONFTEST = """
import json, os
def pytest_collection_modifyitems(session, config, items):
    who = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    with open(os.path.join(os.environ["ORDER_DIR"], who + ".json"), "w") as f:
        json.dump([i.nodeid for i in items], f)
"""


def test_same_items_same_order_with_and_without_xdist(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_cases(pytester)
    pytester.makeconftest(ORDER_CONFTEST)
    order_dir = pytester.path / "order"
    order_dir.mkdir()
    monkeypatch.setenv("ORDER_DIR", str(order_dir))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # we may ourselves run under xdist
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0")
    serial = json.loads((order_dir / "controller.json").read_text())
    (order_dir / "controller.json").unlink()
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    res.assert_outcomes(passed=2, failed=2)
    workers = sorted(order_dir.glob("gw*.json"))
    assert len(workers) == 2
    for w in workers:
        assert json.loads(w.read_text()) == serial
    assert len(serial) == 4


def test_a_case_the_harness_cannot_set_up_is_an_error_in_results(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Results are never lost: a backend that fails while opening a case records that case as
    an error with the reason, and the other cases still run."""
    from drakit.conformance.backends.reference import ReferenceBackend

    real_open = ReferenceBackend.open

    def open_or_fail(self, case):  # type: ignore[no-untyped-def]
        if case.id == "demo/two":
            raise RuntimeError("the fake node would not start\nsecond line")
        return real_open(self, case)

    monkeypatch.setattr(ReferenceBackend, "open", open_or_fail)
    pytester.makefile(".case.yaml", good=CASE.format(name="one", count=1) + "---\n" + CASE.format(name="two", count=1))
    out = pytester.path / "out"
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--drakit-out", str(out))
    res.assert_outcomes(passed=1, failed=1)
    results = json.loads((out / "results.json").read_text())
    by_id = {c["id"]: c for c in results["cases"]}
    assert by_id["demo/one"]["status"] == "passed"
    assert by_id["demo/two"]["status"] == "error"
    assert by_id["demo/two"]["failure"]["summary"] == \
        "harness: setting up the case failed: RuntimeError: the fake node would not start"


def test_cluster_cases_spread_over_workers_and_gate_sets_stay_together(pytester: pytest.Pytester) -> None:
    """Under -n N cluster items are not one xdist group: on a shared cluster the workers' names
    are prefixed (cluster-wide cases run alone under a lock), and with --cluster local each worker
    has its own cluster. There, cases with a gate off are grouped per gate set (the worker's
    alternate local cluster starts once per set)."""
    write_cases(pytester)
    pytester.makefile(".case.yaml", gates=CASE.format(name="gate-off", count=1).replace(
        "features: [core]", "features: [core]\nfeatureGates: {DRAConsumableCapacity: false, DRADeviceTaints: false}"))
    kubeconfig = pytester.path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
                          "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: x}}]\n")
    pytester.makeconftest("""
def pytest_collection_finish(session):
    for item in session.items:
        group = item.get_closest_marker("xdist_group")
        print("ITEM", item.name, group.args[0] if group else "-")
""")
    res = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "-s", "--drakit-backend", "reference,cluster",
                             "--drakit-kubeconfig", str(kubeconfig))
    items = dict(line.split()[1:] for line in res.stdout.lines if line.startswith("ITEM "))
    assert items["demo/one[cluster]"] == "-" and items["demo/one[reference]"] == "-", items
    assert items["demo/gate-off[cluster]"] == "-", items
    res = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "-s", "--drakit-backend", "cluster",
                             "--drakit-cluster", "local")
    items = dict(line.split()[1:] for line in res.stdout.lines if line.startswith("ITEM "))
    assert items["demo/one[cluster]"] == "-", items
    assert items["demo/gate-off[cluster]"] == "drakit-gates-DRAConsumableCapacity=false,DRADeviceTaints=false", items


def test_a_case_a_swallowed_signal_broke_is_not_run_never_failed(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal that reaches the case only as some other failure (here: recorded in a shielded
    block, after which the case fails) makes that case not run, and the run stops there."""
    import signal

    from drakit.conformance import plugin
    from drakit.conformance.interrupt import INTERRUPTS

    real_run = plugin.run_case

    def run_with_a_signal(case, session):  # type: ignore[no-untyped-def]
        if case.id == "demo/too-many":
            INTERRUPTS.enter("cases")
            with INTERRUPTS.shield():
                INTERRUPTS._handle(signal.SIGTERM, None)  # recorded, not raised
        return real_run(case, session)

    monkeypatch.setattr(plugin, "run_case", run_with_a_signal)
    pytester.makefile(".case.yaml", a=CASE.format(name="one", count=1) + "---\n" + CASE.format(name="too-many", count=2)
                      + "---\n" + CASE.format(name="three", count=1))
    out = pytester.path / "out"
    try:
        pytester.inline_run("-p", "no:cacheprovider", "--drakit-out", str(out), no_reraise_ctrlc=True)
        results = json.loads((out / "results.json").read_text())
    finally:
        INTERRUPTS.reset()
    assert [(c["id"], c["status"]) for c in results["cases"]] == [("demo/one", "passed")]
    assert results["verdict"]["result"] == "incomplete"
    reason = next(r for r in results["verdict"]["reasons"] if r["code"] == "interrupted")
    assert reason["signal"] == "SIGTERM"
    assert {c["id"] for c in reason["cases"]} == {"demo/too-many", "demo/three"}


UPDATE_CONFTEST = """
import json
def pytest_runtest_logreport(report):
    for key, value in report.user_properties:
        if key == "drakit-environment-update":
            with open("updates.jsonl", "a") as fh:
                fh.write(json.dumps([report.nodeid, report.when, json.loads(value)]) + "\\n")
"""


def test_what_a_backend_knows_only_at_the_end_rides_on_the_last_case(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend's ``environment_update`` (the cluster backend: kubelets started, hardware
    changes) is sent once, with the process's last case's teardown, after every case ran."""
    from drakit.conformance.backends.reference import ReferenceBackend

    opened: list[str] = []
    real_open = ReferenceBackend.open

    def counting_open(self, case):  # type: ignore[no-untyped-def]
        opened.append(case.id)
        return real_open(self, case)

    monkeypatch.setattr(ReferenceBackend, "open", counting_open)
    monkeypatch.setattr(ReferenceBackend, "environment_update", lambda self: {"nodeSide": {"opened": len(opened)}},
                        raising=False)
    pytester.makeconftest(UPDATE_CONFTEST)
    pytester.makefile(".case.yaml", good=CASE.format(name="one", count=1) + "---\n" + CASE.format(name="two", count=1))
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--drakit-out", str(pytester.path / "out"))
    res.assert_outcomes(passed=2)
    updates = [json.loads(line) for line in (pytester.path / "updates.jsonl").read_text().splitlines()]
    assert [(u[0].rsplit("::", 1)[1], u[1], u[2]) for u in updates] == [
        ("demo/two[reference]", "teardown", {"backend": "reference", "process": "main",
                                             "environment": {"nodeSide": {"opened": 2}}})]


def test_an_environment_update_is_merged_a_level_deep() -> None:
    from types import SimpleNamespace

    from drakit.conformance.results import ResultsCollector

    collector = ResultsCollector(SimpleNamespace(), gates={}, backends=["cluster"])  # type: ignore[arg-type]

    def report(key: str, value: dict) -> SimpleNamespace:  # type: ignore[type-arg]
        return SimpleNamespace(user_properties=[(key, json.dumps(value))], nodeid="x", when="call", duration=0.0)

    collector.pytest_runtest_logreport(report("drakit-environment", {"backend": "cluster", "environment": {
        "kind": "cluster", "nodeSide": {"realKubelets": "every case node", "kubeletsStarted": 0}}}))
    collector.pytest_runtest_logreport(report("drakit-environment-update", {"backend": "cluster", "environment": {
        "nodeSide": {"kubeletsStarted": 3}, "extra": 1}}))
    assert collector._backend_env("cluster") == {
        "kind": "cluster", "nodeSide": {"realKubelets": "every case node", "kubeletsStarted": 3}, "extra": 1}


def test_each_worker_counts_its_own_cases_and_the_counts_add_up() -> None:
    """Under ``-n 2`` each worker sends its own end-of-run update: results.json says how many
    kubelets the whole run started, not the last worker's count."""
    from types import SimpleNamespace

    from drakit.conformance.results import ResultsCollector

    collector = ResultsCollector(SimpleNamespace(), gates={}, backends=["cluster"])  # type: ignore[arg-type]

    def report(key: str, value: dict) -> SimpleNamespace:  # type: ignore[type-arg]
        return SimpleNamespace(user_properties=[(key, json.dumps(value))], nodeid="x", when="call", duration=0.0)

    for _worker in ("gw0", "gw1"):  # each worker describes its cluster at its first case
        collector.pytest_runtest_logreport(report("drakit-environment", {"backend": "cluster", "environment": {
            "kind": "cluster", "nodeSide": {"realKubelets": "every case node", "kubeletsStarted": 0}}}))
    collector.pytest_runtest_logreport(report("drakit-environment-update", {"backend": "cluster", "process": "gw0",
                                              "environment": {"nodeSide": {"kubeletsStarted": 3, "version": "a"}}}))
    collector.pytest_runtest_logreport(report("drakit-environment-update", {"backend": "cluster", "process": "gw1",
                                              "environment": {"nodeSide": {"kubeletsStarted": 4, "version": "a"}}}))
    assert collector._backend_env("cluster")["nodeSide"] == {
        "realKubelets": "every case node", "kubeletsStarted": 7, "version": "a"}
