"""Disabled-field stripping: what the API server silently drops from a write when the feature
gate that owns a field is off.

Upstream every registry strategy has a ``dropDisabledFields`` (``pkg/registry/resource/*/
strategy.go``, ``pkg/api/resourceclaimspec``, ``pkg/api/pod``, ``pkg/registry/scheduling/*``):
on create, and on update unless the old object already uses the field ("in use"), a field
whose gate is off is cleared *before* validation. A list-type attribute with its gate off thus
becomes an attribute without a value and the write is rejected by validation, while a
``capacity`` request without DRAConsumableCapacity just disappears.

This module is the one table of those rules. Paths use ``[*]`` for every list element and
``{*}`` for every map value; the last segment is the field that is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping


@dataclass(frozen=True, slots=True)
class FieldRule:
    kind: str
    gates: tuple[str, ...]          # the fields survive only when every gate is on
    paths: tuple[str, ...]
    status: bool = False            # True: applies to status writes, else to spec (create/update)
    upstream: str = ""              # the upstream function, for readers


def _claim_spec(prefix: str) -> list[tuple[tuple[str, ...], tuple[str, ...], str]]:
    """Rules of pkg/api/resourceclaimspec.DropDisabledFields for a claim spec at ``prefix``."""
    req = f"{prefix}.devices.requests[*]"
    return [
        (("DRAPrioritizedList",), (f"{req}.firstAvailable",), "dropDisabledDRAPrioritizedListFields"),
        (("DRADeviceTaints",), (f"{req}.exactly.tolerations", f"{req}.firstAvailable[*].tolerations"),
         "dropDisabledDRADeviceTaintsFields"),
        (("DRAAdminAccess",), (f"{req}.exactly.adminAccess",), "dropDisabledDRAAdminAccessFields"),
        (("DRAConsumableCapacity",), (f"{prefix}.devices.constraints[*].distinctAttribute", f"{req}.exactly.capacity",
                                      f"{req}.firstAvailable[*].capacity"),
         "dropDisabledDRAResourceClaimConsumableCapacityFields"),
        (("DRADerivedAttributes",), (f"{req}.exactly.derivedAttributes", f"{req}.firstAvailable[*].derivedAttributes"),
         "dropDisabledDRADerivedAttributesFields"),
    ]


_DEV = "spec.devices[*]"
_RESULT = "status.allocation.devices.results[*]"

RULES: tuple[FieldRule, ...] = (
    # --- ResourceSlice (pkg/registry/resource/resourceslice/strategy.go) -------------------------
    FieldRule("ResourceSlice", ("DRADeviceTaints",), (f"{_DEV}.taints",), upstream="dropDisabledDRADeviceTaintsFields"),
    FieldRule("ResourceSlice", ("DRAPartitionableDevices",),
              ("spec.sharedCounters", "spec.perDeviceNodeSelection", f"{_DEV}.consumesCounters", f"{_DEV}.nodeName",
               f"{_DEV}.nodeSelector", f"{_DEV}.allNodes"), upstream="dropDisabledDRAPartitionableDevicesFields"),
    FieldRule("ResourceSlice", ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"),
              (f"{_DEV}.bindingConditions", f"{_DEV}.bindingFailureConditions", f"{_DEV}.bindsToNode"),
              upstream="dropDisabledDRADeviceBindingConditionsFields"),
    FieldRule("ResourceSlice", ("DRAConsumableCapacity",),
              (f"{_DEV}.allowMultipleAllocations", f"{_DEV}.capacity{{*}}.requestPolicy"),
              upstream="dropDisabledDRAConsumableCapacityFields"),
    FieldRule("ResourceSlice", ("DRADeviceCompatibilityGroups",), (f"{_DEV}.consumesCounters[*].compatibilityGroups",),
              upstream="dropDisabledDRADeviceCompatibilityGroupsFields"),
    FieldRule("ResourceSlice", ("DRANodeAllocatableResources",), (f"{_DEV}.nodeAllocatableResources",),
              upstream="dropDisabledDRANodeAllocatableResourcesFields"),
    FieldRule("ResourceSlice", ("DRAListTypeAttributes",),
              tuple(f"{_DEV}.attributes{{*}}.{k}" for k in ("ints", "bools", "strings", "versions")),
              upstream="dropDisableDRAListTypeAttributesFields"),
    FieldRule("ResourceSlice", ("DRAPartitionableDevicesType",), ("spec.partitionTypeAttribute",),
              upstream="dropDisabledDRAPartitionableDevicesTypeFields"),
    FieldRule("ResourceSlice", ("DRAOptionalNodeOperations",), ("spec.skipNodeOperations",),
              upstream="dropDisabledDRAOptionalNodeOperationsFields"),
    # --- ResourceClaim / ResourceClaimTemplate spec (pkg/api/resourceclaimspec) -------------------
    *(FieldRule("ResourceClaim", g, p, upstream=u) for g, p, u in _claim_spec("spec")),
    *(FieldRule("ResourceClaimTemplate", g, p, upstream=u) for g, p, u in _claim_spec("spec.spec")),
    # --- ResourceClaim status (pkg/registry/resource/resourceclaim/strategy.go) -------------------
    FieldRule("ResourceClaim", ("DRAResourceClaimDeviceStatus",), ("status.devices",), status=True,
              upstream="dropDisabledDRAResourceClaimDeviceStatusFields"),
    FieldRule("ResourceClaim", ("DRAAdminAccess",), (f"{_RESULT}.adminAccess",), status=True,
              upstream="dropDisabledDRAAdminAccessStatusFields"),
    FieldRule("ResourceClaim", ("DRAConsumableCapacity",),
              (f"{_RESULT}.shareID", f"{_RESULT}.consumedCapacity", "status.devices[*].shareID"), status=True,
              upstream="dropDisabledDRAResourceClaimConsumableCapacityStatusFields"),
    FieldRule("ResourceClaim", ("DRADeviceBindingConditions",),
              (f"{_RESULT}.bindingConditions", f"{_RESULT}.bindingFailureConditions"), status=True,
              upstream="dropDeviceBindingConditionsFields"),
    FieldRule("ResourceClaim", ("DRAOptionalNodeOperations",), (f"{_RESULT}.skipNodeOperations",), status=True,
              upstream="dropDisabledDRAOptionalNodeOperationsStatusFields"),
    # --- DeviceClass, ResourcePoolStatusRequest --------------------------------------------------
    FieldRule("DeviceClass", ("DRAExtendedResource",), ("spec.extendedResourceName",),
              upstream="dropDisabledDRAExtendedResourceFields"),
    FieldRule("ResourcePoolStatusRequest", ("DRAPartitionableDevicesType",), ("spec.defaultPartitionTypeAttribute",),
              upstream="dropDisabledDRAPartitionableDevicesTypeFields"),
    # --- Pod (pkg/api/pod/util.go) ----------------------------------------------------------------
    FieldRule("Pod", ("GenericWorkload",), ("spec.schedulingGroup",), upstream="dropDisabledSchedulingGroup"),
    FieldRule("Pod", ("DRAExtendedResource",), ("status.extendedResourceClaimStatus",), status=True,
              upstream="dropDisabledPodStatusFields"),
    FieldRule("Pod", ("DRANodeAllocatableResources",), ("status.nodeAllocatableResourceClaimStatuses",), status=True,
              upstream="dropPodNodeAllocatableResourceStatus"),
    # --- PodGroup, Workload (pkg/registry/scheduling) ---------------------------------------------
    FieldRule("PodGroup", ("DRAWorkloadResourceClaims",), ("spec.resourceClaims",),
              upstream="dropDisabledDRAWorkloadResourceClaimsFields"),
    FieldRule("PodGroup", ("DRAWorkloadResourceClaims",), ("status.resourceClaimStatuses",), status=True,
              upstream="dropDisabledPodGroupStatusFields"),
    FieldRule("Workload", ("DRAWorkloadResourceClaims",), ("spec.podGroupTemplates[*].resourceClaims",),
              upstream="dropDisabledDRAWorkloadResourceClaimsFields"),
)


def _split(path: str) -> list[str]:
    out: list[str] = []
    for part in path.split("."):
        if part.endswith(("[*]", "{*}")):
            out.extend([part[:-3], part[-3:]])
        else:
            out.append(part)
    return out


def _parents(obj: Any, segs: list[str]) -> Iterator[dict[str, Any]]:
    """Every dict that holds the final segment of ``segs``."""
    if not segs:
        return
    if len(segs) == 1:
        if isinstance(obj, dict):
            yield obj
        return
    head, rest = segs[0], segs[1:]
    if head == "[*]":
        for item in obj if isinstance(obj, list) else ():
            yield from _parents(item, rest)
    elif head == "{*}":
        for item in obj.values() if isinstance(obj, dict) else ():
            yield from _parents(item, rest)
    elif isinstance(obj, dict) and head in obj:
        yield from _parents(obj[head], rest)


def _set(value: Any) -> bool:
    """Upstream's "in use": a pointer that is not nil, a list or map that is not empty."""
    if value is None:
        return False
    if isinstance(value, (list, dict)):
        return bool(value)
    return True


def in_use(obj: Mapping[str, Any] | None, rule: FieldRule) -> bool:
    if obj is None:
        return False
    for path in rule.paths:
        segs = _split(path)
        for parent in _parents(obj, segs):
            if _set(parent.get(segs[-1])):
                return True
    return False


def drop_disabled_fields(obj: dict[str, Any], old: Mapping[str, Any] | None, gates: Mapping[str, bool], *,
                         status: bool = False) -> list[str]:
    """Drop, in place, the fields of ``obj`` whose gates are off, unless ``old`` already uses
    them. ``status`` selects the rules of a status write instead of a create/update. Returns
    the dropped paths (as written in the table) for diagnostics."""
    dropped: list[str] = []
    for rule in RULES:
        if rule.kind != obj.get("kind") or rule.status != status:
            continue
        if all(gates.get(g, False) for g in rule.gates) or in_use(old, rule):
            continue
        for path in rule.paths:
            segs = _split(path)
            for parent in list(_parents(obj, segs)):
                if segs[-1] in parent:
                    del parent[segs[-1]]
                    dropped.append(path)
    return dropped
