"""Assembling an allocation result: the config list and the node selector."""

from __future__ import annotations

from typing import Sequence

from ..model.claim import DeviceClass, ResourceClaim
from ..model.meta import NodeSelector, Requirement, SelectorTerm, node_name_selector
from .types import AllocationError, CandidateDevice, ConfigResult, NodeInfo


def build_configs(claim: ResourceClaim, chosen: Sequence[tuple[str, DeviceClass]]) -> tuple[ConfigResult, ...]:
    """``chosen``: per request in spec order, the name it was allocated under (``req`` or
    ``req/sub``) and the class of the chosen (sub)request."""
    entries: list[tuple[str, list[str], str, object]] = []  # source, requests, driver, parameters
    class_entries: dict[str, list[int]] = {}
    for name, cls in chosen:
        if cls.name in class_entries:
            for i in class_entries[cls.name]:
                entries[i][1].append(name)
            continue
        class_entries[cls.name] = []
        for cfg in cls.config:
            class_entries[cls.name].append(len(entries))
            entries.append(("FromClass", [name], cfg.driver, cfg.parameters))
    chosen_names = {n for n, _ in chosen}
    base_names = {n.split("/", 1)[0] for n, _ in chosen}
    for claim_cfg in claim.spec.config:
        opaque = claim_cfg.opaque
        if not claim_cfg.requests:
            entries.append(("FromClaim", [], opaque.driver, opaque.parameters))
            continue
        if any(r in chosen_names or ("/" not in r and r in base_names) for r in claim_cfg.requests):
            entries.append(("FromClaim", list(claim_cfg.requests), opaque.driver, opaque.parameters))
    out: list[ConfigResult] = []
    for source, requests, driver, params in entries:
        covered = all(n in requests or n.split("/", 1)[0] in requests for n, _ in chosen)
        out.append(ConfigResult(source, () if covered and requests else tuple(requests), driver, params))
    return tuple(out)


def build_node_selector(claim: ResourceClaim, devices: Sequence[CandidateDevice], node: NodeInfo, *,
                        binds_to_node: bool = True) -> NodeSelector | None:
    """``binds_to_node``: a device's ``bindsToNode`` pins the claim to the node (the stable
    implementation does not know the field)."""
    exprs: list[Requirement] = []
    fields: list[Requirement] = []
    for cand in devices:
        d, s = cand.device, cand.slice
        if s.per_device_node_selection:
            node_name, selector = d.node_name, d.node_selector
        else:
            node_name, selector = s.node_name, s.node_selector
        if node_name or (binds_to_node and d.binds_to_node):
            return node_name_selector(node.name)
        if selector is None:
            continue
        if len(selector.terms) != 1:
            raise AllocationError(f"create NodeSelector for claim {claim.name}: unsupported ResourceSlice.NodeSelector "
                                  f"with {len(selector.terms)} terms")
        term = selector.terms[0]
        for req in term.match_expressions:
            if req not in exprs:
                exprs.append(req)
        for req in term.match_fields:
            if req not in fields:
                fields.append(req)
    if not exprs and not fields:
        return None
    return NodeSelector((SelectorTerm(tuple(exprs), tuple(fields)),))
