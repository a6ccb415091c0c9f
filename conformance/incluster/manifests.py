"""What ``drakit run --in-cluster`` creates in the cluster, as data (pure, no I/O).

Everything but the two cluster-scoped RBAC objects lives in the run's own namespace
(``drakit-<run id>``), and everything carries the label ``drakit.dev/in-cluster: <run id>``, so
the run deletes what it made by name and label, and finds a killed run's leftovers the same way.

The shards' ServiceAccount gets what the cases do and nothing else (:data:`CLUSTER_RULES`, each
with why). The cases run on the cluster backend as they do from outside: each in its own
namespace with fake (kwok) nodes, ResourceSlices, DeviceClasses, taint rules, claims and pods,
created and removed by the case; so the role is cluster-wide, but it holds no secrets, no
workloads beyond pods, no RBAC and no admission configuration. In the run's namespace it may
also keep the Lease through which the shards take turns for cluster-wide cases
(``backends.leaselock``).
"""

from __future__ import annotations

import json
import posixpath
from typing import Any, Mapping, Sequence

RUN_LABEL = "drakit.dev/in-cluster"
SHARD_LABEL = "drakit.dev/shard"
ACCOUNT = "drakit"
LOCK = "drakit-shard-lock"
CASES_MOUNT = "/cases"
PROFILE_MOUNT = "/profile"
OUT = "/tmp/drakit-out"
MAX_CASE_BYTES = 900 * 1024  # a ConfigMap holds 1 MiB at most

_EDIT = ["get", "list", "watch", "create", "update", "patch", "delete"]

#: (rule, why): the ClusterRole of the shards' ServiceAccount.
CLUSTER_RULES: tuple[tuple[dict[str, Any], str], ...] = (
    ({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch", "create", "delete"]},
     "each case runs in a namespace of its own, created and deleted by the case"),
    ({"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": _EDIT},
     "the cases' fake (kwok) nodes, with their labels and capacity, added and removed per case"),
    ({"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": _EDIT},
     "the cases' pods that consume claims"),
    ({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
     "what the driver suite's pods print: the environment the driver's CDI edits gave their containers"),
    ({"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["get", "list", "watch"]},
     "checks on what the scheduler and kubelet say (unschedulable reasons, failures)"),
    ({"apiGroups": ["resource.k8s.io"],
      "resources": ["deviceclasses", "resourceslices", "devicetaintrules", "resourceclaims", "resourceclaims/status",
                    "resourceclaimtemplates", "resourcepoolstatusrequests", "resourcepoolstatusrequests/status"],
      "verbs": _EDIT},
     "the DRA objects the cases apply and check; claim status written as a driver does"),
    ({"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
      "verbs": ["associated-node:update", "associated-node:patch", "arbitrary-node:update", "arbitrary-node:patch"]},
     "a claim's device status and binding conditions, written as its driver does (with "
     "DRAResourceClaimGranularStatusAuthorization, per driver name; the cases use several drivers)"),
    ({"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups", "workloads"], "verbs": _EDIT},
     "workload claims (gang scheduling) cases"),
    ({"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
     "the API server's kubernetes_feature_enabled metric: which DRA gates the cluster has (else dry-runs guess)"),
)

#: (rule, why): the Role in the run's namespace.
NAMESPACE_RULES: tuple[tuple[dict[str, Any], str], ...] = (
    ({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
     "the Lease through which the shards take turns: a cluster-wide case runs with no other case"),
    ({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "update"]},
     "each shard's progress and results, for the caller to read (incluster.channel)"),
)


def namespace_of(run_id: str) -> str:
    return f"drakit-{run_id}"


def _meta(name: str, run_id: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {RUN_LABEL: run_id, **labels}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def rbac_objects(run_id: str) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, ClusterRole + binding, Role + binding, in creation order."""
    ns = namespace_of(run_id)
    subject = [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": ns}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns, run_id)},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(ACCOUNT, run_id, ns)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(ns, run_id),
         "rules": [rule for rule, _why in CLUSTER_RULES]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": _meta(ns, run_id),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ns}, "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(ACCOUNT, run_id, ns),
         "rules": [rule for rule, _why in NAMESPACE_RULES]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": _meta(ACCOUNT, run_id, ns),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT}, "subjects": subject},
    ]


def case_files(files: Sequence[tuple[str, str]], run_id: str) -> tuple[dict[str, Any], list[str]]:
    """The ConfigMap holding the case files (``(relative path, text)``) and their paths in the
    pod. ValueError when they are too large for one."""
    size = sum(len(text.encode("utf-8")) for _p, text in files)
    if size > MAX_CASE_BYTES:
        raise ValueError(f"the case files hold {size:,} bytes; a run in the cluster carries at most "
                         f"{MAX_CASE_BYTES:,} (one ConfigMap): run fewer files, or the image's own suites (no path)")
    data = {f"f{i}": text for i, (_p, text) in enumerate(files)}
    items = [{"key": f"f{i}", "path": posixpath.normpath(path)} for i, (path, _t) in enumerate(files)]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("drakit-cases", run_id, namespace_of(run_id)),
          "data": data}
    cm["items"] = items  # taken out again by the pod spec (not a ConfigMap field)
    return cm, [posixpath.join(CASES_MOUNT, item["path"]) for item in items]


def profile_configmap(name: str, text: str, run_id: str) -> tuple[dict[str, Any], str]:
    """The ConfigMap carrying a vendor profile (its file *name* and *text*) and the profile's
    path in the pod (the file keeps its name: results.json records it). ValueError when it is
    too large for one."""
    size = len(text.encode("utf-8"))
    if size > MAX_CASE_BYTES:
        raise ValueError(f"the vendor profile holds {size:,} bytes; a run in the cluster carries at most "
                         f"{MAX_CASE_BYTES:,} (one ConfigMap)")
    name = posixpath.basename(name.replace("\\", "/")) or "profile.yaml"
    if name in (".", ".."):
        name = "profile.yaml"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("drakit-profile", run_id, namespace_of(run_id)),
          "data": {"profile": text}}
    return cm, posixpath.join(PROFILE_MOUNT, name)


def shard_job(run_id: str, index: int, count: int, image: str, args: Sequence[str],
              items: list[dict[str, str]] | None, api_server: str | None = None,
              profile: str | None = None, part: int | None = None,
              component_gates: Mapping[str, Mapping[str, bool]] | None = None) -> dict[str, Any]:
    """The Job of shard ``index`` of ``count``: ``drakit run --backend cluster --shard i/N`` with
    the pod's service account, its results and progress in its log (``frames``), one try.
    *api_server*: the pod runs in the node's network and reaches the API server there (a
    cluster whose pods have no route to the ``kubernetes`` Service, as drakit's local one).
    *profile*: the vendor profile's path in the pod (``profile_configmap``), mounted from the
    ``drakit-profile`` ConfigMap and given to ``--vendor``. *part*: the size of the parts of its
    results in ConfigMaps (``channel``; None: the default). *component_gates*: the scheduler's and
    controller manager's gates, read by the caller where the pods cannot (``gatemetrics``)."""
    ns = namespace_of(run_id)
    labels = {RUN_LABEL: run_id, SHARD_LABEL: str(index)}
    command = ["drakit", "run", "--backend", "cluster", "--shard", f"{index}/{count}", "--out", OUT, "--plain",
               "--emit-results", "--shard-lock", f"{ns}/{LOCK}", *(["--vendor", profile] if profile else []), *args]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    mounts = [{"name": "tmp", "mountPath": "/tmp"}]
    if items is not None:
        volumes.append({"name": "cases", "configMap": {"name": "drakit-cases", "items": items}})
        mounts.append({"name": "cases", "mountPath": CASES_MOUNT, "readOnly": True})
    if profile is not None:
        volumes.append({"name": "profile", "configMap": {"name": "drakit-profile", "items": [
            {"key": "profile", "path": posixpath.relpath(profile, PROFILE_MOUNT)}]}})
        mounts.append({"name": "profile", "mountPath": PROFILE_MOUNT, "readOnly": True})
    container = {
        "name": "drakit", "image": image, "imagePullPolicy": "IfNotPresent", "command": command,
        "env": [{"name": "TMPDIR", "value": "/tmp"}, {"name": "HOME", "value": "/tmp"},
                {"name": "DRAKIT_RUN_ID", "value": f"{run_id}s{index}"},
                {"name": "DRAKIT_RESULTS_CONFIGMAP", "value": f"{ns}/{shard_configmap(index)}"}],
        "volumeMounts": [*mounts, {"name": "token", "mountPath": TOKEN_MOUNT, "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    if part is not None:
        container["env"].append({"name": "DRAKIT_RESULTS_PART_BYTES", "value": str(part)})
    if component_gates:
        from drakit.conformance.backends.gatemetrics import CALLER_ENV
        container["env"].append({"name": CALLER_ENV, "value": json.dumps(component_gates, sort_keys=True)})
    volumes.append(token_volume())
    pod_spec = {
        "serviceAccountName": ACCOUNT, "automountServiceAccountToken": False,
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 90,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        # never on a kwok node (the cases' fake nodes run no containers); the shards spread over the nodes
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}]}}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                       "whenUnsatisfiable": "ScheduleAnyway",
                                       "labelSelector": {"matchLabels": {RUN_LABEL: run_id}}}],
        "containers": [container], "volumes": volumes,
    }
    if api_server:
        pod_spec.update({"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"})
        container["env"].append({"name": "DRAKIT_API_SERVER", "value": api_server})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(f"drakit-shard-{index}", run_id, ns,
                                                                         **{SHARD_LABEL: str(index)}),
            "spec": {"backoffLimit": 0, "completions": 1, "parallelism": 1,
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}


def shard_configmap(index: int) -> str:
    return f"drakit-shard-{index}"


TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def token_volume() -> dict[str, Any]:
    """The service account's token, CA and namespace, as the ServiceAccount admission plugin
    mounts them, stated in the pod (automountServiceAccountToken off), so that a cluster
    without that plugin (drakit's local one) gives the shard its identity all the same."""
    return {"name": "token", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}


def rbac_table() -> str:
    """The RBAC of the shards, as the docs show it: one line a rule, with why."""
    lines = []
    for rule, why in (*CLUSTER_RULES, *NAMESPACE_RULES):
        what = ", ".join(rule.get("resources") or rule.get("nonResourceURLs") or [])
        lines.append(f"{what}: {', '.join(rule['verbs'])} -- {why}")
    return "\n".join(lines)
