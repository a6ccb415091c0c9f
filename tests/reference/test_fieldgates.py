"""Disabled-field stripping: the table, its "in use" exception, and what admission does after it."""

from __future__ import annotations

import copy

import pytest

from drakit.conformance.errors import ApiRejected
from drakit.conformance.features import DEFAULT_GATES
from drakit.conformance.validation.fieldgates import RULES, drop_disabled_fields, in_use

from .helpers import NS, claim, cluster, device_class, node, slice_

OFF = {g: False for g in DEFAULT_GATES}


def _slice() -> dict:
    return {"kind": "ResourceSlice", "spec": {
        "skipNodeOperations": ["*"], "perDeviceNodeSelection": True, "partitionTypeAttribute": "x.example.com/t",
        "sharedCounters": [{"name": "c", "counters": {"m": {"value": "1"}}}],
        "devices": [{"name": "a", "taints": [{"key": "k", "effect": "NoSchedule"}],
                     "attributes": {"l": {"ints": [1]}, "s": {"int": 1}},
                     "capacity": {"m": {"value": "1", "requestPolicy": {"default": "1"}}},
                     "allowMultipleAllocations": True, "bindsToNode": True, "bindingConditions": ["x"],
                     "bindingFailureConditions": ["y"], "consumesCounters": [{"counterSet": "c", "compatibilityGroups": ["g"]}],
                     "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "1"}}}}]}}


def test_every_slice_field_goes_when_all_gates_are_off() -> None:
    s = _slice()
    drop_disabled_fields(s, None, OFF)
    dev = s["spec"]["devices"][0]
    assert set(s["spec"]) == {"devices"}
    assert set(dev) == {"name", "attributes", "capacity"}
    assert dev["attributes"] == {"l": {}, "s": {"int": 1}}  # the list value goes, the attribute stays (then invalid)
    assert dev["capacity"] == {"m": {"value": "1"}}


def test_nothing_goes_when_all_gates_are_on() -> None:
    s = _slice()
    before = copy.deepcopy(s)
    assert drop_disabled_fields(s, None, {g: True for g in DEFAULT_GATES}) == []
    assert s == before


def test_binding_fields_need_both_gates() -> None:
    s = _slice()
    drop_disabled_fields(s, None, {**DEFAULT_GATES, "DRAResourceClaimDeviceStatus": False})
    assert "bindingConditions" not in s["spec"]["devices"][0] and "bindsToNode" not in s["spec"]["devices"][0]


def test_fields_in_use_in_the_old_object_survive_an_update() -> None:
    old = _slice()
    new = _slice()
    drop_disabled_fields(new, old, OFF)
    assert new == _slice()


@pytest.mark.parametrize("gate,path", [
    ("DRAConsumableCapacity", ("exactly", "capacity")),
    ("DRADeviceTaints", ("exactly", "tolerations")),
    ("DRAAdminAccess", ("exactly", "adminAccess")),
    ("DRADerivedAttributes", ("exactly", "derivedAttributes")),
])
def test_claim_and_template_spec_fields(gate: str, path: tuple[str, str]) -> None:
    body = {"deviceClassName": "c", "capacity": {"requests": {"m": "1"}}, "tolerations": [{"operator": "Exists"}],
            "adminAccess": True, "derivedAttributes": [{"name": "d/x", "expression": "1"}]}
    c = {"kind": "ResourceClaim", "spec": {"devices": {"requests": [{"name": "r", "exactly": dict(body)}],
                                                       "constraints": [{"distinctAttribute": "d/x"}]}}}
    t = {"kind": "ResourceClaimTemplate", "spec": {"spec": copy.deepcopy(c["spec"])}}
    gates = {**{g: True for g in DEFAULT_GATES}, gate: False}
    drop_disabled_fields(c, None, gates)
    drop_disabled_fields(t, None, gates)
    for req in (c["spec"]["devices"]["requests"][0], t["spec"]["spec"]["devices"]["requests"][0]):
        assert path[1] not in req[path[0]]
        assert all(k in req[path[0]] for k in body if k != path[1])
    assert ("distinctAttribute" in c["spec"]["devices"]["constraints"][0]) == (gate != "DRAConsumableCapacity")


def test_status_rules_only_apply_to_status_writes() -> None:
    c = {"kind": "ResourceClaim", "status": {"allocation": {"devices": {"results": [{"skipNodeOperations": ["*"], "shareID": "u"}]}}}}
    drop_disabled_fields(c, None, OFF)
    assert c["status"]["allocation"]["devices"]["results"][0] == {"skipNodeOperations": ["*"], "shareID": "u"}
    drop_disabled_fields(c, None, OFF, status=True)
    assert c["status"]["allocation"]["devices"]["results"][0] == {}


def test_in_use_treats_false_and_empty_as_upstream_does() -> None:
    rule = next(r for r in RULES if r.kind == "ResourceSlice" and "spec.perDeviceNodeSelection" in r.paths)
    assert in_use({"spec": {"perDeviceNodeSelection": False}}, rule)      # a pointer that is set
    assert not in_use({"spec": {"sharedCounters": []}}, rule)             # an empty list is not
    assert not in_use(None, rule)


def test_every_rule_names_known_gates() -> None:
    for r in RULES:
        assert all(g in DEFAULT_GATES for g in r.gates), r


def test_admission_drops_before_it_validates() -> None:
    c = cluster(DRAListTypeAttributes=False, DRAConsumableCapacity=False)
    c.apply(node())
    with pytest.raises(ApiRejected, match="must specify one of: `int`, `bool`"):
        c.apply(slice_("s", [{"name": "d", "attributes": {"l": {"ints": [1, 2]}}}]))
    c.apply(device_class())
    c.apply(slice_("ok", [{"name": "d"}]))
    out = c.apply(claim("c", capacity={"requests": {"m": "1"}}))
    assert "capacity" not in out["spec"]["devices"]["requests"][0]["exactly"]
    assert c.get("ResourceClaim", "c", NS) is not None


def test_extended_resource_name_is_kept_with_the_locked_gate() -> None:
    c = cluster()
    out = c.apply(device_class(extendedResourceName="example.com/gpu"))
    assert out["spec"]["extendedResourceName"] == "example.com/gpu"
