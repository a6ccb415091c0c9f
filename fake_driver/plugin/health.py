"""Device health for the NodeWatchResources stream, driven by injected faults.

``HealthMonitor`` holds the driver's current faults. A device is unhealthy while a fault taints
it (a fault on a GPU or NIC also hits its partitions or virtual functions, exactly as the
published taints do). Every change bumps a version and wakes the streams, which then send the
complete device list again; between changes a stream resends well within the kubelet's
timeout.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from drakit.fake_hw.faults import Fault, Taint, device_taints
from drakit.fake_hw.inventory import NodeInventory

MAX_MESSAGE = 1024
DEFAULT_TIMEOUT_SECONDS = 30


@dataclass(frozen=True, slots=True)
class DeviceHealthInfo:
    pool: str
    device: str
    healthy: bool
    message: str = ""


def fault_message(taints: Iterable[Taint]) -> str:
    text = "; ".join(f"fault {t.value}: taint {t.key}={t.value}:{t.effect}" for t in taints)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


class HealthMonitor:
    """Current health of one driver's devices; thread-safe, with change notification."""

    def __init__(self, inventory: NodeInventory, driver: str, pools: Mapping[str, str], *,
                 timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self.inventory = inventory
        self.driver = driver
        self.pools = dict(pools)
        self.timeout_seconds = timeout_seconds
        self._clock = clock
        self._cond = threading.Condition()
        self._faults: tuple[Fault, ...] = ()
        self._version = 0
        self._closed = False
        self._listeners: list[Callable[[tuple[Fault, ...]], object]] = []

    @property
    def faults(self) -> tuple[Fault, ...]:
        with self._cond:
            return self._faults

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def on_change(self, listener: Callable[[tuple[Fault, ...]], object]) -> None:
        """Call ``listener(faults)`` after every change (e.g. to republish slices)."""
        self._listeners.append(listener)

    def set_faults(self, faults: Iterable[Fault]) -> bool:
        """Replace the faults; ``True`` when that changed anything. Faults on devices of other
        drivers are accepted and ignored here; unknown devices raise ``ValueError``."""
        faults = tuple(dict.fromkeys(faults))
        device_taints(self.inventory, faults)  # validates the device names
        with self._cond:
            if faults == self._faults:
                return False
            self._faults = faults
            self._version += 1
            self._cond.notify_all()
        for listener in self._listeners:
            listener(faults)
        return True

    def inject(self, fault: Fault) -> bool:
        return self.set_faults((*self.faults, fault))

    def clear(self, device: str | None = None) -> bool:
        return self.set_faults(f for f in self.faults if device is not None and f.device != device)

    def snapshot(self) -> tuple[int, list[DeviceHealthInfo]]:
        """(version, every device of the driver with its health), in inventory order."""
        with self._cond:
            version, faults = self._version, self._faults
        taints = device_taints(self.inventory, faults)
        out = []
        for device in self.inventory.devices(self.driver):
            mine = taints.get(device.name, ())
            out.append(DeviceHealthInfo(self.pools.get(device.name, self.inventory.node_name),
                                        device.name, not mine, fault_message(mine)))
        return version, out

    def wait(self, version: int, timeout: float) -> int:
        """Block until the version moves past ``version``, the monitor closes, or ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._version == version and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._version

    def now(self) -> int:
        return int(self._clock())

    def close(self) -> None:
        """End every stream (on shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
