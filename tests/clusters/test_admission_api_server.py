"""The real 1.37.2 API server's own words: the objects the bundled cases create are sent to the
local control plane (dryRun=All, fieldValidation=Strict, as kubectl sends them); its decision and
message must be the admission oracle's and the reference's. This checks the oracle itself against
the API server, not only the reference against the oracle.

* every case object, on the session's cluster (every DRA gate on), with those gates on all sides;
* every ``expectError``, on a cluster started as the cluster backend starts one for the case
  (every DRA gate on, then the case's own gates).

Updates are not sent (a dry-run create cannot model them), nor slices with node-allocatable
resources: an admission plugin refuses those while their node does not exist, and neither model
looks at other objects."""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from drakit.conformance.errors import ApiRejected
from drakit.conformance.features import DEFAULT_GATES
from drakit.conformance.validation.admit import admit
from tests.differential.admission_corpus import NAMESPACE, Write, case_writes
from tests.differential.oracle_fixture import admission_oracle  # noqa: F401

ADMIN_NAMESPACE = NAMESPACE + "-admin"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
WRITES = [w for w in case_writes() if w.old_key is None
          and not any("nodeAllocatableResources" in d for d in (w.obj.get("spec") or {}).get("devices") or [] if isinstance(d, dict))]


def _client(cluster: Any) -> Any:
    from drakit.conformance.backends.kubeapi import KubeApi
    kube = KubeApi(str(cluster.kubeconfig))
    for ns, labels in ((NAMESPACE, {}), (ADMIN_NAMESPACE, {ADMIN_LABEL: "true"})):
        try:
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
        except ApiRejected:
            pass  # already there
    res = kube.resource("v1", "ServiceAccount")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # pods need the namespace's default service account
        try:
            if all(res.get(name="default", namespace=ns) for ns in (NAMESPACE, ADMIN_NAMESPACE)):
                break
        except Exception:  # noqa: BLE001 - not created yet
            pass
        time.sleep(0.5)
    return kube


def _check(kube: Any, oracle: Any, gates: dict[str, bool], writes: list[Write], *, expect: bool) -> tuple[int, list[str]]:
    problems: list[str] = []
    checked = 0
    for w in writes:
        obj, labels = w.obj, dict(w.namespace_labels)
        if obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate", "Pod"):
            ns = ADMIN_NAMESPACE if labels.get(ADMIN_LABEL) == "true" else NAMESPACE
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": ns}}
            labels = {ADMIN_LABEL: "true"} if ns == ADMIN_NAMESPACE else {}
        try:
            kube.dry_run(obj)
            ok, message = True, ""
        except ApiRejected as exc:
            ok, message = False, str(exc)
        up = oracle.admit(obj, None, gates, labels)
        ours = admit(obj, gates=gates, namespace_labels=labels)
        checked += 1
        server = "accepted" if ok else repr(message)
        if ok != up.accepted or (not ok and message != up.message):
            problems.append(f"{w.ident}: API server {server}; oracle {up.message or 'accepted'!r}")
        if ok != ours.accepted or (not ok and message != ours.message and not any(e.unordered for e in ours.errors)):
            problems.append(f"{w.ident}: API server {server}; reference {ours.message or 'accepted'!r}")
        if expect and (ok or (w.expect_error or "") not in message):
            problems.append(f"{w.ident}: expectError {w.expect_error!r} does not hold on the API server: {server}")
    return checked, problems


def test_case_objects_on_the_api_server(local_cluster: Any, admission_oracle: Any) -> None:  # noqa: F811
    gates = {**DEFAULT_GATES, **dict(local_cluster.gates.get("kube-apiserver") or {})}
    assert gates.get("DRAListTypeAttributes") is True, gates  # every DRA gate on
    served = [w for w in WRITES if not (w.obj["kind"] == "ResourcePoolStatusRequest" and not gates.get("DRAResourcePoolStatus"))]
    checked, problems = _check(_client(local_cluster), admission_oracle, gates, served, expect=False)
    print(f"\n{checked} case objects sent to the API server")
    assert checked > 300
    assert not problems, "\n".join(problems[:40]) + (f"\n... {len(problems)} in all" if len(problems) > 40 else "")


def _gate_sets() -> dict[frozenset[tuple[str, bool]], list[Write]]:
    groups: dict[frozenset[tuple[str, bool]], list[Write]] = {}
    for w in WRITES:
        served = not (w.obj["kind"] == "ResourcePoolStatusRequest" and not w.gates.get("DRAResourcePoolStatus"))
        if w.expect_error is not None and served:
            groups.setdefault(frozenset(w.case_gates.items()), []).append(w)
    return groups


GATE_SETS = _gate_sets()


@pytest.mark.parametrize("changed", list(GATE_SETS), ids=lambda c: ",".join(f"{k}={v}" for k, v in sorted(c)) or "defaults")
def test_expect_errors_hold_on_the_api_server(changed: frozenset[tuple[str, bool]], local_cluster_factory: Callable[..., Any],
                                              admission_oracle: Any) -> None:  # noqa: F811
    writes = GATE_SETS[changed]
    cluster = local_cluster_factory(gates=dict(changed) or None)
    gates = {**DEFAULT_GATES, **dict(cluster.gates.get("kube-apiserver") or {})}
    checked, problems = _check(_client(cluster), admission_oracle, gates, writes, expect=True)
    assert checked == len(writes) > 0
    assert not problems, "\n".join(problems)
