"""What a container of a pod gets from the node: the CDI device IDs the kubelet passes to the
container runtime, and the env, mounts and device nodes they resolve to.

The cluster backend reads it from the fake CRI's record on a real kubelet node; the reference
backend computes it here the same way: the per-container CDI IDs by the kubelet's rule
(``clusters.nodeagent.container_cdi_devices``), resolved against the node's CDI spec folder like
a CDI-enabled runtime (spec-level edits once per spec, then the device's; an env variable
replaces one of the same name; mounts and device nodes are appended). The shape of a record
(:func:`record`) is the same on both backends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import LoadError
from ..inputs import DRIVER_FILE, InputError
from ..datafiles import read_document


def record(cdi_devices: list[str], env: list[str], mounts: list[dict[str, Any]],
           device_nodes: list[dict[str, Any]], error: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"cdiDevices": list(cdi_devices), "env": list(env), "mounts": list(mounts),
                           "deviceNodes": list(device_nodes)}
    if error:
        out["error"] = error
    return out


def from_cri_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """A record from one CreateContainer line of the fake CRI (``clusters/local/fakecri``)."""
    eff = event.get("effective") or event.get("requested") or {}
    return record(list(event.get("cdiDevices") or []), list(eff.get("env") or []),
                  [dict(m) for m in eff.get("mounts") or []], [dict(d) for d in eff.get("deviceNodes") or []],
                  event.get("error"))


def container_env(container: Mapping[str, Any]) -> list[str]:
    """The literal ``env`` entries of a container spec as ``NAME=value``."""
    return [f"{e['name']}={e.get('value', '')}" for e in container.get("env") or [] if "valueFrom" not in e]


def resolve(cdi_ids: Iterable[str], cdi_dirs: Iterable[Path], base_env: list[str]) -> dict[str, Any]:
    """The record of a container given its CDI IDs (module docstring); unknown IDs give ``error``,
    as a runtime fails CreateContainer for them."""
    ids = list(cdi_ids)
    devices = _cdi_devices(cdi_dirs)
    env = list(base_env)
    keys = {kv.partition("=")[0]: i for i, kv in enumerate(env)}
    mounts: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    seen_specs: set[str] = set()

    def apply(edits: Mapping[str, Any], source: str) -> None:
        for kv in edits.get("env") or []:
            key = kv.partition("=")[0]
            if key in keys:
                env[keys[key]] = kv
            else:
                keys[key] = len(env)
                env.append(kv)
        for m in edits.get("mounts") or []:
            entry: dict[str, Any] = {"containerPath": m.get("containerPath"), "hostPath": m.get("hostPath"),
                                     "options": m.get("options"), "source": source}
            if "ro" in (m.get("options") or []):
                entry["readOnly"] = True
            mounts.append({k: v for k, v in entry.items() if v is not None})
        for d in edits.get("deviceNodes") or []:
            nodes.append({k: v for k, v in {"containerPath": d.get("path"), "hostPath": d.get("hostPath") or d.get("path"),
                                           "permissions": d.get("permissions"), "source": source}.items() if v is not None})

    unresolved = []
    for cdi_id in ids:
        found = devices.get(cdi_id)
        if found is None:
            unresolved.append(cdi_id)
            continue
        path, spec, device = found
        if path not in seen_specs:
            seen_specs.add(path)
            apply(spec.get("containerEdits") or {}, cdi_id)
        apply(device.get("containerEdits") or {}, cdi_id)
    error = f"CDI device injection failed: unresolvable CDI devices {', '.join(unresolved)}" if unresolved else None
    return record(ids, env, mounts, nodes, error)


def _cdi_devices(dirs: Iterable[Path]) -> dict[str, tuple[str, dict[str, Any], dict[str, Any]]]:
    """``vendor/class=name`` -> (spec file, spec, device) for the specs in ``dirs``, as a runtime's
    CDI cache sees them: later folders override earlier ones, a device defined twice in one
    folder is dropped, a file that does not parse is left out (node-check reports such files)."""
    out: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}
    for folder in dirs:
        if not folder.is_dir():
            continue
        here: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}
        twice: set[str] = set()
        for path in sorted(folder.iterdir()):
            if path.suffix not in (".json", ".yaml", ".yml") or not path.is_file():
                continue
            try:  # drakit's one reader and bounded parsers: the driver wrote it
                spec = read_document(path, DRIVER_FILE)
            except (InputError, LoadError):
                continue
            if not isinstance(spec, dict) or not isinstance(spec.get("devices"), list):
                continue
            for device in spec["devices"]:
                if isinstance(device, dict) and "name" in device:
                    qualified = f"{spec.get('kind')}={device['name']}"
                    if qualified in here:
                        twice.add(qualified)
                    here[qualified] = (str(path), spec, device)
        for qualified in twice:
            here.pop(qualified, None)
        out.update(here)
    return out


#: the key of :func:`env_from_log` for the container's CPUs (no variable's name holds a ``=``)
CPUS_ALLOWED = "=Cpus_allowed_list"
#: its key for the character devices the container listed (``Chardev: <path>`` lines), space-separated
CHARDEVS = "=chardevs"


def env_from_log(api: Any, namespace: str, pod: str, container: str | None) -> dict[str, str] | None:
    """The ``KEY=value`` lines a pod's container printed (through the API server), and the
    ``Cpus_allowed_list:`` line of its /proc status when it printed one (key :data:`CPUS_ALLOWED`),
    the character devices it listed as ``Chardev: <path>`` lines (key :data:`CHARDEVS`, once it
    printed ``Chardevs: done`` after them), or None while there is no log to read. Complete lines
    only: a value read is the whole value."""
    try:
        from kubernetes.client import CoreV1Api
        text = CoreV1Api(api.api_client).read_namespaced_pod_log(pod, namespace, container=container)
    except Exception:  # noqa: BLE001 - not running yet, or no log: the expect step retries
        return None
    lines = str(text).splitlines()
    if lines and not str(text).endswith("\n"):
        lines.pop()  # still being written: the next read has it whole (a cut value is no value)
    out = dict(line.partition("=")[::2] for line in lines if "=" in line)
    for ln in lines:
        if ln.startswith("Cpus_allowed_list:"):
            out[CPUS_ALLOWED] = ln.partition(":")[2].strip()
    devices = [ln[9:].strip() for ln in lines if ln.startswith("Chardev: ")]
    if "Chardevs: done" in lines:  # the list is whole (none listed: an empty list, not no list)
        out[CHARDEVS] = " ".join(devices)
    return out
