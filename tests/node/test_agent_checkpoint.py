"""The node agent's checkpoint is the kubelet 1.37.2 ``dra_manager_state`` format: the claims
under ``ClaimInfoStateList`` and a driver's skipped unprepare as ``skipNodeOperations``, so what
reads a real kubelet's checkpoint reads the agent's; an earlier drakit's checkpoint still loads."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

from drakit.clusters.nodeagent.checkpoint import AgentCheckpoint, ClaimInfo
from drakit.clusters.nodeagent.client import DeviceResult

GPU = "gpu.acme.example.com"


def _claim() -> ClaimInfo:
    info = ClaimInfo("uid-1", "ns", "c", {"pod-1"})
    info.drivers[GPU] = (DeviceResult(GPU, "node-a", "gpu0", ("gpu",), (f"{GPU}/gpu=gpu0",)),)
    info.drivers["nic.swift.example.com"] = ()
    info.skip_unprepare.add("nic.swift.example.com")
    return info


def test_written_as_the_kubelet_writes_it_and_read_back(tmp_path: Path) -> None:
    cp = AgentCheckpoint(tmp_path, durable=False)
    cp.save({"uid-1": _claim()})
    outer = json.loads((tmp_path / "dra_manager_state").read_text())
    assert zlib.crc32(outer["Data"].encode()) == outer["Checksum"]
    data = json.loads(outer["Data"])
    assert data["kind"] == "DRACheckpoint" and data["apiVersion"] == "checkpoint.dra.kubelet.k8s.io/v1"
    [entry] = data["ClaimInfoStateList"]
    assert "Entries" not in data
    assert entry["PodUIDs"] == {"pod-1": {}}
    assert entry["DriverState"]["nic.swift.example.com"] == {"Devices": [], "skipNodeOperations": ["NodeUnprepareResources"]}
    assert entry["DriverState"][GPU]["Devices"][0]["CDIDeviceIDs"] == [f"{GPU}/gpu=gpu0"]
    back = cp.load()["uid-1"]
    assert back.skip_unprepare == {"nic.swift.example.com"} and back.drivers[GPU][0].device == "gpu0"


def test_an_earlier_drakit_checkpoint_still_loads(tmp_path: Path) -> None:
    entry = {"ClaimUID": "uid-1", "ClaimName": "c", "Namespace": "ns", "PodUIDs": {"pod-1": {}},
             "DriverState": {GPU: {"Devices": [], "SkipUnprepare": True}}}
    data = json.dumps({"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1", "Entries": [entry]})
    (tmp_path / "dra_manager_state").write_text(json.dumps({"Data": data, "Checksum": zlib.crc32(data.encode())}))
    claims = AgentCheckpoint(tmp_path, durable=False).load()
    assert set(claims) == {"uid-1"} and claims["uid-1"].skip_unprepare == {GPU}
