"""ResourceSlice validation in drakit's model against upstream's rules
(pkg/apis/resource/validation in kubernetes v1.37.2): capacity request policies and the
binding fields of a device."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.errors import FieldError
from drakit.conformance.model import parse_object
from drakit.conformance.quantity import Quantity


def _slice(device: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": "a.example.com", "nodeName": "n1",
                     "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": [device]}}


def _shared(value: str, policy: dict[str, Any], *, multi: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {"name": "d", "capacity": {"mem": {"value": value, "requestPolicy": policy}}}
    if multi:
        d["allowMultipleAllocations"] = True
    return d


POLICY = "spec.devices[0].capacity.mem.requestPolicy"


@pytest.mark.parametrize("value, policy", [
    ("10", {"default": "2"}),                                                         # a default alone
    ("10", {"default": "2", "validValues": ["1", "2", "10"]}),
    ("10", {"default": "2", "validRange": {"min": "2"}}),
    ("10", {"default": "4", "validRange": {"min": "2", "max": "10", "step": "2"}}),
    ("4", {"default": "500m", "validRange": {"min": "500m", "step": "500m"}}),       # fractional: milli units
    ("8", {"default": "1", "validRange": {"min": "1", "step": "250m"}}),
    ("10", {"default": "2", "validRange": {"min": "2", "max": "2"}}),
])
def test_valid_request_policies_are_accepted(value: str, policy: dict[str, Any]) -> None:
    s = parse_object(_slice(_shared(value, policy)))
    got = s.devices[0].capacity["mem"].request_policy
    assert got is not None and got.default == Quantity(policy["default"])


@pytest.mark.parametrize("value, policy, where, message", [
    ("10", {"default": "2", "validValues": ["1", "2"], "validRange": {"min": "1"}}, "",
     'Forbidden: exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time'),
    ("10", {"validValues": ["1", "2"]}, ".default", "Required value: required when validValues is defined"),
    ("10", {"default": "2", "validValues": ["2", "1"]}, ".validValues[1]",
     "Invalid value: 1: values must be sorted in ascending order"),
    ("10", {"default": "2", "validValues": ["2", "20"]}, ".validValues[1]",
     "Invalid value: 20: option is larger than capacity value: 10"),
    ("10", {"default": "2", "validValues": ["2", "2"]}, ".validValues[1]", "Duplicate value: 2"),
    ("10", {"default": "2", "validValues": ["2000m", "2"]}, ".validValues[1]", "Duplicate value: 2"),
    ("10", {"default": "3", "validValues": ["1", "2"]}, ".validValues",
     "Invalid value: 3: default value is not valid according to the requestPolicy"),
    ("10", {"validRange": {"min": "1"}}, ".default", "Required value: required when validRange is defined"),
    ("10", {"default": "1", "validRange": {"max": "4"}}, ".validRange.min",
     "Required value: required when validRange is defined"),
    ("10", {"default": "20", "validRange": {"min": "20"}}, ".validRange.min",
     "Invalid value: 20: min is larger than capacity value: 10"),
    ("10", {"default": "1", "validRange": {"min": "2"}}, ".validRange.default",
     "Invalid value: 1: default is less than min: 2"),
    ("10", {"default": "4", "validRange": {"min": "4", "max": "2"}}, ".validRange.max",
     "Invalid value: 4: min is larger than max: 2"),
    ("2", {"default": "2", "validRange": {"min": "2", "max": "4"}}, ".validRange.max",
     "Invalid value: 4: max is larger than capacity value: 2"),
    ("10", {"default": "6", "validRange": {"min": "2", "max": "4"}}, ".validRange.default",
     "Invalid value: 6: default is more than max: 4"),
    ("10", {"default": "2", "validRange": {"min": "2", "step": "0"}}, ".validRange.step",
     "Invalid value: 0: must be greater than zero"),
    ("10", {"default": "2", "validRange": {"min": "2", "step": "-1"}}, ".validRange.step",
     "Invalid value: -1: must be greater than zero"),
    ("2", {"default": "2", "validRange": {"min": "2", "step": "2"}}, ".validRange.step",
     "Invalid value: 2: one step 4 is larger than capacity value: 2"),
    ("10", {"default": "3", "validRange": {"min": "2", "step": "2"}}, ".validRange.step",
     "Invalid value: 3: value is not a multiple of a given step (2) from (2)"),
    ("10", {"default": "2", "validRange": {"min": "2", "max": "7", "step": "2"}}, ".validRange.step",
     "Invalid value: 7: value is not a multiple of a given step (2) from (2)"),
    ("10", {"default": "750m", "validRange": {"min": "500m", "step": "500m"}}, ".validRange.step",
     "Invalid value: 750m: value is not a multiple of a given step (500m) from (500m)"),
    ("10", {"default": "1500m", "validRange": {"min": "1", "step": "1"}}, ".validRange.step",
     "Invalid value: 1500m: value is not a multiple of a given step (1) from (1)"),    # a fractional default: milli
    ("10", {"default": "1", "validRange": {"min": "500m", "step": "1u"}}, ".validRange.step",
     "Invalid value: 1u: value cannot be represented as a milli value"),
    ("10", {"default": "-2", "validRange": {"min": "-2", "step": "2"}}, ".validRange.default",
     "Invalid value: -2: must be greater than or equal to 0"),
    ("1e20", {"default": "1e19", "validRange": {"min": "1e19", "step": "1"}}, ".validRange.default",
     "Invalid value: 10e18: must not be larger than 9223372036854775807"),
])
def test_invalid_request_policies_name_the_field(value: str, policy: dict[str, Any], where: str, message: str) -> None:
    with pytest.raises(FieldError) as caught:
        parse_object(_slice(_shared(value, policy)))
    assert str(caught.value) == f"{POLICY}{where}: {message}"


def test_a_request_policy_needs_allow_multiple_allocations() -> None:
    with pytest.raises(FieldError) as caught:
        parse_object(_slice(_shared("10", {"default": "2"}, multi=False)))
    assert str(caught.value) == f"{POLICY}: Forbidden: allowMultipleAllocations must be true"


def test_at_most_ten_valid_values() -> None:
    values = [str(i) for i in range(1, 12)]
    with pytest.raises(FieldError, match=r"validValues: must have at most 10 items, got 11"):
        parse_object(_slice(_shared("100", {"default": "1", "validValues": values})))


def test_binds_to_node_needs_no_binding_conditions() -> None:
    s = parse_object(_slice({"name": "d", "bindsToNode": True}))
    assert s.devices[0].binds_to_node and not s.devices[0].binding_conditions


@pytest.mark.parametrize("fields, message", [
    ({"bindingConditions": ["a.example.com/ready"]},
     "spec.devices[0].bindingFailureConditions: Invalid value: bindingFailureConditions are required to use "
     "bindingConditions"),
    ({"bindingFailureConditions": ["a.example.com/failed"], "bindsToNode": True},
     "spec.devices[0].bindingConditions: Invalid value: bindingConditions are required to use "
     "bindingFailureConditions"),
])
def test_binding_condition_lists_need_each_other(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(FieldError) as caught:
        parse_object(_slice({"name": "d", **fields}))
    assert str(caught.value) == message
