"""The cluster backend waits for a case's kwok nodes to be Ready and untainted before the case
runs (a pod created earlier can only go to the nodes that already are)."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.backends.base import HarnessError
from drakit.conformance.backends.cluster import ClusterSession
from drakit.conformance.backends.names import NameMap


class _Nodes:
    """Answers GET Node with the next state of a node kwok is bringing up."""

    def __init__(self, states: list[dict[str, Any] | None]) -> None:
        self.states = states
        self.reads = 0
        self.names: set[str] = set()

    def get(self, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        assert (kind, namespace) == ("Node", None)
        self.names.add(name)
        state = self.states[min(self.reads, len(self.states) - 1)]
        self.reads += 1
        return state


def _node(ready: bool, taints: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": "node-a"},
            "spec": {"taints": [{"key": k, "effect": "NoSchedule"} for k in taints]},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _session(api: _Nodes, names: NameMap | None = None) -> ClusterSession:
    session = ClusterSession.__new__(ClusterSession)
    session.api = api  # type: ignore[assignment]
    session.names = names or NameMap()
    return session


def test_waits_until_ready_and_the_not_ready_taint_is_gone() -> None:
    api = _Nodes([None, _node(False, ["node.kubernetes.io/not-ready"]), _node(True, ["node.kubernetes.io/not-ready"]),
                  _node(True, [])])
    _session(api).wait_for_nodes(["node-a"], timeout=10)
    assert api.reads == 4 and api.names == {"node-a"}


def test_on_a_shared_cluster_it_waits_for_the_worker_s_own_node() -> None:
    api = _Nodes([_node(True, [])])
    _session(api, NameMap("gw1-", owned=["node-a"])).wait_for_nodes(["node-a"], timeout=10)
    assert api.names == {"gw1-node-a"}


def test_a_node_that_never_gets_ready_is_a_clear_harness_error() -> None:
    api = _Nodes([_node(False, [])])
    with pytest.raises(HarnessError, match="node node-a did not become Ready and untainted within 0 s"):
        _session(api).wait_for_nodes(["node-a"], timeout=0.3)
