"""Hand-built states for explanation tests: a reference cluster, then the explanation of a pod."""

from __future__ import annotations

from typing import Any

from drakit.conformance.explain.run import explain_pod
from drakit.conformance.reference.cluster import ReferenceCluster

from tests.reference.helpers import NS


def explain(c: ReferenceCluster, pod: str) -> dict[str, Any]:
    p = c.get("Pod", pod, NS)
    assert p is not None
    return explain_pod(c.store, p, c.gates)


def devices(out: dict[str, Any], node: str = "node-a", claim: int = 0, request: int = 0, entry: int = 0) -> dict[str, dict[str, Any]]:
    """device name (the last part of its ID) -> its first failing check, on one node."""
    n = next(n for n in out["nodes"] if n["name"] == node)
    e = n["claims"][claim]["requests"][request]["entries"][entry]
    return {d["device"].rsplit("/", 1)[1]: d for d in e["devices"]}
