"""The structural minimiser, without the oracle: shrink towards a property of drakit's own outcome."""

from __future__ import annotations

import json

from drakit.conformance.oracle.compare import run_ours
from drakit.conformance.oracle.minimise import minimise

from .known import KNOWN


def _devices(inp: dict) -> list[str]:
    return [d["name"] for s in inp["slices"] for d in (s["spec"].get("devices") or [])]


def test_minimise_keeps_the_property_and_drops_the_rest() -> None:
    big = {
        "features": {"DRAPrioritizedList": True, "DRAAdminAccess": True},
        "node": {"name": "node-1", "labels": {"region": "r1"}},
        "classes": [{"metadata": {"name": "any"}}, {"metadata": {"name": "unused"}}],
        "slices": [{"metadata": {"name": f"s{i}"}, "spec": {
            "driver": "a.example.com", "nodeName": "node-1",
            "pool": {"name": f"p{i}", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"d{i}{k}", "attributes": {"numa": {"int": k}}} for k in range(3)]}} for i in range(3)],
        "claims": [{"metadata": {"name": f"c{j}"}, "spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": "any", "count": 2}}]}}} for j in range(3)],
    }

    def fails(i: dict) -> bool:  # the property to keep: unsatisfiable, and device d21 still published
        return run_ours(i).status == "unsatisfiable" and "d21" in _devices(i)

    big["allocated"] = {"devices": [f"a.example.com/p{i}/d{i}{k}" for i in range(3) for k in range(3) if k]}
    assert fails(big)
    small = minimise(big, fails)
    assert fails(small)
    assert len(json.dumps(small)) < len(json.dumps(big)) / 4
    assert len(small["claims"]) == 1 and _devices(small) == ["d21"]


def test_known_repros_are_already_minimal_inputs_that_parse() -> None:
    for k in KNOWN:
        assert run_ours(k.repro).status != "rejected", k.name
