"""Reading and checking device metadata files (``metadata.resource.k8s.io``, KEP-5304).

A metadata file is a JSON stream: one ``DeviceMetadata`` object per API version. A consumer
takes the first object whose ``apiVersion`` it knows; node-check additionally requires the
``v1beta1`` object (1.37) and checks every object of a known version.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

GROUP = "metadata.resource.k8s.io"
KNOWN = (f"{GROUP}/v1beta1", f"{GROUP}/v1alpha1")
REQUIRED = f"{GROUP}/v1beta1"
CONTAINER_ROOT = "/var/run/kubernetes.io/dra-device-attributes"
_ATTR_KINDS = {"int", "bool", "string", "version", "ints", "bools", "strings", "versions"}
_CONTAINER_PATH = re.compile(
    r"^/var/run/kubernetes\.io/dra-device-attributes/(resourceclaims|resourceclaimtemplates)/"
    r"(?P<claim>[^/]+)/(?P<request>[^/]+)/(?P<driver>[^/]+)-metadata\.json$")


def parse_stream(text: str) -> list[Any]:
    """Every JSON value in ``text``, in order; raises ``ValueError`` on malformed input."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        value, i = decoder.raw_decode(text, i)
        out.append(value)


def parse_container_path(path: str) -> dict[str, str] | None:
    m = _CONTAINER_PATH.match(path)
    return m.groupdict() if m else None


def check_object(obj: Any, *, claim: dict[str, Any], driver: str, request: str,
                 expected: Iterable[tuple[str, str]]) -> list[str]:
    """Problems of one metadata object for base request ``request`` of ``claim``, whose devices
    of ``driver`` should be exactly ``expected`` ((pool, device) pairs)."""
    if not isinstance(obj, dict):
        return ["a metadata object must be a JSON object"]
    problems = []
    if obj.get("kind") != "DeviceMetadata":
        problems.append(f"kind is {obj.get('kind')!r}, expected DeviceMetadata")
    meta = obj.get("metadata") or {}
    cmeta = claim["metadata"]
    for key in ("name", "namespace", "uid"):
        if meta.get(key) != cmeta.get(key, "" if key == "namespace" else None):
            problems.append(f"metadata.{key} is {meta.get(key)!r}, expected {cmeta.get(key)!r}")
    generation = meta.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
        problems.append(f"metadata.generation must be a positive integer, got {generation!r}")
    requests = obj.get("requests")
    if not isinstance(requests, list) or len(requests) != 1:
        return problems + [f"requests must list exactly this file's request, got {requests!r}"]
    entry = requests[0]
    name = entry.get("name", "") if isinstance(entry, dict) else ""
    if name.partition("/")[0] != request:
        problems.append(f"requests[0].name is {name!r}, expected {request!r} (or {request}/<sub>)")
    got = []
    for i, device in enumerate((entry.get("devices") if isinstance(entry, dict) else None) or []):
        where = f"requests[0].devices[{i}]"
        if device.get("driver") != driver:
            problems.append(f"{where}.driver is {device.get('driver')!r}, expected {driver!r}")
        got.append((device.get("pool"), device.get("name")))
        for attr, value in (device.get("attributes") or {}).items():
            if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in _ATTR_KINDS:
                problems.append(f"{where}.attributes[{attr!r}]: exactly one of "
                                f"{', '.join(sorted(_ATTR_KINDS))} expected, got {value!r}")
        network = device.get("networkData")
        if network is not None:
            extra = set(network) - {"interfaceName", "ips", "hardwareAddress"}
            if extra:
                problems.append(f"{where}.networkData: unknown field(s) {sorted(extra)}")
    if sorted(got) != sorted(expected):
        problems.append(f"devices are {sorted(got)}, expected the allocated {sorted(expected)}")
    return problems


def check_stream(text: str, **kwargs: Any) -> list[str]:
    """Problems of a whole metadata file (see ``check_object`` for the arguments)."""
    try:
        objects = parse_stream(text)
    except ValueError as err:
        return [f"not a JSON stream: {err}"]
    versions = [o.get("apiVersion") if isinstance(o, dict) else None for o in objects]
    problems = []
    if REQUIRED not in versions:
        problems.append(f"no {REQUIRED} object (found {versions})")
    for version, obj in zip(versions, objects):
        if version in KNOWN:
            problems += [f"{version}: {p}" for p in check_object(obj, **kwargs)]
    return problems
