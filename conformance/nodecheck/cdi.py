"""Reading and checking CDI spec files and device ids (Container Device Interface up to 1.1.0).

Independent of the fake driver's writer: this is what node-check holds any driver's output to.

- ``parse_device_id("vendor/class=name")``: the parts, or ``CdiError``. Vendor and class start
  with a letter, end with a letter or digit and contain letters, digits, ``_``, ``-``, ``.``;
  the device name starts and ends with a letter or digit and may contain ``_ - . :`` inside.
- ``check_spec(doc)``: problems of one spec (unknown fields, bad names, a ``cdiVersion`` lower
  than the fields used require).
- ``SpecIndex(dirs)``: every device of every ``.json``/``.yaml`` spec in the folders, with the
  problems found; later folders take precedence, a device defined twice in one folder is a
  conflict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..errors import LoadError
from ..inputs import DRIVER_FILE, InputError
from ..datafiles import read_document

KNOWN_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
_VENDOR_OR_CLASS = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")
_DEVICE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?\Z")
_TOP = {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}
_DEVICE_FIELDS = {"name", "annotations", "containerEdits"}
_EDITS = {"env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", "netDevices"}
_MOUNT = {"hostPath", "containerPath", "type", "options"}
_NODE = {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}
_HOOK = {"hookName", "path", "args", "env", "timeout"}
_NET = {"hostInterfaceName", "name"}


class CdiError(ValueError):
    pass


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def parse_device_id(text: str) -> tuple[str, str, str]:
    """``vendor/class=name`` -> (vendor, class, name); raises ``CdiError``."""
    kind, eq, name = text.partition("=")
    vendor, slash, klass = kind.partition("/")
    if not eq or not slash:
        raise CdiError(f"{text!r} is not a qualified CDI device name (vendor/class=name)")
    if not _VENDOR_OR_CLASS.match(vendor):
        raise CdiError(f"{text!r}: invalid vendor {vendor!r}")
    if not _VENDOR_OR_CLASS.match(klass):
        raise CdiError(f"{text!r}: invalid class {klass!r}")
    if not _DEVICE.match(name):
        raise CdiError(f"{text!r}: invalid device name {name!r}")
    return vendor, klass, name


def _edits_version(edits: dict[str, Any], where: str, problems: list[str]) -> str:
    need = "0.3.0"
    for key in edits:
        if key not in _EDITS:
            problems.append(f"{where}: unknown field {key!r}")
    for i, mount in enumerate(edits.get("mounts") or []):
        extra = set(mount) - _MOUNT
        if extra:
            problems.append(f"{where}.mounts[{i}]: unknown field(s) {sorted(extra)}")
        if not mount.get("hostPath") or not mount.get("containerPath"):
            problems.append(f"{where}.mounts[{i}]: hostPath and containerPath are required")
        if "type" in mount:
            need = max(need, "0.4.0", key=_version_key)
    for i, node in enumerate(edits.get("deviceNodes") or []):
        extra = set(node) - _NODE
        if extra:
            problems.append(f"{where}.deviceNodes[{i}]: unknown field(s) {sorted(extra)}")
        if not node.get("path"):
            problems.append(f"{where}.deviceNodes[{i}]: path is required")
        if "hostPath" in node:
            need = max(need, "0.5.0", key=_version_key)
    for i, hook in enumerate(edits.get("hooks") or []):
        extra = set(hook) - _HOOK
        if extra:
            problems.append(f"{where}.hooks[{i}]: unknown field(s) {sorted(extra)}")
    for i, net in enumerate(edits.get("netDevices") or []):
        extra = set(net) - _NET
        if extra:
            problems.append(f"{where}.netDevices[{i}]: unknown field(s) {sorted(extra)}")
    for i, env in enumerate(edits.get("env") or []):
        if not isinstance(env, str) or "=" not in env:
            problems.append(f"{where}.env[{i}]: expected KEY=value, got {env!r}")
    if "intelRdt" in edits or "additionalGids" in edits:
        need = max(need, "0.7.0", key=_version_key)
    if "netDevices" in edits:
        need = "1.1.0"
    return need


def check_spec(doc: Any) -> tuple[list[str], str]:
    """(problems, minimum cdiVersion the content needs) for one parsed spec."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        return ["a spec must be a mapping"], "0.3.0"
    for key in set(doc) - _TOP:
        problems.append(f"unknown field {key!r}")
    need = "0.3.0"
    version = doc.get("cdiVersion")
    if version not in KNOWN_VERSIONS:
        problems.append(f"cdiVersion {version!r} is not a known CDI version ({', '.join(KNOWN_VERSIONS)})")
    kind = doc.get("kind")
    vendor, slash, klass = str(kind).partition("/")
    if not isinstance(kind, str) or not slash or not _VENDOR_OR_CLASS.match(vendor) \
            or not _VENDOR_OR_CLASS.match(klass):
        problems.append(f"kind {kind!r} is not vendor/class")
    elif "." in klass:
        need = max(need, "0.6.0", key=_version_key)
    if "annotations" in doc:
        need = max(need, "0.6.0", key=_version_key)
    devices = doc.get("devices")
    if not isinstance(devices, list) or not devices:
        problems.append("devices: at least one device is required")
        devices = []
    names: set[str] = set()
    for i, device in enumerate(devices):
        if not isinstance(device, dict):
            problems.append(f"devices[{i}]: expected a mapping")
            continue
        for key in set(device) - _DEVICE_FIELDS:
            problems.append(f"devices[{i}]: unknown field {key!r}")
        name = device.get("name")
        if not isinstance(name, str) or not _DEVICE.match(name):
            problems.append(f"devices[{i}].name: invalid device name {name!r}")
        else:
            if name in names:
                problems.append(f"devices[{i}].name: duplicate device {name!r}")
            names.add(name)
            if name[0].isdigit():
                need = max(need, "0.5.0", key=_version_key)
        if "annotations" in device:
            need = max(need, "0.6.0", key=_version_key)
        edits = device.get("containerEdits")
        if not isinstance(edits, dict):
            problems.append(f"devices[{i}].containerEdits: required")
        else:
            need = max(need, _edits_version(edits, f"devices[{i}].containerEdits", problems),
                       key=_version_key)
    if isinstance(doc.get("containerEdits"), dict):
        need = max(need, _edits_version(doc["containerEdits"], "containerEdits", problems),
                   key=_version_key)
    if version in KNOWN_VERSIONS and _version_key(version) < _version_key(need):
        problems.append(f"cdiVersion {version} is lower than {need}, which the spec's content needs")
    return problems, need


@dataclass(frozen=True, slots=True)
class SpecDevice:
    qualified: str
    path: Path
    device: dict[str, Any]
    spec: dict[str, Any]


@dataclass
class SpecIndex:
    """All CDI devices defined in ``dirs`` (later folders override earlier ones)."""

    dirs: tuple[Path, ...]
    devices: dict[str, SpecDevice] = field(default_factory=dict)
    problems: dict[str, list[str]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    @classmethod
    def load(cls, dirs: Iterable[Path]) -> SpecIndex:
        index = cls(tuple(dirs))
        for folder in index.dirs:
            in_dir: dict[str, SpecDevice] = {}
            conflicts: set[str] = set()
            if not folder.is_dir():
                continue
            for path in sorted(folder.iterdir()):
                if path.suffix not in (".json", ".yaml", ".yml") or not path.is_file():
                    continue
                index.files.append(path)
                try:  # drakit's one reader and bounded parsers: the driver wrote it
                    doc = read_document(path, DRIVER_FILE)
                except (InputError, LoadError) as err:
                    index.problems[str(path)] = [f"cannot parse: {str(err).splitlines()[0]}"]
                    continue
                problems, _ = check_spec(doc)
                if problems:
                    index.problems[str(path)] = problems
                    continue
                for device in doc["devices"]:
                    qualified = f"{doc['kind']}={device['name']}"
                    if qualified in in_dir:
                        conflicts.add(qualified)
                        index.problems.setdefault(str(path), []).append(
                            f"device {qualified} also defined in {in_dir[qualified].path}")
                    in_dir[qualified] = SpecDevice(qualified, path, device, doc)
            for qualified in conflicts:
                in_dir.pop(qualified, None)
            index.devices.update(in_dir)
        return index
