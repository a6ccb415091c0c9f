"""ResourceSlice manifests for an emulated node, in Kubernetes wire form (plain dicts).

Every driver present on the node publishes one pool named after the node. Devices keep the
inventory's order (allocation is first fit, so order is part of the contract) and are cut into
slices no larger than the API allows: 128 devices, or 64 as soon as one device in the slice has
taints, consumes counters or carries a list-type attribute. Shared counter sets go into slices
of their own (a slice holds devices or counters, never both), at most 8 sets per slice, after
the device slices. All slices of a pool carry the same generation and the total slice count.

Slice names are ``<node>-<vendor>-<i>`` with ``i`` counting from 0 across the pool's device and
counter slices, e.g. ``node-a-acme-0``.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from drakit.fake_hw.faults import Fault, Taint, device_taints
from drakit.fake_hw.inventory import CounterSet, Device, DriverPool, NodeInventory

API_VERSION = "resource.k8s.io/v1"
MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_PER_SLICE_ADVANCED = 64
MAX_COUNTER_SETS_PER_SLICE = 8


def publish_slices(inventory: NodeInventory, *, generation: int = 1,
                   faults: Iterable[Fault] = (), max_devices: int | None = None
                   ) -> list[dict[str, Any]]:
    """All ResourceSlices the fake drivers publish for ``inventory``.

    ``faults`` become device taints (a fault on a GPU or NIC also taints its partitions or
    VFs). ``max_devices`` lowers the per-slice device limit, e.g. to spread a pool over several
    slices on purpose.
    """
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        raise ValueError(f"generation must be a non-negative integer, got {generation!r}")
    if max_devices is not None and (isinstance(max_devices, bool) or max_devices < 1):
        raise ValueError(f"max_devices must be at least 1, got {max_devices!r}")
    taints = device_taints(inventory, faults)
    slices: list[dict[str, Any]] = []
    for pool in inventory.pools:
        slices.extend(_pool_slices(inventory.node_name, pool, generation, taints, max_devices))
    return slices


def _pool_slices(node: str, pool: DriverPool, generation: int,
                 taints: dict[str, tuple[Taint, ...]],
                 max_devices: int | None) -> list[dict[str, Any]]:
    wired = [device_to_wire(d, taints.get(d.name, ())) for d in pool.devices]
    device_groups = split_devices(wired, max_devices)
    counter_groups = [pool.counter_sets[i:i + MAX_COUNTER_SETS_PER_SLICE]
                      for i in range(0, len(pool.counter_sets), MAX_COUNTER_SETS_PER_SLICE)]
    bodies: list[tuple[str, list[Any]]] = [("devices", group) for group in device_groups]
    bodies += [("sharedCounters", [counter_set_to_wire(c) for c in group])
               for group in counter_groups]
    count = len(bodies)
    slices = []
    for index, (field, items) in enumerate(bodies):
        name = f"{node}-{pool.vendor}-{index}"
        if len(name) > 253:
            raise ValueError(f"slice name {name!r} is longer than 253 characters")
        slices.append({
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {
                "driver": pool.driver,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
                field: items,
            },
        })
    return slices


def split_devices(devices: Sequence[dict[str, Any]],
                  max_devices: int | None = None) -> list[list[dict[str, Any]]]:
    """Cut wire-form devices, in order, into the fewest consecutive slices the limits allow.

    A slice is closed when the next device would push it past its limit: 128, or 64 once any
    device in it uses an advanced feature; ``max_devices`` caps both. Always at least one
    (possibly empty) group, so an empty pool still has a slice.
    """
    groups: list[list[dict[str, Any]]] = [[]]
    advanced = False
    for device in devices:
        now_advanced = advanced or uses_advanced_features(device)
        limit = MAX_DEVICES_PER_SLICE_ADVANCED if now_advanced else MAX_DEVICES_PER_SLICE
        if max_devices is not None:
            limit = min(limit, max_devices)
        if len(groups[-1]) + 1 > limit:
            groups.append([])
            now_advanced = uses_advanced_features(device)
        groups[-1].append(device)
        advanced = now_advanced
    return groups


def uses_advanced_features(device: dict[str, Any]) -> bool:
    """Whether a wire-form device lowers its slice's limit: taints, counters or list values."""
    if device.get("taints") or device.get("consumesCounters"):
        return True
    return any(kind in ("ints", "bools", "strings", "versions")
               for value in device.get("attributes", {}).values() for kind in value)


def device_to_wire(device: Device, taints: Sequence[Taint] = ()) -> dict[str, Any]:
    """One ``spec.devices[]`` entry; empty sections are left out."""
    wire: dict[str, Any] = {"name": device.name}
    if device.attributes:
        wire["attributes"] = {name: value.to_wire() for name, value in device.attributes}
    if device.capacity:
        wire["capacity"] = {name: {"value": quantity} for name, quantity in device.capacity}
    if device.consumes:
        wire["consumesCounters"] = [
            {"counterSet": use.counter_set,
             "counters": {name: {"value": quantity} for name, quantity in use.counters}}
            for use in device.consumes
        ]
    if taints:
        wire["taints"] = [taint.to_wire() for taint in taints]
    return wire


def counter_set_to_wire(counter_set: CounterSet) -> dict[str, Any]:
    """One ``spec.sharedCounters[]`` entry."""
    return {"name": counter_set.name,
            "counters": {name: {"value": quantity} for name, quantity in counter_set.counters}}
