"""``LocalNode``: an emulated node's fake drivers and a node agent, in one process.

For the reference backend and the cluster backend's node runtime (``kube.KubeNodeRuntime``):
after a scheduler binds a pod, ``node.prepare(pod_uid,
claims)`` prepares the pod's claims through each driver's real Unix socket; the pod may run
only when the result is ``ok``. Claims are read back by the plugins through ``get_claim``
(e.g. the reference store), status writes go to ``write_status`` and published slices to
``publish``::

    node = LocalNode(build_inventory("server-8gpu", "node-a"),
                     get_claim=lambda ns, name: cluster.get("ResourceClaim", name, ns))
    node.start()
    result = node.prepare(pod_uid, [claim, ...])
    ...
    node.read_metadata("ns", "claim", "request")   # the metadata file's documents, or None
    node.unprepare(pod_uid)
    node.stop()

With ``agent=False`` and ``dirs=(plugins, registry, cdi)`` of a real kubelet, the plugins serve in
that kubelet's folders and ``start()`` waits until the kubelet has registered them (the kubelet
prepares; ``prepare``/``unprepare`` are not used).

Sockets live under a short temporary folder (Unix socket paths are limited to 107 bytes);
files are written without fsync, since nothing here must survive a crash.
"""

from __future__ import annotations

import os
import json
import shutil
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from drakit.fake_driver.plugin import FakePlugin, FunctionClaimSource, PluginConfig, metadata
from drakit.fake_driver.plugin.publisher import CallbackSlicePublisher
from drakit.fake_hw.inventory import NodeInventory

from .agent import NodeAgent, PodResult


class LocalNode:
    def __init__(self, inventory: NodeInventory,
                 get_claim: Callable[[str, str], dict[str, Any] | None], *,
                 root: str | Path | None = None, drivers: Sequence[str] | None = None,
                 device_metadata: bool = False, metadata_versions: tuple[str, ...] = ("v1beta1",),
                 write_status: Callable[[str, str, str, str, list[dict[str, Any]]], None] | None = None,
                 publish: Callable[[str, list[dict[str, Any]]], None] | None = None,
                 optional_node_operations: bool = False,
                 skip_node_ops: Mapping[str, Collection[str]] | None = None,
                 check_reserved: bool = True, agent: bool = True,
                 dirs: tuple[Path, Path, Path] | None = None) -> None:
        self.inventory = inventory
        self.node = inventory.node_name
        self._own_root = root is None
        self.root = Path(root) if root is not None else None
        self.driver_names = tuple(drivers) if drivers is not None else inventory.drivers
        self.claims = FunctionClaimSource(get_claim, write_status)
        self.device_metadata = device_metadata
        self.metadata_versions = metadata_versions
        self.publish = publish
        self.skip_node_ops = dict(skip_node_ops or {})
        self.plugins: dict[str, FakePlugin] = {}
        self.agent: NodeAgent | None = None
        self.with_agent = agent
        self._past_calls: list[dict[str, Any]] = []
        self.dirs = dirs  # (plugins, registry, cdi) of a real kubelet; default: below root
        self._agent_options = {"optional_node_operations": optional_node_operations,
                               "check_reserved": check_reserved}

    @property
    def cdi_dir(self) -> Path:
        if self.dirs is not None:
            return self.dirs[2]
        assert self.root is not None
        return self.root / "cdi"

    def _dirs(self) -> tuple[Path, Path, Path]:
        assert self.root is not None
        return self.dirs or (self.root / "plugins", self.root / "registry", self.root / "cdi")

    def start(self, timeout: float = 5.0, *, wait: bool = True) -> None:
        """Start the plugins (and the agent); with ``wait`` (or an agent) return once they are
        registered, else see :meth:`wait_registered`."""
        if self.root is None:
            from drakit.clusters.sockdir import socket_dir
            from drakit.fake_driver.plugin.files import longest_socket_tail
            longest = longest_socket_tail([*self.driver_names, "x"])  # every socket its plugins bind below it
            self.root = socket_dir("drakit-", longest, "the fake drivers' sockets")  # fits whatever TMPDIR is
            from drakit.clusters.leftovers import claim
            claim(self.root)  # a killed run's folder is found and removed by the next run
        try:
            self._start_plugins(timeout, wait=wait)
            if self.with_agent:
                self._start_agent(timeout)
        except BaseException:
            self.stop()
            raise

    def _config(self, driver: str, plugins: Path, registry: Path) -> PluginConfig:
        return PluginConfig(driver=driver, node=self.node, plugin_dir=plugins, registry_dir=registry,
                            cdi_dir=self._dirs()[2], device_metadata=self.device_metadata,
                            metadata_versions=self.metadata_versions, durable=False)

    def _start_plugins(self, timeout: float, drivers: Sequence[str] | None = None, *, wait: bool = True) -> None:
        plugins, registry, _cdi = self._dirs()
        publisher = CallbackSlicePublisher(self.publish) if self.publish is not None else None
        for driver in self.driver_names if drivers is None else drivers:
            plugin = FakePlugin(self._config(driver, plugins, registry), self.inventory, self.claims,
                                publisher=publisher, skip_node_ops=self.skip_node_ops.get(driver, ()))
            plugin.start()
            self.plugins[driver] = plugin
        if not self.with_agent:  # a real kubelet registers the plugins
            if wait:
                self.wait_registered(timeout)
        elif self.agent is not None:
            self._wait_registered(timeout)

    def wait_registered(self, timeout: float) -> None:
        """Until a real kubelet (``agent=False``) has registered every plugin; RuntimeError after
        ``timeout`` seconds."""
        import time
        deadline = time.monotonic() + timeout
        for driver, plugin in self.plugins.items():
            if not plugin.server.registered.wait(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"driver {driver} was not registered by the kubelet of node {self.node} "
                                   f"within {timeout} s")

    def _start_agent(self, timeout: float) -> None:
        assert self.root is not None
        # a throw-away folder, like the plugins' (durable=False): no fsync per save
        self.agent = NodeAgent(self._dirs()[1], self.node, state_dir=self.root / "agent", durable=False,
                               **self._agent_options)  # type: ignore[arg-type]
        self.agent.start()
        self._wait_registered(timeout)

    def _wait_registered(self, timeout: float) -> None:
        assert self.agent is not None
        for driver in self.driver_names:
            if not self.agent.wait_for_driver(driver, timeout):
                raise RuntimeError(f"driver {driver} did not register with the node agent "
                                   f"within {timeout} s: {self.agent.registration_failures()}")

    def plugin_calls(self) -> list[dict[str, Any]]:
        """Every NodePrepare/NodeUnprepareResources call the node's plugins served (also before a
        restart of the plugins), each ``{operation, claims, driver}``, oldest first per driver."""
        out = list(self._past_calls)
        for driver, plugin in self.plugins.items():
            out += [{**c, "driver": driver} for c in plugin.driver.calls]
        return out

    def restart_plugins(self, timeout: float = 10.0) -> None:
        """Stop every fake driver plugin and start it again (a driver's DaemonSet pod restarting):
        the sockets go away and come back, the kubelet (or agent) registers them again."""
        self._past_calls = self.plugin_calls()
        for plugin in self.plugins.values():
            plugin.stop(grace=0)
        self.plugins.clear()
        if self.agent is not None:  # the agent must see the sockets gone before they come back
            import time
            deadline = time.monotonic() + timeout
            while any(self.agent.wait_for_driver(d, 0) for d in self.driver_names) and time.monotonic() < deadline:
                time.sleep(0.02)
        self._start_plugins(timeout)

    def rehome(self, inventory: NodeInventory, *, device_metadata: bool, dirs: tuple[Path, Path, Path],
               timeout: float = 10.0, wait: bool = True) -> list[str]:
        """The node (of a real kubelet, ``agent=False``) has the hardware ``inventory`` from now
        on; nothing may be prepared. A plugin of a driver the new hardware keeps serves its new
        devices on its running sockets (``FakePlugin.rehome``: the kubelet's registration stays,
        as for a driver whose node's devices changed); one of a driver it lacks stops; one of a
        driver it adds starts in ``dirs`` (socket folders no plugin used before, so the kubelet
        registers it in one round) and, with ``wait``, is waited for as at start (else see
        :meth:`wait_registered`). The call history starts anew.
        Returns the drivers whose plugins stopped."""
        if self.with_agent:
            raise RuntimeError("rehome is for the plugins of a real kubelet node (agent=False)")
        self.inventory, self.driver_names, self.device_metadata = inventory, inventory.drivers, device_metadata
        self._past_calls = []
        gone = [d for d in self.plugins if d not in inventory.drivers]
        for driver in gone:
            self.plugins.pop(driver).stop(grace=0)
        for driver, plugin in self.plugins.items():
            plugin.rehome(self._config(driver, plugin.config.plugin_dir, plugin.config.registry_dir), inventory)
        self.dirs = dirs
        self._start_plugins(timeout, [d for d in inventory.drivers if d not in self.plugins], wait=wait)
        return gone

    def restart_agent(self, timeout: float = 10.0) -> None:
        """Stop the node agent (the kubelet's DRA part) and start a new one from its checkpoint."""
        if self.agent is not None:
            self.agent.stop()
            self.agent = None
        self._start_agent(timeout)

    def stop(self) -> None:
        if self.agent is not None:
            self.agent.stop()
            self.agent = None
        for plugin in self.plugins.values():
            plugin.stop(grace=0)
        self.plugins.clear()
        if self._own_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def prepare(self, pod_uid: str, claims: Sequence[Mapping[str, Any]]) -> PodResult:
        assert self.agent is not None, "LocalNode.start() first"
        return self.agent.prepare(pod_uid, claims)

    def unprepare(self, pod_uid: str, claims: Sequence[Mapping[str, Any]] | None = None) -> PodResult:
        assert self.agent is not None, "LocalNode.start() first"
        return self.agent.unprepare(pod_uid, claims)

    def read_metadata(self, namespace: str, claim: str, request: str,
                      driver: str | None = None) -> list[dict[str, Any]] | None:
        """The documents of the metadata file a driver (``driver``, or the first of this node's
        that wrote one) keeps for the claim's request; None when there is no such file."""
        for name, plugin in self.plugins.items():
            if driver is not None and name != driver:
                continue
            path = metadata.host_file(plugin.config.data_dir, namespace, claim, request)
            if not os.path.lexists(path):
                continue
            from drakit.conformance.inputs import DRIVER_FILE, read_text
            text = read_text(path, DRIVER_FILE)  # the driver wrote it: bounded (InputError: one line naming it)
            try:
                return read_json_stream(text)
            except ValueError as err:
                raise ValueError(f"{path}: not a stream of JSON documents: {err}") from None
        return None

    def __enter__(self) -> LocalNode:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def read_json_stream(text: str) -> list[dict[str, Any]]:
    """The JSON values of a stream of concatenated documents (whitespace between them)."""
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return out
        value, pos = decoder.raw_decode(text, pos)
        out.append(value)
