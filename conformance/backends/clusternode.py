"""The cluster backend's node side on drakit's local cluster (kwok nodes, stage set "prepared").

For every fake node of a case, a :class:`clusters.nodeagent.LocalNode` runs the fake drivers'
kubelet plugins (real gRPC sockets in a private folder) and a node agent; the plugins read
claims and write ``status.devices`` through the API server as the driver's own ServiceAccount
(``fake_driver.identity``: narrow RBAC, no admin rights). A
:class:`clusters.nodeagent.kube.KubeNodeRuntime` per case watches the case namespace's pods and
prepares the claims of pods bound to those nodes before kwok may run them, and unprepares them
when the pods go. The plugins are kept for the whole run and reused by later cases with the same
node name and shape (their start-up is the expensive part); the ResourceSlices stay the ones the
backend publishes for the case.
"""

from __future__ import annotations

import logging
from typing import Any, Collection, Mapping

from drakit.clusters.nodeagent import LocalNode
from drakit.clusters.nodeagent.kube import KubeNodeRuntime
from drakit.fake_driver.kube import Kube, KubeClaimSource
from ..hwshapes import build_inventory
from drakit.fake_hw.vendors import VENDORS

from ..spec.case import Case
from .base import HarnessError
from drakit.fake_driver.identity import driver_api_client
from .reference import needs_device_metadata
from ..crash import log_bug

log = logging.getLogger("drakit.cluster.node")


class CaseNodes:
    """One case's node side: its nodes and the pod watcher that prepares for them."""

    def __init__(self, runtime: KubeNodeRuntime, nodes: Mapping[str, LocalNode | None]) -> None:
        self.runtime = runtime
        self.nodes = dict(nodes)

    def device_metadata(self, namespace: str, claim: str, request: str,
                        driver: str | None = None) -> list[dict[str, Any]] | None:
        for node in self.nodes.values():
            found = node.read_metadata(namespace, claim, request, driver) if node is not None else None
            if found is not None:
                return found
        return None

    def close(self) -> list[str]:
        """Stop watching and unprepare what is still prepared; returns the errors."""
        return self.runtime.close()


class ClusterNodeSide:
    """Fake drivers and node agents for the fake nodes of the cases (module docstring)."""

    def __init__(self, admin_api_client: Any, gates: Mapping[str, bool]) -> None:
        self.admin = Kube(admin_api_client)
        try:
            self.driver = Kube(driver_api_client(self.admin, [v.driver for v in VENDORS]))
        except Exception as exc:
            raise HarnessError(f"the node side cannot start: {exc}") from None
        self.claims = KubeClaimSource(self.driver)
        self.optional_ops = bool(gates.get("DRAOptionalNodeOperations"))
        self._nodes: dict[tuple[str, str, bool], LocalNode] = {}

    def _local_node(self, name: str, shape: str, metadata: bool) -> LocalNode:
        key = (name, shape, metadata)
        node = self._nodes.get(key)
        if node is None:
            node = LocalNode(build_inventory(shape, name), self.claims.get_claim,
                             write_status=self.claims.write_device_status,
                             optional_node_operations=self.optional_ops, check_reserved=False,
                             device_metadata=metadata)
            node.start()
            self._nodes[key] = node
        return node

    def open(self, case: Case, namespace: str, skip: Collection[str] = ()) -> CaseNodes:
        """Start the case's node side: pods in ``namespace`` on the case's nodes (but ``skip``,
        which have a real kubelet) get prepared. Nodes without a shape have no fake drivers:
        their pods only need the annotation."""
        metadata = needs_device_metadata(case)
        nodes = {n.name: (self._local_node(n.name, n.shape, metadata) if n.shape else None)
                 for n in case.nodes if n.name not in skip}
        runtime = KubeNodeRuntime(self.admin, nodes, namespace=namespace)
        try:
            runtime.start()
        except Exception as exc:
            runtime.stop()
            raise HarnessError(f"the node runtime cannot watch pods: {exc}") from None
        return CaseNodes(runtime, nodes)

    def stop(self) -> None:
        """Stop every fake node's plugins and agent (end of the run)."""
        for node in self._nodes.values():
            try:
                node.stop()
            except Exception as exc:  # noqa: BLE001 - best effort; the run is over
                log_bug(log, f"stopping fake node {node.node}", exc)
        self._nodes.clear()
