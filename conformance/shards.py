"""Which shard of a run each case belongs to (``drakit run --shard i/N``). Pure, no I/O.

The unit is a case id: every backend of a case runs in the same shard. The cluster-wide cases
(``backends.names.cluster_wide``: they must run alone on a shared cluster) all go to shard 1,
where they run one after another and, on a cluster, under the run's cross-shard lock
(``backends.leaselock``). The other ids are cut into runs of consecutive ids in the order of a
hash of the id (stable across machines and Python runs, so the same corpus always splits the same
way), one run per shard, sized so that the shards hold as many cases as possible alike (shard 1's
cluster-wide cases count towards its size). A case added to the corpus moves only the few at the
runs' edges.

Every shard computes the whole plan, so each one's ``results.json`` can record the corpus and
who runs what (``run.shard``), and ``drakit report --merge`` can tell a missing or doubled case
from a complete run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable

MAX_SHARDS = 1000
PLAN_FILE = ".drakit-shard.json"  # the plan, written beside the results by the process that collected


@dataclass(frozen=True, slots=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"2/4"`` -> Shard(2, 4). ValueError with one line saying what is wrong."""
    head, sep, tail = text.strip().partition("/")
    if not sep or not (head.isdigit() and tail.isdigit() and head.isascii() and tail.isascii()):
        raise ValueError(f"{text!r} is not i/N (the i-th of N shards, e.g. 1/2)")
    index, count = int(head), int(tail)
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"{text!r}: N must be 1 to {MAX_SHARDS}")
    if not 1 <= index <= count:
        raise ValueError(f"{text!r}: i must be 1 to N ({count})")
    return Shard(index, count)


def _key(case_id: str) -> str:
    return hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).hexdigest()


def plan(cases: Iterable[tuple[str, bool]], count: int) -> dict[str, int]:
    """case id -> shard index (1-based) for the ``(case id, cluster-wide)`` pairs of a corpus
    (an id given twice, once per backend, counts once; cluster-wide if any says so)."""
    wide: dict[str, bool] = {}
    for case_id, is_wide in cases:
        wide[case_id] = wide.get(case_id, False) or is_wide
    out = {case_id: 1 for case_id, is_wide in wide.items() if is_wide}
    rest = sorted((c for c, w in wide.items() if not w), key=lambda c: (_key(c), c))
    # shard sizes as even as the whole allows; shard 1's wide cases count towards its size
    total = len(wide)
    sizes = [total // count + (1 if i < total % count else 0) for i in range(count)]
    sizes[0] = max(0, sizes[0] - len(out))
    if sum(sizes) < len(rest):  # more wide cases than shard 1's share: the others split the rest
        tail = len(rest) - sizes[0]
        sizes[1:] = [tail // (count - 1) + (1 if i < tail % (count - 1) else 0) for i in range(count - 1)]
    start = 0
    for index, size in enumerate(sizes, start=1):
        for case_id in rest[start:start + size]:
            out[case_id] = index
        start += size
    return out
