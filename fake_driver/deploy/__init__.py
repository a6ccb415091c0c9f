"""Manifests that install the fake DRA drivers in a real cluster.

The YAML files next to this module hold the fixed parts (namespace, service accounts, RBAC with
a comment per rule, the kubelet plugin DaemonSet, the controller Deployment); they carry
``@TOKEN@`` placeholders that :func:`manifests` fills in. The DeviceClasses are not stored here:
they come from :func:`fake_driver.classes.device_classes`, the same ones the reference backend
uses.

    from drakit.fake_driver.deploy import manifests
    objs = manifests(image="drakit/fake-driver:dev")      # apply in this order

``drakit driver manifests`` prints the same objects as a YAML stream.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata, resources
from typing import Any

import yaml

from drakit.fake_driver.classes import device_classes
from drakit.fake_hw.shapes import DEFAULT_SHAPE
from drakit.fake_hw.shapes import bundled_shapes
from drakit.fake_hw.vendors import VENDORS

NAMESPACE = "drakit-system"
PART_OF = {"app.kubernetes.io/part-of": "drakit"}
KNOWN_DRIVERS: tuple[str, ...] = tuple(v.driver for v in VENDORS)

_FILES = ("namespace.yaml", "serviceaccounts.yaml", "rbac.yaml", "controller.yaml")
_PLUGIN_FILE = "kubelet-plugin.yaml"
_TOKEN = re.compile(r"@[A-Z]+@")
# Apply order: what a later object refers to exists first (namespace before its contents,
# roles before bindings, classes before the drivers whose devices they select).
_KIND_ORDER = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DeviceClass",
               "Deployment", "DaemonSet")


def _version() -> str:
    try:
        return metadata.version("drakit")
    except metadata.PackageNotFoundError:
        return "dev"


DEFAULT_IMAGE = f"drakit/fake-driver:{_version()}"
"""drakit's own image (``drakit image build``, :mod:`clusters.images`); a pinned tag, so a node
that has it never tries to pull it."""


def plugin_name(driver: str) -> str:
    """The DaemonSet of one driver: ``gpu.acme.example.com`` -> ``drakit-plugin-gpu-acme-example-com``."""
    return "drakit-plugin-" + re.sub(r"[^a-z0-9]+", "-", driver.lower()).strip("-")


def manifests(image: str = DEFAULT_IMAGE, shape: str = DEFAULT_SHAPE,
              drivers: Sequence[str] | None = None, api_server: str | None = None) -> list[dict[str, Any]]:
    """Every object that installs the fake drivers, in apply order.

    ``shape`` is the bundled fake_hw node shape every node's plugin emulates; ``drivers`` the
    fake drivers to run (default: all of them), one kubelet plugin DaemonSet each.
    ``api_server`` (``HOST:PORT``), only for clusters whose pods cannot reach the ``kubernetes``
    Service (no kube-proxy, no pod network to the host, as drakit's local cluster): the pods run
    in the host's network namespace and reach the API server at that address. Bad input raises
    ``ValueError`` with one line saying what is wrong.
    """
    chosen = list(KNOWN_DRIVERS if drivers is None else dict.fromkeys(drivers))
    unknown = [d for d in chosen if d not in KNOWN_DRIVERS]
    if unknown or not chosen:
        raise ValueError(f"unknown fake driver(s) {', '.join(map(repr, unknown)) or '(none given)'}: "
                         f"known are {', '.join(KNOWN_DRIVERS)}")
    if shape not in bundled_shapes():
        raise ValueError(f"unknown hardware shape {shape!r}: the image knows only the bundled "
                         f"shapes {', '.join(bundled_shapes())}")
    if not image or any(c.isspace() for c in image):
        raise ValueError(f"bad image reference {image!r}")

    common = {"IMAGE": image, "SHAPE": shape}
    objs: list[dict[str, Any]] = []
    for name in _FILES:
        objs += [_fill(doc, common, chosen) for doc in _load(name)]
    for driver in chosen:
        values = {**common, "DRIVER": driver, "NAME": plugin_name(driver)}
        objs += [_fill(doc, values, chosen) for doc in _load(_PLUGIN_FILE)]
    for cls in device_classes():
        cls = copy.deepcopy(cls)
        cls["metadata"].setdefault("labels", {}).update(PART_OF)
        objs.append(cls)
    if api_server is not None:
        host, port = _host_port(api_server)
        for obj in objs:
            if obj["kind"] in ("Deployment", "DaemonSet"):
                pod = obj["spec"]["template"]["spec"]
                pod["hostNetwork"] = True
                for container in pod["containers"]:
                    container.setdefault("env", []).extend([
                        {"name": "KUBERNETES_SERVICE_HOST", "value": host},
                        {"name": "KUBERNETES_SERVICE_PORT", "value": port}])
    return sorted(objs, key=lambda o: _KIND_ORDER.index(o["kind"]))


def _host_port(text: str) -> tuple[str, str]:
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c.isspace() or c in "/@" for c in host):
        raise ValueError(f"bad API server address {text!r}: expected HOST:PORT, e.g. 127.0.0.1:6443")
    return host, port


def to_yaml(objs: Iterable[Mapping[str, Any]]) -> str:
    """A YAML stream, one document per object, keys in the order given."""
    return str(yaml.safe_dump_all(list(objs), sort_keys=False, default_flow_style=False))


def _load(name: str) -> list[dict[str, Any]]:
    text = (resources.files(__package__) / name).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _fill(node: Any, values: Mapping[str, str], drivers: Sequence[str]) -> Any:
    """Replace ``@TOKEN@`` in every string; a list item ``"@DRIVERS@"`` becomes the driver names."""
    if isinstance(node, dict):
        return {k: _fill(v, values, drivers) for k, v in node.items()}
    if isinstance(node, list):
        out: list[Any] = []
        for item in node:
            out += list(drivers) if item == "@DRIVERS@" else [_fill(item, values, drivers)]
        return out
    if isinstance(node, str) and "@" in node:
        def sub(m: re.Match[str]) -> str:
            key = m.group(0).strip("@")
            if key not in values:
                raise KeyError(f"fake_driver/deploy: token {m.group(0)} has no value here")
            return values[key]
        return _TOKEN.sub(sub, node)
    return node
