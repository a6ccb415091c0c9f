"""CDI specs the fake driver writes for prepared claims (Container Device Interface 1.1.0).

One transient spec per claim, in the CDI folder (``/var/run/cdi`` on a node):

- kind ``k8s.<driver>/<class>`` where the class is the device family (``gpu`` or ``nic``);
- file ``k8s.<driver>-<class>_<claimUID>.json``;
- one CDI device per allocated device, named ``<claimUID>-<device>``, so a name is never reused
  by a later claim (container runtimes cache specs);
- container edits: environment variables that tell the workload which fake device it got.

Fully qualified CDI device ids are ``<vendor>/<class>=<name>``. Spec files are mode 0644: the
container runtime reads them, they hold nothing secret, and the CDI reference library writes
its specs world-readable too.
"""

from __future__ import annotations

import functools
import json
import re
from json.encoder import encode_basestring_ascii as _quote
from pathlib import Path
from typing import Any, Iterable, Sequence

from drakit.fake_hw.inventory import Device

from .files import atomic_write

CDI_VERSION = "1.1.0"
SPEC_MODE = 0o644


def cdi_vendor(driver: str) -> str:
    return f"k8s.{driver}"


def cdi_class(device: Device) -> str:
    """The CDI class of a fake device: its family, ``gpu`` or ``nic``."""
    return "nic" if device.kind in ("nic", "nic-vf") else "gpu"


def cdi_kind(driver: str, klass: str) -> str:
    return f"{cdi_vendor(driver)}/{klass}"


def qualified_name(kind: str, name: str) -> str:
    return f"{kind}={name}"


def claim_device_name(claim_uid: str, device: str) -> str:
    return f"{claim_uid}-{device}"


def claim_spec_path(cdi_dir: Path, driver: str, klass: str, claim_uid: str) -> Path:
    return cdi_dir / f"{cdi_vendor(driver)}-{klass}_{claim_uid}.json"


def claim_spec_file(cdi_dir: str, driver: str, klass: str, claim_uid: str) -> str:
    """:func:`claim_spec_path` as a string (the prepare path handles strings, not Path objects)."""
    return f"{cdi_dir}/{cdi_vendor(driver)}-{klass}_{claim_uid}.json"


def claim_spec_glob(driver: str, claim_uid: str) -> str:
    """Matches every device spec file of one claim, whatever the class."""
    return f"{cdi_vendor(driver)}-*_{claim_uid}.json"


@functools.lru_cache(maxsize=4096)  # a handful of devices, asked for at every prepare
def _env_key(device_name: str, what: str) -> str:
    return "DRAKIT_" + re.sub(r"[^A-Z0-9]", "_", f"{device_name}_{what}".upper())


def device_env(device: Device) -> list[str]:
    """What a container learns about one fake device, as ``KEY=value`` strings."""
    env = [f"{_env_key(device.name, 'DEVICE')}={device.name}",
           f"{_env_key(device.name, 'PCI_BUS_ID')}={device.pci_bus_id}"]
    if device.uuid:
        env.append(f"{_env_key(device.name, 'UUID')}={device.uuid}")
    if device.mac:
        env.append(f"{_env_key(device.name, 'MAC')}={device.mac}")
    if device.interface:
        env.append(f"{_env_key(device.name, 'INTERFACE')}={device.interface}")
    if device.profile:
        env.append(f"{_env_key(device.name, 'PROFILE')}={device.profile}")
    return env


def claim_spec(driver: str, klass: str, claim_uid: str,
               devices: Sequence[Device]) -> dict[str, Any]:
    """The spec for one claim's devices of one class (devices in allocation order, no repeats)."""
    entries = []
    seen: set[str] = set()
    for device in devices:
        if device.name in seen:
            continue
        seen.add(device.name)
        entries.append({"name": claim_device_name(claim_uid, device.name),
                        "containerEdits": {"env": device_env(device)}})
    return {"cdiVersion": CDI_VERSION, "kind": cdi_kind(driver, klass), "devices": entries}


def mount_spec(kind: str, device_name: str, host_path: Path,
               container_path: str) -> dict[str, Any]:
    """A spec with one device whose only edit is a read-only bind mount."""
    return {
        "cdiVersion": CDI_VERSION,
        "kind": kind,
        "devices": [{
            "name": device_name,
            "containerEdits": {"mounts": [{"hostPath": str(host_path),
                                           "containerPath": container_path,
                                           "options": ["ro", "bind"]}]},
        }],
    }


def spec_bytes(spec: dict[str, Any]) -> bytes:
    """One line of JSON (the C encoder: several times faster than pretty-printing)."""
    return spec_text(spec).encode()


def spec_text(spec: dict[str, Any]) -> str:
    return json.dumps(spec, separators=(",", ":")) + "\n"


def write_spec(path: Path, spec: dict[str, Any]) -> None:
    atomic_write(path, spec_bytes(spec), SPEC_MODE)


def device_edits_text(device: Device) -> str:
    """A device's ``containerEdits`` as JSON text, as :func:`spec_text` writes it (the same for
    every claim: the driver renders it once per device)."""
    return json.dumps({"env": device_env(device)}, separators=(",", ":"))


def claim_spec_text(driver: str, klass: str, claim_uid: str, devices: Sequence[tuple[str, str]]) -> str:
    """``spec_text(claim_spec(...))`` from (device name, :func:`device_edits_text`) pairs, the
    edits not encoded again (devices in allocation order, no repeats)."""
    seen: set[str] = set()
    entries = []
    for name, edits in devices:
        if name in seen:
            continue
        seen.add(name)
        entries.append(f'{{"name":{_quote(claim_device_name(claim_uid, name))},"containerEdits":{edits}}}')
    return (f'{{"cdiVersion":{_quote(CDI_VERSION)},"kind":{_quote(cdi_kind(driver, klass))},'
            f'"devices":[{",".join(entries)}]}}\n')


def spec_device_ids(spec: dict[str, Any]) -> list[str]:
    return [qualified_name(spec["kind"], d["name"]) for d in spec["devices"]]


def specs_by_class(driver: str, claim_uid: str,
                   devices: Iterable[Device]) -> dict[str, dict[str, Any]]:
    """One spec per CDI class used by ``devices``, keyed by class, classes in first-use order."""
    groups: dict[str, list[Device]] = {}
    for device in devices:
        groups.setdefault(cdi_class(device), []).append(device)
    return {klass: claim_spec(driver, klass, claim_uid, members) for klass, members in groups.items()}
