"""Pure parts: claim device status, binding conditions, skipNodeOperations slices."""

from __future__ import annotations

import ipaddress

import pytest

from drakit.fake_driver.binding import (ATTACH_FAILED, ATTACHED, BindingController, binding_status,
                                 pending_attachments, with_binding_conditions)
from drakit.fake_driver.nodeops import with_skip_node_operations
from drakit.fake_driver.plugin import MemoryClaimSource
from drakit.fake_driver.plugin.publisher import driver_slices
from drakit.fake_driver.sampleclaims import allocated_claim
from drakit.fake_driver.status import device_status
from drakit.fake_hw.faults import Fault

from .conftest import GPU, NIC, NODE

NOW = "2026-07-24T10:00:00Z"


def result(device, driver=NIC, request="r", **extra):
    return {"request": request, "driver": driver, "pool": NODE, "device": device, **extra}


def test_device_status_for_nics_only(inventory):
    allocation = {"devices": {"results": [result("gpu0", GPU), result("nic0"),
                                          result("nic0-vf2", shareID="s-1"),
                                          result("nic1", pool="other-node")]}}
    allocation["devices"]["results"][3]["pool"] = "node-b"
    entries = device_status(inventory, allocation, now=NOW)
    assert entries == device_status(inventory, allocation, now=NOW)
    assert [e["device"] for e in entries] == ["nic0", "nic0-vf2"]
    vf = entries[1]
    assert vf["shareID"] == "s-1"
    assert vf["conditions"] == [{"type": "Ready", "status": "True", "reason": "InterfaceConfigured",
                                 "message": "net2 configured from host interface eth1v2",
                                 "lastTransitionTime": NOW}]
    net = vf["networkData"]
    assert net["interfaceName"] == "net2" and net["hardwareAddress"] == inventory.device("nic0-vf2").mac
    assert len(net["ips"]) == 2
    for ip in net["ips"]:
        assert str(ipaddress.ip_interface(ip)) == ip  # canonical CIDR form
    assert vf["data"] == {"hostInterface": "eth1v2", "pciBusID": inventory.device("nic0-vf2").pci_bus_id,
                          "model": "swift-cx100", "physicalFunction": "nic0"}
    assert device_status(inventory, None) == []
    assert device_status(inventory, allocation, driver=GPU) == []


def test_binding_conditions_round_trip(inventory):
    slices = with_binding_conditions(driver_slices(inventory, GPU), ["gpu2"], binds_to_node=True)
    gpu2 = next(d for s in slices for d in s["spec"]["devices"] if d["name"] == "gpu2")
    assert gpu2["bindingConditions"] == [ATTACHED] and gpu2["bindsToNode"] is True
    claim = allocated_claim("c", "ns", "uid-c", NODE, [
        result("gpu2", GPU, bindingConditions=[ATTACHED], bindingFailureConditions=[ATTACH_FAILED]),
        result("gpu3", GPU)])
    claim["status"]["devices"] = [{"driver": "other.example.com", "pool": "p", "device": "d"}]
    assert [r["device"] for r in pending_attachments(claim, GPU)] == ["gpu2"]
    ok = binding_status(claim, GPU, {(NODE, "gpu2"): True}, now=NOW)
    assert ok[0]["driver"] == "other.example.com"
    assert {c["type"]: c["status"] for c in ok[1]["conditions"]} == {ATTACHED: "True", ATTACH_FAILED: "False"}
    failed = binding_status(claim, GPU, {(NODE, "gpu2"): "fabric timeout"}, now=NOW)
    assert {c["type"]: (c["status"], c["message"]) for c in failed[1]["conditions"]} == {
        ATTACHED: ("False", "fabric timeout"), ATTACH_FAILED: ("True", "fabric timeout")}
    source = MemoryClaimSource([claim])
    controller = BindingController(GPU, source, clock=lambda: NOW)
    controller.reconcile(claim)
    written = source.get_claim("ns", "c")
    assert pending_attachments(written, GPU) == []
    assert controller.reconcile(written) is None
    with pytest.raises(ValueError, match="no such device"):
        with_binding_conditions(slices, ["gpu9"])


def test_skip_node_operations_pool(inventory):
    slices = driver_slices(inventory, NIC, skip_node_ops=["nic1", "nic3"], faults=[Fault("nic1", "link-down")])
    pools = {}
    for s in slices:
        pools.setdefault(s["spec"]["pool"]["name"], []).append(s)
    assert set(pools) == {NODE, f"{NODE}-no-node-ops"}
    skip = pools[f"{NODE}-no-node-ops"]
    assert [d["name"] for s in skip for d in s["spec"]["devices"]] == ["nic1", "nic3"]
    assert all(s["spec"]["skipNodeOperations"] == ["*"] for s in skip)
    assert skip[0]["spec"]["devices"][0]["taints"][0]["value"] == "link-down"
    assert all("skipNodeOperations" not in s["spec"] for s in pools[NODE])
    for members in pools.values():
        assert {s["spec"]["pool"]["resourceSliceCount"] for s in members} == {len(members)}
    assert len({s["metadata"]["name"] for s in slices}) == len(slices)
    with pytest.raises(ValueError, match="only be skipped together"):
        with_skip_node_operations(slices, ["nic0"], operations=["NodePrepareResources"])


def test_devices_consuming_counters_cannot_skip():
    from drakit.fake_hw.inventory import build_inventory
    inv = build_inventory("acme-partitionable", NODE)
    with pytest.raises(ValueError, match="consumes shared counters"):
        driver_slices(inv, GPU, skip_node_ops=["gpu0"])
