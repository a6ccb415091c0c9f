"""What the reference's controllers (taint eviction, pool status) may use of the cluster that
runs them: its clock, gates and object store, and pod deletion. A Protocol, so that the
controllers need not import :class:`ReferenceCluster`, which builds them."""

from __future__ import annotations

from typing import Any, Protocol

from .clock import Clock
from .store import ObjectStore


class ControllerHost(Protocol):
    gates: dict[str, bool]
    clock: Clock
    store: ObjectStore

    def delete_pod(self, pod: dict[str, Any]) -> None: ...
