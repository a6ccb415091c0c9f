"""Feature gates are observed, never assumed: the components' own ``kubernetes_feature_enabled``
values win, scheduler-only gates count only from the scheduler, the user's ``--feature-gates``
fills in what nothing showed, and what is left is unknown (never guessed)."""

from __future__ import annotations

from pathlib import Path

from drakit.conformance.backends.discovery import Discovery, settle_gates
from drakit.conformance.backends.gatemetrics import local_run_dir, parse_feature_metrics
from drakit.conformance.features import DEFAULT_GATES

METRICS = """\
# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="DRAConsumableCapacity",stage="BETA"} 1
kubernetes_feature_enabled{name="DRAFractionalCapacityRange",stage="BETA"} 1
kubernetes_feature_enabled{name="DRAListTypeAttributes",stage="ALPHA"} 0
kubernetes_feature_enabled{stage="ALPHA",name="SchedulerPreQueueingHints"} 1
apiserver_request_total{code="200"} 12
"""


def test_parse_feature_metrics_reads_every_gate_sample_and_nothing_else() -> None:
    assert parse_feature_metrics(METRICS) == {"DRAConsumableCapacity": True, "DRAFractionalCapacityRange": True,
                                              "DRAListTypeAttributes": False, "SchedulerPreQueueingHints": True}
    assert parse_feature_metrics("garbage\n{}\nkubernetes_feature_enabled{name=\"X\"} nan-ish") == {}


def _inferred() -> Discovery:
    """What dry-run inference leaves: every gate assumed, one probe decided."""
    found = Discovery("v1.37.2", ("resource.k8s.io/v1",), {})
    for gate, default in DEFAULT_GATES.items():
        found.gates[gate], found.sources[gate] = default, "assumed: 1.37 default, not observable from the API"
    found.gates["DRAListTypeAttributes"], found.sources["DRAListTypeAttributes"] = True, "dry-run: field kept"
    return found


def test_scheduler_only_gates_need_the_scheduler_and_the_api_server_decides_the_rest() -> None:
    found = _inferred()
    settle_gates(found, {"kube-apiserver": parse_feature_metrics(METRICS)}, {})
    # the API server says DRAFractionalCapacityRange is on, but it acts in the scheduler only
    assert "DRAFractionalCapacityRange" in found.unknown and "DRAFractionalCapacityRange" not in found.gates
    assert "the API server has it on" in found.sources["DRAFractionalCapacityRange"]
    assert found.gates["DRAConsumableCapacity"] is True
    assert found.sources["DRAConsumableCapacity"] == "kube-apiserver /metrics"
    assert found.gates["DRAListTypeAttributes"] is False  # the component's own value wins over the probe
    assert found.sources["DRAListTypeAttributes"] == "kube-apiserver /metrics; dry-run: field kept: disagrees"
    assert found.gates["DRAResourceClaimDeviceStatus"] is True  # not in these metrics, no probe: locked on
    assert found.sources["DRAResourceClaimDeviceStatus"] == "locked on in 1.37"
    # a gate neither the metrics nor a probe showed is unknown, not its default
    assert "DRAResourcePoolStatus" in found.unknown


def test_the_scheduler_s_metrics_and_the_user_s_statement_fill_in() -> None:
    found = _inferred()
    settle_gates(found, {"kube-apiserver": parse_feature_metrics(METRICS),
                         "kube-scheduler": {"DRAFractionalCapacityRange": False, "SchedulerPreQueueingHints": True}},
                 {"DRAResourcePoolStatus": True, "DRAConsumableCapacity": False})
    assert (found.gates["DRAFractionalCapacityRange"], found.sources["DRAFractionalCapacityRange"]) == (
        False, "kube-scheduler /metrics")
    assert (found.gates["DRAResourcePoolStatus"], found.sources["DRAResourcePoolStatus"]) == (
        True, "stated: --feature-gates")
    assert found.gates["DRAConsumableCapacity"] is True  # observed beats stated, and the source says so
    assert "--feature-gates says false; the observed value is used" in found.sources["DRAConsumableCapacity"]
    assert "DRAResourcePoolStatus" not in found.unknown


def test_without_any_metrics_a_scheduler_only_gate_is_unknown() -> None:
    found = _inferred()
    settle_gates(found, {}, {})
    assert {"DRAFractionalCapacityRange", "SchedulerPreQueueingHints"} <= found.unknown
    assert "DRAListTypeAttributes" not in found.unknown  # the probe decided it


def test_a_kubeconfig_is_drakit_s_local_cluster_only_in_its_run_dir(tmp_path: Path) -> None:
    from drakit.clusters.local.launcher import MARKER
    (tmp_path / "kubeconfig").write_text("x")
    assert local_run_dir(tmp_path / "kubeconfig") is None
    (tmp_path / MARKER).write_text("x")
    (tmp_path / "state.json").write_text("{}")
    assert local_run_dir(tmp_path / "kubeconfig") == tmp_path.resolve()
    assert local_run_dir(None) is None


def test_the_api_server_s_metrics_through_the_kubeconfig_client() -> None:
    """apiserver_gates reads /metrics with the client's own credentials; a refusal is a reason."""
    from drakit.conformance.backends.gatemetrics import apiserver_gates

    class Response:
        def __init__(self, status: int, data: bytes) -> None:
            self.status, self.data = status, data

        def read(self) -> None:
            pass

    class Client:
        def __init__(self, status: int) -> None:
            self.status = status
            self.asked: list[tuple[str, str, list[str]]] = []

        def param_serialize(self, method: str, resource_path: str, auth_settings: list[str]) -> tuple[str, str]:
            self.asked.append((method, resource_path, auth_settings))
            return method, resource_path

        def call_api(self, method: str, url: str, _request_timeout: float) -> Response:
            return Response(self.status, METRICS.encode())

    ok = Client(200)
    gates, why = apiserver_gates(ok)
    assert gates == parse_feature_metrics(METRICS) and why == ""
    assert ok.asked == [("GET", "/metrics", ["BearerToken"])]
    assert apiserver_gates(Client(403)) == (None, "kube-apiserver /metrics not readable (HTTP 403)")
