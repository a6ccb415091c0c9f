"""What node-check is given and observes: its options, the input claims (which expect an error,
which pods use, which results are the driver's) and what one prepare showed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .calls import Answer

EXPECT_ANNOTATION = "drakit.dev/node-check-expect"


@dataclass
class Options:
    registry_dir: Path
    driver: str
    claims: list[dict[str, Any]] = field(default_factory=list)
    claims_file: str = ""
    cdi_dirs: tuple[Path, ...] = (Path("/etc/cdi"), Path("/var/run/cdi"))
    timeout: float = 10.0
    health_timeout: float = 5.0
    rerun: str = ""


@dataclass
class Observation:
    """What happened to one claim during its lifecycle."""

    claim: dict[str, Any]
    owned: bool = True
    first: Answer | None = None
    second: Answer | None = None
    rpc_error: str | None = None
    cdi: list[str] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)
    metadata_ids: int = 0
    leftovers: list[str] = field(default_factory=list)
    unprepare_error: str | None = None


def expects_error(claim: dict[str, Any]) -> bool:
    return (claim["metadata"].get("annotations") or {}).get(EXPECT_ANNOTATION) == "error"


def in_use(claim: dict[str, Any]) -> bool:
    """Pods use the claim: the kubelet prepared (or will prepare) it; node-check must not unprepare it."""
    return bool((claim.get("status") or {}).get("reservedFor"))


def driver_results(claim: dict[str, Any], driver: str) -> list[dict[str, Any]]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [r for r in (alloc.get("devices") or {}).get("results") or [] if r.get("driver") == driver]


def claim_name(claim: dict[str, Any]) -> str:
    return str(claim["metadata"]["name"])
