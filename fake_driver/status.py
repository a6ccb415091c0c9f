"""ResourceClaim ``status.devices`` entries the fake NIC driver reports (KEP-4817).

``device_status(inventory, allocation)`` is pure: the same inventory and allocation give the
same entries (pass ``now`` for the condition timestamp; without it the clock is read). Only
NICs and their virtual functions get entries; GPUs need no status.

Each entry carries a ``Ready`` condition, ``networkData`` (the interface name inside the pod,
``net1``, ``net2``... in allocation order; one IPv4 and one IPv6 address in canonical CIDR form,
derived from the node and device names; the fake MAC as ``hardwareAddress``) and a small
``data`` object with facts about the host side.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from typing import Any, Mapping

from drakit.fake_hw.inventory import Device, NodeInventory

NIC_KINDS = ("nic", "nic-vf")
READY = "Ready"
MAX_CONDITIONS = 8
MAX_IPS = 16
MAX_DATA_BYTES = 10 * 1024


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def device_ips(node: str, device: str) -> list[str]:
    """An IPv4 address in 10.0.0.0/8 (prefix /16) and an IPv6 ULA (prefix /64), canonical."""
    digest = hashlib.sha256(f"{node}/{device}".encode()).digest()
    v4 = ipaddress.ip_interface(f"10.{digest[0]}.{digest[1]}.{digest[2] % 254 + 1}/16")
    host = int.from_bytes(digest[3:11], "big") or 1
    v6 = ipaddress.ip_interface((ipaddress.IPv6Address((0xfd64 << 112) | (1 << 64) | host), 64))
    return [str(v4), str(v6)]


def _entry(node: str, result: Mapping[str, Any], device: Device, interface: str,
           now: str) -> dict[str, Any]:
    data: dict[str, Any] = {"hostInterface": device.interface, "pciBusID": device.pci_bus_id,
                            "model": device.model}
    if device.parent is not None:
        data["physicalFunction"] = device.parent
    entry: dict[str, Any] = {
        "driver": result["driver"],
        "pool": result["pool"],
        "device": result["device"],
        "conditions": [{
            "type": READY,
            "status": "True",
            "reason": "InterfaceConfigured",
            "message": f"{interface} configured from host interface {device.interface}",
            "lastTransitionTime": now,
        }],
        "data": data,
        "networkData": {
            "interfaceName": interface,
            "ips": device_ips(node, device.name),
            "hardwareAddress": device.mac or "",
        },
    }
    if result.get("shareID"):
        entry["shareID"] = result["shareID"]
    return entry


def device_status(inventory: NodeInventory, allocation: Mapping[str, Any] | None, *,
                  driver: str | None = None, now: str | None = None) -> list[dict[str, Any]]:
    """``status.devices`` entries for the NICs in ``allocation`` (a claim's ``status.allocation``).

    Results of other nodes' pools, unknown devices and non-NIC devices are skipped; ``driver``
    limits the entries to one driver.
    """
    if not allocation:
        return []
    stamp = now or now_rfc3339()
    known = {(d.driver, d.name): d for d in inventory.devices()}
    entries: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str, str]] = set()
    interfaces: dict[str, int] = {}
    for result in (allocation.get("devices") or {}).get("results") or []:
        if driver is not None and result.get("driver") != driver:
            continue
        if result.get("pool") != inventory.node_name:
            continue
        device = known.get((result.get("driver", ""), result.get("device", "")))
        if device is None or device.kind not in NIC_KINDS:
            continue
        key = (result["driver"], result["pool"], result["device"], result.get("shareID") or "")
        if key in seen:
            continue
        seen.add(key)
        interfaces[result["driver"]] = interfaces.get(result["driver"], 0) + 1
        entries.append(_entry(inventory.node_name, result, device,
                              f"net{interfaces[result['driver']]}", stamp))
    return entries
