"""Two checks of whether a device may be picked at all, before its selectors' verdict counts:
the binding-conditions gate and a device's own node selection. Both the search
(:mod:`.devicechecks`) and the per-node candidate lists (:mod:`.nodeview`) ask them here, so
each rule is stated once (and a planted fault, tests/mutation, replaces one rule everywhere)."""

from __future__ import annotations

from ..model.slice import node_matches
from .types import CandidateDevice, Features, NodeInfo


def gate_allows(cand: CandidateDevice, features: Features) -> bool:
    """A device with binding conditions is never picked while DRADeviceBindingConditions (or
    DRAResourceClaimDeviceStatus) is off (allocator-and-cel.md §7 step 1, §13.1)."""
    return not cand.device.binding_conditions or features.device_binding_and_status


def on_node(cand: CandidateDevice, node: NodeInfo) -> bool:
    """In a slice with perDeviceNodeSelection, the device's own nodeName, nodeSelector or
    allNodes must select the node (§7 step 4); other slices were matched as a whole."""
    if not cand.slice.per_device_node_selection:
        return True
    d = cand.device
    return node_matches(node.name, dict(node.labels), want_node=d.node_name, all_nodes=d.all_nodes,
                        selector=d.node_selector)
