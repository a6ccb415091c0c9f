"""Saved Kubernetes objects (``kubectl get ... -o yaml`` or ``-o json``): the ResourceSlices and
DeviceClasses of a file, for ``drakit profile init --slices``. Bad input is one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


def read_objects_file(path: Path, max_bytes: int, error: Callable[[str], Exception]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(slices, classes) of the file: single objects, ``List``/``*List`` objects with ``items``,
    several YAML documents. ``error(message)`` is raised for a file that cannot be used."""
    import yaml
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise error(f"--slices {path}: {size:,} bytes, more than the {max_bytes >> 20} MiB drakit reads")
        with path.open("rb") as fh:
            text = fh.read(max_bytes + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"--slices {path}: cannot read: {getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise error(f"--slices {where}: not YAML or JSON: {getattr(exc, 'problem', None) or exc}") from None
    slices: list[dict[str, Any]] = []
    classes: list[dict[str, Any]] = []
    pending = list(docs)
    while pending:
        obj = pending.pop(0)
        if not isinstance(obj, dict):
            raise error(f"--slices {path}: expected Kubernetes objects (mappings with a kind), found a {type(obj).__name__}")
        kind = obj.get("kind")
        if isinstance(obj.get("items"), list):
            pending[:0] = [dict(i, kind=i.get("kind") or str(kind or "").removesuffix("List")) if isinstance(i, dict) else i
                           for i in obj["items"]]
        elif kind == "ResourceSlice" and isinstance(obj.get("spec"), dict):
            slices.append(obj)
        elif kind == "DeviceClass" and isinstance(obj.get("metadata"), dict):
            classes.append(obj)
    if not slices:
        raise error(f"--slices {path}: no ResourceSlice in the file (save them with: kubectl get resourceslices -o yaml)")
    return slices, classes
