"""Removing what a cluster case made, so that the next case starts from a clean cluster.

Pods go first. A pod on a kubelet that prepares claims (drakit's real kubelet case nodes, the
driver suite's nodes, the nodes of a driver case on any cluster) is deleted gracefully: the
kubelet stops its containers, calls the driver's NodeUnprepareResources and only then reports
the pod's terminal phase, and later lets the pod object go (kubelet 1.37 ``SyncTerminatingPod``
stops the containers, unprepares and sets the terminal status; ``SyncTerminatedPod``, after the
pod worker's next wait for the PLEG's cache, lets the status manager delete the pod; a failing
unprepare keeps the pod Terminating). A forced delete (grace 0) would remove the object at once
while the kubelet unprepares later, and the next case could be given the same device while it
is still prepared.
Then the case's claims, and its PodGroups and Workloads (a PodGroup's generated claim is owned by
it and reserved for it: the claim would stay until the timeout); the namespace and the
cluster-scoped objects the case created go once its pods and claims are gone, or after
``CLEANUP_TIMEOUT`` (what is left is returned, for the log: the case's outcome is recorded
already). A pod counts as gone once the caller's ``released(pod)`` says so: on drakit's own
kubelet nodes, once the kubelet reported its terminal phase and its checkpoint holds none of
the case's claims (``kubeletside.CaseKubeletNodes.released``), which is up to a second before
the kubelet deletes the object.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from .kubeapi import CLEANUP_TIMEOUT


def remove_case_objects(api: Any, namespace: str, created: list[tuple[str, str, str | None]],
                        graceful: Callable[[dict[str, Any]], bool], *, timeout: float = CLEANUP_TIMEOUT,
                        released: Callable[[dict[str, Any]], bool] | None = None) -> list[str]:
    """Delete the case's pods (``graceful(pod)``: grace 1, else 0), claims, namespace and the
    cluster-scoped objects in ``created`` (newest first). Returns ``Kind/name`` of the pods and
    claims still there when ``timeout`` ran out (empty when all went); a pod for which
    ``released(pod)`` is true counts as gone (module docstring)."""
    for pod in api.list("Pod", namespace):
        api.delete("Pod", pod["metadata"]["name"], namespace, grace=1 if graceful(pod) else 0)
    for claim in api.list("ResourceClaim", namespace):
        api.delete("ResourceClaim", claim["metadata"]["name"], namespace)
    for kind, name, ns in reversed(created):  # a PodGroup owns, and is reserved, its claims
        if kind in ("PodGroup", "Workload") and ns == namespace:
            api.delete(kind, name, namespace)
    deadline = time.monotonic() + timeout
    while left := [f"{kind}/{o['metadata']['name']}" for kind in ("Pod", "ResourceClaim")
                   for o in api.list(kind, namespace) if not (kind == "Pod" and released is not None and released(o))]:
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    api.delete("Namespace", namespace, None)
    for kind, name, ns in reversed(created):
        if ns is None:
            api.delete(kind, name, None)
    return left
