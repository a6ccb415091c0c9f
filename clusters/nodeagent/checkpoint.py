"""The node agent's checkpoint, in the kubelet 1.37.2 ``dra_manager_state`` format.

``{"Data": "<JSON string>", "Checksum": <CRC-32 (IEEE) of Data>}`` where Data is
``{"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
"ClaimInfoStateList": [...]}`` (``pkg/kubelet/cm/dra/state``) and each entry has ``ClaimUID``,
``ClaimName``, ``Namespace``, ``PodUIDs`` (a set, as a map to ``{}``) and ``DriverState``
(``{driver: {"Devices": [{PoolName, DeviceName, RequestNames, CDIDeviceIDs, ShareID?}],
"skipNodeOperations": ["NodeUnprepareResources"]?}}``: a driver whose devices all skip
NodeUnprepareResources). Checkpoints an earlier drakit wrote (the list under ``Entries``, the
skip as ``SkipUnprepare: true``) are read too.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.fake_driver.plugin.files import atomic_write

from .client import DeviceResult

KIND = "DRACheckpoint"
API_VERSION = "checkpoint.dra.kubelet.k8s.io/v1"
FILE_NAME = "dra_manager_state"
SKIP_UNPREPARE = "NodeUnprepareResources"  # resource.k8s.io SkipNodeOperation


class CheckpointError(RuntimeError):
    pass


@dataclass
class ClaimInfo:
    """What the agent knows about one claim on its node."""

    uid: str
    namespace: str
    name: str
    pod_uids: set[str] = field(default_factory=set)
    drivers: dict[str, tuple[DeviceResult, ...]] = field(default_factory=dict)
    skip_prepare: set[str] = field(default_factory=set)
    skip_unprepare: set[str] = field(default_factory=set)
    prepared: bool = False

    def to_entry(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for driver, devices in sorted(self.drivers.items()):
            wire = []
            for d in devices:
                item: dict[str, Any] = {"PoolName": d.pool, "DeviceName": d.device,
                                        "RequestNames": list(d.request_names),
                                        "CDIDeviceIDs": list(d.cdi_ids)}
                if d.share_id is not None:
                    item["ShareID"] = d.share_id
                wire.append(item)
            state[driver] = {"Devices": wire}
        for driver in sorted(self.skip_unprepare):
            state.setdefault(driver, {"Devices": []})["skipNodeOperations"] = [SKIP_UNPREPARE]
        return {"ClaimUID": self.uid, "ClaimName": self.name, "Namespace": self.namespace,
                "PodUIDs": {uid: {} for uid in sorted(self.pod_uids)}, "DriverState": state}

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> ClaimInfo:
        info = cls(entry["ClaimUID"], entry["Namespace"], entry["ClaimName"],
                   set(entry.get("PodUIDs") or {}))
        for driver, state in (entry.get("DriverState") or {}).items():
            if state.get("SkipUnprepare") or {SKIP_UNPREPARE, "*"} & set(state.get("skipNodeOperations") or ()):
                info.skip_unprepare.add(driver)
            info.drivers[driver] = tuple(
                DeviceResult(driver, d["PoolName"], d["DeviceName"], tuple(d.get("RequestNames") or ()),
                             tuple(d.get("CDIDeviceIDs") or ()), d.get("ShareID"))
                for d in state.get("Devices") or [])
        return info


class AgentCheckpoint:
    """``durable``: fsync each save (file and folder), as the kubelet does; off for a node whose
    state lives in a throw-away folder (the reference backend's), where it only costs time."""

    def __init__(self, state_dir: Path, *, durable: bool = True) -> None:
        self.path = state_dir / FILE_NAME
        self.durable = durable

    def load(self) -> dict[str, ClaimInfo]:
        """The claims of the checkpoint; ``CheckpointError`` (one line, the file) when it exists
        but cannot be trusted, whatever is wrong with it."""
        try:
            outer = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except OSError as err:
            raise CheckpointError(f"{self.path}: cannot read: {err.strerror or err}") from None
        except (ValueError, RecursionError) as err:
            raise CheckpointError(f"{self.path}: not JSON: {str(err).splitlines()[0] if str(err) else err!r}") from None
        data = outer.get("Data") if isinstance(outer, dict) else None
        if not isinstance(data, str) or zlib.crc32(data.encode()) != outer.get("Checksum"):
            raise CheckpointError(f"{self.path}: checksum mismatch (file corrupted)")
        try:
            inner = json.loads(data)
            if inner.get("kind") != KIND or inner.get("apiVersion") != API_VERSION:
                raise CheckpointError(f"{self.path}: not a {API_VERSION} {KIND}")
            entries = inner.get("ClaimInfoStateList", inner.get("Entries")) or []
            return {e["ClaimUID"]: ClaimInfo.from_entry(e) for e in entries}
        except CheckpointError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
            raise CheckpointError(f"{self.path}: unreadable entries: {type(err).__name__}: {err}") from None

    def save(self, claims: dict[str, ClaimInfo]) -> None:
        data = json.dumps({"kind": KIND, "apiVersion": API_VERSION,
                           "ClaimInfoStateList": [claims[uid].to_entry() for uid in sorted(claims)]},
                          separators=(",", ":"))
        outer = {"Data": data, "Checksum": zlib.crc32(data.encode())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(outer).encode(), 0o600, durable=self.durable)
