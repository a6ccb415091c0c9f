"""The state an explanation is worked out on: the cluster's objects in an in-memory store.

From a live cluster (read-only lists through a kubeconfig, see :mod:`.cli`), from a saved state
file (YAML or JSON: objects, ``kind: List`` documents, or what ``--save-state`` wrote), or from a
test session. The objects keep their names, uids and resourceVersions, so ownership (a claim
made from a template for its pod) reads as it does on the cluster.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..reference.store import ObjectStore

# What an explanation reads: cluster-wide, but for the templates (only the pod's namespace).
KINDS = ("DeviceClass", "ResourceSlice", "DeviceTaintRule", "Node", "ResourceClaim", "ResourceClaimTemplate", "Pod")
POD_NAMESPACE_ONLY = ("ResourceClaimTemplate",)
STATE_SCHEMA = "drakit.explain.state/v1"


class StateError(ValueError):
    """A state or claim file that cannot be used (one line: what and where)."""


def load_store(objects: Iterable[Mapping[str, Any]]) -> ObjectStore:
    """A store holding the objects as they are (no new uids), in the order given."""
    store = ObjectStore()
    for n, obj in enumerate(objects):
        if obj.get("kind") not in KINDS:
            continue
        o = dict(obj)  # the store's own top level and metadata; the rest is shared, never written
        meta = o["metadata"] = dict(o.get("metadata") or {})
        meta.setdefault("resourceVersion", str(n + 1))
        meta.setdefault("uid", f"explain-{n}")
        if not meta.get("name"):
            raise StateError(f"{obj.get('kind')} #{n + 1}: metadata.name is missing")
        key = store.key(o["kind"], meta["name"], meta.get("namespace"))
        store.objects[key] = o
        store.order[key] = n
    return store


def _documents(path: Path) -> list[Any]:
    """The documents of a state or claim file, read by drakit's one reader (regular file, size
    bounded, strict UTF-8) and parsed bounded: JSON (``*.json``: no duplicate keys) or YAML
    (depth, nodes and aliases bounded)."""
    from ..errors import LoadError
    from ..inputs import STATE, InputError, parse_json, read_text
    from ..yamlmarks import load_documents
    try:
        text = read_text(path, STATE)
        if path.suffix == ".json" or text.lstrip()[:1] == "{":  # what --save-state writes, whatever its name
            try:
                return [d for d in [parse_json(text, str(path))] if d is not None]
            except InputError as exc:
                if path.suffix == ".json" or "not valid JSON" not in exc.reason:
                    raise
        return [d for _, d in load_documents(text, str(path)) if d is not None]
    except InputError as exc:
        raise StateError(str(exc)) from None
    except LoadError as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        raise StateError(f"{where}: not valid YAML or JSON: {exc.message.removeprefix('YAML: ')}") from None


def read_state(path: Path) -> tuple[dict[str, bool], list[dict[str, Any]]]:
    """The gates a saved state names (empty for other files) and the objects of the file, read once."""
    docs = _documents(path)
    return _gates(docs[0] if docs else None), _objects(path, docs)


def read_objects(path: Path) -> list[dict[str, Any]]:
    """The objects of a YAML or JSON file (``List`` documents and saved states unpacked)."""
    return _objects(path, _documents(path))


def _objects(path: Path, docs: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise StateError(f"{path}: document {i + 1} is not an object")
        check_document(d, f"{path}: document {i + 1}")
        if d.get("schema") == STATE_SCHEMA or (d.get("kind") == "List" or "items" in d and "kind" not in d):
            items = d.get("items") or d.get("objects") or []
            if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
                raise StateError(f"{path}: document {i + 1}: items must be a list of objects")
            out.extend(items)
        elif "kind" in d:
            out.append(d)
        else:
            raise StateError(f"{path}: document {i + 1} has no kind")
    for i, o in enumerate(out):
        if not isinstance(o.get("metadata"), dict) or not o["metadata"].get("name"):
            raise StateError(f"{path}: {o.get('kind', 'object')} #{i + 1}: metadata.name is missing")
        check_object(o, f"{path}: {o.get('kind')} #{i + 1}")
    return out


#: The version of each kind explain reads whose typed model checks an object of a state file.
_MODEL_VERSION = {"DeviceClass": "resource.k8s.io/v1", "ResourceSlice": "resource.k8s.io/v1",
                  "DeviceTaintRule": "resource.k8s.io/v1", "ResourceClaim": "resource.k8s.io/v1",
                  "ResourceClaimTemplate": "resource.k8s.io/v1", "Node": "v1", "Pod": "v1"}


def check_document(doc: dict[str, Any], where: str) -> None:
    """A document of a state file against ``state.v1.json`` (the types of what the typed model
    does not read: status, a saved state's gates): one line naming the bad field's path."""
    import jsonschema

    from ..errors import format_path
    error = jsonschema.exceptions.best_match(_state_validator().iter_errors(doc))
    if error is None:
        return
    message = str(error.message)
    if error.validator == "type":
        from ..model.reader import type_name
        wanted = [error.validator_value] if isinstance(error.validator_value, str) else list(error.validator_value)
        message = f"must be {' or '.join(wanted)}, got {type_name(error.instance)}"
    elif len(message) > 300:
        message = message[:300] + "..."
    raise StateError(f"{where}: {format_path(tuple(error.absolute_path))}: {message}")


def check_object(obj: dict[str, Any], where: str) -> None:
    """An object explain reads, through drakit's typed model of its kind (metadata and spec:
    the field path of the first problem). Wrong types were an AttributeError deep in the
    allocator (issue 32)."""
    kind = obj.get("kind")
    if kind not in _MODEL_VERSION:
        return
    from ..errors import FieldError
    from ..model import parse_object
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    label = f"{meta.get('namespace')}/{name}" if isinstance(meta.get("namespace"), str) else name
    try:
        parse_object({**obj, "apiVersion": _MODEL_VERSION[str(kind)]})
    except FieldError as exc:
        raise StateError(f"{where} ({label!r}): {exc}") from None
    except RecursionError:
        raise StateError(f"{where} ({label!r}): nested too deep") from None


@functools.lru_cache(maxsize=1)
def _state_validator() -> Any:
    import json

    from ..schemas import validator
    return validator(json.loads(Path(__file__).with_name("state.v1.json").read_text(encoding="utf-8")))


#: What a saved Pod keeps of each container: what scheduling reads. Its command, args, env
#: (which may hold credentials), probes and the rest are left out of the file.
_CONTAINER_KEEP = ("name", "image", "resources", "restartPolicy", "ports")


def _scrubbed(obj: dict[str, Any]) -> dict[str, Any]:
    """A Pod as ``--save-state`` writes it: no annotations or managed fields (kubectl's
    last-applied annotation repeats the whole spec) and containers cut to :data:`_CONTAINER_KEEP`;
    other kinds unchanged but for managed fields."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("managedFields", "annotations")}
    out = {**obj, "metadata": meta}
    if obj.get("kind") != "Pod" or not isinstance(obj.get("spec"), dict):
        return out
    spec = dict(obj["spec"])
    for key in ("containers", "initContainers", "ephemeralContainers"):
        if isinstance(spec.get(key), list):
            spec[key] = [{k: v for k, v in c.items() if k in _CONTAINER_KEEP} if isinstance(c, dict) else c
                         for c in spec[key]]
    out["spec"] = spec
    return out


def saved_state(objects: list[dict[str, Any]], gates: Mapping[str, bool]) -> dict[str, Any]:
    """What ``--save-state`` writes: the objects read (Pods scrubbed of what scheduling does not
    read, :func:`_scrubbed`) and the gates the explanation used."""
    return {"schema": STATE_SCHEMA, "featureGates": dict(sorted(gates.items())),
            "items": [_scrubbed(o) if isinstance(o, dict) else o for o in objects]}


def _gates(first: Any) -> dict[str, bool]:
    """The gates a saved state's first document names (empty for other files)."""
    if isinstance(first, dict) and first.get("schema") == STATE_SCHEMA:
        gates = first.get("featureGates")
        return {str(k): bool(v) for k, v in gates.items()} if isinstance(gates, dict) else {}
    return {}
