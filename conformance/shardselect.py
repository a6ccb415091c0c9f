"""``--drakit-shard i/N``: keep this shard's cases, and say what the whole run holds.

After the cases were selected (``-k``, ``-m``: this hook runs last), the plan of
:mod:`drakit.conformance.shards` is made over every collected item, the items of other shards
are deselected, and the plan (every item of the corpus with its shard) is written next to the
results (``<out>/.drakit-shard.json``) by whichever process collected (each xdist worker
collects the same items and writes the same plan). The results collector puts it in
``run.shard``, which is what ``drakit report --merge`` checks completeness against.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .shards import PLAN_FILE, Shard, plan


def plan_entries(items: list[pytest.Item], count: int) -> list[dict[str, Any]]:
    """``[{"id", "backend", "shard"}]`` of the collected items, in collection order."""
    from .backends.names import cluster_wide
    from .results import node_case
    keyed = []
    for item in items:
        ref = node_case(item.nodeid)
        case = getattr(item, "case", None)
        keyed.append((ref, case is not None and cluster_wide(case) is not None))
    where = plan(((ref["id"], wide) for ref, wide in keyed), count)
    return [{**ref, "shard": where[ref["id"]]} for ref, _ in keyed]


class ShardSelect:
    def __init__(self, shard: Shard, out: str | None) -> None:
        self.shard = shard
        self.out = Path(out) if out else None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        entries = plan_entries(items, self.shard.count)
        keep = [item for item, e in zip(items, entries) if e["shard"] == self.shard.index]
        dropped = [item for item, e in zip(items, entries) if e["shard"] != self.shard.index]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep
        if self.out is not None:
            from drakit.reports.safefs import write_file
            write_file(self.out, PLAN_FILE, json.dumps({"index": self.shard.index, "count": self.shard.count,
                                                        "plan": entries}), what="--out")
