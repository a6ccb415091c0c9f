"""The cluster backend's node side on drakit's local cluster with real kubelet nodes.

A case node with fake hardware (a ``shape``, and no ``allocatable`` of its own) is a real
kubelet 1.37.2 (``clusters.local.kubeletnode``) over containerd + runc, or drakit's fake CRI with
``--runtime fake``: the kubelet creates and
owns its Node, registers the fake drivers' plugins (served in-process by a
:class:`clusters.nodeagent.LocalNode` without agent, in the kubelet's ``plugins_registry``),
calls NodePrepareResources / NodeUnprepareResources itself and passes the CDI device IDs to
the runtime, whose record a case can read (:meth:`CaseKubeletNodes.containers`).

A kubelet takes about a second to start, so a running kubelet node serves every later case that
names its node, whatever that case's hardware (:meth:`KubeletNodeSide.prepare`): with other
hardware, once the kubelet holds no claim prepared, the node's CDI folder and driver files are
emptied and the plugins serve the new hardware's devices on their running sockets (as drivers
whose node's devices changed). Every kubelet node runs a plugin of every fake driver
(:func:`every_driver`), one whose driver has no devices on the node's hardware serving none (a
driver's DaemonSet pod runs on every node, devices or not; nothing publishes slices for it, as
the backend publishes the case's): so a hardware change never adds or removes a plugin, which
would wait for the kubelet's once-a-second plugin reconciler, or have the kubelet wipe the
slices of a driver gone from the node 30 s later (its ``wipingDelay``). Before every case its
Node gets the case's labels and loses any other label, taint or cordon a case left
(``reset_kubelet_node``). Nodes a case does not name are stopped (their Node deleted), so a case
sees only its own nodes, as with kwok, unless the case runs no pod (then nothing of it can land
on them). The backend publishes the case's ResourceSlices after a new kubelet's start-up wipe of
its node's slices, and again after a restart step restarted the kubelet (a driver republishes at
once).

The kubelets of a run's first case start with the local cluster, beside its controllers
(``LocalCluster(prestart_kubelet_nodes=...)``, :func:`kubelet_nodes_of`); that case's
:meth:`KubeletNodeSide.prepare` gives them their plugins (or stops them if it runs elsewhere).

Other case nodes are kwok nodes (``clusternode``): a node without hardware needs no node side;
one with hardware and its own ``allocatable`` (which a kubelet would overwrite with the
machine's) keeps the node agent.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Mapping

from drakit.clusters.nodeagent import LocalNode
from drakit.fake_hw.inventory import DriverPool, NodeInventory
from drakit.fake_hw.vendors import VENDORS

from ..hwshapes import build_inventory
from ..spec.case import Case
from .base import HarnessError
from .kubeapi import first_line
from .clusternode import CaseNodes, ClusterNodeSide
from .nodeside import FAKE_CRI
from .reference import needs_device_metadata
from ..crash import log_bug

log = logging.getLogger("drakit.cluster.kubelet")


def real_node_names(case: Case) -> set[str]:
    """The case's nodes that run as real kubelets (module docstring)."""
    return {n.name for n in case.nodes if n.shape and not n.allocatable}


#: Kinds whose objects put pods on nodes: a case with none of them cannot use a node it does not name.
POD_KINDS = frozenset({"Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob",
                       "ReplicationController", "Node"})
#: How long a hardware change waits for the kubelet to unprepare an earlier case's claims.
SETTLE_SECONDS = 30.0


def kubelet_nodes_of(case: Case) -> list[tuple[str, dict[str, str]]]:
    """``(name, node labels)`` of the case's real kubelet nodes, as :meth:`KubeletNodeSide.prepare`
    starts them (``LocalCluster(prestart_kubelet_nodes=...)`` for a run's first case)."""
    out = []
    names = real_node_names(case)
    for spec in case.nodes:
        if spec.name in names:
            assert spec.shape is not None
            out.append((spec.name, {**build_inventory(spec.shape, spec.name).node_labels(), **spec.labels}))
    return out


def every_driver(inv: NodeInventory) -> NodeInventory:
    """``inv`` with an empty pool for each fake driver it has no devices of (module docstring)."""
    have = set(inv.drivers)
    return dataclasses.replace(inv, pools=inv.pools + tuple(
        DriverPool(v.driver, v.key, ()) for v in VENDORS if v.driver not in have))


def runs_pods(case: Case) -> bool:
    """Whether any manifest of the case is a pod, makes pods, or is a Node."""
    return any(m.get("kind") in POD_KINDS for step in case.steps for m in step.manifests)


class _Running:
    def __init__(self, key: tuple[Any, ...], local: LocalNode) -> None:
        self.key = key
        self.local = local


class CaseKubeletNodes:
    """One case's node side: its real kubelet nodes and, for its kwok nodes, ``clusternode``'s."""

    def __init__(self, side: KubeletNodeSide, real: Mapping[str, LocalNode], kwok: CaseNodes | None) -> None:
        self.side = side
        self.real = dict(real)
        self.kwok = kwok

    def device_metadata(self, namespace: str, claim: str, request: str,
                        driver: str | None = None) -> list[dict[str, Any]] | None:
        for node in self.real.values():
            found = node.read_metadata(namespace, claim, request, driver)
            if found is not None:
                return found
        return self.kwok.device_metadata(namespace, claim, request, driver) if self.kwok is not None else None

    def containers(self, namespace: str, pod: str, container: str | None = None) -> list[dict[str, Any]] | None:
        """What the fake CRI of the pod's node recorded for its containers (newest last); None
        when the pod ran on no real kubelet node of this case."""
        for name in self.real:
            node = self.side.cluster.kubelet_node(name)
            if node is None:
                continue
            found = node.containers(namespace, pod, container)
            if found:
                return found
        return None

    def released(self, pod: dict[str, Any]) -> bool:
        """Whether the kubelet of the real kubelet node ``pod`` ran on is done with the pod's
        claims: the pod is being deleted, the kubelet reported its terminal phase (after
        NodeUnprepareResources, in ``SyncTerminatingPod``) and the kubelet's DRA checkpoint holds
        no claim of the pod's namespace (a pod that completed on its own is terminal before it is
        unprepared). The claims are then released to the claim controller; the kubelet deletes
        the pod object itself up to a second later (its pod worker waits for the PLEG's next
        periodic relist first), which the case need not wait for."""
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        if not meta.get("deletionTimestamp") or status.get("phase") not in ("Succeeded", "Failed"):
            return False
        if spec.get("nodeName") not in self.real:
            return False
        node = self.side.cluster.kubelet_node(spec["nodeName"])
        if node is None or not node.alive():
            return False
        held = node.checkpoint_claims()
        return held is not None and not any(c.split("/", 1)[0] == meta.get("namespace") for c in held)

    def restart_kubelet(self, node: str) -> None:
        self.side.restart_kubelet(node)

    def restart_plugins(self, node: str) -> None:
        self.side.restart_plugins(node)

    def inject_health(self, node: str, device: str, kind: str, effect: str) -> None:
        """The fault reaches the kubelet through the driver's health stream (KEP-4680)."""
        from drakit.fake_hw.faults import Fault

        local = self.real.get(node)
        if local is None:
            return
        for plugin in local.plugins.values():
            if device in plugin.driver.devices:
                plugin.inject_fault(Fault(device, kind, effect))  # type: ignore[arg-type]

    def clear_health(self, node: str, device: str) -> None:
        local = self.real.get(node)
        for plugin in (local.plugins.values() if local is not None else ()):
            plugin.clear_faults(device)

    def close(self) -> list[str]:
        for local in self.real.values():  # the plugins stay for later cases: healthy again
            for plugin in local.plugins.values():
                plugin.clear_faults()
        return self.kwok.close() if self.kwok is not None else []


class KubeletNodeSide:
    """Real kubelet nodes (and kwok nodes through ``clusternode``) for the cases' fake nodes."""

    def __init__(self, cluster: Any, admin_api_client: Any, gates: Mapping[str, bool],
                 started: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.cluster = cluster  # clusters.local.launcher.LocalCluster with real nodes
        # kubelets the cluster started with it for the first case (name -> labels): prepare()
        # gives them their plugins if that case has them, else stops them
        self._started = {n: dict(labels) for n, labels in (started or {}).items()}
        self.kwok = ClusterNodeSide(admin_api_client, gates)
        self.claims = self.kwok.claims
        self._nodes: dict[str, _Running] = {}
        self.used: set[str] = set()  # every node name that ran as a real kubelet (results.json)
        self.starts = 0  # kubelets started for cases
        self.reuses = 0  # hardware changes a running kubelet served

    def prepare(self, case: Case) -> set[str]:
        """Start (or keep) the real kubelet nodes of ``case``; returns their names. Call before
        the case's hardware is published: a new kubelet wipes its node's slices when it starts."""
        names = real_node_names(case)
        metadata = needs_device_metadata(case)
        quiet = not runs_pods(case)
        started, self._started = self._started, {}
        pending: list[tuple[str, dict[str, str], Any, bool]] = []
        keys: dict[str, tuple[Any, ...]] = {}
        if started:  # the run's first case here: the kubelets the cluster started for it
            wanted = dict(kubelet_nodes_of(case))
            for name in [n for n, labels in started.items() if wanted.get(n) != labels]:
                self._drop(name)  # started for a case with other nodes (the first case did not run here)
                del started[name]
        for stale in [n for n in self._nodes if n not in {s.name for s in case.nodes}]:
            if not quiet:
                self._drop(stale)  # a case sees its own nodes only, as with kwok nodes
        for spec in case.nodes:
            if spec.name not in names:
                self._drop(spec.name)  # the case wants a kwok node by that name
                continue
            assert spec.shape is not None
            inv = build_inventory(spec.shape, spec.name)
            labels = {**inv.node_labels(), **spec.labels}
            key = (spec.shape, tuple(sorted(labels.items())), metadata)
            running = self._nodes.get(spec.name)
            kn = self.cluster.kubelet_node(spec.name)
            if running is None and started.get(spec.name) == labels:
                self._nodes[spec.name] = _Running(key, self._adopt(spec.name, labels, inv, metadata))
                self.starts += 1
                self.used.add(spec.name)
                continue
            if (running is not None and kn is not None and kn.alive()
                    and (running.key == key or self._rehome(spec.name, running, inv, key, metadata))):
                try:
                    self.cluster.reset_kubelet_node(spec.name, labels)
                except Exception as exc:  # ClusterError: one line
                    raise HarnessError(f"the real kubelet node {spec.name} cannot be reset: {exc}") from None
                continue
            self._drop(spec.name)
            pending.append((spec.name, labels, inv, metadata))
            keys[spec.name] = key
            self.starts += 1
            self.used.add(spec.name)
        for name, local in self._start_all(pending).items():
            self._nodes[name] = _Running(keys[name], local)
        return names

    def _start(self, name: str, labels: dict[str, str], inv: Any, metadata: bool) -> LocalNode:
        """A new kubelet node with the plugins of ``inv``, Ready (:meth:`_start_all`)."""
        return self._start_all([(name, labels, inv, metadata)])[name]

    def _start_all(self, todo: list[tuple[str, dict[str, str], Any, bool]]) -> dict[str, LocalNode]:
        """New kubelet nodes, each with the plugins of its hardware: started together, then waited
        for together (they start in parallel). The plugins start as soon as the kubelet's process
        does (its plugin watcher finds their sockets when it starts), so their registration
        overlaps the kubelet's start. A node that does not start or become Ready is started
        again with ``add_kubelet_node``'s retries, and its plugins after it."""
        started: dict[str, LocalNode] = {}
        for name, labels, inv, metadata in todo:
            try:
                kn = self.cluster.add_kubelet_node(name, labels, wait=False)
            except Exception:  # noqa: BLE001,S112 - started again below, with add_kubelet_node's retries
                continue
            started[name] = self._plugins(kn, inv, metadata)
        ready: set[str] = set()
        try:
            if started:
                self.cluster.wait_kubelet_nodes(list(started))
            ready = set(started)
        except Exception:  # noqa: BLE001 - which one failed is found node by node
            for name in started:
                try:
                    self.cluster.wait_kubelet_nodes([name])
                    ready.add(name)
                except Exception:  # noqa: BLE001,S110 - started again below
                    pass
        for name, labels, inv, metadata in todo:
            if name in ready:
                continue
            if name in started:
                started[name].stop()
                self.cluster.remove_kubelet_node(name)
            try:
                kn = self.cluster.add_kubelet_node(name, labels)
            except Exception as exc:  # ClusterError: one line with the kubelet's log tail
                raise HarnessError(f"the real kubelet node {name} cannot start: {exc}") from None
            started[name] = self._plugins(kn, inv, metadata)
        return started

    def _adopt(self, name: str, labels: dict[str, str], inv: Any, metadata: bool) -> LocalNode:
        """The plugins of ``inv`` on the kubelet the cluster started early for this case, once it
        is Ready (a kubelet registers a plugin that comes after its start at its plugin
        reconciler's next round, within a second: before its pod watch starts, which is about a
        second after its start); a kubelet that did not start is started again by :meth:`_start`."""
        kn = self.cluster.kubelet_node(name)
        if kn is not None and kn.alive():
            local = self._plugins(kn, inv, metadata)
            try:
                self.cluster.wait_kubelet_nodes([name])
                return local
            except Exception as exc:  # noqa: BLE001 - started again below, with add_kubelet_node's retries
                log.warning("kubelet node %s started with the cluster did not become Ready (%s); starting it again",
                            name, first_line(exc))
                local.stop()
        self._drop(name)
        return self._start(name, labels, inv, metadata)

    def _plugins(self, kn: Any, inv: Any, metadata: bool) -> LocalNode:
        """A plugin of every fake driver (:func:`every_driver`) on the kubelet node ``kn``,
        serving the devices of ``inv``, started (:meth:`open` waits for their registration)."""
        local = LocalNode(every_driver(inv), self.claims.get_claim, write_status=self.claims.write_device_status,
                          device_metadata=metadata, agent=False, root=kn.paths.dir / "plugin-data",
                          dirs=(kn.paths.plugins_dir, kn.paths.registry_dir, kn.paths.cdi_dir))
        try:
            local.start(timeout=15.0, wait=False)  # open() waits for the registration
        except RuntimeError as exc:
            raise HarnessError(str(exc)) from None
        return local

    def _rehome(self, name: str, running: _Running, inv: Any, key: tuple[Any, ...], metadata: bool) -> bool:
        """Give the running kubelet node ``name`` the hardware ``inv`` (module docstring); False
        when the kubelet still holds a claim prepared after :data:`SETTLE_SECONDS` (then the
        node is started afresh)."""
        kn = self.cluster.kubelet_node(name)
        deadline = time.monotonic() + SETTLE_SECONDS
        while (held := kn.prepared_claims()) and time.monotonic() < deadline:
            time.sleep(0.1)
        if held:
            log.warning("kubelet node %s still holds %s prepared; starting it afresh", name, ", ".join(held))
            return False
        t0 = time.monotonic()
        kn.clear_driver_files(kn.paths.dir / "plugin-data")
        try:  # every_driver: the same drivers on every hardware, so no plugin stops or starts
            running.local.rehome(every_driver(inv), device_metadata=metadata, timeout=15.0, wait=False,
                                 dirs=(kn.paths.plugins_dir, kn.paths.registry_dir, kn.paths.cdi_dir))
        except RuntimeError as exc:
            raise HarnessError(str(exc)) from None
        running.key = key
        self.reuses += 1
        log.info("kubelet node %s: new hardware %s on the running kubelet in %.2f s", name, key[0],
                 time.monotonic() - t0)
        return True

    def describe(self) -> dict[str, Any]:
        """``environment.backends.cluster.nodeSide`` of results.json."""
        from drakit.clusters.local.build import CONTAINERD_VERSION, KUBE_VERSION, RUNC_VERSION
        runtime = (f"containerd://{CONTAINERD_VERSION.lstrip('v')} (runc {RUNC_VERSION})"
                   if getattr(self.cluster, "node_runtime", None) == "containerd" else FAKE_CRI)
        return {"realKubelets": "every case node with fake hardware and no allocatable of its own",
                "kubeletVersion": KUBE_VERSION, "containerRuntime": runtime,
                "kubeletsStarted": self.starts, "hardwareChangesOnRunningKubelets": self.reuses,
                "kwokNodes": "case nodes without fake hardware (no node side needed), and nodes with their own "
                             "allocatable (kubelets report the machine's), prepared by drakit's node agent"}

    def _drop(self, name: str) -> None:
        running = self._nodes.pop(name, None)
        if running is not None:
            running.local.stop()
        if self.cluster.kubelet_node(name) is not None:
            self.cluster.remove_kubelet_node(name)

    def restart_kubelet(self, name: str) -> None:
        """Stop and start the node's kubelet (its runtime, pods and plugins stay)."""
        node = self.cluster.kubelet_node(name)
        if node is None:
            raise HarnessError(f"node {name} is not a real kubelet node")
        node.restart_kubelet()
        self.cluster._save_state()
        self.cluster.wait_kubelet_nodes([name])

    def restart_plugins(self, name: str) -> None:
        """Stop the node's fake driver plugins and start them again; waits for re-registration."""
        running = self._nodes.get(name)
        if running is None:
            raise HarnessError(f"node {name} has no fake drivers on a real kubelet")
        running.local.restart_plugins(timeout=15.0)

    def open(self, case: Case, namespace: str) -> CaseKubeletNodes:
        """The case's node side, once the kubelets registered the plugins :meth:`prepare`
        started (the wait overlaps the publishing of the case's hardware)."""
        names = real_node_names(case)
        real = {n: self._nodes[n].local for n in names if n in self._nodes}
        for local in real.values():
            try:
                local.wait_registered(15.0)
            except RuntimeError as exc:
                raise HarnessError(str(exc)) from None
        rest = [n for n in case.nodes if n.name not in names]
        kwok = self.kwok.open(case, namespace, skip=names) if rest else None
        return CaseKubeletNodes(self, real, kwok)

    def stop(self) -> None:
        for running in self._nodes.values():
            try:
                running.local.stop()
            except Exception as exc:  # noqa: BLE001 - best effort; the run is over
                log_bug(log, f"stopping the plugins of {running.local.node}", exc)
        self._nodes.clear()
        self.kwok.stop()
