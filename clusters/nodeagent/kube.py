"""``KubeNodeRuntime``: the kubelet's DRA part for fake (kwok) nodes of a real cluster.

It watches pods through the API (one namespace, or all) and acts for the pods bound to a node
it serves, one event at a time:

- bound, not done, using claims, not yet prepared: it reads the pod's claims (GET; generated
  names from ``status.resourceClaimStatuses``), checks owner and reservation like the kubelet
  (``podclaims``), prepares them through that node's agent over the drivers' real gRPC sockets,
  then annotates the pod ``drakit.dev/prepared: "true"`` (kwok's "prepared" stage set then makes
  it Running). A failure becomes a Warning event ``FailedPrepareDynamicResources`` on the pod
  (once per distinct message), the pod stays unannotated, and the prepare is retried with
  backoff (and on every change of the pod).
- done (graceful deletion started, Succeeded, Failed) or deleted: it unprepares the pod's claims
  (NodeUnprepareResources) and removes the annotation, which lets kwok finish the deletion.

Pods without claims are left to kwok. Claims without devices of a driver the node runs are
left out, as the reference backend's node runtime does; a node served without drivers (``None``)
prepares nothing and only annotates. A node is anything with ``prepare(pod_uid, claims)`` and
``unprepare(pod_uid)`` returning a ``PodResult`` (``LocalNode``, ``NodeAgent``).
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Mapping

from drakit.clusters.local.kwokconfig import PREPARED_ANNOTATION
from drakit.fake_driver.kube import Informer, Kube, KubeError, claim_path

from .podclaims import NotReady, allocated_drivers, claim_error, describe, is_done, pod_claims, uses_claims

log = logging.getLogger("drakit.nodeagent.kube")

PREPARE_FAILED = "FailedPrepareDynamicResources"
UNPREPARE_FAILED = "FailedUnprepareDynamicResources"
COMPONENT = "drakit-node-agent"


@dataclass
class _PodState:
    pod: dict[str, Any]
    prepared: bool = False
    attempted: bool = False  # the node side saw a prepare: it must see the unprepare too
    delay: float = 0.0
    retry_at: float | None = None
    reported: set[str] = field(default_factory=set)
    error: str | None = None


class KubeNodeRuntime:
    """See the module docstring. ``nodes`` maps node name to its node side (or ``None``)."""

    def __init__(self, kube: Kube, nodes: Mapping[str, Any], *, namespace: str | None = None,
                 min_retry: float = 0.5, max_retry: float = 10.0, watch_seconds: int = 30) -> None:
        self.kube = kube
        self.nodes = dict(nodes)
        self.namespace = namespace
        self.min_retry = min_retry
        self.max_retry = max_retry
        self._pods: dict[str, _PodState] = {}
        self._queue: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self._stop = threading.Event()
        path = f"/api/v1/namespaces/{urllib.parse.quote(namespace)}/pods" if namespace else "/api/v1/pods"
        query = {"fieldSelector": f"spec.nodeName={next(iter(self.nodes))}"} if len(self.nodes) == 1 else None
        self.informer = Informer(kube, path, lambda kind, pod: self._queue.put((kind, pod)), query=query,
                                 relisted=lambda pods: self._queue.put(("RELISTED", {"items": pods})),
                                 watch_seconds=watch_seconds,
                                 name="drakit-node-runtime-pods")
        self._worker = threading.Thread(target=self._work, name="drakit-node-runtime", daemon=True)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> KubeNodeRuntime:
        self._worker.start()
        self.informer.start()
        if not self.informer.synced.wait(timeout):
            raise KubeError(f"listing pods did not succeed within {timeout:.0f} s: "
                            f"{self.informer.last_error or 'no answer'}")
        return self

    def stop(self) -> None:
        self._stop.set()
        self.informer.stop()
        self._queue.put(("STOP", {}))
        if self._worker.ident is not None:
            self._worker.join(timeout=30)

    def close(self) -> list[str]:
        """Stop, then unprepare every pod still prepared; returns the errors."""
        self.stop()
        errors = []
        for uid, state in list(self._pods.items()):
            if state.prepared or state.attempted:
                error = self._unprepare(uid, state.pod)
                if error:
                    errors.append(f"pod {describe(state.pod)}: {error}")
        return errors

    def __enter__(self) -> KubeNodeRuntime:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what tests and sessions look at --------------------------------------------------------

    def prepared(self) -> dict[str, str]:
        """Prepared pods: uid -> namespace/name."""
        return {uid: describe(s.pod) for uid, s in list(self._pods.items()) if s.prepared}

    def errors(self) -> dict[str, str]:
        """Pods whose last prepare or unprepare failed: namespace/name -> error."""
        return {describe(s.pod): s.error for s in list(self._pods.values()) if s.error}

    # -- the loop -------------------------------------------------------------------------------

    def _relisted(self, items: list[dict[str, Any]]) -> None:
        present = {p["metadata"]["uid"] for p in items}
        for uid, state in list(self._pods.items()):
            if uid not in present:  # deleted while no watch was open
                self._safely("DELETED", state.pod)

    def _work(self) -> None:
        while not self._stop.is_set():
            due = [s.retry_at for s in self._pods.values() if s.retry_at is not None]
            wait = max(0.0, min(due) - time.monotonic()) if due else 1.0
            try:
                kind, pod = self._queue.get(timeout=wait)
            except queue.Empty:
                kind = ""
            if kind == "STOP" or self._stop.is_set():
                return
            if kind == "RELISTED":
                self._relisted(pod["items"])
            elif kind:
                self._safely(kind, pod)
            self._retry_due()

    def _safely(self, kind: str, pod: dict[str, Any]) -> None:
        """Handle one pod; an unexpected failure (the API server away) is retried later."""
        try:
            self._handle(kind, pod)
        except Exception as err:  # noqa: BLE001 - one pod's surprise must not stop the node
            log.warning("node runtime: pod %s: %s", describe(pod), err)
            state = self._pods.setdefault(pod["metadata"]["uid"], _PodState(pod))
            self._failed(state, f"{type(err).__name__}: {err}", event=False)

    def _retry_due(self) -> None:
        now = time.monotonic()
        for uid, state in list(self._pods.items()):
            if state.retry_at is None or state.retry_at > now:
                continue
            state.retry_at = None
            try:
                fresh = self.kube.get(_pod_path(state.pod))
            except KubeError as err:
                self._failed(state, str(err), event=False)
                continue
            if fresh is None or fresh["metadata"]["uid"] != uid:
                self._safely("DELETED", state.pod)
            else:
                self._safely("MODIFIED", fresh)

    def _handle(self, kind: str, pod: dict[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in self.nodes:
            return
        uid = pod["metadata"]["uid"]
        state = self._pods.get(uid)
        if kind == "DELETED" or is_done(pod):
            if state is not None or _annotated(pod):
                self._release(uid, pod, gone=kind == "DELETED")
            return
        if not uses_claims(pod):
            return
        if state is None:
            state = self._pods[uid] = _PodState(pod)
        state.pod = pod
        if state.prepared and _annotated(pod):
            return
        self._prepare(uid, state)

    # -- prepare and unprepare ------------------------------------------------------------------

    def _prepare(self, uid: str, state: _PodState) -> None:
        pod = state.pod
        node = self.nodes[pod["spec"]["nodeName"]]
        try:
            claims = self._claims(pod, node)
        except NotReady as err:
            self._failed(state, str(err), event=False)
            return
        except _Refused as err:
            self._failed(state, str(err))
            return
        if node is not None and claims:
            state.attempted = True
            result = node.prepare(uid, claims)
            if not result.ok:
                self._failed(state, str(result.error))
                return
        state.prepared, state.error, state.delay, state.retry_at = True, None, 0.0, None
        try:
            self.kube.request("PATCH", _pod_path(pod), {"metadata": {
                "uid": uid, "annotations": {PREPARED_ANNOTATION: "true"}}},
                content_type="application/merge-patch+json")
            log.info("prepared the claims of pod %s", describe(pod))
        except KubeError as err:
            if err.status in (404, 409):  # gone, or replaced by a pod of the same name
                self._release(uid, pod, gone=True)
            else:
                raise

    def _claims(self, pod: dict[str, Any], node: Any) -> list[dict[str, Any]]:
        drivers = _driver_names(node)
        out = []
        for ref in pod_claims(pod):
            try:
                claim = self.kube.get(claim_path(pod["metadata"]["namespace"], ref.name))
            except KubeError as err:
                raise _Refused(f"fetch ResourceClaim {ref.name}: {err}") from None
            if claim is None:
                raise _Refused(f'fetch ResourceClaim {ref.name}: resourceclaims.resource.k8s.io "{ref.name}" not found')
            problem = claim_error(pod, ref, claim)
            if problem:
                raise _Refused(problem)
            if drivers is None or allocated_drivers(claim) & drivers:
                out.append(claim)
        return out

    def _release(self, uid: str, pod: dict[str, Any], *, gone: bool) -> None:
        state = self._pods.get(uid)
        if state is not None and (state.prepared or state.attempted):
            error = self._unprepare(uid, pod)
            if error:
                state.pod = pod
                self._failed(state, error, reason=UNPREPARE_FAILED, event=not gone)
                return
        self._pods.pop(uid, None)
        if not gone and _annotated(pod):
            try:
                self.kube.request("PATCH", _pod_path(pod), {"metadata": {
                    "uid": uid, "annotations": {PREPARED_ANNOTATION: None}}},
                    content_type="application/merge-patch+json")
            except KubeError as err:
                if err.status not in (404, 409):
                    raise

    def _unprepare(self, uid: str, pod: dict[str, Any]) -> str | None:
        node = self.nodes.get(pod["spec"]["nodeName"])
        if node is not None:
            result = node.unprepare(uid)
            if not result.ok:
                return str(result.error)
        state = self._pods.get(uid)
        if state is not None:
            state.prepared = state.attempted = False
        log.info("unprepared the claims of pod %s", describe(pod))
        return None

    def _failed(self, state: _PodState, message: str, *, reason: str = PREPARE_FAILED,
                event: bool = True) -> None:
        state.error = message
        state.delay = min(self.max_retry, max(self.min_retry, state.delay * 2))
        state.retry_at = time.monotonic() + state.delay
        if event and message not in state.reported:
            state.reported.add(message)
            verb = "prepare" if reason == PREPARE_FAILED else "unprepare"
            self._event(state.pod, reason, f"Failed to {verb} dynamic resources: {message}")

    def _event(self, pod: dict[str, Any], reason: str, message: str) -> None:
        meta = pod["metadata"]
        now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                 "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                    "namespace": meta["namespace"], "uid": meta["uid"]},
                 "reason": reason, "message": message[:1024], "type": "Warning", "count": 1,
                 "firstTimestamp": now, "lastTimestamp": now,
                 "source": {"component": COMPONENT, "host": pod["spec"]["nodeName"]}}
        try:
            self.kube.request("POST", f"/api/v1/namespaces/{meta['namespace']}/events", event)
        except KubeError as err:
            log.warning("recording event %s on pod %s: %s", reason, describe(pod), err)


class _Refused(Exception):
    """The kubelet would refuse to prepare this pod (the message says why)."""


def _annotated(pod: Mapping[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(PREPARED_ANNOTATION) == "true"


def _pod_path(pod: Mapping[str, Any]) -> str:
    meta = pod["metadata"]
    return f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"


def _driver_names(node: Any) -> set[str] | None:
    """Drivers the node side runs: none for ``None``; ``None`` (send every claim, let the agent
    wait for its driver) when the node side does not say, as a bare ``NodeAgent``."""
    if node is None:
        return set()
    names = getattr(node, "driver_names", None)
    return set(names) if names is not None else None
