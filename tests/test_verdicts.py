"""Verdicts that say what is wrong and why (issue 33): the prepare answer against the allocation,
a declared behaviour its devices contradict, binding conditions in inventory binding, and the
cause a failure names (the kubelet's events and log, the claim's binding conditions, both values
of an environment variable)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from drakit.conformance.cases.causes import binding_waits, cause
from drakit.conformance.cases.driverchecks import env_mismatch
from drakit.conformance.cases.runner import run_case
from drakit.conformance.nodecheck.inspect import devices_against_allocation
from drakit.conformance.spec.case import DeviceNeed, Inventory
from drakit.conformance.spec.contradictions import contradiction
from drakit.conformance.spec.inventory import Unbound, bind, published_devices
from drakit.fake_driver.planted import answered, partition_overcommit
from drakit.fake_driver.slices import publish_slices
from drakit.fake_hw.inventory import build_inventory

GPU = "gpu.acme.example.com"


def acme_slices() -> list[dict[str, Any]]:
    return [s for s in publish_slices(build_inventory("acme-partitionable", "n1")) if s["spec"]["driver"] == GPU]


def test_a_device_with_binding_conditions_is_bound_for_admin_access() -> None:
    """The pod waits for the conditions, as the case does: not an inventory skip (the example
    driver with --binding-conditions had admin-access skipped)."""
    devices = [{"name": f"gpu{i}", "attributes": {"index": {"int": i}}, "bindingConditions": ["ready"],
                "bindingFailureConditions": ["failed"]} for i in range(2)]
    slices = [{"spec": {"driver": GPU, "nodeName": "n1", "devices": devices,
                        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}}}]
    inv = Inventory((DeviceNeed("a", dedicated=True, takeable=True, twice=True),))
    got = bind(inv, published_devices(slices, GPU), GPU)
    assert not isinstance(got, Unbound), got
    assert got["inv.a.device"] == "gpu0" and "index" in got["inv.a.cel"]


def test_partitions_that_fit_beside_their_full_device_contradict_partitionable_devices() -> None:
    good = acme_slices()
    assert contradiction("partitionable-devices", good, GPU) is None
    broken = partition_overcommit(copy.deepcopy(good))
    why = contradiction("partitionable-devices", broken, GPU)
    assert why is not None and "device gpu0 consumes all of shared counter set 'gpu0-counters'" in why, why
    assert "consume none of it" in why and "overcommit" in why
    # the case could not be bound on the broken slices: without the contradiction it was an inventory skip
    inv = Inventory((DeviceNeed("a", has="consumesCounters", selectable=True),
                     DeviceNeed("b", selectable=True, shares_counters_with="a")))
    assert isinstance(bind(inv, published_devices(broken, GPU), GPU), Unbound)
    assert contradiction("admin-access", broken, GPU) is None  # only the behaviour the devices speak of


def test_counters_nobody_consumes_or_that_all_fit_are_contradictions_but_lone_full_devices_are_not() -> None:
    counters = {"name": "s", "counters": {"memory": {"value": "80Gi"}}}

    def pool(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"spec": {"driver": GPU, "nodeName": "n1", "devices": devices, "sharedCounters": [counters],
                          "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}}}]

    def uses(name: str, amount: str, uuid: str) -> dict[str, Any]:
        return {"name": name, "attributes": {"uuid": {"string": uuid}, "model": {"string": "m"}},
                "consumesCounters": [{"counterSet": "s", "counters": {"memory": {"value": amount}}}]}

    none = contradiction("partitionable-devices", pool([{"name": "a"}, {"name": "b"}]), GPU)
    assert none is not None and "that none of its 2 devices consumes" in none
    zero = contradiction("partitionable-devices", pool([uses("full", "80Gi", "u0"), uses("p0", "0", "u1")]), GPU)
    assert zero is not None and "memory 80Gi together" in zero, zero
    # correct: the partition and its full device exceed the set together
    assert contradiction("partitionable-devices", pool([uses("full", "80Gi", "u0"), uses("p0", "10Gi", "u1")]), GPU) is None
    # a GPU without partitions consumes its own set whole; another GPU (another uuid) is no partition of it
    lone = pool([uses("gpu0", "80Gi", "u0"), {"name": "gpu1", "attributes": {"uuid": {"string": "u1"},
                                                                            "model": {"string": "m"}}}])
    assert contradiction("partitionable-devices", lone, GPU) is None


def test_the_prepare_answer_must_name_exactly_the_allocated_devices_with_their_requests() -> None:
    results = [{"request": "dev", "pool": "n1", "device": "gpu0"}, {"request": "pair/any", "pool": "n1", "device": "gpu1"}]
    assert devices_against_allocation(results, [(("dev",), "n1", "gpu0"), (("pair",), "n1", "gpu1")]) == []
    other = devices_against_allocation(results, [(("dev",), "n1", "gpu2"), (("pair",), "n1", "gpu1")])
    assert other == ["the answer names device(s) n1/gpu2, which the claim was not allocated (allocated: n1/gpu0, n1/gpu1)",
                     "the answer does not name the allocated device(s) n1/gpu0"]
    unnamed = devices_against_allocation(results, [(("pair",), "n1", "gpu0"), (("pair",), "n1", "gpu1")])
    assert unnamed == ["device n1/gpu0 serves requests ['pair'] it was not allocated for (or names a subrequest)",
                       "device n1/gpu0 does not name request(s) ['dev'] it was allocated for (the kubelet gives a "
                       "container only the devices of the requests it uses)"]
    # no request names: the device serves every request of the claim (the DRA gRPC API's rule)
    assert devices_against_allocation(results, [((), "n1", "gpu0"), ((), "n1", "gpu1")]) == []
    twice = devices_against_allocation(results[:1], [(("dev",), "n1", "gpu0")] * 2)
    assert twice == ["the answer names n1/gpu0 (2 times, allocated 1)"]
    # the planted fault names the next device of the pool
    assert answered(frozenset({"prepare-other-device"}), "gpu0", {"gpu0": "n1", "gpu1": "n1", "nic0": "n2"}) == "gpu1"
    assert answered(frozenset(), "gpu0", {"gpu0": "n1"}) == "gpu0"


def test_a_variable_with_a_wrong_value_is_shown_with_both_values() -> None:
    said = env_mismatch({"DRAKIT_GPU0_DEVICE": "gpu0", "DRAKIT_GPU1_DEVICE": "gpu1"},
                        {"DRAKIT_GPU0_DEVICE": "wrong-gpu0"})
    assert said == ("lacks the driver's CDI edits ['DRAKIT_GPU1_DEVICE']; has DRAKIT_GPU0_DEVICE='wrong-gpu0', "
                    "expected 'gpu0' (the vendor profile's containerEnv)")


class Session:
    namespace = "ns"

    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]], events: list[dict[str, Any]] = (),  # type: ignore[assignment]
                 nodes: Any = None) -> None:
        self.objects, self._events, self.driver_nodes, self.log_marks = objects, list(events), nodes, {}

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, name))

    def events(self) -> list[dict[str, Any]]:
        return self._events

    def list(self, kind: str) -> list[dict[str, Any]]:
        return [o for (k, _), o in self.objects.items() if k == kind]

    def diagnostics(self) -> dict[str, Any]:
        return {}


def pod(name: str, node: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "resourceClaims": [{"name": "dev", "resourceClaimName": "c"}]},
            "status": {"phase": "Pending"}}


def test_a_pod_that_stays_pending_names_the_drivers_prepare_error() -> None:
    event = {"reason": "FailedPrepareDynamicResources", "involvedObject": {"kind": "Pod", "name": "monitor"},
             "message": "Failed to prepare dynamic resources: NodePrepareResources failed for ResourceClaim admin: "
                        "admin access refused"}
    s = Session({("Pod", "monitor"): pod("monitor", "n1")}, [event])
    said = cause(s, "podRunning", {"pod": "monitor"}, [])
    assert said == ("the kubelet could not prepare its claims (FailedPrepareDynamicResources): Failed to prepare "
                    "dynamic resources: NodePrepareResources failed for ResourceClaim admin: admin access refused")


def test_a_pod_waiting_for_binding_conditions_names_the_device_and_condition() -> None:
    result = {"request": "dev", "driver": GPU, "pool": "n1", "device": "gpu0", "bindingConditions": ["attached", "ready"],
              "bindingFailureConditions": ["failed"]}
    claim = {"metadata": {"name": "c"}, "status": {"allocation": {"devices": {"results": [result]}},
                                                   "devices": [{"driver": GPU, "pool": "n1", "device": "gpu0",
                                                                "conditions": [{"type": "attached", "status": "True"}]}]}}
    s = Session({("Pod", "p"): pod("p"), ("ResourceClaim", "c"): claim})
    explained = [{"subject": "pod ns/p", "verdict": "fits", "message": "fits on 1 of 2 nodes"}]
    said = cause(s, "podRunning", {"pod": "p"}, explained)
    assert said == (f"the scheduler waits for binding condition ready of device {GPU}/n1/gpu0 (claim c): not True in "
                    "the claim's device status (set by the driver); drakit explain: fits: fits on 1 of 2 nodes")
    claim["status"]["devices"][0]["conditions"].append({"type": "failed", "status": "True"})
    assert binding_waits(s, pod("p"))[0] == f"binding failure condition failed of device {GPU}/n1/gpu0 (claim c) is True"


def test_a_pod_kept_by_a_failing_unprepare_names_the_call_and_the_drivers_error() -> None:
    from drakit.conformance.backends.drivernodereads import unprepare_refusal
    log = ['E1207 pod_workers.go:1301] "Error syncing pod, skipping" err="unprepare dynamic resources: '
           'NodeUnprepareResources failed for ResourceClaim c: planted fault \\"x\\"" pod="ns/p" podUID="u"',
           'E1207 ... err="unprepare dynamic resources: other" pod="ns/q"']

    class Nodes:
        def unprepare_refusals(self, namespace: str, since: dict[str, int],
                               pod: str | None = None) -> list[tuple[str, str, str]]:
            return [("drakit-driver-1", *got) for ln in log if (got := unprepare_refusal(ln, namespace, pod))]

    s = Session({("Pod", "p"): pod("p", "n1")}, nodes=Nodes())
    said = cause(s, "object", {"kind": "Pod", "name": "p", "absent": True}, [])
    assert said == ('the kubelet on drakit-driver-1 failed to unprepare its claims: NodeUnprepareResources failed for '
                    'ResourceClaim c: planted fault "x" (it keeps the pod Terminating and retries every 10-15 s; '
                    '1 refusal(s) so far)')
    assert cause(Session({}), "object", {"kind": "Pod", "name": "p", "absent": True}, []) is None


def test_a_contradicted_behaviour_fails_at_its_first_step_saying_why() -> None:
    from drakit.conformance.spec.case import Case, Step
    case = Case(id="driver/partitionable-devices", title="t", description="", features=("driver",), profile="optional",
                backends=("cluster",), feature_gates={}, namespace_labels={}, nodes=(), install_classes=False,
                steps=(Step(index=0, name="expect", kind="expect", line=7,
                            assertions=((7, "podRunning", {"pod": "p"}),)),),
                file="x.case.yaml", line=1, end_line=9, behaviour="partitionable-devices")
    s = Session({})
    s.contradiction = "the devices published for partitionable-devices contradict it: overcommit"  # type: ignore[attr-defined]
    out = run_case(case, s)  # type: ignore[arg-type]
    assert out.status == "failed" and out.failure is not None
    assert out.failure["summary"] == s.contradiction  # type: ignore[attr-defined]
    assert [r.status for r in out.steps] == ["failed"]


@pytest.mark.parametrize("check", ["podRunning", "object"])
def test_a_cause_never_hides_the_failure(check: str) -> None:
    class Broken(Session):
        def get(self, kind: str, name: str) -> dict[str, Any] | None:
            raise RuntimeError("boom")

    assert cause(Broken({}), check, {"pod": "p", "kind": "Pod", "name": "p", "absent": True}, []) is None


def test_the_runner_adds_the_cause_to_the_summary_of_a_failed_expectation() -> None:
    from drakit.conformance.spec.case import Case, Step
    case = Case(id="driver/admin-access", title="t", description="", features=("driver",), profile="optional",
                backends=("cluster",), feature_gates={}, namespace_labels={}, nodes=(), install_classes=False,
                steps=(Step(index=0, name="expect", kind="expect", line=7,
                            assertions=((7, "podRunning", {"pod": "monitor"}),)),),
                file="x.case.yaml", line=1, end_line=9, behaviour="admin-access")
    event = {"reason": "FailedPrepareDynamicResources", "involvedObject": {"kind": "Pod", "name": "monitor"},
             "message": "NodePrepareResources failed for ResourceClaim admin: admin access refused"}
    s = Session({("Pod", "monitor"): pod("monitor", "n1")}, [event])
    s.synchronous = True  # type: ignore[attr-defined]
    out = run_case(case, s)  # type: ignore[arg-type]
    assert out.failure is not None and out.failure["summary"] == (
        "pod monitor is Pending, expected Running: the kubelet could not prepare its claims "
        "(FailedPrepareDynamicResources): NodePrepareResources failed for ResourceClaim admin: admin access refused")


def test_the_driver_side_fails_a_contradicted_behaviour_instead_of_skipping_it() -> None:
    from pathlib import Path

    from drakit.conformance.backends.drivertarget import DriverSide
    from drakit.conformance.cases.loader import load_file
    from drakit.fake_driver.profile import load_profile, load_vendor_profile

    suite = Path(__file__).resolve().parents[1] / "conformance" / "suites" / "driver" / "optional.case.yaml"
    case = next(c for c in load_file(suite, load_profile()).cases if c.id == "driver/partitionable-devices")

    class Api:
        def __init__(self, slices: list[dict[str, Any]]) -> None:
            self.slices = slices

        def list(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
            return self.slices if kind == "ResourceSlice" else []

    side = DriverSide(Api(partition_overcommit(acme_slices())), load_vendor_profile())
    assert side.unmet(case) is None  # not skipped as inventory: it runs, and fails at once

    class Session:
        api, namespace = None, "ns"

    session = Session()
    side.prepare_session(session, case)
    assert "contradict it" in session.contradiction and "overcommit" in session.contradiction  # type: ignore[attr-defined]
    good = DriverSide(Api(acme_slices()), load_vendor_profile())
    assert good.unmet(case) is None and not good._contradicted  # bound: the case proves it on the cluster
    good.prepare_session(session, case)
    assert session.contradiction is None  # type: ignore[attr-defined]


def test_prepared_as_allocated_reads_the_answer_the_kubelet_recorded(tmp_path: Any) -> None:
    """The kubelet's DRA checkpoint (the node agent writes the same format) holds the devices of
    the driver's answer; an answer naming another device than the allocated one fails."""
    from types import SimpleNamespace

    from drakit.clusters.nodeagent.checkpoint import AgentCheckpoint, ClaimInfo
    from drakit.clusters.nodeagent.client import DeviceResult
    from drakit.conformance.backends.drivernodereads import NodeReads
    from drakit.conformance.cases.checks import ExpectationFailed
    from drakit.conformance.cases.driverchecks import check_prepared_as_allocated

    def record(device: str) -> None:
        info = ClaimInfo("uid-c", "ns", "c", {"pod-uid"},
                         {GPU: (DeviceResult(GPU, "n1", device, ("dev",), (f"k8s.{GPU}/gpu=uid-c-{device}",)),)})
        AgentCheckpoint(tmp_path, durable=False).save({"uid-c": info})

    reads = NodeReads()
    reads.dut = SimpleNamespace(driver=GPU)
    reads.nodes = {"n1": SimpleNamespace(name="n1", kubelet=SimpleNamespace(paths=SimpleNamespace(root_dir=tmp_path)))}
    claim = {"metadata": {"name": "c", "uid": "uid-c"},
             "status": {"allocation": {"devices": {"results": [{"request": "dev", "driver": GPU, "pool": "n1",
                                                                "device": "gpu0"}]}}}}
    s = Session({("ResourceClaim", "c"): claim})
    s.driver_nodes, s.vendor = reads, SimpleNamespace(under_test=SimpleNamespace(driver=GPU))  # type: ignore[attr-defined]
    with pytest.raises(ExpectationFailed, match="no node holds claim c prepared"):
        check_prepared_as_allocated(s, {"claim": "c"})  # type: ignore[arg-type]
    record("gpu0")
    check_prepared_as_allocated(s, {"claim": "c"})  # type: ignore[arg-type]
    record("gpu1")
    with pytest.raises(ExpectationFailed) as err:
        check_prepared_as_allocated(s, {"claim": "c"})  # type: ignore[arg-type]
    assert err.value.final  # the kubelet keeps the answer until it unprepares the claim: no waiting
    assert err.value.summary == (f"the {GPU} driver's NodePrepareResources answer for claim c on n1 (as the kubelet "
                                 "recorded it): the answer names device(s) n1/gpu1, which the claim was not allocated "
                                 "(allocated: n1/gpu0)")


def test_a_log_line_still_being_written_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cut value read as a wrong one would now fail at once (a wrong value is final)."""
    import kubernetes.client

    from drakit.conformance.backends.containers import env_from_log

    class Core:
        def __init__(self, client: Any) -> None:
            pass

        def read_namespaced_pod_log(self, pod: str, namespace: str, container: str | None = None) -> str:
            return text

    monkeypatch.setattr(kubernetes.client, "CoreV1Api", Core)
    api = type("Api", (), {"api_client": None})()
    text = "A=1\nDRAKIT_GPU0_DEVICE=gp"
    assert env_from_log(api, "ns", "p", None) == {"A": "1"}
    text = "A=1\nDRAKIT_GPU0_DEVICE=gpu0\n"
    assert env_from_log(api, "ns", "p", None) == {"A": "1", "DRAKIT_GPU0_DEVICE": "gpu0"}


def test_a_wrong_value_fails_at_once_and_a_missing_variable_is_waited_for() -> None:
    from types import SimpleNamespace

    from drakit.conformance.cases.checks import ExpectationFailed
    from drakit.conformance.cases.driverchecks import check_container_env

    claim = {"metadata": {"name": "c", "uid": "u"}, "status": {"allocation": {"devices": {"results": [
        {"request": "dev", "driver": GPU, "pool": "n1", "device": "gpu0"}]}}}}
    s = Session({("ResourceClaim", "c"): claim, ("Pod", "p"): pod("p", "n1")})
    s.vendor = SimpleNamespace(under_test=SimpleNamespace(  # type: ignore[attr-defined]
        driver=GPU, container_env=(("DRAKIT_{DEVICE}_DEVICE", "{device}"),), cpuset_env=None, container_devices=()))
    for got, final in (({"DRAKIT_GPU0_DEVICE": "wrong-gpu0"}, True), ({}, False)):
        s.container_env = lambda pod, container, got=got: got  # type: ignore[attr-defined]
        with pytest.raises(ExpectationFailed) as err:
            check_container_env(s, {"pod": "p", "container": "main", "claim": "c"})  # type: ignore[arg-type]
        assert err.value.final is final, err.value.summary


def test_a_container_that_waits_says_why_once() -> None:
    stuck = pod("p", "n1")
    stuck["status"]["containerStatuses"] = [{"name": "main", "state": {"waiting": {
        "reason": "CreateContainerError", "message": "failed to mount /x"}}}]
    s = Session({("Pod", "p"): stuck})
    assert cause(s, "podRunning", {"pod": "p"}, []) == "container main waits: CreateContainerError: failed to mount /x"
    stuck["status"]["containerStatuses"][0]["state"]["waiting"]["message"] = "unresolvable CDI devices k8s.x/y=z"
    assert cause(s, "podRunning", {"pod": "p"}, []) is None  # podRunning's own summary says it
