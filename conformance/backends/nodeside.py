"""Whether a target has a node side drakit can read for a case (its device metadata files)."""

from __future__ import annotations

from typing import Any

from ..spec.case import Case


def node_side_unmet(case: Case, target: Any, api: Any) -> tuple[str, str] | None:
    """``no-node-side`` for a case that reads what a driver wrote on the node (its device
    metadata files) when drakit does not run that node side itself (``target.node_side``):
    through the API a node's files cannot be read, whichever kubelet serves the driver there."""
    drivers = sorted({str(body.get("driver") or "") for step in case.steps if step.kind == "expect"
                      for _line, name, body in step.assertions if name == "deviceMetadata"})
    if not drivers or target.node_side is not None:
        return None
    names = ", ".join(d for d in drivers if d) or "the case's drivers"
    served = nodes_serving(api, [d for d in drivers if d])
    seen = (f"{served} Ready node(s) publish ResourceSlices of {names}, but" if served
            else f"no Ready node publishes ResourceSlices of {names}, and")
    return ("no-node-side", f"the case reads the device metadata files {names} writes on the node; {seen} "
                            f"drakit reads node files only on nodes it runs itself (--cluster local)")


def nodes_serving(api: Any, drivers: list[str]) -> int:
    """How many Ready nodes publish node-local slices of one of *drivers* (0 when unknown)."""
    try:
        nodes = {n["metadata"]["name"] for n in api.list("Node", None)
                 if any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (n.get("status") or {}).get("conditions") or [])}
        return len({(sl.get("spec") or {}).get("nodeName") for sl in api.list("ResourceSlice", None)
                    if (sl.get("spec") or {}).get("driver") in drivers} & nodes)
    except Exception:  # noqa: BLE001 - only the message's detail depends on it
        return 0
