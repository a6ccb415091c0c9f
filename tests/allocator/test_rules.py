"""The allocator's rules one by one (upstream behaviour of the 1.37 incubating/experimental allocator)."""

from __future__ import annotations

import pytest

from drakit.conformance.allocator import AllocatedState, AllocationError, Features, NodeAllocationError

from .helpers import allocate, allocate_raw, claim, dclass, device, first, req, rslice, sub


# --- pool order and gathering ---------------------------------------------------------------

def test_pools_sorted_by_driver_then_pool_and_binding_condition_pools_last() -> None:
    slices = [
        rslice("s-zz", [device("x0")], pool="p2"),
        rslice("s-aa", [device("y0", bindingConditions=["Attached"], bindingFailureConditions=["Failed"])], pool="p1"),
        rslice("s-mm", [device("z0")], driver="b.example.com", pool="p0"),
    ]
    assert allocate(slices, [claim("c", req("r"))]) == [["r->p2/x0"]]
    assert allocate(slices, [claim("c", req("r", count=3))]) == [["r->p2/x0", "r->p0/z0", "r->p1/y0"]]


def test_binding_condition_devices_unselectable_without_the_feature() -> None:
    slices = [rslice("s", [device("y0", bindingConditions=["A"], bindingFailureConditions=["F"])])]
    off = Features(device_binding_and_status=False)
    assert allocate(slices, [claim("c", req("r"))], features=off) is None
    res = allocate_raw(slices, [claim("c", req("r"))])
    assert res[0].devices[0].binding_conditions == ("A",)


def test_slices_inside_a_pool_are_searched_by_name_then_device_order() -> None:
    slices = [rslice("b", [device("d3"), device("d4")], count=2), rslice("a", [device("d1"), device("d2")], count=2)]
    assert allocate(slices, [claim("c", req("r", count=3))]) == [["r->p1/d1", "r->p1/d2", "r->p1/d3"]]


def test_other_nodes_slices_are_not_candidates() -> None:
    slices = [rslice("s", [device("d1")], node="n2")]
    assert allocate(slices, [claim("c", req("r"))]) is None


def test_highest_generation_wins() -> None:
    slices = [rslice("old", [device("d-old")], gen=1), rslice("new", [device("d-new")], gen=2)]
    assert allocate(slices, [claim("c", req("r"))]) == [["r->p1/d-new"]]


def test_incomplete_pool_is_skipped_by_exact_count() -> None:
    slices = [rslice("s1", [device("d1")], count=2), rslice("s2", [device("e1")], pool="p2")]
    assert allocate(slices, [claim("c", req("r"))]) == [["r->p2/e1"]]


def test_stale_generation_on_another_node_drops_the_pool() -> None:
    slices = [rslice("s1", [device("d1")], pool="p", gen=1, count=2), rslice("s2", [device("d2")], node="n2", pool="p", gen=2, count=2)]
    assert allocate(slices, [claim("c", req("r"))]) is None


def test_pool_completed_by_slices_of_other_nodes() -> None:
    slices = [rslice("s1", [device("d1")], count=2), rslice("s2", [device("d2")], node="n2", count=2)]
    assert allocate(slices, [claim("c", req("r", count=2))]) is None
    assert allocate(slices, [claim("c", req("r"))]) == [["r->p1/d1"]]


def test_invalid_pool_reports_per_node_error_only_when_allocation_fails() -> None:
    slices = [rslice("s1", [device("d1")], count=2), rslice("s2", [device("d1")], count=2),
              rslice("t", [device("d2")], pool="p2")]
    assert allocate(slices, [claim("c", req("r"))]) == [["r->p2/d2"]]
    busy = AllocatedState(devices={("a.example.com", "p2", "d2")})
    with pytest.raises(NodeAllocationError, match="invalid resource pools were encountered"):
        allocate(slices, [claim("c", req("r"))], allocated=busy)


def test_node_selector_and_all_nodes_slices() -> None:
    slices = [rslice("sel", [device("n0")], pool="p-net", node=None,
                     nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}]}]}),
              rslice("all", [device("g0")], pool="p-all", node=None, allNodes=True)]
    assert allocate(slices, [claim("c", req("r", count=2))], labels={"region": "r1"}) == [["r->p-all/g0", "r->p-net/n0"]]
    assert allocate(slices, [claim("c", req("r", count=2))], labels={"region": "r2"}) is None


def test_per_device_node_selection() -> None:
    s = rslice("pd", [device("d1", nodeName="n2"), device("d2", allNodes=True)], node=None, perDeviceNodeSelection=True)
    assert allocate([s], [claim("c", req("r"))]) == [["r->p1/d2"]]
    assert allocate([s], [claim("c", req("r"))], node="n2") == [["r->p1/d1"]]


# --- search ---------------------------------------------------------------------------------

def test_first_available_backtracks_across_requests() -> None:
    slices = [rslice("s1", [device("d1", caps={"memory": "8Gi"})]), rslice("s2", [device("d2", caps={"memory": "4Gi"})], pool="p2")]
    ge8 = 'device.capacity["a.example.com"].memory.compareTo(quantity("8Gi")) >= 0'
    ge4 = 'device.capacity["a.example.com"].memory.compareTo(quantity("4Gi")) >= 0'
    c = claim("c", first("req0", sub("sub0", selectors=ge8), sub("sub1", selectors=ge4)), req("req1", selectors=ge8))
    assert allocate(slices, [c]) == [["req0/sub1->p2/d2", "req1->p1/d1"]]


def test_combinations_not_permutations() -> None:
    slices = [rslice("s", [device("d1", attrs={"numa": 1}), device("d2", attrs={"numa": 2}), device("d3", attrs={"numa": 1})])]
    c = claim("c", req("r", count=2), constraints=[{"matchAttribute": "a.example.com/numa"}])
    assert allocate(slices, [c]) == [["r->p1/d1", "r->p1/d3"]]


def test_claims_are_all_or_nothing() -> None:
    slices = [rslice("s", [device("d1"), device("d2")])]
    assert allocate(slices, [claim("c1", req("r")), claim("c2", req("r", count=2))]) is None
    assert allocate(slices, [claim("c1", req("r")), claim("c2", req("r"))]) == [["r->p1/d1"], ["r->p1/d2"]]


def test_in_use_devices_are_skipped() -> None:
    slices = [rslice("s", [device("d1"), device("d2")])]
    busy = AllocatedState(devices={("a.example.com", "p1", "d1")})
    assert allocate(slices, [claim("c", req("r"))], allocated=busy) == [["r->p1/d2"]]


def test_thirty_two_device_limit_with_prioritized_lists() -> None:
    s = rslice("s", [device(f"device-{i}") for i in range(64)])
    c = claim("c", first("req0", sub("sub0", count=32), sub("sub1", count=16)),
              first("req1", sub("sub0", count=32), sub("sub1", count=16)))
    got = allocate([s], [c])
    assert got is not None
    assert got[0][:16] == [f"req0/sub1->p1/device-{i}" for i in range(16)]
    assert got[0][16:] == [f"req1/sub1->p1/device-{i}" for i in range(16, 32)]
    with pytest.raises(AllocationError, match="claim ns/c, request q: adding 1 devices exceeds the claim limit of 32, with 32 already accounted for"):
        allocate([s], [claim("c", req("r", count=32), req("q", count=1))])


# --- All --------------------------------------------------------------------------------------

def test_all_takes_every_matching_device() -> None:
    slices = [rslice("s", [device("d1"), device("d2")]), rslice("o", [device("x")], driver="b.example.com")]
    assert allocate(slices, [claim("c", req("r", "a", allocationMode="All"))]) == [["r->p1/d1", "r->p1/d2"]]


def test_all_with_an_incomplete_pool_is_fatal() -> None:
    slices = [rslice("s", [device("a0")], pool="pa"), rslice("b", [device("b0")], driver="b.example.com", pool="pb", count=2)]
    with pytest.raises(AllocationError, match=r"asks for all devices, but resource pool b.example.com/pb is currently being updated"):
        allocate(slices, [claim("c", req("r", "a", allocationMode="All"))])
    assert allocate(slices, [claim("c", req("r", "a"))]) == [["r->pa/a0"]]


def test_all_with_an_in_use_device_fails_and_admin_access_ignores_it() -> None:
    slices = [rslice("s", [device("d1"), device("d2")])]
    busy = AllocatedState(devices={("a.example.com", "p1", "d1")})
    assert allocate(slices, [claim("c", req("r", "a", allocationMode="All"))], allocated=busy) is None
    res = allocate_raw(slices, [claim("c", req("r", "a", allocationMode="All", adminAccess=True))], allocated=busy)
    assert [(d.device, d.admin_access) for d in res[0].devices] == [("d1", True), ("d2", True)]
    with pytest.raises(AllocationError, match="admin access is requested, but the feature is disabled"):
        allocate(slices, [claim("c", req("r", adminAccess=True))], features=Features(admin_access=False))


def test_all_constraint_violation_is_fatal() -> None:
    slices = [rslice("s", [device("d1", attrs={"numa": 1}), device("d2", attrs={"numa": 2})])]
    c = claim("c", req("r", allocationMode="All"), constraints=[{"matchAttribute": "a.example.com/numa"}])
    with pytest.raises(AllocationError, match="cannot add device a.example.com/p1/d2 because a claim constraint would not be satisfied"):
        allocate(slices, [c])


# --- constraints ------------------------------------------------------------------------------

def test_match_attribute_missing_attribute_excludes_device() -> None:
    slices = [rslice("s", [device("d1"), device("d2", attrs={"numa": 1}), device("d3", attrs={"numa": 1})])]
    c = claim("c", req("r", count=2), constraints=[{"matchAttribute": "a.example.com/numa"}])
    assert allocate(slices, [c]) == [["r->p1/d2", "r->p1/d3"]]


def test_match_attribute_across_requests_only_those_named() -> None:
    slices = [rslice("s", [device("d1", attrs={"numa": 1}), device("d2", attrs={"numa": 2}), device("d3", attrs={"numa": 2})])]
    c = claim("c", req("a"), req("b"), req("z"), constraints=[{"requests": ["b", "z"], "matchAttribute": "a.example.com/numa"}])
    assert allocate(slices, [c]) == [["a->p1/d1", "b->p1/d2", "z->p1/d3"]]


def test_distinct_attribute_tracked_per_device() -> None:
    slices = [rslice("s", [device("d1", attrs={"nic": "a"}), device("d2", attrs={"nic": "b"}),
                           device("d3", attrs={"nic": "a"}), device("d4", attrs={"nic": "c"})])]
    c = claim("c", req("r", count=3), constraints=[{"distinctAttribute": "a.example.com/nic"}])
    assert allocate(slices, [c]) == [["r->p1/d1", "r->p1/d2", "r->p1/d4"]]


def test_list_attributes_set_semantics_only_with_the_gate() -> None:
    slices = [rslice("s", [device("d1", attrs={"links": ["x", "y"]}), device("d2", attrs={"links": ["y", "z"]}),
                           device("d3", attrs={"links": ["z", "x"]})])]
    mk = lambda n: claim("c", req("r", count=n), constraints=[{"matchAttribute": "a.example.com/links"}])  # noqa: E731
    on = Features(list_type_attributes=True)
    assert allocate(slices, [mk(3)], features=on) is None
    assert allocate(slices, [mk(2)], features=on) == [["r->p1/d1", "r->p1/d2"]]
    assert allocate(slices, [mk(2)]) is None


def test_list_match_widens_again_after_backtracking() -> None:
    slices = [rslice("s", [device("d1", attrs={"links": ["x", "y"]}), device("d2", attrs={"links": ["y"]}),
                           device("d3", attrs={"links": ["x"]})])]
    c = claim("c", req("req0", count=2), req("req1", selectors='device.attributes["a.example.com"].links == ["y"]'),
              constraints=[{"requests": ["req0"], "matchAttribute": "a.example.com/links"}])
    assert allocate(slices, [c], features=Features(list_type_attributes=True)) == [["req0->p1/d1", "req0->p1/d3", "req1->p1/d2"]]


# --- taints -------------------------------------------------------------------------------------

def test_taints_and_tolerations() -> None:
    slices = [rslice("s", [device("d1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
                           device("d2", taints=[{"key": "k", "value": "v2", "effect": "NoExecute"}])])]
    tol = [{"key": "k", "operator": "Equal", "value": "v2", "effect": "NoExecute"}]
    res = allocate_raw(slices, [claim("c", req("r", tolerations=tol))])
    assert res[0].devices[0].device == "d2" and res[0].devices[0].tolerations[0].value == "v2"
    assert allocate(slices, [claim("c", req("r"))]) is None
    assert allocate(slices, [claim("c", req("r"))], features=Features(device_taints=False)) == [["r->p1/d1"]]
    exists = [{"key": "k", "operator": "Exists"}]
    assert allocate(slices, [claim("c", req("r", tolerations=exists))]) == [["r->p1/d1"]]


def test_taint_effect_none_is_ignored_and_admin_access_does_not_bypass() -> None:
    slices = [rslice("s", [device("d1", taints=[{"key": "k", "effect": "None"}]),
                           device("d2", taints=[{"key": "k", "effect": "NoSchedule"}])])]
    assert allocate(slices, [claim("c", req("r", count=2))]) is None
    assert allocate(slices, [claim("c", req("r"))]) == [["r->p1/d1"]]
    assert allocate(slices, [claim("c", req("r", count=2, adminAccess=True))]) is None


# --- CEL errors -----------------------------------------------------------------------------------

def test_cel_missing_key_is_a_fatal_runtime_error_naming_the_selector() -> None:
    slices = [rslice("s", [device("d1", attrs={"other": 1})])]
    c = claim("c", req("r", "a", selectors='device.attributes["a.example.com"].model == "x"'))
    with pytest.raises(AllocationError, match=r"claim ns/c: selector #0 on device a.example.com/p1/d1: CEL runtime error: .*no such key: model.*optional chaining"):
        allocate(slices, [c])
    ok = claim("c", req("r", "a", selectors='device.attributes["a.example.com"].?model.orValue("") == "x"'))
    assert allocate(slices, [ok]) is None


def test_class_selectors_run_before_request_selectors() -> None:
    slices = [rslice("s", [device("d1")], driver="b.example.com")]
    c = claim("c", req("r", "a", selectors='device.attributes["b.example.com"].model == "x"'))
    assert allocate(slices, [c]) is None  # class a rejects the b device first, so the bad selector never runs


# --- partitionable devices and consumable capacity --------------------------------------------------

def _counter_pool() -> list:
    use = lambda q: [{"counterSet": "cs1", "counters": {"memory": {"value": q}}}]  # noqa: E731
    return [rslice("s1", [device("d1", consumesCounters=use("4Gi")), device("d2", consumesCounters=use("6Gi")),
                          device("d3", consumesCounters=use("4Gi"))], count=2),
            rslice("s2", [], count=2, sharedCounters=[{"name": "cs1", "counters": {"memory": {"value": "8Gi"}}}])]


def test_shared_counters_limit_partitions() -> None:
    assert allocate(_counter_pool(), [claim("c", req("req0"), req("req1"))]) == [["req0->p1/d1", "req1->p1/d3"]]
    busy = AllocatedState(devices={("a.example.com", "p1", "d1")})
    assert allocate(_counter_pool(), [claim("c", req("req0"))], allocated=busy) == [["req0->p1/d3"]]
    assert allocate(_counter_pool(), [claim("c", req("req0"))], features=Features(partitionable_devices=False)) is None


def test_consumable_capacity_rounding_and_sharing() -> None:
    cap = {"mem": {"value": "4", "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}}}
    slices = [rslice("s", [device("d1", caps=cap, allowMultipleAllocations=True)])]
    c1 = claim("c1", req("r", capacity={"requests": {"mem": "1"}}))
    c2 = claim("c2", req("r"))
    res = allocate_raw(slices, [c1, c2])
    assert [str(r.devices[0].consumed_capacity["mem"]) for r in res] == ["2", "2"]
    assert res[0].devices[0].share_id != res[1].devices[0].share_id
    c3 = claim("c3", req("r", capacity={"requests": {"mem": "1"}}))
    assert allocate_raw(slices, [c1, c2, c3]) is None
    big = claim("c", req("r", capacity={"requests": {"mem": "5"}}))
    assert allocate_raw(slices, [big]) is None
    three = allocate_raw(slices, [claim("c", req("r", capacity={"requests": {"mem": "3"}}))])
    assert str(three[0].devices[0].consumed_capacity["mem"]) == "4"
    missing = claim("c", req("r", capacity={"requests": {"other": "1"}}))
    assert allocate_raw(slices, [missing]) is None


# --- results ------------------------------------------------------------------------------------------

def test_config_and_node_selector_assembly() -> None:
    cfg = [{"opaque": {"driver": "a.example.com", "parameters": {"x": 1}}}]
    cls = dclass("a", 'device.driver == "a.example.com"', config=cfg)
    slices = [rslice("net", [device("n0")], pool="p-net", node=None,
                     nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}]}]}),
              rslice("local", [device("g0")], pool="p-node")]
    c = claim("c", req("req0", "a"), req("req1", "a"),
              config=[{"requests": ["req0", "req1"], "opaque": {"driver": "a.example.com", "parameters": {"y": 2}}}])
    res = allocate_raw(slices, [c], classes=[cls], labels={"region": "r1"})[0]
    assert [d.device for d in res.devices] == ["n0", "g0"]
    assert [(x.source, x.requests) for x in res.config] == [("FromClass", ()), ("FromClaim", ())]
    assert res.node_selector.to_wire() == {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    only_net = allocate_raw([slices[0]], [claim("c", req("r", "a"))], classes=[cls], labels={"region": "r1"})[0]
    assert only_net.node_selector.to_wire() == {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}]}]}


def test_missing_class_is_fatal() -> None:
    with pytest.raises(AllocationError, match='could not retrieve device class nope'):
        allocate([rslice("s", [device("d1")])], [claim("c", req("r", "nope"))])
