"""The reference backend: every case gets its own in-process mini control plane.

Gates are the run's gate set plus whatever the case declares in ``featureGates`` (the reference
emulates a cluster configured that way). Fake hardware named by the case is turned into Nodes,
ResourceSlices and DeviceClasses by the fake driver's publisher, the same objects the driver
publishes on a real cluster.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

from ..spec.case import Case
from ..errors import ApiRejected
from ..features import DEFAULT_GATES, LOCKED_GATES, unmet_dependencies
from ..model import NAMESPACED_KINDS
from ..reference.cluster import ReferenceCluster
from ..reference.store import NotFound
from .base import Capabilities, HarnessError

NAMESPACED = NAMESPACED_KINDS
REFERENCE_VERSION = "v1.37 (drakit reference allocator)"


def case_namespace(case_id: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", case_id.lower())[:40].strip("-")  # ids may hold / and @ (configurations)
    return f"dra-{slug}-{hashlib.sha256(case_id.encode()).hexdigest()[:6]}"


class ReferenceSession:
    synchronous = True

    def __init__(self, cluster: ReferenceCluster, namespace: str, case: Case | None = None) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.faults = FaultState(case)

    def inject_fault(self, node: str, device: str, kind: str, effect: str) -> None:
        """The fake driver sees a hardware fault and republishes the node's slices with a taint."""
        for obj in self.faults.inject(node, device, kind, effect):
            self.cluster.apply(obj)
        if self.cluster.node_runtime is not None:  # the health stream: pods' device health
            self.cluster.node_runtime.device_fault(node, device, kind, effect)
        self._settled()

    def clear_fault(self, node: str, device: str) -> None:
        """The device is back: the driver republishes its slices without the taint."""
        if self.cluster.node_runtime is not None:  # first: the slice update makes the kubelet part retry
            self.cluster.node_runtime.clear_fault(node, device)
        for obj in self.faults.clear(node, device):
            self.cluster.apply(obj)
        self._settled()

    def _settled(self) -> None:
        """The control plane has settled: let the drivers' held status writes land."""
        if self.cluster.node_runtime is not None:
            self.cluster.node_runtime.flush_status()

    def _ns(self, kind: str) -> str | None:
        return self.namespace if kind in NAMESPACED else None

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") in NAMESPACED:
            obj = {**obj, "metadata": {**obj.get("metadata", {}), "namespace": obj.get("metadata", {}).get("namespace", self.namespace)}}
        out = self.cluster.apply(obj)
        self._settled()
        return out

    def update_status(self, kind: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        try:
            out = self.cluster.update_status(kind, name, self._ns(kind), status)
        except NotFound as exc:
            raise KeyError(str(exc)) from None
        self._settled()
        return out

    def advance(self, seconds: float) -> None:
        self.cluster.advance(seconds)
        self._settled()

    def now(self) -> str:
        return self.cluster.clock.stamp()

    def last_seen(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.cluster.last_seen(kind, name, self._ns(kind))

    def scheduler_metrics(self) -> dict[str, Any]:
        return self.cluster.metrics

    def node_operations(self) -> list[dict[str, Any]]:
        return [dict(o) for o in self.cluster.node_operations]

    def delete(self, kind: str, name: str) -> None:
        try:
            self.cluster.delete(kind, name, self._ns(kind))
        except NotFound as exc:
            raise KeyError(str(exc)) from None
        self._settled()

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.cluster.get(kind, name, self._ns(kind))

    def device_metadata(self, claim: str, request: str, driver: str | None = None) -> list[dict[str, Any]] | None:
        """The metadata file the fake driver wrote on the node (read from the plugin's folder)."""
        if self.cluster.node_runtime is None:
            raise HarnessError("device metadata files need the node side (run without --drakit-no-node-side)")
        return self.cluster.node_runtime.device_metadata(self.namespace, claim, request, driver)  # type: ignore[no-any-return]

    def restart(self, node: str, component: str) -> None:
        """A restart step: the node agent (the kubelet's DRA part) or the node's fake drivers."""
        if self.cluster.node_runtime is None:
            raise HarnessError("restart steps need the node side (run without --drakit-no-node-side)")
        self.cluster.node_runtime.restart(node, component)

    def container(self, pod: str, container: str) -> dict[str, Any] | None:
        """What the node's runtime gave the pod's container (``containers.record``), as the
        reference's kubelet part computes it; None when it created no such container."""
        if self.cluster.node_runtime is None:
            raise HarnessError("container records need the node side (run without --drakit-no-node-side)")
        return self.cluster.node_runtime.container(self.namespace, pod, container)  # type: ignore[no-any-return]

    def list(self, kind: str) -> list[dict[str, Any]]:
        return self.cluster.list(kind, self._ns(kind))

    def events(self) -> list[dict[str, Any]]:
        return self.cluster.events(self.namespace)

    def diagnostics(self) -> dict[str, Any]:
        def brief(kind: str) -> list[dict[str, Any]]:
            return [{"kind": kind, "name": o["metadata"]["name"], "spec": o.get("spec"), "status": o.get("status")}
                    for o in self.cluster.list(kind, self._ns(kind))]
        return {"objects": brief("ResourceClaim") + brief("Pod") + brief("DeviceTaintRule") + brief("PodGroup")
                + brief("ResourcePoolStatusRequest"),
                "clock": self.cluster.clock.stamp(),
                "events": [f"{e['type']} {e['reason']} {e['involvedObject']['kind']}/{e['involvedObject']['name']}: {e['message']}"
                           for e in self.events()]}

    def close(self, *, failed: bool) -> None:
        if self.cluster.node_runtime is not None:
            self.cluster.node_runtime.close()


class ReferenceBackend:
    name = "reference"

    def __init__(self, gates: Mapping[str, bool] | None = None, profile: Mapping[str, str] | None = None, *,
                 node_side: bool = True) -> None:
        self.gates = dict(DEFAULT_GATES if gates is None else gates)
        self.node_side = node_side  # prepare claims through the fake drivers' real gRPC sockets

    def capabilities(self) -> Capabilities:
        return Capabilities(REFERENCE_VERSION, dict(self.gates), served_apis(self.gates))

    def unmet(self, case: Case) -> tuple[str, str] | None:
        for gate, want in (*case.feature_gates.items(), *case.scheduler_gates.items()):
            if not want and gate in LOCKED_GATES:
                return ("feature-disabled", f"{gate} is locked on in 1.37; the case needs it off")
        missing = (unmet_dependencies({**self.gates, **case.feature_gates})
                   or unmet_dependencies({**self.gates, **case.feature_gates, **case.scheduler_gates}))
        if missing:
            return ("feature-disabled", "feature gate dependencies are not met (a 1.37 binary would not start): "
                    + "; ".join(missing))
        return None

    def open(self, case: Case) -> ReferenceSession:
        gates = {**self.gates, **case.feature_gates}
        cluster = ReferenceCluster(gates, seed=case.id, scheduler_gates=case.scheduler_gates)
        if self.node_side:
            from .noderuntime import NodeRuntime
            cluster.node_runtime = NodeRuntime(cluster, {n.name: n.shape for n in case.nodes if n.shape}, gates,
                                               device_metadata=needs_device_metadata(case))
        ns = case_namespace(case.id)
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": dict(case.namespace_labels)}})
        try:
            for obj in hardware_objects(case):
                cluster.apply(obj)
        except (ApiRejected, ValueError) as exc:
            raise HarnessError(f"installing the fake hardware failed: {exc}") from exc
        return ReferenceSession(cluster, ns, case)


def needs_device_metadata(case: Case) -> bool:
    """Whether the case's fake drivers write device metadata files (KEP-5304 is a driver opt-in)."""
    return "device-metadata" in case.features


def hardware_objects(case: Case) -> list[dict[str, Any]]:
    """Nodes, DeviceClasses and ResourceSlices for the case's fake hardware."""
    from drakit.fake_driver.classes import device_classes
    from drakit.fake_driver.slices import publish_slices
    from ..hwshapes import build_inventory

    out: list[dict[str, Any]] = []
    if case.nodes and case.install_classes:
        out.extend(device_classes())
    for node in case.nodes:
        labels = {"kubernetes.io/hostname": node.name}
        slices: list[dict[str, Any]] = []
        if node.shape:
            inv = build_inventory(node.shape, node.name)
            labels.update(inv.node_labels())
            slices = publish_slices(inv)
        labels.update(node.labels)
        n: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.name, "labels": labels}}
        if node.allocatable:
            n["status"] = {"allocatable": dict(node.allocatable)}
        out.append(n)
        out.extend(slices)
    return out


def served_apis(gates: Mapping[str, bool]) -> tuple[str, ...]:
    """API versions the reference serves with these gates (an alpha/beta version is assumed
    enabled in the runtime config exactly when its feature gate is on)."""
    apis = ["resource.k8s.io/v1"]
    if gates.get("DRAResourcePoolStatus"):
        apis.append("resource.k8s.io/v1alpha3")
    if gates.get("GenericWorkload"):
        apis.append("scheduling.k8s.io/v1beta1")
    return tuple(apis)


class FaultState:
    """The faults injected into a case's fake nodes, and the slices the driver republishes."""

    def __init__(self, case: Case | None) -> None:
        self.shapes = {n.name: n.shape for n in case.nodes if n.shape} if case else {}
        self.faults: dict[str, list[Any]] = {}
        self.generation: dict[str, int] = {}

    def inject(self, node: str, device: str, kind: str, effect: str) -> list[dict[str, Any]]:
        from drakit.fake_driver.slices import publish_slices
        from drakit.fake_hw.faults import Fault
        from ..hwshapes import build_inventory
        shape = self.shapes.get(node)
        if shape is None:
            raise KeyError(f"node {node!r} has no fake hardware in this case")
        inventory = build_inventory(shape, node)
        inventory.device(device)  # KeyError for an unknown device
        faults = self.faults.setdefault(node, [])
        faults.append(Fault(device, kind, effect))  # type: ignore[arg-type]
        self.generation[node] = self.generation.get(node, 1) + 1
        return publish_slices(inventory, generation=self.generation[node], faults=faults)

    def clear(self, node: str, device: str) -> list[dict[str, Any]]:
        """The device is healthy again: the slices the driver publishes then."""
        from drakit.fake_driver.slices import publish_slices
        from ..hwshapes import build_inventory
        shape = self.shapes.get(node)
        if shape is None:
            raise KeyError(f"node {node!r} has no fake hardware in this case")
        faults = [f for f in self.faults.get(node, []) if f.device != device]
        self.faults[node] = faults
        self.generation[node] = self.generation.get(node, 1) + 1
        return publish_slices(build_inventory(shape, node), generation=self.generation[node], faults=faults)
