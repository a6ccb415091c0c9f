"""Explanations attached to a failed case: every pod of the case still waiting for a node.

Read through the session (the same reads on both backends: the case's namespace and the
cluster-wide objects it sees; on a cluster, also the claims and pods of every other namespace,
whose devices and node resources the scheduler counts as taken) and worked out on a copy, so
the target is never changed.
A claim left unallocated is explained through the pod that waits for it (claims are allocated
for a pod being scheduled; one no pod asks for is not a failure of its own).
"""

from __future__ import annotations

from typing import Any

from ..features import DEFAULT_GATES
from .render import text
from .run import explain_pod
from .state import KINDS, load_store

MAX_PODS = 5  # explained per failure at most (the rest are named)


def session_gates(session: Any) -> dict[str, bool]:
    """The scheduler's gates (an explanation replays its allocator): a cluster session's, or the
    reference cluster's scheduler's (``schedulerFeatureGates`` over the cluster's)."""
    gates = getattr(session, "gates", None) or getattr(getattr(session, "cluster", None), "scheduler_gates", None)
    return dict(gates) if gates else dict(DEFAULT_GATES)


def explain_failure(session: Any) -> tuple[list[dict[str, Any]], str]:
    """The explanations (JSON) of the session's pods that have no node, and their text."""
    objects = [dict(o, kind=kind) for kind in KINDS for o in session.list(kind)]
    waiting = [o for o in objects if o["kind"] == "Pod" and not (o.get("spec") or {}).get("nodeName")
               and not o["metadata"].get("deletionTimestamp")]
    if not waiting:
        return [], ""
    for o in objects:  # session.list may leave out the namespace the objects live in
        if o["kind"] in ("Pod", "ResourceClaim", "ResourceClaimTemplate"):
            o["metadata"] = {**o["metadata"], "namespace": o["metadata"].get("namespace") or session.namespace}
    elsewhere, warnings = _elsewhere(session)
    store = load_store(objects + elsewhere)
    gates = session_gates(session)
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for pod in waiting[:MAX_PODS]:
        got = store.get("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
        assert got is not None
        e = explain_pod(store, got, gates)
        if warnings:
            e["warnings"] = warnings
        out.append(e)
        texts.append(text(e))
    if len(waiting) > MAX_PODS:
        texts.append(f"({len(waiting) - MAX_PODS} more pod(s) without a node: "
                     f"{', '.join(p['metadata']['name'] for p in waiting[MAX_PODS:])})")
    return out, "\n".join(texts)


def _elsewhere(session: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The claims and pods of the other namespaces of a cluster the session reads through the API
    (with the session's names, as its own lists have them), and what could not be read; none
    for the reference backend, whose cluster holds only the case."""
    api, ns = getattr(session, "api", None), getattr(session, "namespace", None)
    if api is None or not ns:
        return [], []
    names = getattr(session, "names", None)
    out: list[dict[str, Any]] = []
    warnings: list[str] = []
    for kind in ("ResourceClaim", "Pod"):
        try:
            found = [o for o in api.list(kind, None) if o["metadata"].get("namespace") not in (ns, None)]
        except Exception as exc:  # a refused cluster-wide list: explain with what the case sees
            why = exc.summary() if callable(getattr(exc, "summary", None)) else str(exc)  # the API's message
            first = (str(why).strip().splitlines() or [type(exc).__name__])[0]
            warnings.append(f"{kind}s of other namespaces not read ({first}): what they hold is taken as free")
            continue
        out.extend(dict(o, kind=kind) for o in (names.incoming(found) if names is not None else found))
    return out, warnings
