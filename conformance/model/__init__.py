"""Typed DRA API objects, parsed from wire-form dicts with every upstream validation limit.

:func:`parse_object` is the one entry point: it dispatches on apiVersion/kind and raises
:class:`conformance.errors.FieldError` with the field path of the first problem.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import FieldError
from .claim import DeviceClass, ResourceClaim, ResourceClaimTemplate, parse_device_class, parse_resource_claim, \
    parse_resource_claim_template
from .pod import Node, Pod, parse_node, parse_pod
from .reader import Reader
from .slice import ResourceSlice, parse_resource_slice
from .taintrule import DeviceTaintRule, parse_device_taint_rule
from .poolstatus import ResourcePoolStatusRequest, parse_resource_pool_status_request
from .workload import PodGroup, Workload, parse_pod_group, parse_workload

PARSERS: dict[tuple[str, str], Callable[[Reader], Any]] = {
    ("resource.k8s.io/v1", "DeviceClass"): parse_device_class,
    ("resource.k8s.io/v1", "ResourceClaim"): parse_resource_claim,
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): parse_resource_claim_template,
    ("resource.k8s.io/v1", "ResourceSlice"): parse_resource_slice,
    ("resource.k8s.io/v1", "DeviceTaintRule"): parse_device_taint_rule,
    ("v1", "Pod"): parse_pod,
    ("v1", "Node"): parse_node,
    ("resource.k8s.io/v1alpha3", "ResourcePoolStatusRequest"): parse_resource_pool_status_request,
    ("scheduling.k8s.io/v1beta1", "PodGroup"): parse_pod_group,
    ("scheduling.k8s.io/v1beta1", "Workload"): parse_workload,
}

NAMESPACED_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "Pod", "PodGroup", "Workload"})


def parse_object(obj: Any) -> Any:
    if not isinstance(obj, dict):
        raise FieldError((), "a manifest must be an object")
    api, kind = obj.get("apiVersion"), obj.get("kind")
    if not api or not kind:
        raise FieldError(("apiVersion" if not api else "kind",), "required value")
    parser = PARSERS.get((api, kind))
    if parser is None:
        known = ", ".join(f"{k} ({a})" for a, k in PARSERS)
        raise FieldError(("kind",), f"unsupported object {kind} in {api}; drakit knows {known}")
    return parser(Reader(obj))


__all__ = ["parse_object", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceTaintRule",
           "Pod", "Node", "PodGroup", "Workload", "ResourcePoolStatusRequest", "NAMESPACED_KINDS", "PARSERS"]
