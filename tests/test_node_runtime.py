"""The reference backend prepares claims through the fake drivers' real gRPC sockets."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.backends import noderuntime
from conformance.backends.reference import ReferenceBackend
from conformance.cases.loader import load_file
from conformance.cases.runner import run_case
from fake_driver.profile import load_profile

SUITE = Path(__file__).resolve().parents[1] / "conformance" / "suites" / "core" / "template-claims.case.yaml"


@pytest.fixture()
def case():  # type: ignore[no-untyped-def]
    cases = load_file(SUITE, load_profile()).cases
    yield next(c for c in cases if c.id == "core/template-claim-gets-one-gpu")
    noderuntime.shutdown()


def test_running_pod_has_its_claim_prepared_through_the_driver_socket(case) -> None:  # type: ignore[no-untyped-def]
    session = ReferenceBackend().open(case)
    assert run_case(case, session).status == "passed"
    runtime = session.cluster.node_runtime
    assert len(runtime.prepared) == 1
    node = next(iter(noderuntime._NODES.values()))
    specs = list((Path(node.root) / "cdi").glob("*.json"))
    assert specs, "the driver wrote no CDI spec for the prepared claim"
    session.close(failed=False)
    assert not runtime.prepared
    assert not list((Path(node.root) / "cdi").glob("*.json")), "unprepare left the CDI spec behind"


def test_a_driver_refusal_keeps_the_pod_from_running(case, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    session = ReferenceBackend().open(case)
    real = noderuntime.NodeRuntime.prepare
    monkeypatch.setattr(noderuntime.NodeRuntime, "prepare", lambda self, *a: "driver said no")
    session.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
                   "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": load_profile()["class.gpu"]}}]}}}})
    session.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                            "containers": [{"name": "c", "image": "pause"}]}})
    pod = session.get("Pod", "p")
    assert pod["spec"]["nodeName"] and (pod.get("status") or {}).get("phase") != "Running"
    assert any("driver said no" in e["message"] for e in session.events())
    monkeypatch.setattr(noderuntime.NodeRuntime, "prepare", real)
    session.close(failed=False)
