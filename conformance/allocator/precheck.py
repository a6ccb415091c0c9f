"""Refusing a node before any search: when it cannot have enough devices for some request.

Upstream searches every node it is asked about. On a full node (or one without the devices a
request asks for) that search looks at each device and fails; here, a request entry's devices
are known per node (:meth:`.nodeview.NodeView.fitting`: those its selectors accept and its
capacity request fits), and the node is refused when, for some request, every entry has fewer
of them uncommitted than it needs. That is asked only for plain claims
(:attr:`.plan.ClaimPlan.plain`) and only when every selector and capacity evaluated cleanly on
the node, so the search could not have failed with an error: skipping it changes nothing but
the time it takes (and the search steps, which are then zero).
"""

from __future__ import annotations

from typing import Sequence

from .nodeview import NodeView
from .plan import ClaimPlan, Entry
from .pools import SliceIndex
from .selectors import SelectorCache
from .types import AllocatedState, DeviceID, Features, NodeInfo

# Per request (of every claim, in order), its entries with their SliceIndex.entry_id.
Requests = tuple[tuple[tuple[Entry, int], ...], ...]


def entries_of(plans: Sequence[ClaimPlan], index: SliceIndex) -> Requests | None:
    """The requests of the claims for :func:`short`, or None when some claim is not plain."""
    if not all(p.plain for p in plans):
        return None
    return tuple(tuple((e, index.entry_id(e.key)) for e in entries) for p in plans for entries in p.entries)


def short(view: NodeView, requests: Requests, allocated: AllocatedState, node: NodeInfo, features: Features,
          stable: bool, cel: SelectorCache) -> bool:
    """Whether some request cannot be satisfied on the node whatever the search picks (see the
    module docstring); False whenever that cannot be told without the search."""
    sets: list[frozenset[DeviceID]] = []
    for entries in requests:
        for e, key in entries:
            ids = view.fitting(e, key, node, features, stable, cel)
            if ids is None:
                return False  # the search evaluates device by device (and may fail with an error)
            sets.append(ids)
    committed = allocated.devices
    # committed capacity matters only where the search checks capacity (DRAConsumableCapacity)
    shares = allocated.capacity if features.consumable_capacity else {}
    k = 0
    for entries in requests:
        enough = False
        for e, _ in entries:
            ids = sets[k]
            k += 1
            if enough:
                continue
            free = len(ids) if e.admin else len(ids) - len(ids & committed)
            if shares and free >= e.need:
                # committed shares may leave too little capacity
                free -= sum(1 for dev in ids if dev in shares and (e.admin or dev not in committed)
                            and not view.fits_committed(e, dev, shares[dev]))
            enough = free >= e.need
        if not enough:
            return True
    return False
