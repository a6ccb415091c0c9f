"""Stable identities for emulated devices: UUIDs and MAC addresses.

Both derive from the node name and the device name only, so rebuilding a node gives the same
values and two nodes never share them.
"""

from __future__ import annotations

import hashlib
import uuid

DRAKIT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "drakit.dev")
"""The UUID namespace under which device UUIDs are derived."""


def device_uuid(node: str, device: str) -> str:
    """A name-based (version 5) UUID for ``device`` on ``node``, lower-case, 36 characters."""
    return str(uuid.uuid5(DRAKIT_NAMESPACE, f"{node}/{device}"))


def device_mac(node: str, device: str) -> str:
    """A locally administered unicast MAC address for ``device`` on ``node``.

    The bytes come from a SHA-256 of the names; the first octet has the locally-administered bit
    set and the multicast bit cleared, so it can never collide with a vendor-assigned address.
    """
    raw = bytearray(hashlib.sha256(f"{node}/{device}".encode()).digest()[:6])
    raw[0] = (raw[0] & 0xFC) | 0x02
    return ":".join(f"{b:02x}" for b in raw)
