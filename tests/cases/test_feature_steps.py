"""Case-format additions for the feature suites: the advance and driverStatus steps, node
allocatable in hardware, the extended-resource claim reference and the new assertions."""

from __future__ import annotations

from drakit.fake_driver.profile import load_profile

from drakit.conformance.backends.reference import ReferenceBackend
from drakit.conformance.cases.loader import load_text
from drakit.conformance.cases.runner import run_case

PROFILE = load_profile()

HEAD = """\
id: t/x
title: x
features: [device-taints]
hardware:
  nodes:
    - {name: node-a, shape: small-1gpu, allocatable: {cpu: "4"}}
steps:
  - apply:
      - apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: c}
        spec:
          devices:
            requests:
              - {name: gpu, exactly: {deviceClassName: "${class.gpu}"}}
      - apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          resourceClaims: [{name: gpu, resourceClaimName: c}]
          containers: [{name: main, image: pause, resources: {claims: [{name: gpu}]}}]
"""


def run(text: str):  # type: ignore[no-untyped-def]
    res = load_text(text, "x.case.yaml", PROFILE)
    assert not res.errors, res.errors
    (case,) = res.cases
    backend = ReferenceBackend()
    return case, run_case(case, backend.open(case))


def test_loader_reads_new_steps_and_node_allocatable() -> None:
    text = HEAD + """\
  - advance: 2h
  - driverStatus:
      claim: c
      devices: [{request: gpu, conditions: [{type: Ready, status: "True", reason: Ok, message: ""}]}]
"""
    case, outcome = run(text)
    assert case.nodes[0].allocatable == {"cpu": "4"}
    assert [s.kind for s in case.steps] == ["apply", "advance", "driverStatus"]
    assert case.steps[1].seconds == 7200
    assert outcome.status == "passed", outcome.failure


def test_a_step_cannot_mix_kinds() -> None:
    res = load_text(HEAD + "  - {advance: 1s, expect: [{podRunning: {pod: p}}]}\n", "x.case.yaml", PROFILE)
    assert res.errors and not res.cases


def test_driver_status_is_written_and_rejections_are_reported() -> None:
    good = HEAD + """\
  - driverStatus:
      claim: c
      devices: [{request: gpu, networkData: {interfaceName: net1}}]
  - expect:
      - object: {kind: ResourceClaim, name: c, match: {status: {devices: [{networkData: {interfaceName: net1}}]}}}
"""
    assert run(good)[1].status == "passed"
    bad = HEAD + """\
  - driverStatus:
      claim: c
      devices: [{request: gpu, networkData: {ips: [not-an-ip]}}]
"""
    outcome = run(bad)[1]
    assert outcome.status == "failed" and "rejected" in outcome.failure["summary"]  # type: ignore[index]
    expected = bad + "    expectError: networkData.ips[0]\n"
    assert run(expected)[1].status == "passed"
    unknown = HEAD + """\
  - driverStatus:
      claim: c
      devices: [{request: nope, conditions: []}]
"""
    assert "no allocated device for request" in run(unknown)[1].failure["summary"]  # type: ignore[index]


def test_pod_evicted_and_event_assertions() -> None:
    text = HEAD + """\
  - apply:
      apiVersion: resource.k8s.io/v1
      kind: DeviceTaintRule
      metadata: {name: r}
      spec:
        deviceSelector: {driver: "${driver.gpu}"}
        taint: {key: k, effect: NoExecute}
  - expect:
      - podEvicted: {pod: p}
      - event: {reason: DeviceTaintManagerEviction, kind: Pod, name: p, messageContains: Marking, count: 1}
      - event: {reason: FailedScheduling, absent: true}
"""
    assert run(text)[1].status == "passed"
    not_evicted = HEAD + "  - expect:\n      - podEvicted: {pod: p}\n"
    outcome = run(not_evicted)[1]
    assert outcome.status == "failed" and "was not evicted" in outcome.failure["summary"]  # type: ignore[index]


def test_scheduler_metrics_comparisons() -> None:
    ok = HEAD + "  - expect:\n      - schedulerMetrics: {scheduleAttempts: 1, claimEvents: '>= 1', unschedulablePods: '< 1'}\n"
    assert run(ok)[1].status == "passed"
    wrong = HEAD + "  - expect:\n      - schedulerMetrics: {scheduleAttempts: '> 1'}\n"
    assert "scheduler metric scheduleAttempts is 1, expected > 1" in run(wrong)[1].failure["summary"]  # type: ignore[index]
    unknown = HEAD + "  - expect:\n      - schedulerMetrics: {nope: 1}\n"
    assert "unknown scheduler metric" in run(unknown)[1].failure["summary"]  # type: ignore[index]


def test_node_operations_assertion() -> None:
    text = HEAD + "  - expect:\n      - nodeOperations: {claim: c, prepared: called, unprepared: none}\n"
    assert run(text)[1].status == "passed"
    text = HEAD + "  - expect:\n      - nodeOperations: {claim: c, prepared: skipped}\n"
    assert run(text)[1].status == "failed"


def test_extended_resources_claim_reference() -> None:
    text = """\
id: t/er
title: er
features: [extended-resource]
hardware:
  nodes:
    - {name: node-a, shape: small-1gpu}
steps:
  - apply:
      apiVersion: v1
      kind: Pod
      metadata: {name: p}
      spec:
        containers: [{name: m, image: pause, resources: {limits: {"deviceclass.resource.kubernetes.io/${class.gpu}": "1"}}}]
  - expect:
      - allocated: {claim: {pod: p, extendedResources: true}, count: 1}
      - object: {kind: ResourceClaim, claim: {pod: p, extendedResources: true}, match: {metadata: {annotations: {resource.kubernetes.io/extended-resource-claim: "true"}}}}
"""
    assert run(text)[1].status == "passed"
