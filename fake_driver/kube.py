"""The fake driver's API side: what a DRA driver reads from and writes to the API server.

- ``load_api_client(kubeconfig, in_cluster)``: a ``kubernetes`` client from a kubeconfig file or
  the pod's service account; a bad config is one ``KubeError`` line.
- ``Kube``: thin JSON-over-REST calls through that client (no discovery) and ``Informer``, a
  list-then-watch loop that re-lists when the watch expires.
- ``KubeClaimSource``: a ``ClaimSource`` for the kubelet plugin: GET resourceclaims, and the
  driver's ``status.devices`` entries written with server-side apply on the ``status``
  subresource (field manager = the driver name, so drivers never overwrite each other).
- ``KubeSlicePublisher``: a ``SlicePublisher`` that keeps the driver's ResourceSlices of one
  node in the API equal to what the plugin publishes (create, update, delete; owned by the
  Node; the pool generation never goes backwards); ``start()`` resyncs periodically and at once
  when someone else deletes or changes one of them (a kubelet wipes its node's slices at start).
- ``BindingConditionsController``: the controller side of binding conditions (KEP-5007):
  watches claims and attaches pending devices of its drivers (``fake_driver.binding``).
- ``driver_rules(drivers)`` / ``controller_rules(drivers)``: the ClusterRole rules the kubelet
  plugin side and the controller side need.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from .binding import BindingController
from .plugin.claims import Claim, ClaimSourceError

log = logging.getLogger("drakit.driver.kube")

RESOURCE_API = "/apis/resource.k8s.io/v1"
SLICES = f"{RESOURCE_API}/resourceslices"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
CALL_TIMEOUT = 30.0


class KubeError(RuntimeError):
    """An API call failed; ``status`` is the HTTP status (0 when the server was not reached)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def load_api_client(kubeconfig: str | Path | None = None, in_cluster: bool = False,
                    context: str | None = None) -> Any:
    """A ``kubernetes.client.ApiClient`` for the service account (``in_cluster``) or a
    kubeconfig (the file, else ``$KUBECONFIG`` / ``~/.kube/config``)."""
    try:
        from kubernetes import config
        from kubernetes.client import ApiClient, Configuration
    except ImportError as err:  # pragma: no cover - a packaging problem, said plainly
        raise KubeError("talking to the API server needs the 'kubernetes' package") from err
    cfg = Configuration()
    if kubeconfig and not in_cluster:
        _bounded(str(kubeconfig))
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None,
                                    context=context, client_configuration=cfg)
    except Exception as err:
        where = "the in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
        raise KubeError(f"cannot load {where}: {_first_line(err)}") from None
    return ApiClient(cfg)


def _bounded(kubeconfig: str) -> None:
    """Each file of *kubeconfig* checked by drakit's one reader and its bounded YAML loader before
    the client reads it: a FIFO, ``/dev/zero``, a huge file or an alias bomb is one line."""
    from drakit.conformance.errors import LoadError
    from drakit.conformance.inputs import KUBECONFIG, InputError, read_text
    from drakit.conformance.yamlmarks import load_documents
    for part in kubeconfig.split(os.pathsep):
        if not part or not os.path.lexists(part):
            continue  # the client says what is missing
        try:
            docs = [doc for _, doc in load_documents(read_text(part, KUBECONFIG), part)]
            for doc in docs:
                _named_files(doc, Path(part))
        except InputError as err:
            raise KubeError(f"cannot load kubeconfig {err}") from None
        except LoadError as err:  # the YAML error quotes the file, which may hold credentials: the bound only
            bound = err.message.removeprefix("YAML: ") if "(the limit" in err.message else "not valid YAML"
            raise KubeError(f"cannot load kubeconfig {part}{f':{err.line}' if err.line else ''}: {bound}") from None


_NAMED = (("clusters", "cluster", ("certificate-authority",)),
          ("users", "user", ("client-certificate", "client-key", "tokenFile")))


def _named_files(doc: Any, source: Path) -> None:
    """The CA, client certificate and key and token files a kubeconfig's entries name, checked
    by drakit's one reader (:class:`~drakit.conformance.inputs.InputError`) before the client
    reads them; relative to the kubeconfig's folder, as the client reads them; a missing file is
    the client's to report."""
    from drakit.conformance.inputs import KUBECONFIG, InputError, read_bytes
    if not isinstance(doc, dict):
        return
    for table, key, fields in _NAMED:
        for entry in doc.get(table) or []:
            body = entry.get(key) if isinstance(entry, dict) else None
            for field in fields:
                value = body.get(field) if isinstance(body, dict) else None
                if not isinstance(value, str) or not value:
                    continue
                named = Path(value) if os.path.isabs(value) else source.parent / value
                if os.path.lexists(named):
                    try:
                        read_bytes(named, KUBECONFIG)
                    except InputError as err:
                        raise InputError(source, f"{field} {err}") from None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class Kube:
    """JSON requests against the API server through a ``kubernetes`` ApiClient."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def request(self, method: str, path: str, body: Any = None, *,
                query: Mapping[str, Any] | None = None, content_type: str | None = None,
                timeout: float | tuple[float, float] = CALL_TIMEOUT, stream: bool = False) -> Any:
        """The decoded JSON answer (or, with ``stream``, the open urllib3 response).
        Non-2xx answers raise ``KubeError`` with the server's message."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = [(k, str(v).lower() if isinstance(v, bool) else str(v))
                  for k, v in (query or {}).items() if v is not None]
        try:
            req = self.api_client.param_serialize(method, path, query_params=params,
                                                  header_params=headers, body=body,
                                                  auth_settings=["BearerToken"])
            resp = self.api_client.call_api(*req, _request_timeout=timeout)
        except Exception as err:
            raise KubeError(f"{method} {path}: {_first_line(err)}") from None
        if not 200 <= resp.status <= 299:
            data = resp.read()
            raise KubeError(f"{method} {path}: HTTP {resp.status}: {_message(data)}", resp.status)
        if stream:
            return resp.response
        data = resp.read()
        return json.loads(data) if data else None

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            return self.request("GET", path)  # type: ignore[no-any-return]
        except KubeError as err:
            if err.status == 404:
                return None
            raise


def _message(data: bytes | None) -> str:
    try:
        status = json.loads(data or b"")
    except ValueError:
        return (data or b"").decode(errors="replace")[:200]
    return str(status.get("message") or status) if isinstance(status, dict) else str(status)


class Informer:
    """List then watch ``path`` (a collection), calling ``handler(type, obj)`` for every object
    (``ADDED`` for listed ones) and ``relisted(items)`` after every list, so a consumer can
    notice objects deleted while no watch was open. Runs in a daemon thread."""

    def __init__(self, kube: Kube, path: str, handler: Callable[[str, dict[str, Any]], None], *,
                 query: Mapping[str, Any] | None = None,
                 relisted: Callable[[list[dict[str, Any]]], None] | None = None,
                 watch_seconds: int = 30, backoff: float = 1.0, name: str = "drakit-informer") -> None:
        self.kube = kube
        self.path = path
        self.handler = handler
        self.query = dict(query or {})
        self.relisted = relisted
        self.watch_seconds = watch_seconds
        self.backoff = backoff
        self.synced = threading.Event()
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self, wait: float = 2.0) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # noqa: BLE001 - already closed
                pass
        if self._thread.ident is not None:
            self._thread.join(timeout=wait)

    def _run(self) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    listing = self.kube.request("GET", self.path, query=self.query)
                    version = listing["metadata"]["resourceVersion"]
                    items = listing.get("items") or []
                    for item in items:
                        self.handler("ADDED", item)
                    if self.relisted is not None:
                        self.relisted(items)
                    self.synced.set()
                version = self._watch(version)
            except Exception as err:  # noqa: BLE001 - keep the loop alive, say why
                if not self._stop.is_set():
                    self.last_error = _first_line(err)
                    log.warning("watching %s: %s", self.path, self.last_error)
                    version = None
                    self._stop.wait(self.backoff)

    def _watch(self, version: str) -> str | None:
        query = {**self.query, "watch": "true", "resourceVersion": version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": self.watch_seconds}
        self._response = self.kube.request("GET", self.path, query=query, stream=True,
                                           timeout=(10.0, self.watch_seconds + 10.0))
        try:
            for line in _lines(self._response):
                if self._stop.is_set():
                    return version
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    return None  # usually 410 Gone: the version is too old, list again
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if event.get("type") != "BOOKMARK":
                    self.handler(event["type"], obj)
        finally:
            response, self._response = self._response, None
            response.release_conn()
        return version


def _lines(response: Any) -> Iterator[bytes]:
    pending = b""
    for chunk in response.stream(16384, decode_content=True):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def claim_path(namespace: str, name: str) -> str:
    return f"{RESOURCE_API}/namespaces/{urllib.parse.quote(namespace)}/resourceclaims/{urllib.parse.quote(name)}"


class KubeClaimSource:
    """Claims from the API server; status written as the driver (see the module docstring)."""

    def __init__(self, kube: Kube, field_manager: str | None = None) -> None:
        self.kube = kube
        self.field_manager = field_manager

    def get_claim(self, namespace: str, name: str) -> Claim | None:
        try:
            return self.kube.get(claim_path(namespace, name))
        except KubeError as err:
            raise ClaimSourceError(f"reading ResourceClaim {namespace}/{name}: {err}") from None

    def write_device_status(self, namespace: str, name: str, uid: str, driver: str,
                            entries: list[dict[str, Any]]) -> None:
        """Apply this driver's ``status.devices`` entries; entries it applied before and left
        out now are removed. The claim's UID is a precondition (a replaced claim is refused)."""
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "status": {"devices": entries}}
        try:
            self.kube.request("PATCH", claim_path(namespace, name) + "/status", body,
                              content_type=APPLY,
                              query={"fieldManager": self.field_manager or driver, "force": True})
        except KubeError as err:
            raise ClaimSourceError(f"writing status.devices of ResourceClaim {namespace}/{name}: {err}") from None


def _spec_without_generation(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(dict(obj.get("spec") or {}))
    spec.get("pool", {}).pop("generation", None)
    return spec


class KubeSlicePublisher:
    """Keeps one node's ResourceSlices of each driver in the API as published (module docstring)."""

    def __init__(self, kube: Kube, node: str, *, owner: bool = True) -> None:
        self.kube = kube
        self.node = node
        self.owner = owner
        self._desired: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._kick = threading.Event()
        self._watcher: Informer | None = None
        self._repairer: threading.Thread | None = None

    def publish(self, driver: str, slices: list[dict[str, Any]]) -> None:
        with self._lock:
            self._desired[driver] = copy.deepcopy(slices)
            try:
                self._sync(driver)
            except KubeError as err:  # the periodic resync tries again
                log.warning("publishing ResourceSlices of %s on %s: %s", driver, self.node, err)

    def sync(self) -> None:
        """Repair what someone else changed or deleted; errors are logged."""
        with self._lock:
            for driver in list(self._desired):
                try:
                    self._sync(driver)
                except KubeError as err:
                    log.warning("resyncing ResourceSlices of %s on %s: %s", driver, self.node, err)

    def start(self, interval: float = 30.0, watch: bool = True) -> None:
        """Resync every ``interval`` seconds and, with ``watch``, at once when one of the node's
        slices of a published driver is deleted or changed by someone else (a kubelet deletes
        every slice of its node when it starts; waiting for the resync would leave the node
        without devices for up to ``interval``)."""
        def loop() -> None:
            while not self._stop.wait(interval):
                self.sync()
        self._thread = threading.Thread(target=loop, name="drakit-slice-resync", daemon=True)
        self._thread.start()
        if watch:
            self._watcher = Informer(self.kube, SLICES, self._on_event,
                                     query={"fieldSelector": f"spec.nodeName={self.node}"},
                                     name="drakit-slice-watch").start()
            self._repairer = threading.Thread(target=self._repair_loop, name="drakit-slice-repair", daemon=True)
            self._repairer.start()

    def _on_event(self, event: str, obj: dict[str, Any]) -> None:
        driver = (obj.get("spec") or {}).get("driver")
        if event in ("DELETED", "MODIFIED") and driver in self._desired:
            self._kick.set()

    def _repair_loop(self) -> None:
        while not self._stop.is_set():
            if self._kick.wait(0.5):
                self._kick.clear()
                self.sync()

    def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.stop()
        for thread in (self._thread, self._repairer):
            if thread is not None:
                thread.join(timeout=5)

    def _owner_refs(self) -> list[dict[str, Any]]:
        node = self.kube.get(f"/api/v1/nodes/{urllib.parse.quote(self.node)}") if self.owner else None
        if node is None:
            return []
        return [{"apiVersion": "v1", "kind": "Node", "name": self.node,
                 "uid": node["metadata"]["uid"], "controller": True}]

    def _sync(self, driver: str) -> None:
        selector = f"spec.driver={driver},spec.nodeName={self.node}"
        existing = {s["metadata"]["name"]: s for s in
                    self.kube.request("GET", SLICES, query={"fieldSelector": selector})["items"]}
        desired = {s["metadata"]["name"]: s for s in self._desired[driver]}
        stale = [name for name in existing if name not in desired]
        changed = [name for name, want in desired.items()
                   if name not in existing
                   or _spec_without_generation(existing[name]) != _spec_without_generation(want)]
        if not changed and not stale:
            return
        # consumers drop slices of older generations: never publish below what is there
        there = [s["spec"]["pool"].get("generation", 0) for s in existing.values()]
        generation = max([s["spec"]["pool"].get("generation", 0) for s in desired.values()]
                         + ([max(there) + 1] if there else []))
        owners = self._owner_refs()
        for name, want in desired.items():
            obj = copy.deepcopy(want)
            obj["spec"]["pool"]["generation"] = generation
            if owners:
                obj["metadata"]["ownerReferences"] = owners
            if name in existing:
                obj["metadata"]["resourceVersion"] = existing[name]["metadata"]["resourceVersion"]
                self.kube.request("PUT", f"{SLICES}/{name}", obj)
            else:
                self.kube.request("POST", SLICES, obj)
        for name in stale:
            try:
                self.kube.request("DELETE", f"{SLICES}/{name}")
            except KubeError as err:
                if err.status != 404:
                    raise
        log.info("published %d ResourceSlice(s) of %s on %s (generation %d)", len(desired), driver,
                 self.node, generation)


HARNESS_LABEL = "drakit.dev/run"  # on the claims of a drakit case (conformance.backends.kubeapi.RUN_LABEL)


class BindingConditionsController:
    """Attaches devices that wait for binding conditions, for each of ``drivers``.

    ``attach(result)`` returns ``None`` (attached) or an error text (the failure conditions go
    ``True``). Status is applied with field manager ``<driver>/controller``."""

    def __init__(self, kube: Kube, drivers: Sequence[str],
                 attach: Callable[[Mapping[str, Any]], str | None] = lambda result: None) -> None:
        self.controllers = [BindingController(d, KubeClaimSource(kube, f"{d}/controller"), attach)
                            for d in drivers]
        self.informer = Informer(kube, f"{RESOURCE_API}/resourceclaims", self.handle,
                                 name="drakit-binding-conditions")

    def handle(self, event: str, claim: dict[str, Any]) -> None:
        if event == "DELETED" or HARNESS_LABEL in ((claim.get("metadata") or {}).get("labels") or {}):
            return  # a drakit case plays this controller for its own claims (driverStatus steps)
        for controller in self.controllers:
            try:
                if controller.reconcile(claim) is not None:
                    meta = claim["metadata"]
                    log.info("attached devices of %s for ResourceClaim %s/%s", controller.driver,
                             meta.get("namespace"), meta["name"])
            except ClaimSourceError as err:
                log.warning("%s", err)

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()


def driver_rules(drivers: Sequence[str]) -> list[dict[str, Any]]:
    """ClusterRole rules for a driver's kubelet plugin run without a node-bound token: read
    claims, write their device status for its own drivers only (``resourceclaims/driver``; a
    token not bound to a pod on the claim's node needs the ``arbitrary-node:`` verbs), own its
    ResourceSlices, read Nodes (slice owner references). Nothing else."""
    group = "resource.k8s.io"
    return [
        {"apiGroups": [group], "resources": ["resourceclaims"], "verbs": ["get"]},
        {"apiGroups": [group], "resources": ["resourceclaims/status"], "verbs": ["update", "patch"]},
        {"apiGroups": [group], "resources": ["resourceclaims/driver"], "resourceNames": list(drivers),
         "verbs": ["associated-node:update", "associated-node:patch", "arbitrary-node:update",
                   "arbitrary-node:patch"]},
        {"apiGroups": [group], "resources": ["resourceslices"],
         "verbs": ["list", "watch", "create", "update", "delete"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    ]


def controller_rules(drivers: Sequence[str]) -> list[dict[str, Any]]:
    """ClusterRole rules for the controller side: watch claims everywhere, write the binding
    conditions of its own drivers' devices (it runs on no particular node: ``arbitrary-node:``)."""
    group = "resource.k8s.io"
    return [
        {"apiGroups": [group], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [group], "resources": ["resourceclaims/status"], "verbs": ["update", "patch"]},
        {"apiGroups": [group], "resources": ["resourceclaims/driver"], "resourceNames": list(drivers),
         "verbs": ["arbitrary-node:update", "arbitrary-node:patch"]},
    ]
