"""The device taint eviction controller and DeviceTaintRule status, on simulated time."""

from __future__ import annotations

from typing import Any

from drakit.conformance.reference.clock import parse_time

from .helpers import DRIVER, NS, claim, cluster, condition, pod, running, standard


def rule(name: str, effect: str, selector: dict[str, Any] | None = None, **taint: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "example.com/maint", "effect": effect, **taint}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": spec}


def _running_pod(tolerations: list[dict[str, Any]] | None = None, **gates: bool):  # type: ignore[no-untyped-def]
    c = standard(cluster(**gates))
    c.apply(claim("c", tolerations=tolerations))
    c.apply(pod("p", claim_name="c"))
    assert running(c, "p")
    return c


def test_noexecute_rule_evicts_with_condition_and_event() -> None:
    c = _running_pod()
    c.apply(rule("r", "NoExecute", {"driver": DRIVER}))
    assert c.get("Pod", "p", NS) is None
    last = c.last_seen("Pod", "p", NS)
    assert condition(last, "DisruptionTarget") == {
        "type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager",
        "message": "Device Taint manager: deleting due to NoExecute taint", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert [e["message"] for e in c.events(NS) if e["reason"] == "DeviceTaintManagerEviction"] == ["Marking for deletion"]
    assert not (c.get("ResourceClaim", "c", NS) or {}).get("status", {}).get("allocation")


def test_rule_status_is_written_before_eviction_and_completed_after_the_period() -> None:
    c = _running_pod()
    c.apply(rule("r", "NoExecute", {"driver": DRIVER}))
    cond = condition(c.get("DeviceTaintRule", "r"), "EvictionInProgress")
    assert cond is not None and cond["status"] == "True" and cond["reason"] == "PodsPendingEviction"
    c.advance(9)
    assert condition(c.get("DeviceTaintRule", "r"), "EvictionInProgress")["reason"] == "PodsPendingEviction"  # type: ignore[index]
    c.advance(1)
    cond = condition(c.get("DeviceTaintRule", "r"), "EvictionInProgress")
    assert cond is not None and (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Completed", "1 pod evicted since starting the controller.")
    assert cond["lastTransitionTime"] == "2026-01-01T00:00:10Z"


def test_toleration_seconds_count_from_time_added() -> None:
    tol = [{"key": "example.com/maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]
    c = _running_pod(tol)
    c.advance(100)  # the rule's timeAdded is "now" when it is created, not when the pod started
    c.apply(rule("r", "NoExecute", {"driver": DRIVER}))
    c.advance(29)
    assert running(c, "p")
    c.advance(1)
    assert c.get("Pod", "p", NS) is None


def test_smallest_toleration_wins_and_forever_wins_over_all() -> None:
    tol = [{"key": "example.com/maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
           {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}]
    c = _running_pod(tol)
    c.apply(rule("r", "NoExecute", {"driver": DRIVER}))
    c.advance(10)
    assert c.get("Pod", "p", NS) is None
    forever = [{"key": "example.com/maint", "operator": "Exists", "effect": "NoExecute"},
               {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}]
    c2 = _running_pod(forever)
    c2.apply(rule("r", "NoExecute", {"driver": DRIVER}))
    c2.advance(3600)
    assert running(c2, "p")


def test_a_toleration_without_effect_does_not_stop_eviction() -> None:
    # 1.37.2 claimEvictionTime only considers tolerations whose effect is NoExecute.
    c = _running_pod([{"key": "example.com/maint", "operator": "Exists"}])
    c.apply(rule("r", "NoExecute", {"driver": DRIVER}))
    assert c.get("Pod", "p", NS) is None


def test_pending_eviction_is_cancelled_when_the_taint_goes() -> None:
    tol = [{"key": "example.com/maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]
    c = _running_pod(tol)
    c.apply(rule("r", "NoExecute", {"driver": DRIVER}))
    c.advance(10)
    c.delete("DeviceTaintRule", "r")
    c.advance(60)
    assert running(c, "p")
    assert [e["message"] for e in c.events(NS) if e["reason"] == "DeviceTaintManagerEviction"] == ["Cancelling deletion"]


def test_effect_change_bumps_time_added_and_generation() -> None:
    c = _running_pod()
    c.apply(rule("r", "None", {"driver": DRIVER}))
    first = c.get("DeviceTaintRule", "r")
    assert first is not None and first["metadata"]["generation"] == 1
    c.advance(45)
    c.apply(rule("r", "NoSchedule", {"driver": DRIVER}, timeAdded=first["spec"]["taint"]["timeAdded"]))
    second = c.get("DeviceTaintRule", "r")
    assert second is not None and second["metadata"]["generation"] == 2
    assert parse_time(second["spec"]["taint"]["timeAdded"]) > parse_time(first["spec"]["taint"]["timeAdded"])
    # changing the value alone keeps the time
    c.apply(rule("r", "NoSchedule", {"driver": DRIVER}, value="v"))
    third = c.get("DeviceTaintRule", "r")
    assert third is not None and third["spec"]["taint"]["timeAdded"] == second["spec"]["taint"]["timeAdded"]
    assert third["metadata"]["generation"] == 3


def test_none_rule_reports_simulation_once() -> None:
    c = _running_pod()
    c.apply(rule("r", "None", {"driver": DRIVER}))
    cond = condition(c.get("DeviceTaintRule", "r"), "EvictionInProgress")
    assert cond is not None and cond["reason"] == "NoEffect" and cond["status"] == "False"
    assert cond["message"].startswith("1 published device selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace ")
    assert running(c, "p")


def test_rule_without_selector_and_gate_off() -> None:
    c = _running_pod()
    c.apply(rule("r", "NoExecute"))  # no deviceSelector: selects nothing
    assert running(c, "p")
    c2 = _running_pod(DRADeviceTaintRules=False)
    c2.apply(rule("r", "NoExecute", {}))
    assert running(c2, "p")  # rules are ignored without DRADeviceTaintRules
    c3 = _running_pod(DRADeviceTaints=False, DRADeviceTaintRules=False)
    c3.apply(rule("r", "NoExecute", {}))
    assert running(c3, "p")


def test_slice_taint_time_is_defaulted_and_kept_across_reapply() -> None:
    c = standard(cluster(), devices=[{"name": "d0", "taints": [{"key": "k", "effect": "None"}]}])
    first = c.get("ResourceSlice", "s")["spec"]["devices"][0]["taints"][0]["timeAdded"]  # type: ignore[index]
    c.advance(30)
    from .helpers import slice_
    c.apply(slice_("s", [{"name": "d0", "taints": [{"key": "k", "effect": "None"}, {"key": "new", "effect": "None"}]}]))
    taints = c.get("ResourceSlice", "s")["spec"]["devices"][0]["taints"]  # type: ignore[index]
    assert taints[0]["timeAdded"] == first and taints[1]["timeAdded"] == "2026-01-01T00:00:30Z"
