"""Device metadata files (the DRA "downward API", KEP-5304) and the CDI specs that mount them.

For every prepared claim and every request that got at least one device, the plugin writes

- the host file ``<plugin data dir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json``
  (folders 0755, file 0644: the file is bind-mounted read-only into containers whose user may
  not be root, so it must be world-readable; it holds only what the ResourceSlice already
  publishes);
- a CDI spec ``<cdi dir>/<driver>_metadata_<claimUID>_<request>.json`` with kind
  ``<driver>/metadata`` and one device ``<claimUID>_<request>`` that bind-mounts the file at
  ``/var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json``
  (or ``.../resourceclaimtemplates/<pod claim name>/...`` for a claim made from a template);

and appends that CDI id to the first device of the response serving the request. ``request``
is always the base request name; the full ``<request>/<subrequest>`` appears inside the file.

The file is a JSON stream: the same ``DeviceMetadata`` object once per configured API version
(``metadata.resource.k8s.io/v1beta1`` first; optionally ``v1alpha1``), pretty-printed and
separated by newlines.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from . import cdi
from .files import atomic_write, ensure_dir

GROUP = "metadata.resource.k8s.io"
KIND = "DeviceMetadata"
SUPPORTED_VERSIONS = ("v1beta1", "v1alpha1")
REQUIRED_VERSION = "v1beta1"
CONTAINER_ROOT = "/var/run/kubernetes.io/dra-device-attributes"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
HOST_DIR_NAME = "dra-device-metadata"
FILE_MODE = 0o644
DIR_MODE = 0o755


def check_versions(versions: Sequence[str]) -> tuple[str, ...]:
    """Validate the configured metadata versions (v1beta1 is required, order is kept)."""
    if not versions:
        raise ValueError("device metadata needs at least one API version (v1beta1)")
    unknown = [v for v in versions if v not in SUPPORTED_VERSIONS]
    if unknown:
        raise ValueError(f"unknown device metadata version(s) {', '.join(unknown)} "
                         f"(known: {', '.join(SUPPORTED_VERSIONS)})")
    if REQUIRED_VERSION not in versions:
        raise ValueError(f"device metadata version {REQUIRED_VERSION} is required")
    if len(set(versions)) != len(versions):
        raise ValueError("device metadata versions repeat")
    return tuple(versions)


def base_request(name: str) -> str:
    return name.partition("/")[0]


def host_dir(plugin_data_dir: Path, namespace: str, claim_name: str) -> Path:
    return plugin_data_dir / HOST_DIR_NAME / f"{namespace}_{claim_name}"


def host_file(plugin_data_dir: Path, namespace: str, claim_name: str, request: str) -> Path:
    return host_dir(plugin_data_dir, namespace, claim_name) / request / "metadata.json"


def spec_path(cdi_dir: Path, driver: str, claim_uid: str, request: str) -> Path:
    return cdi_dir / f"{driver}_metadata_{claim_uid}_{request}.json"


def spec_glob(driver: str, claim_uid: str) -> str:
    return f"{driver}_metadata_{claim_uid}_*.json"


def cdi_kind(driver: str) -> str:
    return f"{driver}/metadata"


def cdi_device(claim_uid: str, request: str) -> str:
    return f"{claim_uid}_{request}"


def cdi_id(driver: str, claim_uid: str, request: str) -> str:
    return cdi.qualified_name(cdi_kind(driver), cdi_device(claim_uid, request))


def container_path(driver: str, claim_name: str, request: str,
                   pod_claim_name: str | None) -> str:
    if pod_claim_name:
        return (f"{CONTAINER_ROOT}/resourceclaimtemplates/{pod_claim_name}/{request}/"
                f"{driver}-metadata.json")
    return f"{CONTAINER_ROOT}/resourceclaims/{claim_name}/{request}/{driver}-metadata.json"


@dataclass(frozen=True, slots=True)
class MetadataDevice:
    """One device as the metadata file names it."""

    driver: str
    pool: str
    name: str
    attributes: dict[str, Any]
    network_data: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"driver": self.driver, "pool": self.pool, "name": self.name,
                               "attributes": self.attributes}
        if self.network_data:
            out["networkData"] = self.network_data
        return out


def metadata_object(version: str, claim: dict[str, Any], request: str,
                    devices: Sequence[MetadataDevice], generation: int = 1) -> dict[str, Any]:
    """One ``DeviceMetadata`` object for one request (``request`` is the full request name)."""
    meta = claim["metadata"]
    obj: dict[str, Any] = {
        "kind": KIND,
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {"name": meta["name"], "namespace": meta.get("namespace", ""),
                     "uid": meta["uid"], "generation": generation},
    }
    pod_claim = (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION)
    if pod_claim:
        obj["podClaimName"] = pod_claim
    obj["requests"] = [{"name": request, "devices": [d.to_wire() for d in devices]}]
    return obj


def stream_bytes(objects: Sequence[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(o, indent=2) + "\n" for o in objects).encode()


@dataclass(frozen=True, slots=True)
class MetadataFiles:
    """What writing one request's metadata produced."""

    host_file: Path
    spec_file: Path
    cdi_id: str
    content: bytes
    spec: dict[str, Any]


def plan_request(*, driver: str, plugin_data_dir: Path, cdi_dir: Path, claim: dict[str, Any],
                 request: str, devices: Sequence[MetadataDevice],
                 versions: Sequence[str]) -> MetadataFiles:
    """Compute (without writing) the files for one request; ``request`` is the full name."""
    meta = claim["metadata"]
    base = base_request(request)
    ns, name, uid = meta.get("namespace", ""), meta["name"], meta["uid"]
    pod_claim = (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION)
    host = host_file(plugin_data_dir, ns, name, base)
    content = stream_bytes([metadata_object(v, claim, request, devices) for v in versions])
    spec = cdi.mount_spec(cdi_kind(driver), cdi_device(uid, base), host,
                          container_path(driver, name, base, pod_claim))
    return MetadataFiles(host, spec_path(cdi_dir, driver, uid, base), cdi_id(driver, uid, base),
                         content, spec)


def write(files: MetadataFiles) -> None:
    """Write the host file (folders 0755, file 0644), then the CDI spec that mounts it."""
    for folder in reversed(files.host_file.parents[:3]):
        ensure_dir(folder, DIR_MODE)
    atomic_write(files.host_file, files.content, FILE_MODE)
    cdi.write_spec(files.spec_file, files.spec)


def remove_claim(plugin_data_dir: Path, cdi_dir: Path, driver: str, namespace: str,
                 claim_name: str, claim_uid: str) -> None:
    """Delete a claim's metadata folder and metadata CDI specs; missing ones are fine."""
    for spec in cdi_dir.glob(spec_glob(driver, claim_uid)):
        spec.unlink(missing_ok=True)
    folder = host_dir(plugin_data_dir, namespace, claim_name)
    if folder.is_dir():
        shutil.rmtree(folder)
