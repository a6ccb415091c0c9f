"""``FakePlugin``: one fake DRA driver on one emulated node, assembled and running.

It ties together the node-side logic (``FakeDriver``), the gRPC sockets (``PluginServer``),
device health (``HealthMonitor``), slice publishing (``SliceState``) and, optionally, a faults
file that is polled so another process can inject faults::

    plugin = FakePlugin(config, build_inventory("server-8gpu", "node-a"), MemoryClaimSource())
    plugin.start()
    plugin.inject_fault(Fault("gpu1", "ecc", "NoExecute"))   # taint + Unhealthy on the stream
    plugin.stop()

The faults file holds one fault per line, ``device=kind[:Effect]`` (``#`` starts a comment).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any, Collection

from drakit.fake_hw.faults import Fault
from drakit.fake_hw.inventory import NodeInventory

from ..nodeops import skip_pools
from .claims import ClaimSource
from .driver import FakeDriver, PluginConfig
from .health import HealthMonitor
from .publisher import SlicePublisher, SliceState
from .server import PluginServer

log = logging.getLogger("drakit.driver")


def read_faults_file(path: Path) -> tuple[Fault, ...]:
    """Faults from a file (drakit's one reader: a regular file, its size bounded, strict
    UTF-8; :class:`~drakit.conformance.inputs.InputError` otherwise); a missing file means no faults."""
    from drakit.conformance.inputs import FAULTS, read_text
    if not os.path.lexists(path):
        return ()
    text = read_text(path, FAULTS)
    faults = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            faults.append(Fault.parse(line))
        except ValueError as err:
            raise ValueError(f"{path}:{number}: {err}") from None
    return tuple(faults)


class FakePlugin:
    """A running fake kubelet plugin (start/stop), usable in-process or from the CLI."""

    def __init__(self, config: PluginConfig, inventory: NodeInventory, claims: ClaimSource, *,
                 publisher: SlicePublisher | None = None, skip_node_ops: Collection[str] = (),
                 health: bool = True, resend_seconds: float = 10.0,
                 faults_file: Path | None = None, poll_seconds: float = 0.2,
                 server_options: dict[str, Any] | None = None) -> None:
        self.claims = claims
        self.publisher = publisher
        self.skip_node_ops = tuple(skip_node_ops)
        self._assemble(config, inventory)
        self.server = PluginServer(self.driver, health=self.health if health else None,
                                   resend_seconds=resend_seconds, **(server_options or {}))
        self.faults_file = faults_file
        self.poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def _assemble(self, config: PluginConfig, inventory: NodeInventory) -> None:
        pools = {**skip_pools(self.skip_node_ops, inventory.node_name), **config.pools}
        if pools != dict(config.pools):
            config = dataclasses.replace(config, pools=pools)
        self.config = config
        self.inventory = inventory
        self.driver = FakeDriver(config, inventory, self.claims)
        health = self.health = HealthMonitor(inventory, config.driver, self.driver.pools)
        self.slices = SliceState(inventory, config.driver, self.publisher, self.skip_node_ops)
        health.on_change(self.slices.publish)
        self.driver.lost = lambda: {f.device for f in health.faults if f.kind == "lost"}

    def rehome(self, config: PluginConfig, inventory: NodeInventory) -> None:
        """Serve this driver's devices of ``inventory`` (the node's hardware changed) with
        ``config`` (same driver and sockets) on the running sockets, as a driver whose node's
        devices changed does: its registration with the kubelet stays. The driver starts from
        nothing (its folder emptied but for the sockets, no faults, slices published anew);
        nothing may be prepared."""
        if self.driver.prepared():
            raise RuntimeError(f"driver {self.config.driver} still has claims prepared")
        if (config.driver, config.dra_socket, config.registration_socket) != (
                self.config.driver, self.server.dra_socket, self.server.registration_socket):
            raise ValueError(f"rehome of {self.config.driver}: another driver or other sockets ({config.driver})")
        self.driver.close()
        sockets = {self.server.dra_socket, self.server.registration_socket}
        for entry in config.data_dir.iterdir() if config.data_dir.is_dir() else ():
            if entry in sockets or entry.name.startswith(".reg-"):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        self._assemble(config, inventory)
        self.server.swap(self.driver, self.health if self.server.health is not None else None)
        self.slices.publish(self.health.faults)

    @property
    def dra_socket(self) -> Path:
        return self.server.dra_socket

    @property
    def registration_socket(self) -> Path:
        return self.server.registration_socket

    def start(self) -> None:
        if self.faults_file is not None:
            self.health.set_faults(read_faults_file(self.faults_file))
        self.slices.publish(self.health.faults)
        self.server.start()
        if self.faults_file is not None:
            self._poller = threading.Thread(target=self._poll_faults, name="drakit-faults",
                                            daemon=True)
            self._poller.start()

    def stop(self, grace: float | None = 1.0) -> None:
        self._stop.set()
        self.server.stop(grace)
        if self._poller is not None:
            self._poller.join(timeout=5)
        self.driver.close()

    def inject_fault(self, fault: Fault) -> None:
        self.health.inject(fault)

    def clear_faults(self, device: str | None = None) -> None:
        self.health.clear(device)

    def _poll_faults(self) -> None:
        assert self.faults_file is not None
        last: tuple[int, int] | None = None
        while not self._stop.wait(self.poll_seconds):
            try:
                st = self.faults_file.stat()
                key = (st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                key = (0, -1)
            if key == last:
                continue
            last = key
            try:
                self.health.set_faults(read_faults_file(self.faults_file))
            except ValueError as err:
                log.error("faults file: %s", err)

    def __enter__(self) -> FakePlugin:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
