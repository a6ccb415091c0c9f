"""Nodes of drakit's local cluster that run the driver under test (the driver suite).

Two nodes, ``drakit-driver-1`` and ``-2``. On each, the driver's kubelet plugin runs:

- a vendor's own driver from its profile's ``driverUnderTest.plugin`` command template
  (``clusters.local.vendorplugin``: a private mount namespace, ``/var/run/cdi`` bound to the
  node's CDI folder), with the DeviceClasses the profile lists;
- drakit's fake driver (the role under test, on ``driverUnderTest.nodeShapes``, else the
  profile's first shape) in-process, its
  slices published through the API as the fake driver's controller side does.

Each node is a real kubelet 1.37.2 (``clusters.local.kubeletnode``) over containerd + runc (as
root) or drakit's fake CRI (``--runtime fake``): the kubelet registers the plugin from its
``plugins_registry``, prepares and unprepares claims itself, and the runtime runs the containers
(containerd, with CDI and NRI) or records what each got (the fake CRI). Where real kubelets cannot run (not root), the node is a kwok node with
drakit's node agent (``clusters.nodeagent``: the kubelet's DRA role) instead. ``describe()`` says
which it is.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from .base import HarnessError
from .driverlogs import DriverLogs
from .drivernodereads import NodeReads
from .driverreads import build_version

COUNT = 2
AGENT_SIDE = "drakit node agent (the kubelet's DRA role) on kwok nodes"
KUBELET_SIDE = "real kubelet v1.37.2 over {runtime}"
RUNTIME_NAMES = {"containerd": "containerd + runc", "fake": "drakit's fake CRI"}
REGISTERED = "Registered DRA plugin"  # the kubelet's log line (dra_plugin_manager, -v 3)


class _Node:
    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.root = root
        self.plugin: Any = None  # clusters.local.vendorplugin.VendorPlugin
        self.inventory: Any = None
        self.local: Any = None   # clusters.nodeagent.LocalNode (fake driver)
        self.agent: Any = None   # clusters.nodeagent.NodeAgent (kwok nodes only)
        self.kubelet: Any = None  # clusters.local.kubeletnode.KubeletNode
        self.log_offset = 0      # where the kubelet log stood when the plugin last (re)started
        self.cdi: Path | None = None

    @property
    def cdi_dir(self) -> Path:
        if self.cdi is not None:
            return self.cdi
        return self.local.cdi_dir if self.local is not None else self.root / "cdi"

    def kubelet_log(self) -> Path:
        return self.kubelet.paths.dir / "kubelet.log"

    def mark_log(self) -> None:
        if self.kubelet is not None:
            try:
                self.log_offset = self.kubelet_log().stat().st_size
            except OSError:
                self.log_offset = 0


class DriverNodes(NodeReads):
    def __init__(self, target: Any, vendor: Any, logs_dir: Path | None = None) -> None:
        self.target = target
        self.vendor = vendor
        self.dut = vendor.under_test
        self.nodes: dict[str, _Node] = {}
        self.runtime: Any = None
        self.root: Path | None = None
        self.classes: list[str] = []
        self.logs = DriverLogs(logs_dir)
        confs = self.dut.configurations
        self.log_prefix = f"{confs[0].name}-" if len(confs) == 1 else ""  # profile v2: the running configuration
        self.controller: Any = None  # clusters.local.vendorplugin.Controller
        self.programs: dict[str, str] = {}  # plugin/controller -> the program {binary} names

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        if self.dut.plugin is None and not self.vendor.fake:
            return  # nothing drakit could start: the suite finds no slices and says why
        from drakit.clusters.local.kwokconfig import fake_node
        from drakit.clusters.nodeagent.kube import KubeNodeRuntime
        api = self.target.api
        cluster = self.target.cluster
        self.real = getattr(cluster, "real_nodes_reason", "no real nodes") is None
        self._check_needs(getattr(cluster, "node_runtime", None) if self.real else None)
        from drakit.clusters.sockdir import socket_dir
        # short whatever TMPDIR is (Unix socket paths): every socket a plugin binds below n<i>
        from drakit.fake_driver.plugin.files import longest_socket_tail
        self.root = socket_dir("drakit-drv-", len(f"/n{COUNT}") + longest_socket_tail([self.dut.driver]),
                               "the driver's node sockets")
        from drakit.clusters.leftovers import claim
        claim(self.root)  # a killed run's folder is found and removed by the next run
        labels = {"drakit.dev/driver-under-test": "true"}
        try:
            for i in range(1, COUNT + 1):
                node = _Node(f"drakit-driver-{i}", self.root / f"n{i}")
                self.nodes[node.name] = node
                if self.real:
                    try:
                        node.kubelet = cluster.add_kubelet_node(node.name, labels)
                    except Exception as exc:  # noqa: BLE001 - one line with the kubelet's log tail
                        raise HarnessError(f"the real kubelet node {node.name} cannot start: {exc}") from None
                elif api.get("Node", node.name, None) is None:
                    api.create(fake_node(node.name, labels))
            self._wait_ready()
            self._start_controller()
            for node in self.nodes.values():
                self._start_node(node)
            for node in self.nodes.values():
                self._wait_registered(node.name)
            self._install_classes()
            if not self.real:
                admin = getattr(self.target.node_side, "kwok", self.target.node_side).admin
                self.runtime = KubeNodeRuntime(admin, {n.name: self._side(n) for n in self.nodes.values()})
                self.runtime.start()
        except HarnessError:
            self.stop()
            raise
        except Exception as exc:  # noqa: BLE001 - one line for the run, the rest is in the logs
            self.stop()
            raise HarnessError(f"{type(exc).__name__}: {exc}") from None

    def _check_needs(self, runtime: str | None) -> None:
        """A plugin that needs NRI or the stock node paths runs on containerd nodes only: one line."""
        from drakit.clusters.local.vendorplugin import needs_problem
        problem = needs_problem(self.dut.driver, self.dut.plugin.needs, runtime) if self.dut.plugin else None
        if problem:
            raise HarnessError(problem)

    def _side(self, node: _Node) -> Any:
        return node.local if node.local is not None else node.agent

    def _start_node(self, node: _Node) -> None:
        from drakit.clusters.nodeagent import LocalNode, NodeAgent
        if node.kubelet is not None:
            paths = node.kubelet.paths
            node.cdi = paths.cdi_dir
        if self.dut.plugin is not None:
            from drakit.clusters.local.vendorplugin import NodeFolders, PluginStartError, VendorPlugin
            folders = (NodeFolders(paths.registry_dir, paths.plugins_dir, paths.cdi_dir) if node.kubelet is not None
                       else NodeFolders(node.root / "registry", node.root / "plugins", node.root / "cdi"))
            cluster = self.target.cluster
            node.plugin = VendorPlugin(self.dut.driver, self.dut.plugin.command, self.dut.plugin.folders, node.name,
                                       folders, cluster.kubeconfig, cluster.bin_dir, self.logs.path(f"{self.log_prefix}{node.name}-plugin"),
                                       extra={**self._values(self.dut.plugin, "plugin"), "nodeDir": str(node.root / "plugin")},
                                       env=self.dut.plugin.env, enter=self._enter(node), setup=self.dut.plugin.setup)
            node.mark_log()
            try:
                node.plugin.start()
            except (PluginStartError, KeyError) as exc:
                raise HarnessError(str(exc)) from None
            if node.kubelet is None:
                node.agent = NodeAgent(folders.registry_dir, node.name, state_dir=node.root / "agent")
                node.agent.start()
            return
        from ..hwshapes import build_inventory
        index = list(self.nodes).index(node.name)
        shapes = self.dut.node_shapes or (self.vendor.shapes or ("server-8gpu",))[:1]
        shape = shapes[min(index, len(shapes) - 1)]
        claims = self.target.node_side.claims
        inventory = build_inventory(shape, node.name)
        if node.kubelet is not None:
            paths = node.kubelet.paths
            node.local = LocalNode(inventory, claims.get_claim, root=paths.dir / "plugin-data", drivers=[self.dut.driver],
                                   write_status=claims.write_device_status, device_metadata=True, agent=False,
                                   dirs=(paths.plugins_dir, paths.registry_dir, paths.cdi_dir))
        else:
            node.local = LocalNode(inventory, claims.get_claim, root=node.root, drivers=[self.dut.driver],
                                   write_status=claims.write_device_status, check_reserved=True, device_metadata=True)
        node.mark_log()
        node.local.start(timeout=15.0)
        node.agent = node.local.agent
        self._publish(node, inventory)

    @staticmethod
    def _enter(node: _Node) -> Any:
        """A containerd node's way in (the plugin runs in its namespaces, as a DaemonSet pod)."""
        kubelet = node.kubelet
        return kubelet.enter if kubelet is not None and getattr(kubelet, "containerd", None) is not None else None

    def _values(self, spec: Any, role: str) -> dict[str, str]:
        """``{binary}`` (found or built: ``clusters.local.driverbuild``) and ``{profileDir}``."""
        out = {"profileDir": spec.profile_dir or "."}
        if spec.binary is None and not spec.builds:
            return out
        if role not in self.programs:
            from drakit.clusters.local.driverbuild import DriverBuildError, build
            try:
                path, took = build(spec)
            except DriverBuildError as exc:
                raise HarnessError(f"the driver's {role} program: {exc}") from None
            if took:
                logging.getLogger("drakit.cluster").warning("built the driver's %s program %s in %.0f s", role, path, took)
            self.programs[role] = str(path)
        out["binary"] = self.programs[role]
        return out

    def _start_controller(self) -> None:
        spec = self.dut.controller
        if spec is None:
            return
        from drakit.clusters.local.vendorplugin import Controller, PluginStartError
        cluster = self.target.cluster
        self.controller = Controller(spec.command, cluster.kubeconfig, cluster.bin_dir, self.logs.path(f"{self.log_prefix}controller"),
                                     extra=self._values(spec, "controller"), env=spec.env)
        try:
            self.controller.start()
        except (PluginStartError, KeyError) as exc:
            raise HarnessError(str(exc)) from None

    def _publish(self, node: _Node, inventory: Any) -> None:
        """The fake driver's slices for the node, through the API (its controller side's job)."""
        from drakit.fake_driver.slices import publish_slices
        from drakit.fake_driver.planted import partition_overcommit, planted, wrong_attribute_type
        try:
            plants = planted()
        except ValueError as exc:
            raise HarnessError(str(exc)) from None
        if node.kubelet is not None:  # a new kubelet wipes its node's slices at start: after that
            deadline = time.monotonic() + 20
            while not node.kubelet.wiped() and time.monotonic() < deadline:
                time.sleep(0.1)
        slices = publish_slices(inventory)
        if "wrong-attribute-type" in plants:
            slices = wrong_attribute_type([s for s in slices if s["spec"]["driver"] == self.dut.driver])
        if "partition-overcommit" in plants:
            slices = partition_overcommit([s for s in slices if s["spec"]["driver"] == self.dut.driver])
        node.inventory = inventory
        for s in slices:
            if s["spec"]["driver"] == self.dut.driver:
                s["metadata"] = {"generateName": f"{node.name}-{self.dut.driver}-",
                                 "labels": {"drakit.dev/driver-under-test": "true"}}
                self.target.api.create(s)

    def _install_classes(self) -> None:
        if self.dut.plugin is not None:
            from drakit.fake_driver.classes import device_class
            wanted = [device_class(name, selector) for name, selector in self.dut.plugin.device_classes]
        else:
            from drakit.fake_driver.classes import device_classes
            wanted = [c for c in device_classes() if c["metadata"]["name"] == self.dut.class_name]
        for obj in wanted:
            if self.target.api.get("DeviceClass", obj["metadata"]["name"], None) is None:
                self.target.api.create(obj)
                self.classes.append(obj["metadata"]["name"])

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for name in self.nodes:
            while True:
                node = self.target.api.get("Node", name, None) or {}
                ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in (node.get("status") or {}).get("conditions") or [])
                tainted = any(t.get("key", "").startswith("node.kubernetes.io/")
                              for t in (node.get("spec") or {}).get("taints") or [])
                if ready and not tainted:
                    break
                if time.monotonic() > deadline:
                    raise HarnessError(f"node {name} did not become Ready within {timeout:.0f} s")
                time.sleep(0.1)

    def prepared_claims(self) -> list[str]:
        """Claims the nodes' kubelets (or agents) still hold prepared: the kubelet's DRA checkpoint."""
        held = []
        for node in self.nodes.values():
            if node.kubelet is not None:
                held += [f"{node.name}:{claim}" for claim in node.kubelet.prepared_claims()]
            elif node.agent is not None:
                held += [f"{node.name}:{i.namespace}/{i.name}" for i in node.agent.claim_infos().values()]
        return held

    def settle(self, timeout: float = 30.0, ignore: frozenset[str] = frozenset()) -> list[str]:
        """Wait until no claim of an earlier case is still prepared (a force-deleted pod's claims
        are unprepared by the kubelet a moment later), claims of namespaces in ``ignore`` aside
        (pods whose unprepare keeps failing); returns what is still held at the end."""
        deadline = time.monotonic() + timeout
        while (held := [c for c in self.prepared_claims() if c.split(":", 1)[-1].split("/", 1)[0] not in ignore]) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        return held

    def _wait_registered(self, name: str, timeout: float = 30.0) -> None:
        """Until the node's kubelet (or agent) registered the plugin: a pod sent there before would
        meet "driver not registered", which is the harness's haste, not the driver's fault."""
        deadline = time.monotonic() + timeout
        while True:
            ok, detail = self.registered(name)
            if ok:
                return
            if time.monotonic() > deadline:
                raise HarnessError(f"the {self.dut.driver} plugin did not register on {name} within {timeout:.0f} s: {detail}")
            time.sleep(0.1)

    def wait_for_slices(self, timeout: float = 20.0) -> None:
        """Until every node has a slice of the driver (a plugin publishes a moment after start)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            nodes = {(s.get("spec") or {}).get("nodeName") for s in self.target.api.list("ResourceSlice", None)
                     if (s.get("spec") or {}).get("driver") == self.dut.driver}
            if set(self.nodes) <= nodes:
                return
            time.sleep(0.2)

    def stop(self) -> None:
        if self.runtime is not None:
            self.runtime.stop()
            self.runtime = None
        api = self.target.api
        for node in self.nodes.values():
            if node.kubelet is not None:
                try:
                    self.target.cluster.remove_kubelet_node(node.name)
                except Exception:  # noqa: BLE001,S110 - the cluster may be going down already
                    pass
            for part in (node.plugin, node.local if node.local is not None else node.agent):
                if part is not None:
                    try:
                        part.stop()
                    except Exception:  # noqa: BLE001,S110 - best effort at the end of the run
                        pass
            try:
                for s in api.list("ResourceSlice", None):
                    if (s.get("spec") or {}).get("nodeName") == node.name:
                        api.delete("ResourceSlice", s["metadata"]["name"], None)
                api.delete("Node", node.name, None)
            except Exception:  # noqa: BLE001,S110 - the cluster may be going down already
                pass
        for name in self.classes:
            try:
                api.delete("DeviceClass", name, None)
            except Exception:  # noqa: BLE001,S110
                pass
        if self.controller is not None:
            self.controller.stop()
            self.controller = None
        self.nodes.clear()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    # -- what the driver checks read ------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        how = "vendor plugin from the profile's command template" if self.dut.plugin is not None else \
            "drakit's fake driver" if self.vendor.fake else "not started (the profile gives no plugin command)"
        out = {"names": sorted(self.nodes), "plugin": how,
               "nodeSide": AGENT_SIDE}
        if getattr(self, "real", False):
            runtime = getattr(self.target.cluster, "node_runtime", "fake")
            out["nodeSide"] = KUBELET_SIDE.format(runtime=RUNTIME_NAMES.get(runtime, runtime))
        if self.programs:
            out["programs"] = dict(self.programs)
        if self.controller is not None:
            out["controller"] = "started once for the cluster from the profile's controller command"
        if self.logs.files():
            out["logs"] = self.logs.files()
        return out

    def published(self) -> dict[str, Any]:
        """What the driver's plugin says of itself on drakit's nodes: its registration (GetInfo
        over the registration socket, as the kubelet asks it: the name and the DRA gRPC API
        versions it serves, which are not a version of the driver) and, when the profile gives
        ``plugin.metricsPath``, its build version from a ``*_build_info`` metric."""
        from drakit.clusters.nodeagent.client import get_info
        out: dict[str, Any] = {}
        for node in self.nodes.values():
            registry = node.kubelet.paths.registry_dir if node.kubelet is not None else node.root / "registry"
            if node.plugin is not None:
                registry = node.plugin.folders.registry_dir
            try:
                found = [registry / f"{self.dut.driver}-reg.sock",
                         *sorted(registry.glob(f"{self.dut.driver}-*-reg.sock"))]  # rolling-update names
                socket = next((p for p in found if p.is_socket()), None)
                if socket is None:
                    continue
                info = get_info(str(socket))
            except Exception:  # noqa: BLE001 - not there (kwok agent layout): nothing published here
                continue
            out["registration"] = {"name": info.name, "supportedVersions": list(info.supported_versions)}
            metrics = self.dut.plugin.metrics_path if self.dut.plugin is not None else None
            port = node.plugin.values.get("metricsPort") if node.plugin is not None else None
            if metrics and port and "buildVersion" not in out:
                out.update(build_version(f"http://127.0.0.1:{port}{metrics}"))
            break
        return out

    def _node(self, name: str) -> _Node:
        if name not in self.nodes:
            raise HarnessError(f"node {name} is not one of the driver's nodes ({', '.join(sorted(self.nodes))})")
        return self.nodes[name]

    def registered(self, name: str) -> tuple[bool, str]:
        node = self._node(name)
        if node.kubelet is not None:  # the kubelet says so in its log since the plugin last started
            try:
                with node.kubelet_log().open("rb") as fh:
                    fh.seek(node.log_offset)
                    text = fh.read().decode(errors="replace")
            except OSError as exc:
                return False, f"cannot read the kubelet's log: {exc}"
            mine = [ln for ln in text.splitlines() if REGISTERED in ln and f'driverName="{self.dut.driver}"' in ln]
            return (True, mine[-1][-200:]) if mine else (False, f"the kubelet logged no {REGISTERED!r} for "
                                                                f"{self.dut.driver} since the plugin started")
        drivers = node.agent.drivers() if node.agent is not None else {}
        if self.dut.driver in drivers:
            return True, "registered"
        failures = node.agent.registration_failures() if node.agent is not None else {}
        return False, "; ".join(f"{k}: {v}" for k, v in failures.items()) or f"registered: {sorted(drivers) or 'none'}"

    def log_marks(self) -> dict[str, int]:
        """Where each node's kubelet log stands now: a case reads only what follows."""
        marks = {}
        for node in self.nodes.values():
            if node.kubelet is not None:
                try:
                    marks[node.name] = node.kubelet_log().stat().st_size
                except OSError:
                    marks[node.name] = 0
        return marks

    def can_restart(self, component: str) -> bool:
        """A vendor plugin restarts as a process; drakit's fake driver runs in drakit's process,
        so only its node's kubelet restarts (and only a real one)."""
        if component == "plugin":
            return all(n.plugin is not None for n in self.nodes.values())
        return all(n.plugin is not None or n.kubelet is not None for n in self.nodes.values())

    def restart(self, component: str, name: str) -> None:
        node = self._node(name)
        if node.kubelet is not None and component == "kubelet":
            node.mark_log()
            try:
                node.kubelet.restart_kubelet()
                self.target.cluster._save_state()
                self.target.cluster.wait_kubelet_nodes([name])
            except Exception as exc:  # noqa: BLE001 - a kubelet that does not come back is the harness's
                raise HarnessError(f"restarting the kubelet of {name}: {exc}") from None
            if node.local is not None:  # the fake driver's slices, wiped by the kubelet at start
                self._publish(node, node.inventory)
            return
        if component == "plugin" and node.local is not None and node.kubelet is not None:
            node.mark_log()
            node.local.restart_plugins(timeout=15.0)
            return
        if component == "plugin":
            node.mark_log()
            if node.plugin is None:
                raise HarnessError("restarting drakit's in-process fake driver is not supported; a vendor plugin is")
            try:
                node.plugin.restart()
            except Exception as exc:  # noqa: BLE001
                raise HarnessError(f"restarting the plugin on {name}: {exc}") from None
            return
        if node.local is not None:
            raise HarnessError("restarting the node side of drakit's in-process fake driver is not supported")
        from drakit.clusters.nodeagent import NodeAgent
        node.agent.stop()
        node.agent = NodeAgent(node.plugin.folders.registry_dir, node.name, state_dir=node.root / "agent")
        node.agent.start()
        if self.runtime is not None:
            self.runtime.nodes[name] = node.agent
