"""Publishing the driver's ResourceSlices from the running plugin.

The plugin computes its slices with ``fake_driver.slices.publish_slices`` (faults become device
taints) and, when asked, moves devices without node operations into their own pool
(``fake_driver.nodeops``). Where the slices go is a ``SlicePublisher``:

- ``FileSlicePublisher``: a JSON list in a file (no cluster; tests read it);
- ``CallbackSlicePublisher``: hands the list to a function (the reference backend);
- a Kubernetes publisher is cluster work (create/update/delete owned by the Node object).

Every republish bumps the pool generation, so consumers drop the older slices.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Protocol

from drakit.fake_hw.faults import Fault
from drakit.fake_hw.inventory import NodeInventory

from ..nodeops import with_skip_node_operations
from ..slices import publish_slices
from .files import atomic_write


class SlicePublisher(Protocol):
    def publish(self, driver: str, slices: list[dict[str, Any]]) -> None: ...


class FileSlicePublisher:
    """Writes the driver's current slices to ``path`` (a JSON list), atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def publish(self, driver: str, slices: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, (json.dumps(slices, indent=1) + "\n").encode(), 0o644,
                     durable=False)


class CallbackSlicePublisher:
    def __init__(self, callback: Callable[[str, list[dict[str, Any]]], None]) -> None:
        self.callback = callback

    def publish(self, driver: str, slices: list[dict[str, Any]]) -> None:
        self.callback(driver, slices)


def driver_slices(inventory: NodeInventory, driver: str, *, generation: int = 1,
                  faults: Iterable[Fault] = (), skip_node_ops: Collection[str] = ()
                  ) -> list[dict[str, Any]]:
    """The slices of one driver: taints from ``faults``, ``skip_node_ops`` devices moved."""
    slices = [s for s in publish_slices(inventory, generation=generation, faults=faults)
              if s["spec"]["driver"] == driver]
    if skip_node_ops:
        slices = with_skip_node_operations(slices, skip_node_ops)
    return slices


class SliceState:
    """Recomputes and republishes the driver's slices whenever its faults change."""

    def __init__(self, inventory: NodeInventory, driver: str, publisher: SlicePublisher | None,
                 skip_node_ops: Collection[str] = ()) -> None:
        self.inventory = inventory
        self.driver = driver
        self.publisher = publisher
        self.skip_node_ops = tuple(skip_node_ops)
        self.generation = 0
        self.slices: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def publish(self, faults: Iterable[Fault] = ()) -> list[dict[str, Any]]:
        with self._lock:
            self.generation += 1
            self.slices = driver_slices(self.inventory, self.driver, generation=self.generation,
                                        faults=tuple(faults), skip_node_ops=self.skip_node_ops)
            if self.publisher is not None:
                self.publisher.publish(self.driver, self.slices)
            return self.slices
