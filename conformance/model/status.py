"""Validation of status written through a status subresource: ``metav1.Condition`` lists,
ResourceClaim ``status.devices`` (KEP-4817) and DeviceTaintRule ``status.conditions``.

Limits from ``resource.k8s.io/v1`` (1.37): at most 8 conditions per device and per rule,
``data`` a JSON object of at most 10 KiB, ``networkData.interfaceName`` at most 256 bytes,
``hardwareAddress`` at most 128 bytes, at most 16 unique ``ips`` in canonical CIDR form. A
status entry must name an allocated device of the claim (driver, pool, device, shareID).
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any, Iterable

from ..errors import FieldError
from .reader import check_dns_label, check_dns_subdomain, check_label_key

MAX_DEVICE_CONDITIONS = 8
MAX_RULE_CONDITIONS = 8
MAX_DATA_BYTES = 10 * 1024
MAX_INTERFACE_NAME = 256
MAX_HARDWARE_ADDRESS = 128
MAX_IPS = 16
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?\Z")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")

DeviceKey = tuple[str, str, str, "str | None"]  # driver, pool, device, shareID


def validate_conditions(conditions: Any, path: tuple[object, ...], max_items: int) -> None:
    """``metav1.Condition`` rules (apimachinery ValidateConditions) plus a list limit."""
    if conditions is None:
        return
    if not isinstance(conditions, list):
        raise FieldError(path, "must be a list")
    if len(conditions) > max_items:
        raise FieldError(path, f"Too many: {len(conditions)}: must have at most {max_items} items")
    seen: set[str] = set()
    for i, c in enumerate(conditions):
        p = path + (i,)
        if not isinstance(c, dict):
            raise FieldError(p, "must be an object")
        ctype = c.get("type")
        if not ctype:
            raise FieldError(p + ("type",), "Required value")
        check_label_key(p + ("type",), str(ctype))
        if ctype in seen:
            raise FieldError(p + ("type",), f"Duplicate value: {ctype!r}")
        seen.add(ctype)
        if c.get("status") not in ("True", "False", "Unknown"):
            raise FieldError(p + ("status",), f"Unsupported value: {c.get('status')!r}: supported values: "
                                              '"False", "True", "Unknown"')
        reason = c.get("reason")
        if not reason:
            raise FieldError(p + ("reason",), "Required value")
        if len(str(reason)) > 1024 or not _REASON.match(str(reason)):
            raise FieldError(p + ("reason",), f"Invalid value: {reason!r}: a condition reason must start with an "
                                              "alphabetic character, optionally followed by a string of alphanumeric "
                                              "characters or '_,:', and must end with an alphanumeric character or '_'")
        if not c.get("lastTransitionTime"):
            raise FieldError(p + ("lastTransitionTime",), "Required value: must be set")
        if len(str(c.get("message") or "")) > 32768:
            raise FieldError(p + ("message",), "Too long: may not be more than 32768 bytes")
        og = c.get("observedGeneration")
        if og is not None and (not isinstance(og, int) or og < 0):
            raise FieldError(p + ("observedGeneration",), f"Invalid value: {og!r}: must be greater than or equal to zero")


def _interface_address(path: tuple[object, ...], text: Any) -> None:
    if not isinstance(text, str):
        raise FieldError(path, "must be a string")
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        raise FieldError(path, f"Invalid value: {text!r}: must be a valid address in CIDR form, "
                               "(e.g. 10.9.8.7/24 or 2001:db8::1/64)") from None
    if "/" not in text:
        raise FieldError(path, f"Invalid value: {text!r}: must be a valid address in CIDR form, "
                               "(e.g. 10.9.8.7/24 or 2001:db8::1/64)")
    if str(iface) != text:
        raise FieldError(path, f"Invalid value: {text!r}: must be in canonical form ({str(iface)!r})")


def validate_claim_devices(devices: Any, allocated: Iterable[DeviceKey], path: tuple[object, ...] = ("status", "devices")) -> None:
    """Validate ``status.devices`` against the claim's current allocation results."""
    if devices is None:
        return
    if not isinstance(devices, list):
        raise FieldError(path, "must be a list")
    allowed = set(allocated)
    keys: set[DeviceKey] = set()
    for i, d in enumerate(devices):
        p = path + (i,)
        if not isinstance(d, dict):
            raise FieldError(p, "must be an object")
        unknown = set(d) - {"driver", "pool", "device", "shareID", "conditions", "data", "networkData"}
        if unknown:
            raise FieldError(p + (sorted(unknown)[0],), "unknown field")
        for k in ("driver", "pool", "device"):
            if not d.get(k):
                raise FieldError(p + (k,), "Required value")
        check_dns_subdomain(p + ("driver",), str(d["driver"]), 63)
        for part in str(d["pool"]).split("/"):
            check_dns_subdomain(p + ("pool",), part)
        check_dns_label(p + ("device",), str(d["device"]))
        share = d.get("shareID")
        if share is not None and not _UUID.match(str(share)):
            raise FieldError(p + ("shareID",), f"Invalid value: {share!r}: must be a lowercase UUID in 8-4-4-4-12 format")
        key: DeviceKey = (d["driver"], d["pool"], d["device"], share)
        if key in keys:
            raise FieldError(p, f"Duplicate value: {'/'.join(x for x in key if x)}")
        keys.add(key)
        if key not in allowed:
            raise FieldError(p, f"Invalid value: {'/'.join(x for x in key if x)}: must be an allocated device in the claim")
        validate_conditions(d.get("conditions"), p + ("conditions",), MAX_DEVICE_CONDITIONS)
        if "data" in d and d["data"] is not None:
            if not isinstance(d["data"], dict):
                raise FieldError(p + ("data",), "Invalid value: <value omitted>: must be a valid JSON object")
            size = len(json.dumps(d["data"], separators=(",", ":")).encode())
            if size > MAX_DATA_BYTES:
                raise FieldError(p + ("data",), f"Too long: may not be more than {MAX_DATA_BYTES} bytes")
        nd = d.get("networkData")
        if nd is not None:
            np_ = p + ("networkData",)
            if not isinstance(nd, dict):
                raise FieldError(np_, "must be an object")
            unknown = set(nd) - {"interfaceName", "ips", "hardwareAddress"}
            if unknown:
                raise FieldError(np_ + (sorted(unknown)[0],), "unknown field")
            if len(str(nd.get("interfaceName") or "").encode()) > MAX_INTERFACE_NAME:
                raise FieldError(np_ + ("interfaceName",), f"Too long: may not be more than {MAX_INTERFACE_NAME} bytes")
            if len(str(nd.get("hardwareAddress") or "").encode()) > MAX_HARDWARE_ADDRESS:
                raise FieldError(np_ + ("hardwareAddress",), f"Too long: may not be more than {MAX_HARDWARE_ADDRESS} bytes")
            ips = nd.get("ips") or []
            if not isinstance(ips, list):
                raise FieldError(np_ + ("ips",), "must be a list")
            if len(ips) > MAX_IPS:
                raise FieldError(np_ + ("ips",), f"Too many: {len(ips)}: must have at most {MAX_IPS} items")
            for j, ip in enumerate(ips):
                _interface_address(np_ + ("ips", j), ip)
                if ip in ips[:j]:
                    raise FieldError(np_ + ("ips", j), f"Duplicate value: {ip!r}")
