"""The cluster backend: the same cases against a real API server and scheduler.

Any kubeconfig works (``--drakit-kubeconfig`` or ``$KUBECONFIG``); ``--drakit-cluster local``
starts drakit's local control plane (upstream 1.37 binaries plus kwok) for the session and stops
it at the end. Each case gets its own namespace (deterministic name, run label). Cluster-scoped
objects a case creates (nodes, slices, classes, taint rules) are deleted when the case ends,
so cluster cases run one at a time (``-n 0``). The fake hardware of a case is published through
the API the way the fake driver's controller side does: kwok Nodes, the drivers' DeviceClasses
and the nodes' ResourceSlices.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any, Mapping

from ..cases.model import Case
from ..errors import ApiRejected
from ..features import DEFAULT_GATES
from .base import Capabilities, HarnessError

RUN_LABEL = "drakit.dev/run"
CASE_LABEL = "drakit.dev/case"
API_VERSIONS = {
    "DeviceClass": "resource.k8s.io/v1", "ResourceClaim": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1", "ResourceSlice": "resource.k8s.io/v1",
    "DeviceTaintRule": "resource.k8s.io/v1", "Pod": "v1", "Node": "v1", "Namespace": "v1", "Event": "v1",
    "ResourcePoolStatusRequest": "resource.k8s.io/v1alpha3", "PodGroup": "scheduling.k8s.io/v1beta1",
    "Workload": "scheduling.k8s.io/v1beta1",
}
NAMESPACED = {"ResourceClaim", "ResourceClaimTemplate", "Pod", "Event", "PodGroup", "Workload"}
CLEANUP_TIMEOUT = 60.0


class KubeApi:
    """A thin layer over the kubernetes DynamicClient that speaks wire-form dicts."""

    def __init__(self, kubeconfig: str | None) -> None:
        try:
            from kubernetes import config as kconfig
            from kubernetes.client import ApiClient
            from kubernetes.dynamic import DynamicClient
        except ImportError as exc:  # pragma: no cover - a packaging problem, said plainly
            raise HarnessError("the cluster backend needs the 'kubernetes' package (pip install kubernetes)") from exc
        try:
            client_config = type("Cfg", (), {})()
            from kubernetes.client import Configuration
            client_config = Configuration()
            kconfig.load_kube_config(config_file=kubeconfig, client_configuration=client_config)
        except Exception as exc:
            where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise HarnessError(f"cannot load kubeconfig {where}: {type(exc).__name__}: {_first_line(exc)}") from None
        self.api_client = ApiClient(client_config)
        self.dynamic = DynamicClient(self.api_client)
        self._resources: dict[tuple[str, str], Any] = {}

    def resource(self, api_version: str, kind: str) -> Any:
        key = (api_version, kind)
        if key not in self._resources:
            try:
                self._resources[key] = self.dynamic.resources.get(api_version=api_version, kind=kind)
            except Exception as exc:
                raise HarnessError(f"the cluster does not serve {kind} in {api_version}: {_first_line(exc)}") from None
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

    def version(self) -> str:
        try:
            return str(self.api_client.call_api("/version", "GET", response_type="object")[0].get("gitVersion"))
        except Exception:
            try:
                from kubernetes.client import VersionApi
                return str(VersionApi(self.api_client).get_code().git_version)
            except Exception as exc:
                raise HarnessError(f"cannot reach the API server: {_first_line(exc)}") from None

    @staticmethod
    def _call(fn: Any, obj: dict[str, Any]) -> dict[str, Any]:
        from kubernetes.dynamic.exceptions import DynamicApiError
        try:
            return fn().to_dict()  # type: ignore[no-any-return]
        except DynamicApiError as exc:
            status = getattr(exc, "status", None)
            message = _status_message(exc)
            if status in (400, 403, 409, 422):
                raise ApiRejected(message) from None
            raise HarnessError(f"{obj['kind']} {obj['metadata'].get('name')}: HTTP {status}: {message}") from None


def _status_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    try:
        data = json.loads(body) if isinstance(body, (str, bytes)) else None
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class ClusterSession:
    synchronous = False

    def __init__(self, api: KubeApi, case: Case, namespace: str, run_id: str, keep_on_failure: bool) -> None:
        self.api = api
        self.case = case
        self.namespace = namespace
        self.run_id = run_id
        self.keep_on_failure = keep_on_failure
        self.created: list[tuple[str, str, str | None]] = []
        from .reference import FaultState
        self.faults = FaultState(case)

    def inject_fault(self, node: str, device: str, kind: str, effect: str) -> None:
        for obj in self.faults.inject(node, device, kind, effect):
            self.apply(obj)

    def _ns(self, kind: str) -> str | None:
        return self.namespace if kind in NAMESPACED else None

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = json.loads(json.dumps(obj))
        meta = obj.setdefault("metadata", {})
        if obj["kind"] in NAMESPACED:
            meta.setdefault("namespace", self.namespace)
        else:
            meta.setdefault("labels", {}).update({RUN_LABEL: self.run_id, CASE_LABEL: _label(self.case.id)})
        name = meta.get("name")
        existing = self.api.get(obj["kind"], name, meta.get("namespace")) if name else None
        if existing is None:
            out = self.api.create(obj)
            self.created.append((obj["kind"], out["metadata"]["name"], meta.get("namespace")))
            return out
        for attempt in range(5):
            meta["resourceVersion"] = existing["metadata"]["resourceVersion"]
            if "status" in existing:
                obj["status"] = existing["status"]
            try:
                return self.api.replace(obj)
            except ApiRejected as exc:
                # Controllers (kwok, the claim controller) write too: re-read and try again.
                if "the object has been modified" not in str(exc) or attempt == 4:
                    raise
                existing = self.api.get(obj["kind"], name, meta.get("namespace")) or existing
        raise AssertionError("unreachable")

    def update_status(self, kind: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Replace the object's status through the status subresource, as a driver does."""
        obj = self.api.get(kind, name, self._ns(kind))
        if obj is None:
            raise KeyError(f'{kind} "{name}" not found')
        obj["status"] = status
        return self.api.replace_status(obj)

    def advance(self, seconds: float) -> None:
        """A real cluster has a real clock: wait."""
        time.sleep(seconds)

    def delete(self, kind: str, name: str) -> None:
        if not self.api.delete(kind, name, self._ns(kind)):
            raise KeyError(f'{kind} "{name}" not found')

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.api.get(kind, name, self._ns(kind))

    def list(self, kind: str) -> list[dict[str, Any]]:
        return self.api.list(kind, self._ns(kind))

    def events(self) -> list[dict[str, Any]]:
        return self.api.list("Event", self.namespace)

    def diagnostics(self) -> dict[str, Any]:
        def brief(kind: str) -> list[dict[str, Any]]:
            try:
                return [{"kind": kind, "name": o["metadata"]["name"], "spec": o.get("spec"), "status": o.get("status")}
                        for o in self.list(kind)]
            except Exception as exc:
                return [{"kind": kind, "error": _first_line(exc)}]
        events = []
        for e in self.events():
            inv = e.get("involvedObject") or {}
            events.append(f"{e.get('type')} {e.get('reason')} {inv.get('kind')}/{inv.get('name')}: {e.get('message')}")
        return {"objects": brief("ResourceClaim") + brief("Pod"), "events": events}

    def close(self, *, failed: bool) -> None:
        if failed and self.keep_on_failure:
            return
        for pod in self.api.list("Pod", self.namespace):
            self.api.delete("Pod", pod["metadata"]["name"], self.namespace, grace=0)
        for claim in self.api.list("ResourceClaim", self.namespace):
            self.api.delete("ResourceClaim", claim["metadata"]["name"], self.namespace)
        deadline = time.monotonic() + CLEANUP_TIMEOUT
        while time.monotonic() < deadline and (self.api.list("Pod", self.namespace)
                                                or self.api.list("ResourceClaim", self.namespace)):
            time.sleep(0.25)
        self.api.delete("Namespace", self.namespace, None)
        for kind, name, ns in reversed(self.created):
            if ns is None:
                self.api.delete(kind, name, None)


def _label(text: str) -> str:
    value = text.replace("/", ".")[:63].strip("-_.")
    return value or "case"


class ClusterBackend:
    """Runs cases against a real cluster; see the module docstring."""

    name = "cluster"

    def __init__(self, config: Any) -> None:
        opt = config.getoption
        self.keep_on_failure = bool(opt("--drakit-keep-on-failure"))
        self.run_id = uuid.uuid4().hex[:8]
        self._local = None
        kubeconfig = opt("--drakit-kubeconfig")
        gates: Mapping[str, bool] | None = None
        if opt("--drakit-cluster") == "local":
            from clusters.local.launcher import LocalCluster
            self._local = LocalCluster(gates=opt("--drakit-feature-gates") or None)
            self._local.up()
            config.add_cleanup(self._local.down)
            kubeconfig = str(self._local.kubeconfig)
            gates = {g: v for comp in self._local.gates.values() for g, v in comp.items()}
        self.api = KubeApi(kubeconfig)
        self.version = self.api.version()
        self.gates = dict(DEFAULT_GATES)
        if gates:
            self.gates.update({g: v for g, v in gates.items() if g in DEFAULT_GATES})

    def capabilities(self) -> Capabilities:
        return Capabilities(self.version, dict(self.gates), ("resource.k8s.io/v1",))

    def unmet(self, case: Case) -> tuple[str, str] | None:
        for gate, want in case.feature_gates.items():
            if self.gates.get(gate, False) != want:
                return ("feature-disabled", f"the case needs {gate}={str(want).lower()}; the cluster has "
                                            f"{str(self.gates.get(gate, False)).lower()}")
        return None

    def open(self, case: Case) -> ClusterSession:
        from .reference import case_namespace, hardware_objects
        ns = case_namespace(case.id)
        session = ClusterSession(self.api, case, ns, self.run_id, self.keep_on_failure)
        try:
            session.apply({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": ns, "labels": {**case.namespace_labels, RUN_LABEL: self.run_id}}})
            for obj in hardware_objects(case):
                if obj["kind"] == "Node":
                    from clusters.local.kwokconfig import fake_node
                    node = fake_node(obj["metadata"]["name"], obj["metadata"].get("labels"))
                    session.apply(node)
                else:
                    session.apply(obj)
        except ApiRejected as exc:
            session.close(failed=False)
            raise HarnessError(f"installing the fake hardware failed: {exc}") from exc
        return session


def write_kubeconfig_note(path: Path) -> str:
    return f"export KUBECONFIG={path}"
