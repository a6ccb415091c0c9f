"""The reference backend prepares claims through the fake drivers' real gRPC sockets; device
metadata files and device status come back from the drivers; the node runtime's pod checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from drakit.conformance.backends import noderuntime
from drakit.conformance.backends.reference import ReferenceBackend
from drakit.conformance.cases.loader import load_file
from drakit.conformance.cases.runner import run_case
from drakit.fake_driver.profile import load_profile

SUITE = Path(__file__).resolve().parents[1] / "conformance" / "suites" / "core" / "template-claims.case.yaml"


@pytest.fixture()
def case():  # type: ignore[no-untyped-def]
    noderuntime.shutdown()  # fresh fake nodes: other tests may leave claims prepared on cached ones
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


def test_device_metadata_is_read_back_from_the_driver_and_gone_after_unprepare(case) -> None:  # type: ignore[no-untyped-def]
    import dataclasses
    with_metadata = dataclasses.replace(case, features=(*case.features, "device-metadata"))
    session = ReferenceBackend().open(with_metadata)
    assert run_case(with_metadata, session).status == "passed"
    pod = next(p for p in session.list("Pod"))
    claim = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    request = session.get("ResourceClaim", claim)["status"]["allocation"]["devices"]["results"][0]["request"]
    docs = session.device_metadata(claim, request)
    assert docs and docs[0]["kind"] == "DeviceMetadata" and docs[0]["metadata"]["name"] == claim
    assert docs[0]["podClaimName"] == pod["spec"]["resourceClaims"][0]["name"]
    assert session.device_metadata(claim, "no-such-request") is None
    assert session.device_metadata(claim, request, driver="other.example.com") is None
    session.close(failed=False)
    assert session.device_metadata(claim, request) is None


def test_without_the_feature_no_metadata_file_is_written(case) -> None:  # type: ignore[no-untyped-def]
    session = ReferenceBackend().open(case)
    assert run_case(case, session).status == "passed"
    claim = session.list("ResourceClaim")[0]
    request = claim["status"]["allocation"]["devices"]["results"][0]["request"]
    assert session.device_metadata(claim["metadata"]["name"], request) is None
    session.close(failed=False)


def test_without_the_node_side_device_metadata_is_a_harness_error(case) -> None:  # type: ignore[no-untyped-def]
    from drakit.conformance.backends.base import HarnessError
    session = ReferenceBackend(node_side=False).open(case)
    with pytest.raises(HarnessError, match="node side"):
        session.device_metadata("c", "r")


def test_the_nic_driver_writes_network_data_into_the_claim_status(case) -> None:  # type: ignore[no-untyped-def]
    assert case.nodes[0].shape == "small-1gpu"  # one GPU, one NIC
    session = ReferenceBackend().open(case)
    nic_class = load_profile()["class.nic"]
    session.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "net"},
                   "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": nic_class}}]}}})
    session.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"resourceClaims": [{"name": "nic", "resourceClaimName": "net"}],
                            "containers": [{"name": "c", "image": "pause", "resources": {"claims": [{"name": "nic"}]}}]}})
    assert session.get("Pod", "p")["status"]["phase"] == "Running"
    (entry,) = session.get("ResourceClaim", "net")["status"]["devices"]
    assert entry["driver"] == load_profile()["driver.nic"] and entry["networkData"]["interfaceName"] == "net1"
    assert entry["conditions"][0]["type"] == "Ready"
    session.close(failed=False)


def _pod(**status: object) -> dict:  # type: ignore[type-arg]
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
            "spec": {"nodeName": "n", "schedulingGroup": {"podGroupName": "g"},
                     "resourceClaims": [{"name": "direct", "resourceClaimName": "c1"},
                                        {"name": "tmpl", "resourceClaimTemplateName": "t"}]},
            "status": status}


def test_pod_claims_follow_the_kubelets_naming_rules() -> None:
    from drakit.clusters.nodeagent.podclaims import ClaimRef, NotReady, is_done, pod_claims, uses_claims
    with pytest.raises(NotReady, match="'tmpl' has not been created yet"):
        pod_claims(_pod())
    pod = _pod(resourceClaimStatuses=[{"name": "tmpl", "resourceClaimName": "p-tmpl-x"}],
               extendedResourceClaimStatus={"resourceClaimName": "p-extended"})
    assert pod_claims(pod) == [ClaimRef("c1", False), ClaimRef("p-tmpl-x", True), ClaimRef("p-extended", False)]
    assert pod_claims(_pod(resourceClaimStatuses=[{"name": "tmpl"}])) == [ClaimRef("c1", False)]  # none needed
    assert uses_claims(pod) and not uses_claims({"spec": {}, "status": {}})
    assert is_done({"metadata": {"deletionTimestamp": "t"}}) and is_done({"status": {"phase": "Failed"}})
    assert not is_done(pod)


def test_claim_checks_owner_and_reservation_like_the_kubelet() -> None:
    from drakit.clusters.nodeagent.podclaims import ClaimRef, claim_error
    pod = _pod()
    mine = {"metadata": {"name": "c", "namespace": "ns", "uid": "c-uid",
                         "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "pod-uid", "controller": True}]},
            "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}]}}
    assert claim_error(pod, ClaimRef("c", True), mine) is None
    stranger = {**mine, "metadata": {**mine["metadata"], "ownerReferences": [{"kind": "Pod", "uid": "x", "controller": True}]}}
    assert "was not created for Pod ns/p" in (claim_error(pod, ClaimRef("c", True), stranger) or "")
    assert claim_error(pod, ClaimRef("c", False), stranger) is None  # named claims have no owner check
    unreserved = {**mine, "status": {"reservedFor": [{"resource": "pods", "name": "q", "uid": "other"}]}}
    assert claim_error(pod, ClaimRef("c", False), unreserved) == \
        "pod p (pod-uid) is not allowed to use ResourceClaim c (c-uid)"
    group = {**mine, "status": {"reservedFor": [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g"}]}}
    assert claim_error(pod, ClaimRef("c", False), group) is None


def test_metadata_files_are_read_as_json_streams() -> None:
    from drakit.clusters.nodeagent.localnode import read_json_stream
    assert read_json_stream('{\n "a": 1\n}\n{"b": [2]}\n\n') == [{"a": 1}, {"b": [2]}]
    assert read_json_stream("") == []
    with pytest.raises(ValueError):
        read_json_stream('{"a": 1} {')


@pytest.mark.parametrize("argv", [
    ["driver", "controller", "--kubeconfig", "/nonexistent/kubeconfig"],
    ["driver", "serve", "--driver", "gpu.acme.example.com", "--node", "n", "--plugin-dir", "/nonexistent/p",
     "--registry-dir", "/nonexistent/r", "--cdi-dir", "/nonexistent/c", "--kubeconfig", "/nonexistent/kubeconfig"],
    ["driver", "serve", "--driver", "gpu.acme.example.com", "--node", "n", "--plugin-dir", "/nonexistent/p",
     "--registry-dir", "/nonexistent/r", "--cdi-dir", "/nonexistent/c", "--kubeconfig", "k", "--claims", "c"],
    ["node-agent", "--registry-dir", "/nonexistent/r", "--node", "n", "--kubeconfig", "/nonexistent/kubeconfig"],
])
def test_api_flags_with_bad_input_give_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from drakit.clusters.nodeagent import cli as agent_cli
    from drakit.fake_driver import cli as driver_cli
    module = agent_cli if argv[0] == "node-agent" else driver_cli
    parser = argparse.ArgumentParser(prog="drakit")
    module.add_parsers(parser.add_subparsers(dest="command", required=True))
    assert module.run(parser.parse_args(argv)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"drakit {' '.join(argv[:2]) if argv[0] == 'driver' else 'node-agent'}: ")
    assert "kubeconfig" in err or "exclude each other" in err
    assert not Path("/nonexistent").exists()


def test_a_driver_that_never_unprepares_gets_fresh_plugins_for_the_next_case(case, monkeypatch: pytest.MonkeyPatch,
                                                                              caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    """The plugins are shared by a worker's cases: a claim a driver refused to unprepare would keep
    its device taken from every later case (issue 33: 90 cases failed so). drakit frees what it
    can (the node's fake drivers start afresh) and says so."""
    monkeypatch.setenv("DRAKIT_FAKE_DRIVER_PLANT", "unprepare-always-fails")
    first = ReferenceBackend().open(case)
    assert run_case(case, first).status == "passed"
    stuck = set(noderuntime._NODES.values())
    first.close(failed=False)
    assert not stuck & set(noderuntime._NODES.values()), "the node whose driver kept a claim prepared was kept"
    assert any("NodeUnprepareResources failed" in r.getMessage() and "afresh" in r.getMessage() for r in caplog.records)
    second = ReferenceBackend().open(case)  # the same device again: prepared by the fresh plugin
    assert run_case(case, second).status == "passed"
    second.close(failed=False)
