"""Allocator behaviour behind alpha/beta gates: compatibility groups, optional node operations,
fractional capacity ranges, distinct attributes over scalars and lists."""

from __future__ import annotations

import pytest

from drakit.conformance.allocator import AllocatedState, AllocationError, Allocator, Features, NodeAllocationError, NodeInfo

from .helpers import ANY, allocate, allocate_raw, claim, dclass, device, req, rslice

GROUPS_ON = Features(compatibility_groups=True)
STABLE = Features(device_binding_and_status=False, consumable_capacity=False)


def _grouped_pool(g1: list[str] | None, g2: list[str] | None) -> list:
    def use(groups: list[str] | None) -> list:
        c = {"counterSet": "gpu", "counters": {"mem": {"value": "1"}}}
        if groups:
            c["compatibilityGroups"] = groups
        return [c]
    return [rslice("devs", [device("a", consumesCounters=use(g1)), device("b", consumesCounters=use(g2))], count=2),
            rslice("ctr", [], count=2, sharedCounters=[{"name": "gpu", "counters": {"mem": {"value": "2"}}}])]


def test_incompatible_groups_are_not_co_allocated() -> None:
    pool = _grouped_pool(["mig"], ["vgpu"])
    assert allocate(pool, [claim("c", req("r", count=2))], features=GROUPS_ON) is None
    assert allocate(pool, [claim("c", req("r"))], features=GROUPS_ON) == [["r->p1/a"]]
    same = _grouped_pool(["mig"], ["mig", "x"])
    assert allocate(same, [claim("c", req("r", count=2))], features=GROUPS_ON) == [["r->p1/a", "r->p1/b"]]


def test_grouped_and_ungrouped_devices_do_not_mix() -> None:
    assert allocate(_grouped_pool(None, ["mig"]), [claim("c", req("r", count=2))], features=GROUPS_ON) is None
    assert allocate(_grouped_pool(None, None), [claim("c", req("r", count=2))], features=GROUPS_ON) == [["r->p1/a", "r->p1/b"]]


def test_committed_allocation_sets_the_baseline() -> None:
    pool = _grouped_pool(["mig"], ["vgpu"])
    busy = AllocatedState(devices={("a.example.com", "p1", "a")})
    assert allocate(pool, [claim("c", req("r"))], features=GROUPS_ON, allocated=busy) is None


def test_slices_with_groups_are_ignored_when_the_gate_is_off() -> None:
    pool = _grouped_pool(["mig"], ["mig"])
    assert allocate(pool, [claim("c", req("r"))]) is None  # the grouped device slice is dropped: pool incomplete


def test_skip_node_operations_needs_gate_and_node_declaration() -> None:
    """Only the experimental implementation (picked when an alpha switch is on) looks at
    skipNodeOperations: it needs DRAOptionalNodeOperations and a node that declares it."""
    s = [rslice("s", [device("d1")], skipNodeOperations=["*"])]
    alpha = Features(list_type_attributes=True)
    assert allocate(s, [claim("c", req("r"))], features=alpha) is None
    on = Features(optional_node_operations=True)
    assert allocate(s, [claim("c", req("r"))], features=on) is None
    declared = NodeInfo("n1", {}, ("DRAOptionalNodeOperations",))
    res = Allocator(on, {"any": ANY}, s).allocate(declared, [claim("c", req("r"))])
    assert res[0].devices[0].skip_node_operations == ("*",)
    assert res[0].devices[0].to_wire()["skipNodeOperations"] == ["*"]


def test_skip_node_operations_ignored_by_stable_and_incubating() -> None:
    """Beta-level switches pick the incubating implementation, GA-level ones the stable one:
    neither knows skipNodeOperations, so the device is allocated and the result has no skip list."""
    s = [rslice("s", [device("d1")], skipNodeOperations=["*"])]
    for features, channel in ((Features(), "incubating"), (STABLE, "stable")):
        alloc = Allocator(features, {"any": ANY}, s)
        res = alloc.allocate(NodeInfo("n1", {}), [claim("c", req("r"))])
        assert alloc.channel == channel
        assert res is not None and "skipNodeOperations" not in res[0].devices[0].to_wire()


def test_fractional_range_rounds_in_milli_units_only_with_the_gate() -> None:
    cap = {"bw": {"value": "4", "requestPolicy": {"default": "500m", "validRange": {"min": "500m", "step": "500m"}}}}
    s = [rslice("s", [device("d1", caps=cap, allowMultipleAllocations=True)])]
    c = claim("c", req("r", capacity={"requests": {"bw": "1200m"}}))
    on = allocate_raw(s, [c], features=Features(fractional_capacity=True))
    assert str(on[0].devices[0].consumed_capacity["bw"]) == "1500m"
    off = allocate_raw(s, [c])
    assert str(off[0].devices[0].consumed_capacity["bw"]) == "2"


def test_rounded_capacity_takes_the_step_format() -> None:
    cap = {"mem": {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}
    s = [rslice("s", [device("d1", caps=cap, allowMultipleAllocations=True)])]
    res = allocate_raw(s, [claim("c", req("r", capacity={"requests": {"mem": "1500Mi"}}))])
    assert str(res[0].devices[0].consumed_capacity["mem"]) == "2Gi"


def test_distinct_scalar_mode_ignores_list_values_already_held() -> None:
    s = [rslice("s", [device("d1", attrs={"nic": ["a", "b"]}), device("d2", attrs={"nic": "a"})])]
    c = claim("c", req("r", count=2), constraints=[{"distinctAttribute": "a.example.com/nic"}])
    assert allocate(s, [c]) == [["r->p1/d1", "r->p1/d2"]]
    assert allocate(s, [c], features=Features(list_type_attributes=True)) is None


DERIVED_ON = Features(derived_attributes=True)


def _gpu_nic() -> list:
    return [rslice("g", [device("g0", attrs={"numa": 0}), device("g1", attrs={"numa": 1})], driver="gpu.example.com", pool="pg"),
            rslice("n", [device("n1", attrs={"numaNode": 1})], driver="nic.example.com", pool="pn")]


GPU_CLASS = dclass("gpu", 'device.driver == "gpu.example.com"')
NIC_CLASS = dclass("nic", 'device.driver == "nic.example.com"')


def _numa_claim(gpu_expr: str = 'device.attributes["gpu.example.com"].numa') -> object:
    return claim("c",
                 req("gpu", "gpu", derivedAttributes=[{"name": "derived/numa", "expression": gpu_expr}]),
                 req("nic", "nic", derivedAttributes=[{"name": "derived/numa", "expression": 'device.attributes["nic.example.com"].numaNode'}]),
                 constraints=[{"matchAttribute": "derived/numa"}])


def test_derived_attribute_aligns_two_vendors_names() -> None:
    assert allocate(_gpu_nic(), [_numa_claim()], features=DERIVED_ON, classes=[GPU_CLASS, NIC_CLASS]) == [["gpu->pg/g1", "nic->pn/n1"]]


def test_derived_attributes_need_the_gate() -> None:
    import pytest
    from drakit.conformance.allocator import AllocationError
    with pytest.raises(AllocationError, match="cannot handle request with derived attributes, the feature is disabled"):
        allocate(_gpu_nic(), [_numa_claim()], classes=[GPU_CLASS, NIC_CLASS])


def test_derived_attribute_runtime_error_is_fatal_and_names_the_device() -> None:
    import pytest
    from drakit.conformance.allocator import AllocationError
    bad = _numa_claim('device.attributes["gpu.example.com"].missing')
    with pytest.raises(AllocationError, match=r"evaluate derived attribute derived/numa on device gpu.example.com/pg/g0 failed: .*no such key: missing"):
        allocate(_gpu_nic(), [bad], features=DERIVED_ON, classes=[GPU_CLASS, NIC_CLASS])


def test_derived_attribute_must_be_used_by_a_constraint() -> None:
    import pytest
    from drakit.conformance.errors import FieldError
    with pytest.raises(FieldError, match="not used by any matchAttribute or distinctAttribute constraint"):
        claim("c", req("gpu", derivedAttributes=[{"name": "derived/numa", "expression": "1"}]))


# --- which upstream implementation answers ----------------------------------------------------

def test_the_channel_follows_the_switches_and_the_enabled_implementations() -> None:
    assert STABLE.channel() == "stable"
    assert Features().channel() == "incubating"
    assert Features(derived_attributes=True).channel() == "experimental"
    assert STABLE.channel(("incubating", "experimental")) == "incubating"
    with pytest.raises(AllocationError, match="no allocator available"):
        Features(list_type_attributes=True).channel(("stable", "incubating"))


def test_stable_ignores_capacity_requests_and_refuses_distinct_constraints() -> None:
    s = [rslice("s", [device("d1", caps={"mem": "1"}), device("d2", attrs={"x": 1})])]
    big = claim("c", req("r", capacity={"requests": {"mem": "5"}}))
    assert allocate(s, [big], features=STABLE) == [["r->p1/d1"]]
    with pytest.raises(AllocationError, match="has capacity requests, but the DRAConsumableCapacity feature is"):
        allocate(s, [big], features=Features(consumable_capacity=False))
    distinct = claim("c", req("r"), constraints=[{"distinctAttribute": "a.example.com/x"}])
    with pytest.raises(AllocationError, match=r"claim ns/c, constraint #0: empty constraint \(unsupported"):
        allocate(s, [distinct], features=STABLE)


def test_stable_counts_only_dedicated_allocations_against_shared_counters() -> None:
    use = [{"counterSet": "cs", "counters": {"m": {"value": "1"}}}]
    pool = [rslice("devs", [device("a", consumesCounters=use, allowMultipleAllocations=True),
                            device("b", consumesCounters=use)], count=2),
            rslice("ctr", [], count=2, sharedCounters=[{"name": "cs", "counters": {"m": {"value": "1"}}}])]
    shared = AllocatedState(shares={(("a.example.com", "p1", "a"), "s1")})
    assert allocate(pool, [claim("c", req("r"))], features=STABLE, allocated=shared) == [["r->p1/a"]]
    incubating = Features(consumable_capacity=False)  # incubating: the share holds the counter
    assert allocate(pool, [claim("c", req("r"))], features=incubating, allocated=shared) is None


def test_stable_gathers_counter_slices_of_other_nodes_and_keeps_listed_slice_order() -> None:
    pool = [rslice("s-b", [device("b0")], count=3), rslice("s-a", [device("a0")], count=3),
            rslice("ctr", [], node="n2", count=3, sharedCounters=[{"name": "cs", "counters": {"m": {"value": "1"}}}])]
    assert allocate(pool, [claim("c", req("r"))], features=STABLE) == [["r->p1/b0"]]
    assert allocate(pool, [claim("c", req("r"))]) == [["r->p1/a0"]]  # incubating: by slice name
    counters = [{"name": "cs", "counters": {"m": {"value": "1"}}}]
    bad = [rslice(f"ctr{i}", [], node="n2", count=2, sharedCounters=counters) for i in (1, 2)]  # one set twice
    two = [claim("c", req("r", count=2))]
    with pytest.raises(NodeAllocationError, match="invalid resource pools"):
        allocate(bad + [rslice("x", [device("x0")], pool="p2")], two, features=STABLE)
    assert allocate(bad + [rslice("x", [device("x0")], pool="p2")], two) is None  # incubating never sees p1


def test_stable_ignores_binds_to_node_and_hides_allow_multiple_from_cel() -> None:
    s = [rslice("s", [device("d", bindsToNode=True, allowMultipleAllocations=True)], node=None, allNodes=True)]
    assert allocate_raw(s, [claim("c", req("r"))], features=STABLE)[0].node_selector is None
    assert allocate_raw(s, [claim("c", req("r"))])[0].node_selector is not None
    multi = claim("c", req("r", selectors="device.allowMultipleAllocations"))
    assert allocate(s, [multi], features=STABLE) is None
    assert allocate(s, [multi]) == [["r->p1/d"]]


@pytest.mark.parametrize("request_, policy, message", [
    ("-1", None, 'capacity "mem": capacity value is negative'),
    ("18446744073709551616", {"default": "2", "validRange": {"min": "2", "step": "2"}},
     "request 18446744073709551616 exceeds MaxInt64"),
    ("9223372036854775807", {"default": "2", "validRange": {"min": "2", "step": "2"}},
     "rounding request 9223372036854775807 up to the next step passes MaxInt64"),
])
def test_capacity_the_range_arithmetic_cannot_hold_is_fatal(request_: str, policy: dict | None, message: str) -> None:
    cap = {"value": "8", **({"requestPolicy": policy} if policy else {})}
    s = [rslice("s", [device("d1", caps={"mem": cap}, allowMultipleAllocations=True)])]
    with pytest.raises(AllocationError, match="checking capacity for device a.example.com/p1/d1: .*" + message):
        allocate(s, [claim("c", req("r", capacity={"requests": {"mem": request_}}))])
