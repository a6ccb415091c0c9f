"""The kubelet's DRA part for the reference backend, over the fake drivers' real gRPC sockets.

For every fake node with hardware, a :class:`clusters.nodeagent.LocalNode` runs the fake drivers'
kubelet plugins (registration and DRA sockets in a private folder) and a node agent that
registers them like kubelet's plugin watcher does. When the mini control plane binds a pod, its
claims are prepared through those sockets (NodePrepareResources) before the pod may run, and
unprepared when it goes. The plugins are kept per worker process and reused across cases (their
start-up is the expensive part); each case unprepares what it prepared when it closes.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

_NODES: dict[tuple[str, str, bool], Any] = {}


def shutdown() -> None:
    """Stop every fake node of this process (the plugin calls it when the session ends: the gRPC
    servers' threads would otherwise keep the interpreter alive)."""
    for node in _NODES.values():
        try:
            node.stop()
        except Exception:  # noqa: BLE001 - best effort; the session is over
            pass
    _NODES.clear()


class _Router:
    """Claim lookups go to whichever case is current in this worker."""

    get: Callable[[str, str], dict[str, Any] | None] = staticmethod(lambda ns, name: None)  # type: ignore[assignment]


_ROUTER = _Router()


def _local_node(node: str, shape: str, optional_ops: bool) -> Any:
    key = (node, shape, optional_ops)
    ln = _NODES.get(key)
    if ln is None:
        from clusters.nodeagent import LocalNode
        from fake_hw.inventory import build_inventory
        ln = LocalNode(build_inventory(shape, node), lambda ns, name: _ROUTER.get(ns, name),
                       optional_node_operations=optional_ops, check_reserved=False)
        ln.start()
        _NODES[key] = ln
    return ln


class NodeRuntime:
    def __init__(self, cluster: Any, shapes: Mapping[str, str], gates: Mapping[str, bool]) -> None:
        self.cluster = cluster
        self.shapes = dict(shapes)
        self.optional_ops = bool(gates.get("DRAOptionalNodeOperations"))
        self.prepared: dict[str, tuple[str, dict[str, Any]]] = {}  # pod uid -> (node, pod)
        _ROUTER.get = lambda ns, name: cluster.get("ResourceClaim", name, ns)  # type: ignore[method-assign]

    def _node(self, node: str) -> Any:
        shape = self.shapes.get(node)
        return _local_node(node, shape, self.optional_ops) if shape else None

    def prepare(self, node: str, pod: dict[str, Any], claims: Sequence[dict[str, Any]]) -> str | None:
        ln = self._node(node)
        if ln is None:
            return None  # a node without fake hardware has no fake drivers to call
        ours = [c for c in claims if any(r.get("driver") in ln.driver_names for r in _results(c))]
        if not ours:
            return None
        result = ln.prepare(pod["metadata"]["uid"], ours)
        if result.ok:
            self.prepared[pod["metadata"]["uid"]] = (node, pod)
            return None
        return str(result.error)

    def unprepare(self, node: str, pod: dict[str, Any]) -> None:
        entry = self.prepared.pop(pod["metadata"]["uid"], None)
        if entry is not None:
            ln = self._node(node)
            if ln is not None:
                ln.unprepare(pod["metadata"]["uid"])

    def close(self) -> None:
        for uid, (node, pod) in list(self.prepared.items()):
            self.unprepare(node, pod)


def _results(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []))
