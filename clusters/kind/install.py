"""Apply manifests to a cluster and wait for the workloads among them to roll out.

Server-side apply with one field manager, so applying the same manifests again is a no-op and
a changed image or shape updates the objects in place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

FIELD_MANAGER = "drakit"


class InstallError(Exception):
    """An object was refused or a workload did not become ready; the message names it."""


def _name(obj: Mapping[str, Any]) -> str:
    ns = obj["metadata"].get("namespace")
    return f"{obj['kind']} {ns + '/' if ns else ''}{obj['metadata']['name']}"


def dynamic_client(kubeconfig: Path) -> Any:
    from kubernetes import config as kconfig
    from kubernetes.client import ApiClient, Configuration
    from kubernetes.dynamic import DynamicClient

    cfg = Configuration()
    kconfig.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)  # type: ignore[no-untyped-call]
    return DynamicClient(ApiClient(cfg))  # type: ignore[no-untyped-call]


def apply(client: Any, objs: Iterable[Mapping[str, Any]], progress: Callable[[str], None] = lambda m: None,
          *, dry_run: bool = False) -> None:
    """Server-side apply every object, in order, with strict field validation (an unknown or
    duplicated field is an error, not a warning). ``dry_run``: the API server validates and
    admits each object (``dryRun=All``) but stores nothing."""
    for obj in objs:
        res = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        try:
            res.server_side_apply(body=dict(obj), name=obj["metadata"]["name"],
                                  namespace=obj["metadata"].get("namespace"),
                                  field_manager=FIELD_MANAGER, force_conflicts=True,
                                  dry_run="All" if dry_run else None,
                                  query_params=[("fieldValidation", "Strict")])
        except Exception as exc:
            raise InstallError(f"{_name(obj)}: {getattr(exc, 'reason', None) or type(exc).__name__}: "
                               f"{_message(exc)}") from None
        progress(f"{'dry-run ' if dry_run else ''}applied {_name(obj)}")


def wait_ready(client: Any, objs: Iterable[Mapping[str, Any]], timeout: float,
               poll: float = 2.0) -> None:
    """Wait until every DaemonSet has a ready pod on each of its nodes and every Deployment is
    available; :class:`InstallError` names the ones that are not after ``timeout`` seconds."""
    pending = [o for o in objs if o["kind"] in ("DaemonSet", "Deployment")]
    deadline = time.monotonic() + timeout
    while True:
        waiting = []
        for obj in pending:
            res = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            got = res.get(name=obj["metadata"]["name"], namespace=obj["metadata"]["namespace"]).to_dict()
            if not _ready(got):
                waiting.append(f"{_name(obj)} ({_progress_of(got)})")
        if not waiting:
            return
        if time.monotonic() >= deadline:
            raise InstallError(f"not ready after {timeout:.0f}s: {'; '.join(waiting)}")
        time.sleep(poll)


def _ready(obj: Mapping[str, Any]) -> bool:
    st = obj.get("status") or {}
    if obj["metadata"].get("generation") != st.get("observedGeneration"):
        return False
    if obj["kind"] == "DaemonSet":
        want = st.get("desiredNumberScheduled", 0)
        return bool(want) and st.get("numberReady", 0) == want and st.get("updatedNumberScheduled", 0) == want
    want = (obj.get("spec") or {}).get("replicas", 1)
    return bool(st.get("availableReplicas", 0) >= want and st.get("updatedReplicas", 0) >= want)


def _progress_of(obj: Mapping[str, Any]) -> str:
    st = obj.get("status") or {}
    if obj["kind"] == "DaemonSet":
        return f"{st.get('numberReady', 0)}/{st.get('desiredNumberScheduled', 0)} ready"
    return f"{st.get('availableReplicas', 0)}/{(obj.get('spec') or {}).get('replicas', 1)} available"


def _message(exc: BaseException) -> str:
    from drakit.clusters.kind.docker import one_line
    from drakit.conformance.errors import api_error_message

    return one_line(api_error_message(exc))
