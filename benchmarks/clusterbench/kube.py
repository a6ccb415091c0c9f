"""The API client of the cluster benchmarks: bulk creation over keep-alive HTTPS connections (the
bodies serialised once, nothing parsed back), lists, and a watch recording when each pod was first
seen bound."""

from __future__ import annotations

import http.client
import json
import ssl
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

Obj = dict[str, Any]
T0 = time.monotonic()
PLURALS = {"Node": "nodes", "Namespace": "namespaces", "Pod": "pods", "DeviceClass": "deviceclasses",
           "ResourceSlice": "resourceslices", "ResourceClaimTemplate": "resourceclaimtemplates",
           "ResourceClaim": "resourceclaims"}


def progress(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    p90 = statistics.quantiles(values, n=10, method="inclusive")[8] if len(values) > 1 else values[0]
    return {"n": len(values), "median": statistics.median(values), "p90": p90, "min": min(values), "max": max(values)}


def path_of(obj: Obj, sub: str = "") -> str:
    """The REST path of ``obj``'s collection (``sub``: ``/<name>/status`` and the like)."""
    kind, ns = obj["kind"], obj["metadata"].get("namespace")
    base = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
    return f"{base}{f'/namespaces/{ns}' if ns else ''}/{PLURALS[kind]}{sub}"


class Kube:
    """The kubernetes client for lists and watches; :meth:`send_all` for writes in bulk."""

    def __init__(self, kubeconfig: Path, threads: int = 16) -> None:
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(str(kubeconfig), client_configuration=cfg)
        cfg.connection_pool_maxsize = threads + 4
        self.threads = threads
        api = client.ApiClient(cfg)
        self.core: Any = client.CoreV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        url = urlparse(cfg.host)
        self._addr = (url.hostname or "127.0.0.1", url.port or 443)
        self._ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        self._ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPSConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = self._local.conn = http.client.HTTPSConnection(*self._addr, context=self._ctx, timeout=120)
        return c

    def send(self, method: str, path: str, body: bytes, content_type: str = "application/json") -> None:
        """One request on this thread's connection (reconnecting once if the server closed it)."""
        for attempt in (1, 2):
            c = self._conn()
            try:
                c.request(method, path, body, {"Content-Type": content_type, "Accept": "application/json"})
                r = c.getresponse()
                data = r.read()
            except (http.client.HTTPException, ConnectionError) as exc:
                c.close()
                self._local.conn = None
                if attempt == 2:
                    raise OSError(f"{method} {path}: {exc}") from None
                continue
            if r.status >= 300:
                raise OSError(f"{method} {path}: HTTP {r.status}: {data[:300].decode(errors='replace')}")
            return

    def send_all(self, requests: list[tuple[str, str, bytes, str]]) -> float:
        """``(method, path, body, content type)`` requests from ``threads`` threads; seconds taken."""
        t, ex = time.monotonic(), ThreadPoolExecutor(self.threads)
        try:
            for f in [ex.submit(self.send, *r) for r in requests]:
                f.result()
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
        return time.monotonic() - t

    def create_all(self, objs: list[Obj]) -> float:
        return self.send_all([("POST", path_of(o), json.dumps(o).encode(), "application/json") for o in objs])

    def items(self, list_fn: Callable[..., Any], *args: Any, **kw: Any) -> list[Obj]:
        return list(json.loads(list_fn(*args, _preload_content=False, **kw).data)["items"])


class BoundWatch(threading.Thread):
    """Watches the namespace's bound pods and records when each was first seen bound."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        super().__init__(daemon=True)
        self.kube, self.ns, self.cond, self.stopping = kube, namespace, threading.Condition(), False
        self.bound: dict[str, float] = {}

    def run(self) -> None:
        from kubernetes.watch.watch import iter_resp_lines

        while not self.stopping:
            try:
                resp = self.kube.core.list_namespaced_pod(self.ns, watch=True, field_selector="spec.nodeName!=",
                                                          timeout_seconds=900, _preload_content=False)
                for line in iter_resp_lines(resp):
                    ev = json.loads(line)
                    name = ev.get("object", {}).get("metadata", {}).get("name")
                    if ev.get("type") in ("ADDED", "MODIFIED") and name:
                        with self.cond:
                            self.bound.setdefault(name, time.monotonic())
                            self.cond.notify_all()
            except Exception:  # noqa: BLE001 - the watch broke or the cluster went away: retry or end
                time.sleep(0.5)

    def wait_for(self, names: set[str], timeout: float, label: str) -> tuple[int, float | None]:
        """How many of ``names`` got bound within ``timeout``, and when the last one did."""
        deadline, reported = time.monotonic() + timeout, time.monotonic()
        with self.cond:
            while len(done := names.intersection(self.bound)) < len(names) and time.monotonic() < deadline:
                if time.monotonic() - reported > 10:
                    progress(f"  {label}: {len(done)}/{len(names)} pods bound")
                    reported = time.monotonic()
                self.cond.wait(1.0)
        return len(done), max((self.bound[n] for n in done), default=None)
