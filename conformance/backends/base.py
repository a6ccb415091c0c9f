"""The one seam between the runner and a target: a backend opens a session per case.

A session applies, deletes and reads objects in the case's namespace and says whether the target
reacts synchronously (reference: every change has settled when the call returns) or must be
polled (a real cluster).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..spec.case import Case
from ..errors import ApiRejected

__all__ = ["ApiRejected", "Backend", "Capabilities", "HarnessError", "Session"]


class HarnessError(Exception):
    """The target or the kit failed, not the behaviour under test."""


@dataclass(frozen=True)
class Capabilities:
    kubernetes_version: str
    feature_gates: dict[str, bool] = field(default_factory=dict)
    apis: tuple[str, ...] = ()


class Session(Protocol):
    namespace: str
    synchronous: bool

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]: ...
    def update_status(self, kind: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Replace an object's status through the status subresource (what a driver or
        controller does); ApiRejected when the API server refuses it."""
        ...
    def advance(self, seconds: float) -> None:
        """Let time pass: a simulated clock moves, a real cluster is simply waited for."""
        ...
    def delete(self, kind: str, name: str) -> None: ...
    def get(self, kind: str, name: str) -> dict[str, Any] | None: ...
    def device_metadata(self, claim: str, request: str, driver: str | None = None) -> list[dict[str, Any]] | None:
        """The documents of the device metadata file (KEP-5304) the driver (``driver``, or any)
        wrote on the node for that claim of the session namespace and request (its base name);
        None when there is no such file. HarnessError when the node side cannot be seen."""
        ...
    def list(self, kind: str) -> list[dict[str, Any]]: ...
    def events(self) -> list[dict[str, Any]]: ...
    def diagnostics(self) -> dict[str, Any]: ...
    def close(self, *, failed: bool) -> None: ...

# Optional, reference-only observations a session may offer (checks ask with getattr and report
# a harness error where a backend cannot observe them):
#   now() -> str                        the target's current time (RFC 3339)
#   last_seen(kind, name) -> dict|None  an object or the last state of a deleted one
#   scheduler_metrics() -> dict         the mini scheduler's queue counters
#   node_operations() -> list[dict]     the kubelet's NodePrepare/NodeUnprepare calls


class Backend(Protocol):
    name: str

    def capabilities(self) -> Capabilities: ...
    def unmet(self, case: Case) -> tuple[str, str] | None:
        """(category, message) when the case cannot run here, else None."""
        ...
    def open(self, case: Case) -> Session: ...
