"""Each kind of reason an explanation gives, on a state built for it: the check named, the values
it saw, and the summary's closest node and checked change."""

from __future__ import annotations

from typing import Any

from tests.reference.helpers import (DRIVER, NS, claim, cluster, device_class, node, pod, running, slice_,
                                     standard)

from .helpers import devices, explain

MODEL = {"model": {"string": "a100"}}


def _gpu(name: str, model: str = "a100", **more: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"model": {"string": model}}, **more}


def _pending(c: Any, name: str = "p", **claim_spec: Any) -> None:
    c.apply(claim(f"{name}-c", **claim_spec))
    c.apply(pod(name, claim_name=f"{name}-c"))
    assert not running(c, name)


def test_selector_false_names_the_expression_and_the_value() -> None:
    c = standard(cluster(), devices=[_gpu("d0", "h100")])
    _pending(c, selectors=[{"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'a100'"}}])
    out = explain(c, "p")
    d = devices(out)["d0"]
    assert d["check"] == "selector"
    assert d["values"]["owner"] == f"claim {NS}/p-c" and d["values"]["index"] == 0
    assert d["values"]["attributes"] == {f"{DRIVER}/model": "'h100'"}
    assert "model = 'h100'" in d["message"]
    s = out["summary"]
    assert s["closestNode"] == "node-a" and s["checked"] and "selector #0" in s["fix"]


def test_class_selector_is_named_before_the_claims() -> None:
    c = standard(cluster(), devices=[{"name": "d0"}], driver="other.example.com")
    _pending(c, selectors=[{"cel": {"expression": "false"}}])
    d = devices(explain(c, "p"))["d0"]
    assert d["check"] == "selector" and d["values"]["owner"] == "class gpu"
    assert d["values"]["expression"] == f"device.driver == '{DRIVER}'"
    assert d["values"]["attributes"] == {"driver": "'other.example.com'"}


def test_missing_attribute_is_said() -> None:
    c = standard(cluster(), devices=[{"name": "d0"}])
    _pending(c, selectors=[{"cel": {"expression": f"has(device.attributes['{DRIVER}'].model)"}}])
    d = devices(explain(c, "p"))["d0"]
    assert d["check"] == "selector" and d["values"]["missing"] == [f"{DRIVER}/model"]
    assert "missing attribute: gpu.example.com/model" in d["message"]


def test_cel_runtime_error_fails_the_attempt_and_names_the_device() -> None:
    c = standard(cluster(), devices=[{"name": "d0"}])
    _pending(c, selectors=[{"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'a100'"}}])
    out = explain(c, "p")
    assert out["verdict"] == "error" and "CEL runtime error" in out["message"]
    r = out["refusal"]
    assert r["check"] == "cel-error" and "no such key" in r["values"]["error"]
    assert r["values"]["missing"] == [f"{DRIVER}/model"]


def test_already_allocated_names_the_holder_and_freeing_it_is_checked() -> None:
    c = standard(cluster(), devices=[_gpu("d0")])
    c.apply(claim("held"))
    c.apply(pod("holder", claim_name="held"))
    assert running(c, "holder")
    _pending(c)
    out = explain(c, "p")
    d = devices(out)["d0"]
    assert d["check"] == "allocated" and d["values"]["claims"] == [f"{NS}/held"]
    assert d["values"]["allowMultipleAllocations"] is False
    s = out["summary"]
    assert s["checked"] and s["singleChange"] and f"claim {NS}/held" in s["fix"]


def test_untolerated_taint_from_the_slice_and_from_a_rule() -> None:
    c = standard(cluster(), devices=[_gpu("d0", taints=[{"key": "broken", "value": "yes", "effect": "NoSchedule"}]),
                                     _gpu("d1")])
    c.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "maint"},
             "spec": {"deviceSelector": {"driver": DRIVER, "pool": "s", "device": "d1"},
                      "taint": {"key": "maintenance", "effect": "NoSchedule"}}})
    _pending(c)
    ds = devices(explain(c, "p"))
    assert ds["d0"]["check"] == "taint" and ds["d1"]["check"] == "taint"
    assert ds["d0"]["values"]["taints"] == [{"key": "broken", "value": "yes", "effect": "NoSchedule",
                                             "from": "ResourceSlice s"}]
    assert ds["d1"]["values"]["taints"][0]["from"] == "DeviceTaintRule maint"
    assert "broken=yes:NoSchedule" in ds["d0"]["message"]


def test_tolerating_the_taint_is_the_checked_change() -> None:
    c = standard(cluster(), devices=[_gpu("d0", taints=[{"key": "broken", "effect": "NoSchedule"}])])
    _pending(c)
    s = explain(c, "p")["summary"]
    assert s["checked"] and s["fix"].startswith("tolerate broken:NoSchedule")


def test_an_all_request_shows_every_device_not_only_the_first_refused() -> None:
    # allocationMode All: upstream's search stops at the first device it cannot take; explain
    # goes on, so every device has its check and the change covers all that are refused
    # (found by the counterfactual script: explain said "no single change" here)
    c = standard(cluster(), devices=[_gpu("d0", taints=[{"key": "broken", "effect": "NoSchedule"}]), _gpu("d1"), _gpu("d2")])
    _pending(c, allocationMode="All")
    out = explain(c, "p")
    ds = devices(out)
    assert {k: d["check"] for k, d in ds.items()} == {"d0": "taint", "d1": "ok", "d2": "ok"}
    s = out["summary"]
    assert s["singleChange"] and s["checked"] and s["fix"].startswith("tolerate broken:NoSchedule")
    # two taints, on two devices: no single toleration is enough, and both are named
    c = standard(cluster(), devices=[_gpu("d0", taints=[{"key": "broken", "effect": "NoSchedule"}]), _gpu("d1"),
                                     _gpu("d2", taints=[{"key": "hot", "effect": "NoSchedule"}])])
    _pending(c, allocationMode="All")
    out = explain(c, "p")
    assert {k: d["check"] for k, d in devices(out).items()} == {"d0": "taint", "d1": "ok", "d2": "taint"}
    s = out["summary"]
    assert not s["singleChange"] and [ch["key"][1][0][0] for ch in s["changes"]] == ["broken", "hot"]


def test_a_change_that_covers_other_devices_is_tried() -> None:
    # tolerating d0's two taints also tolerates d1's one: together the devices an All request
    # lacks (found by the counterfactual script: explain said "no single change" here)
    c = standard(cluster(), devices=[_gpu("d0", taints=[{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]),
                                     _gpu("d1", taints=[{"key": "a", "effect": "NoSchedule"}])])
    _pending(c, allocationMode="All")
    s = explain(c, "p")["summary"]
    assert s["singleChange"] and s["fix"].startswith("tolerate a:NoSchedule (from ResourceSlice s), b:NoSchedule")


def test_a_gate_is_tried_even_where_it_refuses_fewer_devices_than_lack() -> None:
    # DRAPartitionableDevices off: d0 (consuming counters) is refused, and the devices of a slice
    # with per-device node selection are not seen at all; turning the gate on shows them
    # (found by the counterfactual script). Written with the gates on, explained with it off.
    c = cluster()
    c.apply(node())
    c.apply(device_class())
    counters = slice_("s-counters", [], pool="s")
    del counters["spec"]["devices"]
    counters["spec"]["sharedCounters"] = [{"name": "card", "counters": {"mem": {"value": "8"}}}]
    part = slice_("s", [_gpu("d0", consumesCounters=[{"counterSet": "card", "counters": {"mem": {"value": "4"}}}])])
    for x in (counters, part):
        x["spec"]["pool"]["resourceSliceCount"] = 2
        c.apply(x)
    per = slice_("per", [_gpu("d1", nodeName="node-a")], pool="per")
    del per["spec"]["nodeName"]
    per["spec"]["perDeviceNodeSelection"] = True
    c.apply(per)
    c.apply(claim("c0", count=2))
    from drakit.conformance.explain.run import claim_pod, explain_pod
    out = explain_pod(c.store, claim_pod(NS, "c0"), {**c.gates, "DRAPartitionableDevices": False})
    assert devices(out)["d0"]["check"] == "partitionable-off" and "d1" not in devices(out)
    s = out["summary"]
    assert s["singleChange"] and s["checked"] and s["fix"] == "turn on DRAPartitionableDevices"
    assert explain_pod(c.store, claim_pod(NS, "c0"), c.gates)["verdict"] == "fits"


def test_capacity_short_after_rounding() -> None:
    dev = {"name": "d0", "allowMultipleAllocations": True,
           "capacity": {"mem": {"value": "10Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "4Gi"}}}}}
    c = standard(cluster(), devices=[dev])
    c.apply(claim("first", capacity={"requests": {"mem": "6Gi"}}))
    c.apply(pod("first", claim_name="first"))
    assert running(c, "first")
    _pending(c, capacity={"requests": {"mem": "2Gi"}})
    d = devices(explain(c, "p"))["d0"]
    assert d["check"] == "capacity"
    short = d["values"]["short"]["mem"]
    # 6Gi rounds up to 9Gi (1Gi + 2 steps of 4Gi); 2Gi rounds to 5Gi, more than the 1Gi left
    assert short["requested"] == "5Gi" and short["remaining"] == "1Gi" and short["committed"] == "9Gi"


def test_counters_exhausted_names_the_counter_and_the_consumers() -> None:
    c = cluster()
    c.apply(node())
    c.apply(device_class())
    part = [{"counterSet": "card", "counters": {"mem": {"value": "8"}}}]
    counters = slice_("s-counters", [], pool="s")
    del counters["spec"]["devices"]
    counters["spec"]["sharedCounters"] = [{"name": "card", "counters": {"mem": {"value": "8"}}}]
    devs = slice_("s", [{"name": "whole", "consumesCounters": part, "attributes": {"kind": {"string": "whole"}}},
                        {"name": "half", "consumesCounters": [{"counterSet": "card", "counters": {"mem": {"value": "4"}}}],
                         "attributes": {"kind": {"string": "half"}}}])
    for s in (counters, devs):
        s["spec"]["pool"]["resourceSliceCount"] = 2
        c.apply(s)
    c.apply(claim("big", selectors=[{"cel": {"expression": f"device.attributes['{DRIVER}'].kind == 'whole'"}}]))
    c.apply(pod("big", claim_name="big"))
    assert running(c, "big")
    _pending(c, selectors=[{"cel": {"expression": f"device.attributes['{DRIVER}'].kind == 'half'"}}])
    out = explain(c, "p")
    d = devices(out)["half"]
    assert d["check"] == "counters"
    assert d["values"]["short"] == [{"counterSet": "card", "counter": "mem", "needs": "4", "remaining": "0",
                                     "consumedBy": [f"{DRIVER}/s/whole"], "claims": [f"{NS}/big"]}]
    assert out["summary"]["checked"] and f"claim {NS}/big" in out["summary"]["fix"]


def test_constraint_no_combination_meets_shows_the_values_seen() -> None:
    c = standard(cluster(), devices=[{"name": "d0", "attributes": {"numa": {"int": 0}}},
                                     {"name": "d1", "attributes": {"numa": {"int": 1}}}])
    c.apply({**claim("p-c", count=2), "spec": {"devices": {
        "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 2}}],
        "constraints": [{"matchAttribute": f"{DRIVER}/numa"}]}}})
    c.apply(pod("p", claim_name="p-c"))
    assert not running(c, "p")
    out = explain(c, "p")
    n = out["nodes"][0]
    assert [e["pass"] for e in n["claims"][0]["requests"][0]["entries"]] == [2]  # alone, both devices pass
    seen = n["combination"]["constraints"]
    assert seen == [{"claim": f"{NS}/p-c", "attribute": f"{DRIVER}/numa",
                     "valuesSeen": {f"{DRIVER}/s/d1": "1", f"{DRIVER}/s/d0": "0"}}]
    assert "no combination meets the constraint" in out["summary"]["reason"]
    assert not out["summary"]["singleChange"]


def test_incomplete_pool_is_named() -> None:
    c = cluster()
    c.apply(node())
    c.apply(device_class())
    s = slice_("s", [_gpu("d0")])
    s["spec"]["pool"]["resourceSliceCount"] = 2
    c.apply(s)
    _pending(c)
    r = explain(c, "p")["nodes"][0]["claims"][0]["requests"][0]
    assert r["pools"] == [{"pool": f"{DRIVER}/s", "problem": "incomplete: not all of its slices are published yet"}]
    assert r["entries"][0]["devices"] == []


def test_node_selection_other_nodes_slices_and_the_pods_node_selector() -> None:
    c = cluster()
    c.apply({**node("node-a"), "metadata": {"name": "node-a", "labels": {"zone": "a"}}})
    c.apply({**node("node-b"), "metadata": {"name": "node-b", "labels": {"zone": "b"}}})
    c.apply(device_class())
    c.apply(slice_("s-b", [_gpu("d0")], node_name="node-b"))
    c.apply(claim("p-c"))
    c.apply(pod("p", claim_name="p-c", nodeSelector={"zone": "a"}))
    assert not running(c, "p")
    out = explain(c, "p")
    by = {n["name"]: n for n in out["nodes"]}
    assert by["node-b"]["refusals"] == [{"plugin": "NodeAffinity", "values": {"nodeSelector": {"zone": "a"}, "labels": {"zone": "b"}},
                                         "reason": "node(s) didn't match Pod's node affinity/selector: wants zone=a, has b"}]
    assert by["node-a"]["otherNodes"]["devicesInOtherNodesSlices"] == 1
    assert by["node-a"]["claims"][0]["requests"][0]["entries"][0]["devices"] == []
    assert out["summary"]["closestNode"] == "node-a"  # the allocator looked there; node-b was filtered first


def test_per_device_node_selection() -> None:
    c = cluster()
    c.apply(node("node-a"))
    c.apply(device_class())
    s = slice_("s", [_gpu("d0", nodeName="node-z"), _gpu("d1", allNodes=True)])
    del s["spec"]["nodeName"]
    s["spec"]["perDeviceNodeSelection"] = True
    c.apply(s)
    c.apply(claim("held"))
    c.apply(pod("holder", claim_name="held"))
    assert running(c, "holder")  # on d1, the one device for every node
    _pending(c)
    ds = devices(explain(c, "p"))
    assert ds["d0"]["check"] == "node-selection" and ds["d0"]["values"]["nodeName"] == "node-z"
    assert "for node-z, not node node-a" in ds["d0"]["message"]
    assert ds["d1"]["check"] == "allocated"


def test_binding_conditions_with_the_gate_off() -> None:
    # Written while the gates were on (admission drops the fields otherwise), explained with one off.
    c = standard(cluster(), devices=[_gpu("d0", bindingConditions=["ready"], bindingFailureConditions=["failed"])])
    c.apply(claim("c0"))
    from drakit.conformance.explain.run import claim_pod, explain_pod
    out = explain_pod(c.store, claim_pod(NS, "c0"), {**c.gates, "DRAResourceClaimDeviceStatus": False})
    d = devices(out)["d0"]
    assert d["check"] == "binding-conditions" and d["values"]["bindingConditions"] == ["ready"]
    assert out["summary"]["checked"] and out["summary"]["fix"] == "turn on DRADeviceBindingConditions and DRAResourceClaimDeviceStatus"
    assert "DRAResourceClaimDeviceStatus" in d["message"]
    assert explain_pod(c.store, claim_pod(NS, "c0"), c.gates)["verdict"] == "fits"


def test_a_pod_that_fits_says_where() -> None:
    c = standard(cluster(), devices=[_gpu("d0")])
    c.apply(node("node-b"))
    c.apply(claim("c0"))
    from drakit.conformance.explain.run import claim_pod, explain_pod
    got = explain_pod(c.store, claim_pod(NS, "c0"), c.gates)
    assert got["verdict"] == "fits" and got["fitsOn"] == ["node-a"]
    assert {n["name"]: n["fits"] for n in got["nodes"]} == {"node-a": True, "node-b": False}
