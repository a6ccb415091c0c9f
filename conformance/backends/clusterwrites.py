"""How the cluster backend writes a case's objects that controllers write too, and waits for nodes.

Names here are the cluster's (after ``names.NameMap.outgoing``)."""

from __future__ import annotations

import time
from typing import Any

from ..errors import ApiRejected
from .base import HarnessError
from .kubeapi import KubeApi


def wait_for_nodes(api: KubeApi, names: list[str], timeout: float = 30.0) -> None:
    """Wait until the fake nodes are Ready and carry no not-ready taint: until then the
    scheduler filters them out, and a case's pod would go to whichever node was first."""
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        node = api.get("Node", pending[0], None)
        status = (node or {}).get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        tainted = any(t.get("key", "").startswith("node.kubernetes.io/")
                      for t in ((node or {}).get("spec") or {}).get("taints") or [])
        if ready and not tainted:
            pending.pop(0)
            continue
        if time.monotonic() >= deadline:
            raise HarnessError(f"node {pending[0]} did not become Ready and untainted within {timeout:.0f} s "
                               f"(is kwok running?)")
        time.sleep(0.1)


def update_node(api: KubeApi, obj: dict[str, Any], existing: dict[str, Any]) -> dict[str, Any]:
    """A case re-applying a fake node: keep what makes it a kwok node (its annotations and
    labels), and write the status the case gives (e.g. ``declaredFeatures: []``, an
    older kubelet) through the status subresource, as a kubelet would, once kwok has made
    the node Ready (kwok's node stage would otherwise fill in its defaults)."""
    meta = obj["metadata"]
    old = existing["metadata"]
    meta["labels"] = {**(old.get("labels") or {}), **(meta.get("labels") or {})}
    meta["annotations"] = {**(old.get("annotations") or {}), **(meta.get("annotations") or {})}
    want = obj.pop("status", None)
    out = replace(api, obj, existing)
    if not want:
        return out
    deadline = time.monotonic() + 15
    for attempt in range(10):
        node = api.get("Node", meta["name"], None) or out
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (node.get("status") or {}).get("conditions") or [])
        if not ready and time.monotonic() < deadline:
            time.sleep(0.2)
            continue
        status = dict(node.get("status") or {})
        status.update(want)
        if "allocatable" in want:
            status["capacity"] = {**(status.get("capacity") or {}), **want["allocatable"]}
        node["status"] = status
        try:
            return api.replace_status(node)
        except ApiRejected as exc:
            if "the object has been modified" not in str(exc) or attempt == 9:
                raise
    raise HarnessError(f"node {meta['name']}: its status could not be written")


def keep_owner_labels(meta: dict[str, Any], existing: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Re-applying an object that another run made, or that was there before drakit (a cluster's
    own DeviceClass, a vendor's): it keeps its own values of the run and case labels ``keys``, as
    ours would make it this run's, and a clean-up by label (the in-cluster run's) would delete it."""
    old = existing["metadata"].get("labels") or {}
    labels = meta.setdefault("labels", {})
    if old.get(keys[0]) == labels.get(keys[0]):
        return
    for key in keys:
        if key in old:
            labels[key] = old[key]
        else:
            labels.pop(key, None)


def replace(api: KubeApi, obj: dict[str, Any], existing: dict[str, Any]) -> dict[str, Any]:
    """Replace ``existing`` with ``obj`` (its status kept), re-reading when a controller wrote
    in between."""
    meta = obj["metadata"]
    name = meta["name"]
    for attempt in range(5):
        meta["resourceVersion"] = existing["metadata"]["resourceVersion"]
        if "status" in existing:
            obj["status"] = existing["status"]
        try:
            return api.replace(obj)
        except ApiRejected as exc:
            # Controllers (kwok, the claim controller) write too: re-read and try again.
            if "the object has been modified" not in str(exc) or attempt == 4:
                raise
            existing = api.get(obj["kind"], name, meta.get("namespace")) or existing
    raise AssertionError("unreachable")
