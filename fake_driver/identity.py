"""The fake driver's own identity on a cluster: a ServiceAccount with a narrow ClusterRole.

``driver_api_client(admin, drivers)`` makes (idempotently) the namespace ``drakit-system``, the
ServiceAccount ``drakit-fake-driver``, the ClusterRole ``drakit:fake-driver`` with only the rules
a DRA driver needs (``fake_driver.kube.driver_rules``) and its binding, then asks the TokenRequest
API for a token and returns an ApiClient that authenticates with it (same server and CA as the
admin client). The token is kept in memory only and never logged;
``write_kubeconfig(api_client, path)`` puts it in a kubeconfig file (mode 0600) for a driver
process started with ``drakit driver serve --kubeconfig PATH``.
"""

from __future__ import annotations

import base64
import copy
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from .kube import Kube, KubeError, driver_rules

NAMESPACE = "drakit-system"
SERVICE_ACCOUNT = "drakit-fake-driver"
ROLE = "drakit:fake-driver"
TOKEN_SECONDS = 24 * 3600
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _ensure(admin: Kube, collection: str, obj: dict[str, Any]) -> None:
    """Create ``obj``, or replace it when it exists (so the rules are always the current ones)."""
    name = obj["metadata"]["name"]
    current = admin.get(f"{collection}/{name}")
    if current is None:
        admin.request("POST", collection, obj)
        return
    if obj["kind"] in ("Namespace", "ServiceAccount"):
        return
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    admin.request("PUT", f"{collection}/{name}", obj)


def driver_api_client(admin: Kube, drivers: Sequence[str], *, namespace: str = NAMESPACE,
                      service_account: str = SERVICE_ACCOUNT, role: str = ROLE,
                      rules: Callable[[Sequence[str]], list[dict[str, Any]]] = driver_rules) -> Any:
    """An ApiClient acting as the fake driver's ServiceAccount (see the module docstring);
    ``rules`` makes the ClusterRole (e.g. ``fake_driver.kube.controller_rules``)."""
    from kubernetes.client import ApiClient, Configuration

    subject = {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
    try:
        _ensure(admin, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": namespace}})
        _ensure(admin, f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": service_account, "namespace": namespace}})
        _ensure(admin, f"{RBAC}/clusterroles",
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": role}, "rules": rules(drivers)})
        _ensure(admin, f"{RBAC}/clusterrolebindings",
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": role}, "subjects": [subject],
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}})
        answer = admin.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": TOKEN_SECONDS}})
    except KubeError as err:
        raise KubeError(f"setting up the fake driver's identity ({namespace}/{service_account}): {err}",
                        err.status) from None
    base = admin.api_client.configuration
    cfg = Configuration()
    cfg.host = base.host
    cfg.ssl_ca_cert = base.ssl_ca_cert
    cfg.verify_ssl = base.verify_ssl
    cfg.api_key = {"authorization": answer["status"]["token"]}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return ApiClient(cfg)


def write_kubeconfig(api_client: Any, path: Path, name: str = "drakit-fake-driver") -> None:
    """A kubeconfig (mode 0600, written atomically) for the token client ``driver_api_client``
    made: same server and CA, the token as the user's credential."""
    cfg = api_client.configuration
    cluster: dict[str, Any] = {"server": cfg.host}
    if cfg.ssl_ca_cert:
        cluster["certificate-authority-data"] = base64.b64encode(Path(cfg.ssl_ca_cert).read_bytes()).decode()
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": name,
           "clusters": [{"name": name, "cluster": cluster}],
           "users": [{"name": name, "user": {"token": cfg.api_key["authorization"]}}],
           "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)
    os.replace(tmp, path)
