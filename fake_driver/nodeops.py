"""Devices that need no node preparation (KEP-5945, ``skipNodeOperations``).

``skipNodeOperations`` is a ResourceSlice field and covers every device of the slice, so such
devices need slices of their own. The fake drivers put them into a second pool per driver,
``<node>-no-node-ops``, whose slices carry ``skipNodeOperations`` (default ``["*"]``: neither
NodePrepareResources nor NodeUnprepareResources). Which devices those are is the caller's
choice (``drakit driver serve --skip-node-ops gpu3,...``); the emulated hardware has no opinion.

``with_skip_node_operations`` takes what ``fake_driver.slices.publish_slices`` returns and moves
the named devices; slices of other drivers, counter slices and device order are kept. A device
that consumes shared counters cannot move (counters belong to its pool).
"""

from __future__ import annotations

import copy
from typing import Any, Collection, Sequence

from .slices import split_devices

POOL_SUFFIX = "-no-node-ops"
OPERATIONS = ("NodePrepareResources", "NodeUnprepareResources", "*")


def check_operations(operations: Sequence[str]) -> list[str]:
    ops = list(dict.fromkeys(operations))
    if not ops:
        raise ValueError("skipNodeOperations needs at least one operation")
    unknown = [op for op in ops if op not in OPERATIONS]
    if unknown:
        raise ValueError(f"unknown node operation(s) {', '.join(unknown)} (known: {', '.join(OPERATIONS)})")
    if "NodePrepareResources" in ops and not ({"NodeUnprepareResources", "*"} & set(ops)):
        raise ValueError("NodePrepareResources can only be skipped together with NodeUnprepareResources")
    return ops


def skip_pool_name(pool: str) -> str:
    return pool + POOL_SUFFIX


def with_skip_node_operations(slices: Sequence[dict[str, Any]], devices: Collection[str], *,
                              operations: Sequence[str] = ("*",)) -> list[dict[str, Any]]:
    """``slices`` with ``devices`` moved into a ``skipNodeOperations`` pool of their driver."""
    ops = check_operations(operations)
    wanted = set(devices)
    if not wanted:
        return [copy.deepcopy(s) for s in slices]
    pools: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in slices:
        pools.setdefault((s["spec"]["driver"], s["spec"]["pool"]["name"]), []).append(s)
    found: set[str] = set()
    out: list[dict[str, Any]] = []
    for (_driver, pool), members in pools.items():
        moved = [d for s in members for d in s["spec"].get("devices", []) if d["name"] in wanted]
        if not moved:
            out.extend(copy.deepcopy(members))
            continue
        for d in moved:
            if d.get("consumesCounters"):
                raise ValueError(f"device {d['name']} consumes shared counters of pool {pool} "
                                 "and cannot move to a pool without node operations")
        found.update(d["name"] for d in moved)
        kept = [d for s in members for d in s["spec"].get("devices", []) if d["name"] not in wanted]
        counters = [s for s in members if "sharedCounters" in s["spec"]]
        template = members[0]
        prefix = template["metadata"]["name"].rsplit("-", 1)[0]
        generation = template["spec"]["pool"]["generation"]
        bodies: list[tuple[str, list[Any]]] = [
            ("devices", group) for group in split_devices(copy.deepcopy(kept))
            if group or not counters]  # counters alone keep the pool non-empty
        bodies += [("sharedCounters", copy.deepcopy(c["spec"]["sharedCounters"])) for c in counters]
        main = [_slice(template, pool, f"{prefix}-{i}", field, items)
                for i, (field, items) in enumerate(bodies)]
        skip = [_slice(template, skip_pool_name(pool), f"{prefix}{POOL_SUFFIX}-{i}", "devices", group)
                for i, group in enumerate(split_devices(copy.deepcopy(moved)))]
        for group_slices, extra in ((main, None), (skip, ops)):
            for s in group_slices:
                s["spec"]["pool"] = {"name": s["spec"]["pool"]["name"], "generation": generation,
                                     "resourceSliceCount": len(group_slices)}
                if extra is not None:
                    s["spec"]["skipNodeOperations"] = list(extra)
        out.extend(main + skip)
    missing = wanted - found
    if missing:
        raise ValueError(f"no such device(s) in the slices: {', '.join(sorted(missing))}")
    return out


def _slice(template: dict[str, Any], pool: str, name: str, field: str,
           items: list[Any]) -> dict[str, Any]:
    spec = {k: copy.deepcopy(v) for k, v in template["spec"].items()
            if k not in ("devices", "sharedCounters", "pool", "skipNodeOperations")}
    spec["pool"] = {"name": pool}
    spec[field] = items
    return {"apiVersion": template["apiVersion"], "kind": template["kind"],
            "metadata": {"name": name}, "spec": spec}


def skip_pools(devices: Collection[str], node: str) -> dict[str, str]:
    """Device name -> pool name for devices moved by ``with_skip_node_operations``."""
    return {name: skip_pool_name(node) for name in devices}
