"""Allocator behaviour behind alpha/beta gates: compatibility groups, optional node operations,
fractional capacity ranges, distinct attributes over scalars and lists."""

from __future__ import annotations

from conformance.allocator import AllocatedState, Features

from .helpers import allocate, allocate_raw, claim, dclass, device, req, rslice

GROUPS_ON = Features(compatibility_groups=True)


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
    s = [rslice("s", [device("d1")], skipNodeOperations=["*"])]
    assert allocate(s, [claim("c", req("r"))]) is None
    on = Features(optional_node_operations=True)
    assert allocate(s, [claim("c", req("r"))], features=on) is None
    from conformance.allocator import Allocator, NodeInfo
    from .helpers import ANY
    res = Allocator(on, {"any": ANY}, s).allocate(NodeInfo("n1", {}, ("DRAOptionalNodeOperations",)), [claim("c", req("r"))])
    assert res[0].devices[0].skip_node_operations == ("*",)
    assert res[0].devices[0].to_wire()["skipNodeOperations"] == ["*"]


def test_fractional_range_rounds_in_milli_units_only_with_the_gate() -> None:
    cap = {"bw": {"value": "4", "requestPolicy": {"validRange": {"min": "500m", "step": "500m"}}}}
    s = [rslice("s", [device("d1", caps=cap, allowMultipleAllocations=True)])]
    c = claim("c", req("r", capacity={"requests": {"bw": "1200m"}}))
    on = allocate_raw(s, [c], features=Features(fractional_capacity=True))
    assert str(on[0].devices[0].consumed_capacity["bw"]) == "1500m"
    off = allocate_raw(s, [c])
    assert str(off[0].devices[0].consumed_capacity["bw"]) == "2"


def test_rounded_capacity_takes_the_step_format() -> None:
    cap = {"mem": {"value": "8Gi", "requestPolicy": {"validRange": {"min": "1Gi", "step": "1Gi"}}}}
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
    from conformance.allocator import AllocationError
    with pytest.raises(AllocationError, match="cannot handle request with derived attributes, the feature is disabled"):
        allocate(_gpu_nic(), [_numa_claim()], classes=[GPU_CLASS, NIC_CLASS])


def test_derived_attribute_runtime_error_is_fatal_and_names_the_device() -> None:
    import pytest
    from conformance.allocator import AllocationError
    bad = _numa_claim('device.attributes["gpu.example.com"].missing')
    with pytest.raises(AllocationError, match=r"evaluate derived attribute derived/numa on device gpu.example.com/pg/g0 failed: .*no such key: missing"):
        allocate(_gpu_nic(), [bad], features=DERIVED_ON, classes=[GPU_CLASS, NIC_CLASS])


def test_derived_attribute_must_be_used_by_a_constraint() -> None:
    import pytest
    from conformance.errors import FieldError
    with pytest.raises(FieldError, match="not used by any matchAttribute or distinctAttribute constraint"):
        claim("c", req("gpu", derivedAttributes=[{"name": "derived/numa", "expression": "1"}]))
