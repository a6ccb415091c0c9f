"""The cluster backend: the same cases against a real API server and scheduler.

Any kubeconfig works (``--drakit-kubeconfig`` or ``$KUBECONFIG``, ``--drakit-context``; see
``kubeconfig``): the cluster is only read (``discovery``: version, served APIs, gates inferred by
dry-run) unless ``--drakit-install-driver`` installs the fake driver (``install``). ``--drakit-cluster local``
starts drakit's local control plane (upstream 1.37 binaries plus kwok) for the session and stops
it at the end. Each case gets its own namespace (deterministic name, run label). Cluster-scoped
objects a case creates (nodes, slices, classes, taint rules) are deleted when the case ends.
Under ``-n N`` each worker of ``--drakit-cluster local`` starts a cluster of its own; workers
sharing one cluster give those objects the worker's prefix (``names``), and a cluster-wide case
runs alone there (``clusterlock``). The fake hardware of a case is published through
the API the way the fake driver's controller side does: kwok Nodes, the drivers' DeviceClasses
and the nodes' ResourceSlices. On the local cluster the node side is real too
(``clusternode``): kwok runs a pod with claims only after a node runtime has prepared them
through the fake drivers' gRPC sockets, and the drivers write claim status as themselves. A case
whose ``featureGates`` that cluster lacks runs on an alternate local cluster (``localtarget``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

from ..spec.case import Case
from ..errors import ApiRejected
from .base import Capabilities, HarnessError
from .clusterwrites import keep_owner_labels, replace, update_node, wait_for_nodes
from .gatemetrics import observed_gates, stated_gates
from .kubeapi import CASE_LABEL, CLEANUP_TIMEOUT, KubeApi, NAMESPACED, RUN_LABEL, first_line
from .names import NameMap, cluster_wide, owned_names
from .localtarget import gates_unmet
from .nodeside import kubelet_side_unmet, node_runtimes, node_side_unmet, shared_driver_unmet

SCOPE_LABEL = "drakit.dev/scope"  # a case's nodes, and what its pods select, on a cluster drakit does not own

class ClusterSession:
    synchronous = False

    def __init__(self, api: KubeApi, case: Case, namespace: str, run_id: str, keep_on_failure: bool,
                 names: NameMap | None = None) -> None:
        self.api = api
        # the case's names <-> the cluster's (a worker prefix on a cluster shared by workers)
        self.names = names or NameMap()
        self.lock: Any = None  # clusterlock.ClusterLock held while the case runs on a shared cluster
        self.case = case
        self.namespace = namespace
        self.run_id = run_id
        self.keep_on_failure = keep_on_failure
        # On a cluster drakit does not own, other nodes (the cluster's own, with the same drivers'
        # devices) exist: the case's pods are kept to the case's nodes by this label.
        self.scope: str | None = None
        self.created: list[tuple[str, str, str | None]] = []
        self.slices: dict[str, dict[str, Any]] = {}  # the ResourceSlices applied, by name (republished)
        self.node_side: Any = None  # clusternode.CaseNodes on the local cluster
        self.gates: dict[str, bool] = {}  # the target's gates (set by the backend)
        from .reference import FaultState
        self.faults = FaultState(case)
        from .caselog import CaseLog
        self.logs_dir: Path | None = None  # the local control plane's component logs
        # driver suite (drivertarget): the vendor profile, ${inv.*} bound, the driver's local nodes
        self.vendor, self.bindings, self.driver_nodes = None, {}, None  # type: tuple[Any, dict[str, str], Any]
        self.driver_logs: Any = None  # (driverlogs.DriverLogs, marks at the case's start): the driver suite
        self.on_held: Any = None  # (case id, namespace, why): its pods stay, their claims' devices held
        self.refusal_patience = 20.0  # s after a failed unprepare that end the clean-up's wait (0: known to last)
        self.log = CaseLog().__enter__()

    def inject_fault(self, node: str, device: str, kind: str, effect: str) -> None:
        for obj in self.faults.inject(node, device, kind, effect):
            self.apply(obj)
        health = getattr(self.node_side, "inject_health", None)
        if health is not None:  # a real kubelet hears it on the driver's health stream
            health(node, device, kind, effect)

    def clear_fault(self, node: str, device: str) -> None:
        for obj in self.faults.clear(node, device):
            self.apply(obj)
        clear = getattr(self.node_side, "clear_health", None)
        if clear is not None:
            clear(node, device)

    def _ns(self, kind: str) -> str | None:
        return self.namespace if kind in NAMESPACED else None

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.names.incoming(self._apply(self.names.outgoing(json.loads(json.dumps(obj)))))  # type: ignore[no-any-return]
        except ApiRejected as exc:  # the API server's words, with the case's names
            raise ApiRejected(self.names.text(str(exc))) from None
        except HarnessError as exc:
            raise HarnessError(self.names.text(str(exc))) from None

    def _apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        if self.scope is not None:
            self._confine(obj)
        if obj["kind"] in NAMESPACED:
            meta.setdefault("namespace", self.namespace)
            _mark_harness_driven(obj, self.run_id)
        else:
            meta.setdefault("labels", {}).update({RUN_LABEL: self.run_id, CASE_LABEL: _label(self.case.id)})
        name = meta.get("name")
        existing = self.api.get(obj["kind"], name, meta.get("namespace")) if name else None
        if obj["kind"] == "ResourceSlice" and name:
            self.slices[name] = obj
        if existing is None:
            out = self.api.create(obj)
            self.created.append((obj["kind"], out["metadata"]["name"], meta.get("namespace")))
            return out
        keep_owner_labels(meta, existing, (RUN_LABEL, CASE_LABEL))  # a cluster's own DeviceClass, say
        if obj["kind"] == "Node":
            return update_node(self.api, obj, existing)
        return replace(self.api, obj, existing)

    def _confine(self, obj: dict[str, Any]) -> None:
        """The case's nodes carry the scope label; the case's pods (unless bound by name) select it."""
        if obj["kind"] == "Node":
            obj["metadata"].setdefault("labels", {})[SCOPE_LABEL] = self.scope
        elif obj["kind"] == "Pod":
            spec = obj.setdefault("spec", {})
            if not spec.get("nodeName"):
                spec.setdefault("nodeSelector", {})[SCOPE_LABEL] = self.scope

    def wait_for_nodes(self, names: list[str], timeout: float = 30.0) -> None:
        wait_for_nodes(self.api, [self.names.name(n) for n in names], timeout)

    def update_status(self, kind: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Replace the object's status through the status subresource, as a driver does."""
        obj = self.api.get(kind, self.names.object_name(kind, name), self._ns(kind))
        if obj is None:
            raise KeyError(f'{kind} "{name}" not found')
        obj["status"] = self.names.claim_status(status) if kind == "ResourceClaim" else status
        try:
            return self.names.incoming(self.api.replace_status(obj))  # type: ignore[no-any-return]
        except ApiRejected as exc:
            raise ApiRejected(self.names.text(str(exc))) from None

    def advance(self, seconds: float) -> None:
        """A real cluster has a real clock: wait."""
        time.sleep(seconds)

    def delete(self, kind: str, name: str) -> None:
        if not self.api.delete(kind, self.names.object_name(kind, name), self._ns(kind)):
            raise KeyError(f'{kind} "{name}" not found')

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.names.incoming(self.api.get(kind, self.names.object_name(kind, name), self._ns(kind)))  # type: ignore[no-any-return]

    def device_metadata(self, claim: str, request: str, driver: str | None = None) -> list[dict[str, Any]] | None:
        """The metadata file the fake driver wrote on the (local) node for the claim's request."""
        if self.node_side is None:
            raise HarnessError("device metadata files are only visible with drakit's node side (--cluster local)")
        return self.node_side.device_metadata(self.namespace, claim, request, driver)  # type: ignore[no-any-return]

    def restart(self, node: str, component: str) -> None:
        """A restart step on a real kubelet node: its kubelet (runtime and pods stay; it waits for
        Ready again) or its fake driver plugins (waits until the kubelet registered them)."""
        if self.driver_nodes is not None:  # the driver suite's nodes
            return self.driver_nodes.restart("plugin" if component == "driver" else component, node)  # type: ignore[no-any-return]
        side = self.node_side
        if getattr(side, "restart_kubelet", None) is None:
            raise HarnessError("restart steps need drakit's real kubelet nodes (--cluster local, as root)")
        if node not in side.real:
            raise HarnessError(f"node {node} is not a real kubelet node of this case")
        if component == "kubelet":
            side.restart_kubelet(node)
            self._republish(node)
        else:
            side.restart_plugins(node)

    def node_operations(self) -> list[dict[str, Any]]:
        """The NodePrepare/NodeUnprepareResources calls the fake drivers of the case's real
        kubelet nodes served (one entry per claim of a call; calls a kubelet skipped are not seen)."""
        real = getattr(self.node_side, "real", None)
        if real is None:
            raise HarnessError("node operations are only visible on drakit's real kubelet nodes (--cluster local, as root)")
        return [{"node": node, "claim": claim, "driver": call["driver"], "pod": None, "operation": call["operation"],
                 "skipped": False, "batch": sorted(call["claims"])}
                for node, local in real.items() for call in local.plugin_calls() for claim in call["claims"]]

    def _republish(self, node: str) -> None:
        """A kubelet deletes its node's ResourceSlices when it starts; a driver publishes them
        again at once. The backend publishes the case's slices for the fake driver, so it does."""
        for name, obj in list(self.slices.items()):
            if (obj.get("spec") or {}).get("nodeName") == node and self.api.get("ResourceSlice", name, None) is None:
                fresh = json.loads(json.dumps(obj))
                for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
                    fresh["metadata"].pop(key, None)
                self.api.create(fresh)

    def container(self, pod: str, container: str) -> dict[str, Any] | None:
        """What the fake CRI of a real kubelet node recorded for the pod's container (its newest
        CreateContainer, as ``containers.record``); None when it created none."""
        reader = getattr(self.node_side, "containers", None)
        if reader is None:
            raise HarnessError("container records are only visible on drakit's real kubelet nodes (--cluster local, as root)")
        from .containers import from_cri_event
        found = reader(self.namespace, pod, container)
        return from_cri_event(found[-1]) if found else None

    def list(self, kind: str) -> list[dict[str, Any]]:
        """The objects of ``kind`` the case sees: in its namespace, or cluster-wide but not
        another worker's (on a cluster shared by workers), with the case's names."""
        found = [o for o in self.api.list(kind, self._ns(kind)) if not self.names.foreign(o["metadata"].get("name"))]
        return self.names.incoming(found)  # type: ignore[no-any-return]

    def events(self) -> list[dict[str, Any]]:
        return self.names.incoming(self.api.list("Event", self.namespace))  # type: ignore[no-any-return]

    def diagnostics(self) -> dict[str, Any]:
        def brief(kind: str) -> list[dict[str, Any]]:
            try:
                return [{"kind": kind, "name": o["metadata"]["name"], "spec": o.get("spec"), "status": o.get("status")}
                        for o in self.list(kind)]
            except Exception as exc:
                return [{"kind": kind, "error": first_line(exc)}]
        events = []
        for e in self.events():
            inv = e.get("involvedObject") or {}
            events.append(f"{e.get('type')} {e.get('reason')} {inv.get('kind')}/{inv.get('name')}: {e.get('message')}")
        from .caselog import control_plane_lines
        mine = {(kind, self.names.text(name)) for kind, name, ns in self.created if ns is None}
        slices = [o for o in brief("ResourceSlice") if ("ResourceSlice", o.get("name")) in mine or "error" in o]
        out = {"objects": brief("ResourceClaim") + brief("Pod") + slices, "events": events,
               "driverAndNodeAgent": self.log.snapshot(),
               "controlPlane": control_plane_lines(self.logs_dir, self.namespace)}
        if self.driver_logs is not None:  # the driver's own output while the case ran
            logs, marks = self.driver_logs
            out["driverLog"] = logs.window(marks)
        return self.names.incoming(out)  # type: ignore[no-any-return]

    def driver_exercise(self) -> list[str]:
        from .drivertarget import driver_exercise
        return driver_exercise(self)

    def close(self, *, failed: bool) -> None:
        try:
            self._cleanup(failed)
        finally:
            if self.lock is not None:  # the case's objects are gone: other workers' cases may run
                self.lock.release()
            self.log.close()
            if self.node_side is not None:  # kept objects or not, later cases reuse the fake nodes
                errors = self.node_side.close()
                self.node_side = None
                for error in errors:  # the outcome is recorded already; say it, do not hide it
                    logging.getLogger("drakit.cluster").warning("unpreparing on the fake nodes failed: %s", error)

    def _cleanup(self, failed: bool) -> None:
        if failed and self.keep_on_failure:
            return
        from .cleanup import StuckWatch, remove_case_objects, say_left
        real = getattr(self.node_side, "real", None) or {}
        driver_case = "driver" in self.case.features  # its pods run where a kubelet prepares claims
        refusals = getattr(self.driver_nodes, "unprepare_errors", None)
        marks = getattr(self, "log_marks", None) or {}
        left = remove_case_objects(self.api, self.namespace, self.created, lambda pod: driver_case or (
            pod.get("spec") or {}).get("nodeName") in real, released=getattr(self.node_side, "released", None),
            refused=StuckWatch(lambda: bool(refusals(self.namespace, marks)), self.refusal_patience) if refusals else None)
        if left:
            say_left(self.case.id, self.namespace, left, refusals(self.namespace, marks) if refusals else [], self.on_held)


def _mark_harness_driven(obj: dict[str, Any], run_id: str) -> None:
    """Claims a case makes (directly or through a template) carry the run label: the case plays
    the driver's controller for them (``driverStatus`` steps), so an installed fake driver's
    controller leaves their binding conditions alone (``fake_driver.kube.HARNESS_LABEL``)."""
    if obj["kind"] == "ResourceClaim":
        obj["metadata"].setdefault("labels", {})[RUN_LABEL] = run_id
    elif obj["kind"] == "ResourceClaimTemplate":
        template = obj.setdefault("spec", {}).setdefault("metadata", {})
        template.setdefault("labels", {})[RUN_LABEL] = run_id


def _run_id(text: str | None) -> str | None:
    """``$DRAKIT_RUN_ID`` when it is a usable label value (lower-case letters and digits, up to 40)."""
    return text if text and text.isascii() and text.isalnum() and text.islower() and len(text) <= 40 else None


def _label(text: str) -> str:
    value = re.sub(r"[^A-Za-z0-9_.-]", ".", text)[:63].strip("-_.")  # ids hold / and @ (configurations)
    return value or "case"


class ClusterBackend:
    """Runs cases against a real cluster; see the module docstring.

    With ``--drakit-cluster local`` drakit owns the cluster, so a case whose ``featureGates`` the
    main cluster lacks (a gate-off case) runs on an alternate local cluster started with the
    main one's requested gates plus the case's. One alternate at most is alive; it is restarted
    only when a case needs a different gate set. On any other cluster such a case is skipped."""

    name = "cluster"

    def __init__(self, config: Any, vendor: Any = None, first: Case | None = None) -> None:
        opt = config.getoption
        self.config = config
        self.vendor = vendor  # fake_driver.profile.VendorProfile of the run (None: the fake drivers')
        self.keep_on_failure = bool(opt("--drakit-keep-on-failure"))
        # the label value of what the cases create; a shard of drakit run --in-cluster is told
        # its own (the run removes what a killed shard left by it)
        self.run_id = _run_id(os.environ.get("DRAKIT_RUN_ID")) or uuid.uuid4().hex[:8]
        self.local = opt("--drakit-cluster") == "local"
        self.alternate: Any = None  # localtarget.Alternate on the local cluster
        self._stops: list[Any] = []  # what close() undoes, last first
        config.add_cleanup(self.close)  # close() runs at session finish already; this is the safety net
        from .discovery import discover
        from .localtarget import Alternate, LocalTarget, Target
        if self.local:
            from drakit.clusters.local.gates import GateError, parse_gate_string
            try:
                requested = parse_gate_string(opt("--drakit-feature-gates") or "")
            except GateError as exc:
                raise HarnessError(f"--drakit-feature-gates: {exc}") from None
            main = LocalTarget(requested, first)  # the first case's kubelets start with the cluster
            self._stops.append(main.stop)  # node side first, then the cluster
            self.main: Target = main
            self.alternate = Alternate(main)
            self._stops.append(self.alternate.stop)  # stops run last-in first-out: before main
        else:
            api = KubeApi(opt("--drakit-kubeconfig"), opt("--drakit-context"))
            # read-only: API discovery, the components' /metrics, and dry-run probes for the gates
            # of a cluster drakit did not start; --feature-gates states what none of them shows
            self.main = Target(api, discover(api.version(), api.get_json, api.dry_run,
                                             observed=observed_gates(api), stated=stated_gates(opt("--drakit-feature-gates"))))
        self.provider = "local" if self.local else "kubeconfig"
        # -n N on one cluster shared by the workers (not --cluster local: a cluster per worker):
        # the worker's prefix on the cases' cluster-scoped names, cluster-wide cases alone
        self.api, self.version, self.discovery = self.main.api, self.main.version, self.main.discovery
        self.prefix, self.shared = "", None  # type: tuple[str, Any]
        if not self.local:
            self._share(config)
        self.gates = dict(self.main.gates)
        self.node_side = self.main.node_side  # clusternode.ClusterNodeSide on the local cluster
        self.installed: Any = None
        if opt("--drakit-install-driver"):
            from .install import install_fake_driver
            drivers = list(vendor.driver_names) if vendor is not None else None
            self.installed = install_fake_driver(self.api, image=opt("--drakit-driver-image"), drivers=drivers)
            self._stops.append(self.installed.remove)
        from .drivertarget import DriverSide
        self.driver_side = DriverSide(self.api, vendor, local=self.main if self.local else None, out=opt("--drakit-out"))
        self._stops.append(self.driver_side.stop)  # before the cluster goes (last first)

    def _share(self, config: Any) -> None:
        """On a cluster shared with other workers (``-n N``: ``clusterlock``) or other shards of
        the run (``--drakit-shard i/N``, N > 1: ``leaselock``), the prefix of this process's
        cluster-scoped names and the lock(s) its cases hold."""
        from .sharing import shared_cluster
        self.prefix, self.shared = shared_cluster(config, self.api, self.run_id)
        if self.shared is not None:
            self._stops.append(self.shared.close)

    def teardown_note(self) -> str | None:
        """What :meth:`close` is about to stop, for the console (None: nothing to wait for)."""
        if self.local:
            return "stopping the local clusters and their fake nodes" if self._stops else None
        return "stopping the installed fake driver" if getattr(self, "installed", None) is not None else None

    def close(self) -> None:
        """Undo what the backend started (installed driver, alternate and main local clusters),
        last first; each once, whatever fails."""
        errors = []
        while self._stops:
            try:
                self._stops.pop()()
            except Exception as exc:  # noqa: BLE001 - the others still run; said below
                errors.append(first_line(exc))
        for error in errors:
            logging.getLogger("drakit.cluster").warning("stopping the cluster backend: %s", error)

    def capabilities(self) -> Capabilities:
        return Capabilities(self.version, dict(self.gates), self.discovery.served)

    def _target(self, case: Case) -> Any:
        """The cluster that runs ``case``: the main one, or the alternate local cluster. An
        alternate is stopped once a case runs on the main one again (a gate set's cases come
        together): an idle control plane and its kubelets hold the user's inotify instances,
        of which all of the host's kubelets and control planes share 128 by default."""
        alternate = self.alternate.target(case) if self.alternate is not None else None
        if alternate is None and self.alternate is not None:
            self.alternate.stop()
        return alternate if alternate is not None else self.main

    def unmet(self, case: Case) -> tuple[str, str] | None:
        target = self._target(case)
        gates = gates_unmet(case, target, target is not self.main, self.alternate)
        if gates:
            return gates
        node_side = node_side_unmet(case, target, self.api) or kubelet_side_unmet(case, target) or (
            None if self.local else shared_driver_unmet(case, target.api, RUN_LABEL))
        if node_side:
            return node_side
        for step in case.steps:
            for m in step.manifests:
                if not target.discovery.serves(m.get("apiVersion", ""), m.get("kind", "")):
                    where = "the alternate local cluster" if target is not self.main else "the cluster"
                    return ("api-not-served", f"the case uses {m.get('kind')} in {m.get('apiVersion')}, which {where} "
                                              f"does not serve (served: {', '.join(target.discovery.served)})")
        return self.driver_side.unmet(case) if "driver" in case.features else None  # the driver suite

    def environment(self) -> dict[str, Any]:
        """What results.json records about this cluster: names and versions, never credentials
        or the server address. On the local cluster, the gate sets of the alternate local
        clusters the run's gate-off cases run on (from the collected cases), if any."""
        from .install import driver_mode
        env = {"kind": "cluster", "kubernetesVersion": self.version, "provider": self.provider,
               "context": self.api.target.context, "cluster": self.api.target.cluster,
               "featureGates": dict(sorted(self.gates.items())), "servedApis": list(self.discovery.served),
               "featureGateSources": dict(sorted(self.discovery.sources.items())),
               "driver": driver_mode(self.vendor, self.installed is not None)}
        session = self.config.pluginmanager.get_plugin("session")
        env["driverUnderTest"] = self.driver_side.describe(getattr(session, "items", None) or [])
        planned = self.alternate.planned(getattr(session, "items", None) or [], self.name) if self.alternate else []
        if planned:
            env["alternateLocalClusters"] = planned
        if self.local:
            env["nodeSide"] = self._node_side_env()
        env.update(node_runtimes(self.api))
        return env

    def environment_update(self) -> dict[str, Any]:
        """What :meth:`environment` can say only once the cases ran (plugin.pytest_runtest_teardown)."""
        return {"nodeSide": self._node_side_env()} if self.local else {}

    def _node_side_env(self) -> dict[str, Any]:
        """Which of the cases' nodes are real kubelets on the local cluster, and what else."""
        cluster = getattr(self.main, "cluster", None)
        if getattr(self.node_side, "prepare", None) is not None and cluster is not None:
            return self.node_side.describe()  # type: ignore[no-any-return]
        reason = getattr(cluster, "real_nodes_reason", None) or "not asked for"
        return {"realKubelets": "none", "why": reason,
                "kwokNodes": "every case node; drakit's node agent prepares their claims"}

    def _wait_until_gone(self, api: KubeApi, namespace: str) -> None:
        """The case's namespace of an earlier run may still be terminating (namespace names are
        deterministic): creating objects in it would be refused, so wait for it to go."""
        deadline = time.monotonic() + CLEANUP_TIMEOUT
        while (old := api.get("Namespace", namespace, None)) and old["metadata"].get("deletionTimestamp"):
            if time.monotonic() >= deadline:
                raise HarnessError(f"namespace {namespace} of an earlier run is still being deleted")
            time.sleep(0.25)

    def open(self, case: Case) -> ClusterSession:
        from .reference import case_namespace, hardware_objects
        target = self._target(case)
        ns = case_namespace(case.id)
        hardware = hardware_objects(case)
        wide = self.shared is not None and cluster_wide(case) is not None
        names = NameMap(self.prefix, owned_names([n.name for n in case.nodes], [*hardware, *(
            m for step in case.steps for m in step.manifests)])) if self.shared is not None and not wide else NameMap()
        if self.shared is not None:  # alone on the cluster for a cluster-wide case, else beside the others
            self.shared.acquire(exclusive=wide)
        session = ClusterSession(target.api, case, ns, self.run_id, self.keep_on_failure, names)
        session.lock = self.shared
        session.logs_dir = target.logs_dir
        session.gates = {**target.gates, **getattr(target, "scheduler", {})}  # an explanation's allocator: the scheduler's
        if not self.local and case.nodes:
            session.scope = _label(f"{self.run_id}.{case.id}")
        try:
            self._wait_until_gone(target.api, ns)
            if "driver" in case.features:
                self.driver_side.prepare_session(session, case)
            self.driver_side.keep_to_driver_cases(case)
            session.apply({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": ns, "labels": {**case.namespace_labels, RUN_LABEL: self.run_id}}})
            real = target.node_side.prepare(case) if hasattr(target.node_side, "prepare") else set()
            for obj in hardware:
                if obj["kind"] == "Node" and obj["metadata"]["name"] in real:
                    continue  # a real kubelet registered it, with the labels of the case
                if obj["kind"] == "Node":
                    from drakit.clusters.local.kwokconfig import fake_node
                    node = fake_node(obj["metadata"]["name"], obj["metadata"].get("labels"),
                                     allocatable=(obj.get("status") or {}).get("allocatable"))
                    session.apply(node)
                else:
                    session.apply(obj)
            session.wait_for_nodes([n.name for n in case.nodes])
            if target.node_side is not None and case.nodes:
                session.node_side = target.node_side.open(case, ns)
        except ApiRejected as exc:
            session.close(failed=False)
            raise HarnessError(f"installing the fake hardware failed: {exc}") from exc
        except BaseException:  # a harness error, or SIGINT/SIGTERM: remove what was created
            session.close(failed=False)
            raise
        return session


def write_kubeconfig_note(path: Path) -> str:
    return f"export KUBECONFIG={path}"
