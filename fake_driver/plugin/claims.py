"""Where the kubelet plugin learns a claim's allocation, and where it reports device status.

NodePrepareResources carries only a claim's namespace, name and UID; the plugin looks the
ResourceClaim up itself, checks the UID and reads ``status.allocation``. That lookup is the
``ClaimSource`` interface, with these implementations:

- ``MemoryClaimSource``: claims held in a dict (tests, benchmarks).
- ``FileClaimSource``: claims read from a YAML/JSON file or a folder of them, re-read when the
  files change (``drakit driver serve --claims``, ``drakit node-check``).
- ``FunctionClaimSource``: two callables, e.g. the reference control plane's store.
- ``KubernetesClaimSource``: the API server through the ``kubernetes`` client (thin; the
  status write is left to the cluster work).

Claims are plain dicts in Kubernetes wire form (``resource.k8s.io/v1``).
"""

from __future__ import annotations

import copy
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

Claim = dict[str, Any]


def copy_claim(claim: Claim) -> Claim:
    """A deep copy of a claim (JSON data: a round trip through the C codec is the fast way)."""
    copied: Claim = json.loads(json.dumps(claim))
    return copied


class ClaimSourceError(RuntimeError):
    """The claim store could not be read or written (not: the claim does not exist)."""


class ClaimSource(Protocol):
    """Read access to ResourceClaims and write access to their ``status.devices``."""

    def get_claim(self, namespace: str, name: str) -> Claim | None:
        """The claim in wire form, or ``None`` when it does not exist. The object may be the
        source's own (no copy per call: a prepare reads it once): callers only read it."""
        ...

    def write_device_status(self, namespace: str, name: str, uid: str, driver: str,
                            entries: list[dict[str, Any]]) -> None:
        """Replace this driver's entries in the claim's ``status.devices`` with ``entries``."""
        ...


def merge_device_status(existing: Iterable[dict[str, Any]], driver: str,
                        entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``status.devices`` with ``driver``'s entries replaced and other drivers' kept in order."""
    kept = [dict(e) for e in existing if e.get("driver") != driver]
    return kept + [dict(e) for e in entries]


class MemoryClaimSource:
    """Claims in memory, keyed by namespace and name. Thread-safe."""

    local = True  # reads and writes never wait (FakeDriver.answers_inline)

    def __init__(self, claims: Iterable[Claim] = ()) -> None:
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str], Claim] = {}
        for claim in claims:
            self.put(claim)

    def put(self, claim: Claim) -> None:
        meta = claim.get("metadata") or {}
        with self._lock:
            self._claims[(meta.get("namespace", ""), meta["name"])] = copy.deepcopy(claim)

    def delete(self, namespace: str, name: str) -> None:
        with self._lock:
            self._claims.pop((namespace, name), None)

    def get_claim(self, namespace: str, name: str) -> Claim | None:
        """The stored claim itself (read-only: stored claims are replaced, never changed)."""
        with self._lock:
            return self._claims.get((namespace, name))

    def write_device_status(self, namespace: str, name: str, uid: str, driver: str,
                            entries: list[dict[str, Any]]) -> None:
        with self._lock:
            claim = self._claims.get((namespace, name))
            if claim is None or claim.get("metadata", {}).get("uid") != uid:
                raise ClaimSourceError(f"ResourceClaim {namespace}/{name} (uid {uid}) not found")
            status = dict(claim.get("status") or {})  # a new claim object: one handed out stays as it was
            status["devices"] = merge_device_status(status.get("devices") or [], driver, entries)
            self._claims[(namespace, name)] = {**claim, "status": status}


class FunctionClaimSource:
    """Adapts two callables: ``get(namespace, name)`` and an optional status writer
    ``write(namespace, name, uid, driver, entries)``. Without a writer, status writes are kept
    in ``self.statuses`` keyed by ``(namespace, name)``."""

    def __init__(self, get: Callable[[str, str], Claim | None],
                 write: Callable[[str, str, str, str, list[dict[str, Any]]], None] | None = None
                 ) -> None:
        self._get = get
        self._write = write
        self.statuses: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def get_claim(self, namespace: str, name: str) -> Claim | None:
        claim = self._get(namespace, name)
        return copy_claim(claim) if claim is not None else None

    def write_device_status(self, namespace: str, name: str, uid: str, driver: str,
                            entries: list[dict[str, Any]]) -> None:
        if self._write is not None:
            self._write(namespace, name, uid, driver, entries)
            return
        with self._lock:
            key = (namespace, name)
            self.statuses[key] = merge_device_status(self.statuses.get(key, []), driver, entries)


def load_claim_documents(path: Path) -> list[Claim]:
    """ResourceClaims from one file: a JSON object or list, a ``List`` with ``items``, or YAML
    (several documents allowed). Objects of other kinds are ignored."""
    from drakit.conformance.errors import LoadError
    from drakit.conformance.inputs import CLAIMS, InputError, parse_json, read_text
    from drakit.conformance.yamlmarks import load_documents
    try:  # drakit's one reader: a regular file, its size bounded, strict UTF-8
        text = read_text(path, CLAIMS)
    except InputError as err:
        raise ClaimSourceError(str(err)) from None
    try:
        if path.suffix == ".json":
            docs: list[Any] = [parse_json(text, str(path), what=": not a claims file")]
        else:  # the kit's YAML loader, with its bounds on depth and aliases
            docs = [doc for _, doc in load_documents(text, str(path))]
    except InputError as err:
        raise ClaimSourceError(str(err)) from None
    except LoadError as err:
        where = f"line {err.line}: " if err.line else ""
        raise ClaimSourceError(f"{path}: not valid JSON/YAML: {where}{err.message.removeprefix('YAML: ')}") from None
    except ValueError as err:
        raise ClaimSourceError(f"{path}: not valid JSON/YAML: {str(err).splitlines()[0]}") from None
    except RecursionError:
        raise ClaimSourceError(f"{path}: nested too deep to hold claims") from None
    claims: list[Claim] = []

    def visit(doc: Any) -> None:
        if isinstance(doc, list):
            for item in doc:
                visit(item)
        elif isinstance(doc, dict):
            if isinstance(doc.get("items"), list):
                visit(doc["items"])
            elif doc.get("kind") == "ResourceClaim":
                meta = doc.get("metadata")
                if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                    raise ClaimSourceError(f"{path}: a ResourceClaim without metadata.name")
                claims.append(doc)

    try:
        for doc in docs:
            visit(doc)
    except RecursionError:
        raise ClaimSourceError(f"{path}: nested too deep to hold claims") from None
    return claims


class FileClaimSource:
    """Claims read from a file or from every ``*.json``/``*.yaml``/``*.yml`` file in a folder.

    Files are re-read when their size or modification time changes, so a test can add claims
    while the plugin runs (write them atomically: to a temporary name, then rename). Status
    writes go to ``status_dir/<namespace>_<name>.json`` (a JSON list, ``status.devices``), or
    stay in memory when no ``status_dir`` is given.
    """

    SUFFIXES = (".json", ".yaml", ".yml")
    local = True  # local files only (FakeDriver.answers_inline)

    def __init__(self, path: str | Path, status_dir: str | Path | None = None) -> None:
        self.path = Path(path)
        self.status_dir = Path(status_dir) if status_dir is not None else None
        self._lock = threading.Lock()
        self._cache: dict[Path, tuple[tuple[int, int], list[Claim]]] = {}
        self._generation = 0  # counts changes of the cache
        self._index: tuple[int, dict[tuple[str, str], Claim]] | None = None  # by (namespace, name)
        self.statuses: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def _files(self) -> list[Path]:
        if self.path.is_dir():
            return sorted(p for p in self.path.iterdir()
                          if p.suffix in self.SUFFIXES and not p.name.startswith("."))
        if self.path.exists():
            return [self.path]
        raise ClaimSourceError(f"{self.path}: no such claims file or folder")

    def _refresh(self) -> list[Path]:
        """Re-read the files that changed; the files present, in order (call with the lock held)."""
        try:  # one stat for a claims file (a prepare asks for every claim it prepares)
            single = self.path.stat()
        except OSError:
            single = None
        if single is not None and not stat.S_ISDIR(single.st_mode):
            files, known = [self.path], {self.path: single}
        else:
            files, known = self._files(), {}
        for stale in set(self._cache) - set(files):
            del self._cache[stale]
            self._generation += 1
        present = []
        for file in files:
            try:
                st = known.get(file) or file.stat()
            except FileNotFoundError:
                continue
            key = (st.st_mtime_ns, st.st_size)
            cached = self._cache.get(file)
            if cached is None or cached[0] != key:
                self._cache[file] = (key, load_claim_documents(file))
                self._generation += 1
            present.append(file)
        return present

    def claims(self) -> list[Claim]:
        """Every claim currently in the files, in file order."""
        with self._lock:
            return [claim for file in self._refresh() for claim in self._cache[file][1]]

    def get_claim(self, namespace: str, name: str) -> Claim | None:
        """One claim as parsed (shared, read-only), re-reading changed files first. Its cost does not grow with the
        claims in the files: the index is rebuilt only when a file changed."""
        with self._lock:
            files = self._refresh()
            if self._index is None or self._index[0] != self._generation:
                index: dict[tuple[str, str], Claim] = {}
                for file in files:
                    for claim in self._cache[file][1]:
                        meta = claim["metadata"]
                        index.setdefault((meta.get("namespace", ""), meta["name"]), claim)  # the first wins
                self._index = (self._generation, index)
            return self._index[1].get((namespace, name))  # the parsed document itself, never changed

    def write_device_status(self, namespace: str, name: str, uid: str, driver: str,
                            entries: list[dict[str, Any]]) -> None:
        with self._lock:
            key = (namespace, name)
            merged = merge_device_status(self.statuses.get(key, []), driver, entries)
            self.statuses[key] = merged
            if self.status_dir is None:
                return
            self.status_dir.mkdir(parents=True, exist_ok=True)
            target = self.status_dir / f"{namespace}_{name}.json"
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, target)


class KubernetesClaimSource:
    """Claims from the API server (``resource.k8s.io/v1``) through the ``kubernetes`` client.

    ``api`` is a ``kubernetes.client.ResourceV1Api`` (or anything with the same
    ``read_namespaced_resource_claim(name, namespace)`` method); without one, the client is built
    from the in-cluster config or ``KUBECONFIG``. Reads turn the typed model back into wire
    form.

    Status writes are not implemented yet: the cluster work needs server-side apply on the
    ``status`` subresource with the driver as field manager (and the ``resourceclaims/driver``
    ``associated-node:patch`` permission), which the pydantic-based 37.x client only does
    through ``DynamicClient``. ``write_device_status`` raises ``NotImplementedError``; the plugin
    logs that and carries on, since device status is best effort.
    """

    def __init__(self, api: Any | None = None) -> None:
        if api is None:
            try:
                from kubernetes import client, config  # type: ignore[import-not-found]
            except ImportError as err:
                raise ClaimSourceError("reading claims from the API server needs the "
                                       "'kubernetes' package (pip install kubernetes)") from err
            try:
                config.load_incluster_config()
            except Exception:  # not in a pod: fall back to KUBECONFIG / ~/.kube/config
                try:
                    config.load_kube_config()
                except Exception as err:  # noqa: BLE001 - the client raises several kinds
                    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                    raise ClaimSourceError(
                        f"no claims to read: not in a pod and no usable kubeconfig ($KUBECONFIG or "
                        f"~/.kube/config: {first}); give --claims FILE, --kubeconfig PATH or --in-cluster") from None
            api = client.ResourceV1Api()
        self.api = api

    def get_claim(self, namespace: str, name: str) -> Claim | None:
        try:
            obj = self.api.read_namespaced_resource_claim(name, namespace)
        except Exception as err:  # the client raises ApiException; only its status matters
            if getattr(err, "status", None) == 404:
                return None
            raise ClaimSourceError(f"reading ResourceClaim {namespace}/{name}: {err}") from err
        if isinstance(obj, dict):
            return obj
        sanitize = getattr(getattr(self.api, "api_client", None), "sanitize_for_serialization", None)
        if sanitize is None:
            raise ClaimSourceError("the API client cannot turn a claim back into wire form")
        wire: Claim = sanitize(obj)
        return wire

    def write_device_status(self, namespace: str, name: str, uid: str, driver: str,
                            entries: list[dict[str, Any]]) -> None:
        raise NotImplementedError(
            "writing ResourceClaim status.devices to the API server is not implemented yet "
            "(cluster work: server-side apply on resourceclaims/status, field manager = driver)")
