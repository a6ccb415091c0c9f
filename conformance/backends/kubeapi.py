"""A thin client over the Kubernetes API for the cluster backend: typed kinds, apply with strict
field validation, reads, deletes and waits. Shared by the cluster backend and the local target."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ApiRejected, api_error_message
from .base import HarnessError

RUN_LABEL = "drakit.dev/run"
CASE_LABEL = "drakit.dev/case"
API_VERSIONS = {
    "DeviceClass": "resource.k8s.io/v1", "ResourceClaim": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1", "ResourceSlice": "resource.k8s.io/v1",
    "DeviceTaintRule": "resource.k8s.io/v1", "Pod": "v1", "Node": "v1", "Namespace": "v1", "Event": "v1",
    "ResourcePoolStatusRequest": "resource.k8s.io/v1alpha3", "PodGroup": "scheduling.k8s.io/v1beta1",
    "Workload": "scheduling.k8s.io/v1beta1", "Lease": "coordination.k8s.io/v1",
    "ConfigMap": "v1",
}
NAMESPACED = {"ResourceClaim", "ResourceClaimTemplate", "Pod", "Event", "PodGroup", "Workload"}
CLEANUP_TIMEOUT = 60.0


API_TIMEOUT_ENV = "DRAKIT_API_TIMEOUT"  # seconds to wait for an API server's answer (default 120)
CONNECT_SECONDS = 10.0


def api_timeout() -> tuple[float, float]:
    """(connect, read) seconds of every API call that does not set its own."""
    raw = os.environ.get(API_TIMEOUT_ENV, "")
    try:
        read = float(raw) if raw else 120.0
    except ValueError:
        read = 120.0
    read = read if 0 < read <= 3600 else 120.0
    return min(CONNECT_SECONDS, read), read


def bound_requests(api_client: Any) -> None:
    """Give every request of *api_client* a (connect, read) timeout: the kubernetes client waits
    for ever by default (a server that accepts and never answers hung drakit)."""
    rest = api_client.rest_client
    unbounded = rest.request

    def request(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return unbounded(*args, _request_timeout=_request_timeout or api_timeout(), **kwargs)
    rest.request = request


class KubeApi:
    """A thin layer over the kubernetes DynamicClient that speaks wire-form dicts."""

    def __init__(self, kubeconfig: str | None, context: str | None = None, cache_dir: Path | None = None) -> None:
        """*cache_dir*: where the client keeps its discovery cache (default: the temp dir, one file
        per server; a local cluster's run dir, so the file goes with the cluster)."""
        try:
            from kubernetes.client import ApiClient
            from kubernetes.dynamic import DynamicClient
        except ImportError as exc:  # pragma: no cover - a packaging problem, said plainly
            raise HarnessError("the cluster backend needs the 'kubernetes' package (pip install kubernetes)") from exc
        from .kubeconfig import KubeconfigError, client_configuration, resolve_kubeconfig
        try:
            self.target = resolve_kubeconfig(kubeconfig, context)
            client_config = client_configuration(self.target)
        except KubeconfigError as exc:
            raise HarnessError(str(exc)) from None
        self.api_client = ApiClient(client_config)
        bound_requests(self.api_client)
        try:  # the dynamic client reads the API discovery documents right away
            cache = str(cache_dir / "discovery-cache.json") if cache_dir is not None else None
            self.dynamic = DynamicClient(self.api_client, cache_file=cache)
        except Exception as exc:
            raise HarnessError(f"cannot reach the API server of context {self.target.context!r} "
                               f"(kubeconfig {self.target.config_file}): {first_line(exc)}") from None
        self._resources: dict[tuple[str, str], Any] = {}

    def resource(self, api_version: str, kind: str) -> Any:
        key = (api_version, kind)
        if key not in self._resources:
            try:
                self._resources[key] = self.dynamic.resources.get(api_version=api_version, kind=kind)
            except Exception as exc:
                raise HarnessError(f"the cluster does not serve {kind} in {api_version}: {first_line(exc)}") from None
        return self._resources[key]

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        res = self.resource(obj["apiVersion"], obj["kind"])
        ns = obj["metadata"].get("namespace")
        return self._call(lambda: self._strict("post", res.path(namespace=ns), obj), obj)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        res = self.resource(obj["apiVersion"], obj["kind"])
        ns = obj["metadata"].get("namespace")
        return self._call(lambda: self._strict("put", res.path(name=obj["metadata"]["name"], namespace=ns), obj), obj)

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        res = self.resource(obj["apiVersion"], obj["kind"]).subresources["status"]
        ns = obj["metadata"].get("namespace")
        return self._call(lambda: self._strict("put", res.path(name=obj["metadata"]["name"], namespace=ns), obj), obj)

    def _strict(self, method: str, path: str, obj: dict[str, Any]) -> Any:
        """Write with fieldValidation=Strict, as kubectl does: an unknown or duplicate field is an
        error, not a warning with the field silently dropped. (The DynamicClient accepts a
        field_validation argument but never sends it, so the query goes into the path.)"""
        return self.dynamic.request(method, f"{path}?fieldValidation=Strict", body=obj)

    def get(self, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        from kubernetes.dynamic.exceptions import NotFoundError
        res = self.resource(API_VERSIONS[kind], kind)
        try:
            return res.get(name=name, namespace=namespace).to_dict()  # type: ignore[no-any-return]
        except NotFoundError:
            return None

    def list(self, kind: str, namespace: str | None, label_selector: str | None = None) -> list[dict[str, Any]]:
        res = self.resource(API_VERSIONS[kind], kind)
        got = res.get(namespace=namespace, label_selector=label_selector)
        return [item.to_dict() for item in got.items]

    def delete(self, kind: str, name: str, namespace: str | None, *, grace: int | None = None) -> bool:
        from kubernetes.dynamic.exceptions import NotFoundError
        res = self.resource(API_VERSIONS[kind], kind)
        body = {"gracePeriodSeconds": grace} if grace is not None else None
        try:
            res.delete(name=name, namespace=namespace, body=body)
            return True
        except NotFoundError:
            return False

    def dry_run(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` with ``dryRun=All``: validated and admitted, never stored."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        ns = obj["metadata"].get("namespace")
        # As in _strict: the DynamicClient would drop field_validation, so the query goes into the path.
        path = f"{res.path(namespace=ns)}?fieldValidation=Strict&dryRun=All"
        return self._call(lambda: self.dynamic.request("post", path, body=obj), obj)

    def get_json(self, path: str) -> dict[str, Any]:
        """GET a discovery path (``/apis``, ``/apis/<group>/<version>``) as data."""
        try:
            return self.dynamic.request("GET", path).to_dict()  # type: ignore[no-any-return]
        except Exception as exc:
            raise HarnessError(f"API discovery of {path} failed: {first_line(exc)}") from None

    def version(self) -> str:
        """The API server's ``gitVersion`` (GET /version)."""
        try:
            from kubernetes.client import VersionApi
            return str(VersionApi(self.api_client).get_code().git_version)
        except Exception as exc:
            raise HarnessError(f"cannot reach the API server: {first_line(exc)}") from None

    @staticmethod
    def _call(fn: Any, obj: dict[str, Any]) -> dict[str, Any]:
        from kubernetes.dynamic.exceptions import DynamicApiError
        try:
            return fn().to_dict()  # type: ignore[no-any-return]
        except DynamicApiError as exc:
            status = getattr(exc, "status", None)
            message = api_error_message(exc)
            if status in (400, 403, 409, 422):
                raise ApiRejected(message) from None
            raise HarnessError(f"{obj['kind']} {obj['metadata'].get('name')}: HTTP {status}: {message}") from None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


