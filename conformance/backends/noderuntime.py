"""The kubelet's DRA part for the reference backend, over the fake drivers' real gRPC sockets.

For every fake node with hardware, a :class:`clusters.nodeagent.LocalNode` runs the fake drivers'
kubelet plugins (registration and DRA sockets in a private folder) and a node agent that
registers them like kubelet's plugin watcher does. When the mini control plane binds a pod, its
claims are prepared through those sockets (NodePrepareResources) before the pod may run, and
unprepared when it goes. The plugins are kept per worker process and reused across cases (their
start-up is the expensive part); each case unprepares what it prepared when it closes.

The drivers' ``status.devices`` writes (NIC network data) reach the case's control plane through
``NodeRuntime.flush_status``, which the session calls once the control plane has settled: the
writes are made while a prepare runs inside the control plane's reconcile loop, so they are held
until then instead of re-entering it. Cases of
the device-metadata feature get plugins that write device metadata files, which
``NodeRuntime.device_metadata`` reads back.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping, Sequence

_NODES: dict[tuple[str, str, bool, bool], Any] = {}


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
    """Claim lookups and status writes go to whichever case is current in this worker."""

    get: Callable[[str, str], dict[str, Any] | None] = staticmethod(lambda ns, name: None)  # type: ignore[assignment]
    write: Callable[[str, str, str, str, list[dict[str, Any]]], None] = staticmethod(lambda *a: None)  # type: ignore[assignment]


_ROUTER = _Router()


def _discard(node: str, shape: str, optional_ops: bool, device_metadata: bool) -> None:
    ln = _NODES.pop((node, shape, optional_ops, device_metadata), None)
    if ln is not None:
        ln.stop()


def _local_node(node: str, shape: str, optional_ops: bool, device_metadata: bool) -> Any:
    key = (node, shape, optional_ops, device_metadata)
    ln = _NODES.get(key)
    if ln is None:
        from drakit.clusters.nodeagent import LocalNode
        from ..hwshapes import build_inventory
        ln = LocalNode(build_inventory(shape, node), lambda ns, name: _ROUTER.get(ns, name),
                       optional_node_operations=optional_ops, check_reserved=False,
                       device_metadata=device_metadata, write_status=lambda *a: _ROUTER.write(*a))
        ln.start()
        _NODES[key] = ln
    return ln


class NodeRuntime:
    def __init__(self, cluster: Any, shapes: Mapping[str, str], gates: Mapping[str, bool], *,
                 device_metadata: bool = False) -> None:
        self.cluster = cluster
        self.shapes = dict(shapes)
        self.optional_ops = bool(gates.get("DRAOptionalNodeOperations"))
        self.device_metadata_files = device_metadata
        self.prepared: dict[str, tuple[str, dict[str, Any]]] = {}  # pod uid -> (node, pod)
        self.results: dict[str, Any] = {}  # pod uid -> the PodResult of its prepare
        self.faults: dict[str, list[Any]] = {}  # node -> fake_hw Faults injected in this case
        # (namespace, pod, container) -> what the runtime would give it (``containers.record``)
        self.containers: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.pending_status: list[tuple[str, str, str, str, list[dict[str, Any]]]] = []
        self.refused: dict[str, str] = {}  # node -> a failed NodeUnprepareResources of this case
        self._lock = threading.Lock()
        _ROUTER.get = lambda ns, name: cluster.get("ResourceClaim", name, ns)  # type: ignore[method-assign]
        _ROUTER.write = self._hold_status  # type: ignore[method-assign]

    def _hold_status(self, namespace: str, name: str, uid: str, driver: str,
                     entries: list[dict[str, Any]]) -> None:
        with self._lock:
            self.pending_status.append((namespace, name, uid, driver, entries))

    def flush_status(self) -> None:
        """Write the held ``status.devices`` entries through the status subresource, as the
        driver would have; a claim that went away or was replaced is skipped (best effort, like
        the driver's own writes). Writes made meanwhile are flushed too."""
        from drakit.fake_driver.plugin.claims import merge_device_status

        from ..errors import ApiRejected
        while True:
            with self._lock:
                if not self.pending_status:
                    return
                namespace, name, uid, driver, entries = self.pending_status.pop(0)
            claim = self.cluster.get("ResourceClaim", name, namespace)
            if claim is None or claim["metadata"].get("uid") != uid:
                continue
            status = dict(claim.get("status") or {})
            merged = merge_device_status(status.get("devices") or [], driver, entries)
            if merged == (status.get("devices") or []):
                continue
            status["devices"] = merged
            try:
                self.cluster.update_status("ResourceClaim", name, namespace, status)
            except ApiRejected:
                continue

    def _node(self, node: str) -> Any:
        shape = self.shapes.get(node)
        return _local_node(node, shape, self.optional_ops, self.device_metadata_files) if shape else None

    def prepare(self, node: str, pod: dict[str, Any], claims: Sequence[dict[str, Any]]) -> str | None:
        ln = self._node(node)
        if ln is None:
            return None  # a node without fake hardware has no fake drivers to call
        ours = [c for c in claims if any(r.get("driver") in ln.driver_names for r in _results(c))]
        if not ours:
            self._record_containers(ln, pod, None)
            return None
        result = ln.prepare(pod["metadata"]["uid"], ours)
        if result.ok:
            self.prepared[pod["metadata"]["uid"]] = (node, pod)
            self.results[pod["metadata"]["uid"]] = result
            self._record_containers(ln, pod, result)
            return None
        return str(result.error)

    def _record_containers(self, ln: Any, pod: dict[str, Any], result: Any) -> None:
        """What each container would get from a CDI runtime (``containers``), as a real kubelet
        node's fake CRI records it."""
        from drakit.clusters.nodeagent import container_cdi_devices

        from .containers import container_env, resolve
        spec = pod.get("spec") or {}
        meta = pod["metadata"]
        ids = container_cdi_devices(pod, result) if result is not None else {}
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            self.containers[(meta.get("namespace", ""), meta["name"], c["name"])] = resolve(
                ids.get(c["name"], []), [ln.cdi_dir], container_env(c))

    def device_fault(self, node: str, device: str, kind: str, effect: str) -> None:
        """A device of ``node`` turned unhealthy (KEP-4680, ResourceHealthStatus): like the
        kubelet once the driver's health stream says so, write every running pod's
        ``containerStatuses[].allocatedResourcesStatus`` on that node (``devicehealth``)."""
        from drakit.fake_hw.faults import Fault

        ln = self._node(node)
        if ln is None:
            return
        fault = Fault(device, kind, effect)  # type: ignore[arg-type]
        self.faults.setdefault(node, []).append(fault)
        for plugin in ln.plugins.values():  # the driver sees it (a lost device fails prepare)
            if device in plugin.driver.devices:
                plugin.inject_fault(fault)
        self._write_health(node)

    def clear_fault(self, node: str, device: str) -> None:
        ln = self._node(node)
        if ln is None:
            return
        self.faults[node] = [f for f in self.faults.get(node, []) if f.device != device]
        for plugin in ln.plugins.values():
            plugin.clear_faults(device)
        self._write_health(node)

    def started(self, node: str, uid: str) -> None:
        """The pod runs: like the kubelet's status of a running pod, its containers' statuses
        carry the health of its prepared devices (Healthy until the driver says otherwise)."""
        if uid in self.results and self._node(node) is not None:
            self._write_health(node, only=uid)

    def _write_health(self, node: str, only: str | None = None) -> None:
        from drakit.fake_hw.faults import device_taints

        from .devicehealth import allocated_resources_status
        ln = self._node(node)
        unhealthy = set(device_taints(ln.inventory, self.faults.get(node, [])))
        for uid, (n, pod) in list(self.prepared.items()):
            if n != node or uid not in self.results or (only is not None and uid != only):
                continue
            current = self.cluster.get("Pod", pod["metadata"]["name"], pod["metadata"].get("namespace"))
            if current is None:
                continue
            status = dict(current.get("status") or {})
            status["containerStatuses"] = allocated_resources_status(current, self.results[uid], unhealthy,
                                                                     status.get("containerStatuses") or [])
            self.cluster.update_status("Pod", current["metadata"]["name"], current["metadata"].get("namespace"), status)

    def restart(self, node: str, component: str) -> None:
        """Restart the node's kubelet part (the node agent, from its checkpoint) or its fake
        driver plugins (registered again); prepared claims stay prepared."""
        ln = self._node(node)
        if ln is None:
            raise KeyError(f"node {node} has no fake hardware, so no node side to restart")
        if component == "kubelet":
            ln.restart_agent()
        else:
            ln.restart_plugins()

    def container(self, namespace: str, pod: str, container: str) -> dict[str, Any] | None:
        return self.containers.get((namespace, pod, container))

    def unprepare(self, node: str, pod: dict[str, Any]) -> None:
        self.results.pop(pod["metadata"]["uid"], None)
        entry = self.prepared.pop(pod["metadata"]["uid"], None)
        if entry is not None:
            ln = self._node(node)
            if ln is not None:
                result = ln.unprepare(pod["metadata"]["uid"])
                if not result.ok:  # the driver keeps the claim prepared: its devices stay taken
                    self.refused[node] = f"pod {pod['metadata']['name']}: {result.error}"

    def device_metadata(self, namespace: str, claim: str, request: str,
                        driver: str | None = None) -> list[dict[str, Any]] | None:
        """The documents of the metadata file a fake driver of this case's nodes wrote for the
        claim's request (None: no such file)."""
        for node in self.shapes:
            found = self._node(node).read_metadata(namespace, claim, request, driver)
            if found is not None:
                return found  # type: ignore[no-any-return]
        return None

    def close(self) -> None:
        for node, pod in list(self.prepared.values()):
            self.unprepare(node, pod)
        for node, why in self.refused.items():  # later cases get fresh plugins, not the devices still held
            _discard(node, self.shapes[node], self.optional_ops, self.device_metadata_files)
            logging.getLogger("drakit.reference").warning(
                "node %s: NodeUnprepareResources failed (%s); its fake drivers were restarted afresh so that "
                "later cases do not meet the devices it kept prepared", node, why)
        self.refused.clear()
        for node in self.faults:  # the plugins are shared by later cases: healthy again
            ln = self._node(node)
            if ln is not None:
                for plugin in ln.plugins.values():
                    plugin.clear_faults()
        self.faults.clear()


def _results(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []))
