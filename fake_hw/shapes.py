"""Node shapes: YAML descriptions of what hardware an emulated node carries.

A shape names sockets, NUMA nodes per socket, and groups of GPUs and NICs, each group placed on
a NUMA node and optionally on a shared PCIe root complex. Shapes are validated once, here; the
rest of ``fake_hw`` trusts a ``Shape``. Bad input gives a ``ShapeError`` whose message is one
line: ``<file>: <field path>: <what is wrong>``.

Schema (unknown fields are errors)::

    name: server-8gpu            # DNS label
    description: free text       # optional
    sockets: 2                   # default 1
    numaPerSocket: 1             # default 1; NUMA node ids are socket * numaPerSocket + i
    partitioning: none           # none | partitionable (GPUs whose model has partition profiles)
    numaNodeForm: scalar         # scalar | list: form of resource.kubernetes.io/numaNode
    gpus:
      - {vendor: acme, model: acme-a100, count: 2, numa: 0, pcieRoot: 0}
    nics:
      - {vendor: swift, model: swift-cx100, count: 1, numa: 0, pcieRoot: 0, vfs: 4}

``numa: null`` places a device without NUMA affinity. Devices sharing a ``pcieRoot`` number sit
on the same root complex; devices without one get a root of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Mapping, cast

from drakit.fake_hw.vendors import Vendor, find_vendor

Partitioning = Literal["none", "partitionable"]
NumaNodeForm = Literal["scalar", "list"]

DEFAULT_SHAPE = "server-8gpu"  # the node shape the fake driver serves when none is named
MAX_GROUP_COUNT = 256
MAX_DEVICES_PER_ROOT = 14
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_TOP_FIELDS = ("name", "description", "sockets", "numaPerSocket", "partitioning", "numaNodeForm",
               "gpus", "nics")
_GPU_FIELDS = ("vendor", "model", "count", "numa", "pcieRoot")
_NIC_FIELDS = _GPU_FIELDS + ("vfs",)


class ShapeError(ValueError):
    """A shape that cannot be used; the message says which file and field, on one line."""


@dataclass(frozen=True, slots=True)
class DeviceGroup:
    """``count`` identical devices of one vendor and model, placed together."""

    vendor: str
    model: str
    count: int = 1
    numa: int | None = 0
    pcie_root: int | None = None
    vfs: int = 0


@dataclass(frozen=True, slots=True)
class Shape:
    """A validated node shape. ``source`` names the file it came from (messages only; shapes
    with equal content compare equal wherever they were read from)."""

    name: str
    sockets: int
    numa_per_socket: int
    gpus: tuple[DeviceGroup, ...]
    nics: tuple[DeviceGroup, ...]
    partitioning: Partitioning = "none"
    numa_node_form: NumaNodeForm = "scalar"
    description: str = ""
    source: str = field(default="<shape>", compare=False)

    @property
    def numa_node_count(self) -> int:
        return self.sockets * self.numa_per_socket

    def groups(self) -> tuple[tuple[str, DeviceGroup], ...]:
        """Every group with its field path (``gpus[0]``), GPUs first, in file order."""
        return tuple((f"gpus[{i}]", g) for i, g in enumerate(self.gpus)) + tuple(
            (f"nics[{i}]", g) for i, g in enumerate(self.nics)
        )


class _Checker:
    """Small helpers that raise ``ShapeError`` with the file and field path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, message: str) -> ShapeError:
        return ShapeError(f"{self.source}: {path}: {message}")

    def mapping(self, value: object, path: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected a mapping, got {_kind(value)}")
        for key in value:
            if key not in allowed:
                raise self.fail(_join(path, str(key)),
                                f"unknown field (allowed: {', '.join(allowed)})")
        return value

    def integer(self, value: object, path: str, low: int, high: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {_kind(value)}")
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise self.fail(path, f"must be {bound}, got {value}")
        return value

    def choice(self, value: object, path: str, options: tuple[str, ...]) -> str:
        if value not in options:
            raise self.fail(path, f"must be one of {', '.join(options)}, got {value!r}")
        return str(value)


def parse_shape(data: object, source: str = "<shape>") -> Shape:
    """Validate a shape already read from YAML and return it; raise ``ShapeError`` if invalid."""
    check = _Checker(source)
    top = check.mapping(data, "shape", _TOP_FIELDS) if data is not None else None
    if top is None:
        raise ShapeError(f"{source}: shape: the file is empty")
    name = top.get("name")
    if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > 63:
        raise check.fail("name", f"must be a DNS label (lower-case, digits, '-'), got {name!r}")
    description = top.get("description", "")
    if not isinstance(description, str):
        raise check.fail("description", f"expected a string, got {_kind(description)}")
    sockets = check.integer(top.get("sockets", 1), "sockets", 1, 16)
    per_socket = check.integer(top.get("numaPerSocket", 1), "numaPerSocket", 1, 16)
    partitioning = check.choice(top.get("partitioning", "none"), "partitioning",
                                ("none", "partitionable"))
    numa_form = check.choice(top.get("numaNodeForm", "scalar"), "numaNodeForm",
                             ("scalar", "list"))
    numa_count = sockets * per_socket
    gpus = _groups(check, top.get("gpus", []), "gpus", "gpu", numa_count)
    nics = _groups(check, top.get("nics", []), "nics", "nic", numa_count)
    if not gpus and not nics:
        raise check.fail("gpus", "a shape needs at least one GPU or NIC")
    shape = Shape(
        name=name, sockets=sockets, numa_per_socket=per_socket, gpus=gpus, nics=nics,
        partitioning=cast(Partitioning, partitioning),
        numa_node_form=cast(NumaNodeForm, numa_form),
        description=description, source=source,
    )
    _check_roots(check, shape)
    if partitioning == "partitionable" and not any(_partitions(g) for g in gpus):
        raise check.fail("partitioning", "no GPU in this shape has partition profiles")
    return shape


def _groups(check: _Checker, value: object, list_name: str, kind: str,
            numa_count: int) -> tuple[DeviceGroup, ...]:
    if not isinstance(value, list):
        raise check.fail(list_name, f"expected a list, got {_kind(value)}")
    fields = _NIC_FIELDS if kind == "nic" else _GPU_FIELDS
    groups = []
    for i, item in enumerate(value):
        path = f"{list_name}[{i}]"
        entry = check.mapping(item, path, fields)
        if "vendor" not in entry:
            raise check.fail(f"{path}.vendor", "required field is missing")
        vendor = find_vendor(str(entry["vendor"]))
        if vendor is None:
            raise check.fail(f"{path}.vendor", f"unknown vendor {entry['vendor']!r}")
        if vendor.kind != kind:
            raise check.fail(f"{path}.vendor",
                             f"{vendor.key!r} makes {vendor.kind}s, not {kind}s")
        model = entry.get("model", vendor.default_model)
        if model not in vendor.model_names:
            raise check.fail(f"{path}.model", f"unknown model {model!r} for vendor {vendor.key} "
                                              f"(known: {', '.join(vendor.model_names)})")
        count = check.integer(entry.get("count", 1), f"{path}.count", 1, MAX_GROUP_COUNT)
        numa = entry.get("numa", 0)
        if numa is not None:
            numa = check.integer(numa, f"{path}.numa", 0)
            if numa >= numa_count:
                raise check.fail(f"{path}.numa", f"NUMA node {numa} does not exist "
                                                 f"(this shape has nodes 0..{numa_count - 1})")
        root = entry.get("pcieRoot")
        if root is not None:
            root = check.integer(root, f"{path}.pcieRoot", 0)
        vfs = _vfs(check, entry, path, vendor, str(model))
        groups.append(DeviceGroup(vendor.key, str(model), count, numa, root, vfs))
    return tuple(groups)


def _partitions(group: DeviceGroup) -> bool:
    vendor = find_vendor(group.vendor)
    return vendor is not None and bool(vendor.gpu_model(group.model).partitions)


def _vfs(check: _Checker, entry: Mapping[str, Any], path: str, vendor: Vendor, model: str) -> int:
    if "vfs" not in entry:
        return 0
    limit = vendor.nic_model(model).max_vfs
    return check.integer(entry["vfs"], f"{path}.vfs", 0, limit)


def _check_roots(check: _Checker, shape: Shape) -> None:
    """Devices on one root complex must share its NUMA node, and a root has room for 14."""
    owner: dict[int, tuple[str, int | None]] = {}
    load: dict[int, int] = {}
    for path, group in shape.groups():
        if group.pcie_root is None:
            continue  # each device gets a root of its own
        root = group.pcie_root
        first = owner.setdefault(root, (path, group.numa))
        if first[1] != group.numa:
            raise check.fail(f"{path}.pcieRoot", f"root {root} is on NUMA node {first[1]} "
                                                 f"({first[0]}), not {group.numa}")
        load[root] = load.get(root, 0) + group.count
        if load[root] > MAX_DEVICES_PER_ROOT:
            raise check.fail(f"{path}.pcieRoot", f"root {root} would hold {load[root]} devices, "
                                                 f"at most {MAX_DEVICES_PER_ROOT} fit")


def bundled_shapes() -> tuple[str, ...]:
    """Names of the shapes shipped in ``fake_hw/profiles``, sorted."""
    folder = resources.files("drakit.fake_hw") / "profiles"
    return tuple(sorted(p.name[: -len(".yaml")] for p in folder.iterdir()
                        if p.name.endswith(".yaml")))


def is_shape_file(name_or_path: str | Path) -> bool:
    """Whether a shape is named by a file path (``./gpus.yaml``) rather than a bundled name."""
    text = str(name_or_path)
    return isinstance(name_or_path, Path) or "/" in text or text.endswith((".yaml", ".yml"))


def load_shape(name: str) -> Shape:
    """Load a bundled shape by name (``server-8gpu``). A shape file is read at the edge, by
    ``drakit.conformance.hwshapes.read_shape`` (drakit's one input reader), and parsed here by
    :func:`shape_from_text`: the pure core reads no file a user names."""
    text_path = str(name)
    if is_shape_file(name):
        raise ShapeError(f"{text_path}: a shape file is read by drakit.conformance.hwshapes.read_shape, "
                         f"not by fake_hw")
    if text_path not in bundled_shapes():
        raise ShapeError(f"unknown shape {text_path!r} (bundled: {', '.join(bundled_shapes())})")
    resource = resources.files("drakit.fake_hw") / "profiles" / f"{text_path}.yaml"
    return shape_from_text(resource.read_text(encoding="utf-8"), f"fake_hw/profiles/{text_path}.yaml")


def shape_from_text(text: str, source: str = "<shape>") -> Shape:
    """Parse YAML text and validate it as a shape."""
    from drakit.conformance.errors import LoadError
    from drakit.conformance.yamlmarks import load_documents
    try:  # the kit's bounded loader: depth and alias expansion are limited while parsing
        docs = [doc for _, doc in load_documents(text, source)]
    except LoadError as err:
        where = f"line {err.line}: " if err.line else ""
        raise ShapeError(f"{source}: {where}invalid YAML: {err.message.removeprefix('YAML: ')}") from None
    if len(docs) > 1:
        raise ShapeError(f"{source}: a shape file holds one YAML document, not {len(docs)}")
    return parse_shape(docs[0] if docs else None, source)


def _join(path: str, key: str) -> str:
    return key if path == "shape" else f"{path}.{key}"


def _kind(value: object) -> str:
    for kind, name in ((bool, "a boolean"), (dict, "a mapping"), (list, "a list"), (str, "a string"),
                       (int, "an integer"), (float, "a number"), (type(None), "nothing")):
        if isinstance(value, kind):
            return name
    return type(value).__name__
