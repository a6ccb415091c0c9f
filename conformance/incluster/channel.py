"""A shard's progress and results through the API server, beside its log.

A pod's log reaches the caller through the API server's proxy to the node's kubelet, which not
every cluster allows (a kubelet port the API server cannot reach, a node with no address). So a shard in a pod also keeps them in ConfigMaps of the run's
namespace (``$DRAKIT_RESULTS_CONFIGMAP``, ``NAMESPACE/NAME``, set by the Job): the ConfigMap
``NAME`` carries the progress (annotation ``drakit.dev/progress: DONE/TOTAL``, written at most
once a second and at the end) and, once the shard is done, how many parts its results have and
their SHA-256; ``NAME-part-<k>`` hold the gzipped ``results.json`` in parts of at most 700 KiB
(a ConfigMap holds 1 MiB; ``$DRAKIT_RESULTS_PART_BYTES`` makes them smaller, for a cluster whose
API server or etcd takes less in one request). The caller reads them (:func:`read_results`), else the log
(``frames``). A failure to write is said on stderr and the shard goes on: the log still carries
everything.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import sys
import time
from typing import Any

PROGRESS = "drakit.dev/progress"
PART = 700 * 1024
PART_ENV = "DRAKIT_RESULTS_PART_BYTES"


class Channel:
    def __init__(self, where: str, api: Any = None, part: int | None = None) -> None:
        self.namespace, _, self.name = where.partition("/")
        self._api = api
        self.part = part or part_bytes(os.environ)
        self._last = 0.0
        self.broken = False

    def _client(self) -> Any:
        if self._api is None:
            from drakit.conformance.backends.kubeapi import KubeApi
            self._api = KubeApi(None, None)  # the pod's service account
        return self._api

    def _put(self, name: str, body: dict[str, Any]) -> None:
        api = self._client()
        meta: dict[str, Any] = {"name": name, "namespace": self.namespace}
        if "annotations" in body:
            meta["annotations"] = body["annotations"]
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
               **{k: v for k, v in body.items() if k != "annotations"}}
        old = api.get("ConfigMap", name, self.namespace)
        if old is None:
            api.create(obj)
        else:
            obj["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            api.replace(obj)

    def _safely(self, what: str, fn: Any) -> None:
        if self.broken:
            return
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the log still carries it; say it once
            self.broken = True
            from drakit.conformance.backends.kubeapi import first_line
            print(f"drakit: cannot write the shard's {what} to ConfigMap {self.namespace}/{self.name} "
                  f"(the log still has it): {first_line(exc)}", file=sys.stderr, flush=True)

    def progress(self, done: int, total: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 1.0:
            return
        self._last = now
        self._safely("progress", lambda: self._put(self.name, {"annotations": {PROGRESS: f"{done}/{total}"}}))

    def results(self, text: str, done: int) -> None:
        packed = gzip.compress(text.encode("utf-8"), mtime=0)
        parts = [packed[i:i + self.part] for i in range(0, len(packed), self.part)] or [b""]

        def write() -> None:
            for k, part in enumerate(parts):
                self._put(f"{self.name}-part-{k}", {"binaryData": {"part": base64.b64encode(part).decode("ascii")}})
            self._put(self.name, {"annotations": {PROGRESS: f"{done}/{done}"},
                                  "data": {"parts": str(len(parts)), "sha256": hashlib.sha256(packed).hexdigest()}})
        self._safely("results", write)


def part_bytes(environ: Any) -> int:
    """The size of a results part: ``$DRAKIT_RESULTS_PART_BYTES`` (1 KiB to :data:`PART`), else
    :data:`PART`; a value that is not a number in that range is said on stderr and ignored."""
    raw = str(environ.get(PART_ENV) or "").strip()
    if not raw:
        return PART
    if raw.isdigit() and 1024 <= int(raw) <= PART:
        return int(raw)
    print(f"drakit: ${PART_ENV}={raw!r} is not a number of bytes from 1024 to {PART}: parts of {PART} bytes",
          file=sys.stderr, flush=True)
    return PART


def read_progress(api: Any, namespace: str, name: str) -> tuple[int, int] | None:
    cm = api.get("ConfigMap", name, namespace)
    text = (((cm or {}).get("metadata") or {}).get("annotations") or {}).get(PROGRESS, "")
    done, sep, total = text.partition("/")
    return (int(done), int(total)) if sep and done.isdigit() and total.isdigit() else None


def read_results(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    """The results a shard left in its ConfigMaps, checked; None when there are none (yet)."""
    head = api.get("ConfigMap", name, namespace)
    data = (head or {}).get("data") or {}
    if not str(data.get("parts", "")).isdigit():
        return None
    packed = b""
    for k in range(int(data["parts"])):
        part = api.get("ConfigMap", f"{name}-part-{k}", namespace)
        if part is None:
            return None
        packed += base64.b64decode((part.get("binaryData") or {}).get("part", ""))
    if hashlib.sha256(packed).hexdigest() != data.get("sha256"):
        return None
    try:
        results = json.loads(gzip.decompress(packed).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return results if isinstance(results, dict) else None
