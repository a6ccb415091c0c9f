"""A driver whose NodeUnprepareResources always fails costs seconds (issue 33): the pure parts.
The kubelet's words are read from its log (kubelet 1.37.2 records no event), a deleted pod that
the kubelet refused to let go fails at once, the clean-up stops waiting once the kubelet's retry
failed too, and the devices such pods hold set later driver cases aside. The whole on real
kubelets: tests/clusters/test_driver_suite.py (unprepare-always-fails)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from drakit.conformance.backends.cleanup import StuckWatch, remove_case_objects
from drakit.conformance.backends.drivernodereads import unprepare_refusal
from drakit.conformance.backends.heldclaims import HeldClaims
from drakit.conformance.cases.checks import ExpectationFailed, check_object

# The line kubelet 1.37.2's pod worker logs when SyncTerminatingPod fails (pod_workers.go, the
# error of cm/dra/manager.go's unprepareResources): klog's structured text format.
LINE = ('E1207 09:40:00.123456   4242 pod_workers.go:1338] "Error syncing pod, skipping" '
        'err="unprepare dynamic resources: NodeUnprepareResources failed for ResourceClaim c: planted fault '
        'unprepare-always-fails: the device is \\"busy\\"" pod="drakit-driver-unprepare/p" podUID="0f0f"')


def test_the_kubelets_refusal_names_the_call_the_claim_and_the_drivers_error() -> None:
    pod, error = unprepare_refusal(LINE, "drakit-driver-unprepare") or ("", "")
    assert pod == "p"
    assert error == 'NodeUnprepareResources failed for ResourceClaim c: planted fault unprepare-always-fails: the device is "busy"'
    assert unprepare_refusal(LINE, "drakit-driver-unprepare", "q") is None
    assert unprepare_refusal(LINE, "other") is None
    assert unprepare_refusal(LINE.replace("unprepare dynamic resources", "prepare dynamic resources"), "drakit-driver-unprepare") is None


class Api:
    """Pods that never go (their kubelet refuses to unprepare) and their allocated claim."""

    def __init__(self) -> None:
        self.objects = {("Pod", "ns"): [{"metadata": {"name": "p"}}],
                        ("ResourceClaim", "ns"): [{"metadata": {"name": "c"}, "status": {"allocation": {"devices": {
                            "results": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}}}}]}
        self.deleted: list[tuple[str, str]] = []

    def list(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        return list(self.objects.get((kind, namespace or ""), []))

    def get(self, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        return next((o for o in self.list(kind, namespace) if o["metadata"]["name"] == name), None)

    def delete(self, kind: str, name: str, namespace: str | None, grace: int | None = None) -> None:
        self.deleted.append((kind, name))


def test_clean_up_stops_waiting_once_the_kubelets_retry_failed_too() -> None:
    api, reads = Api(), []

    def seen() -> bool:
        reads.append(time.monotonic())
        return len(reads) >= 2  # the kubelet's first refusal shows at the second read

    t0 = time.monotonic()
    left = remove_case_objects(api, "ns", [], lambda pod: True, timeout=60, refused=StuckWatch(seen, 1.5))
    took = time.monotonic() - t0
    assert 1.5 <= took < 6 and left == ["Pod/p", "ResourceClaim/c"], took  # its retry's time, not the 60 s
    assert ("Pod", "p") in api.deleted and ("Namespace", "ns") in api.deleted


def test_a_refusal_is_stuck_only_once_the_retry_had_its_time() -> None:
    now = [0.0]
    watch = StuckWatch(lambda: now[0] >= 3, 20.0, clock=lambda: now[0])
    assert not watch()            # nothing refused yet
    now[0] = 3.0
    assert not watch()            # refused at 3 s: the kubelet retries 10-15 s later
    now[0] = 22.9
    assert not watch()
    now[0] = 23.0
    assert watch()                # the retry failed too (the pods are still there)


def test_held_devices_name_the_case_that_left_them_and_go_when_freed() -> None:
    api = Api()
    held = HeldClaims(api)
    assert held.devices("gpu.example.com") == {}
    held.add("driver/unprepare", "ns", "pod p on node-1: NodeUnprepareResources failed for ResourceClaim c: busy")
    got = held.devices("gpu.example.com")
    assert got == {("node-1", "gpu-0"): "driver/unprepare"} and held.namespaces() == {"ns"}
    why = held.reason(got)
    assert "driver/unprepare" in why and "NodeUnprepareResources failed for ResourceClaim c: busy" in why
    assert "node-1/gpu-0" in why
    api.objects[("ResourceClaim", "ns")] = []  # the driver answered a retry at last
    assert held.devices("gpu.example.com") == {} and not held.records


class Session:
    namespace = "drakit-driver-unprepare"
    log_marks: dict[str, int] = {}

    def __init__(self, refusals: list[tuple[str, str, str]]) -> None:
        self.refusals = refusals
        self.driver_nodes = self

    def unprepare_refusals(self, namespace: str, since: dict[str, int], pod: str | None = None) -> list[tuple[str, str, str]]:
        return [r for r in self.refusals if pod in (None, r[1])]

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return {"metadata": {"name": name, "deletionTimestamp": "2026-12-07T09:40:00Z"}}


def test_a_pod_the_kubelet_refused_to_let_go_fails_at_once_saying_why() -> None:
    with pytest.raises(ExpectationFailed) as exc:
        check_object(Session([("node-1", "p", "NodeUnprepareResources failed for ResourceClaim c: busy")]),  # type: ignore[arg-type]
                     {"kind": "Pod", "name": "p", "absent": True})
    assert exc.value.final and "NodeUnprepareResources failed for ResourceClaim c: busy" in exc.value.summary
    assert "node-1" in exc.value.summary
    with pytest.raises(ExpectationFailed) as still:  # no refusal (yet): waiting may still help
        check_object(Session([]), {"kind": "Pod", "name": "p", "absent": True})  # type: ignore[arg-type]
    assert not still.value.final and still.value.summary == "Pod p still exists"
