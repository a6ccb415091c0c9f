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

import logging
import time
from typing import Any, Callable

from .kubeapi import CLEANUP_TIMEOUT


def remove_case_objects(api: Any, namespace: str, created: list[tuple[str, str, str | None]],
                        graceful: Callable[[dict[str, Any]], bool], *, timeout: float = CLEANUP_TIMEOUT,
                        released: Callable[[dict[str, Any]], bool] | None = None,
                        refused: Callable[[], bool] | None = None) -> list[str]:
    """Delete the case's pods (``graceful(pod)``: grace 1, else 0), claims, namespace and the
    cluster-scoped objects in ``created`` (newest first). Returns ``Kind/name`` of the pods and
    claims still there when ``timeout`` ran out (empty when all went); a pod for which
    ``released(pod)`` is true counts as gone (module docstring). ``refused()``: whether the
    kubelets' failed unprepares for the case's pods show that waiting longer frees nothing (the
    kubelet's retry failed too); what is left is then returned at once."""
    for pod in api.list("Pod", namespace):
        api.delete("Pod", pod["metadata"]["name"], namespace, grace=1 if graceful(pod) else 0)
    for claim in api.list("ResourceClaim", namespace):
        api.delete("ResourceClaim", claim["metadata"]["name"], namespace)
    for kind, name, ns in reversed(created):  # a PodGroup owns, and is reserved, its claims
        if kind in ("PodGroup", "Workload") and ns == namespace:
            api.delete(kind, name, namespace)
    deadline = time.monotonic() + timeout
    asked = 0.0
    while left := [f"{kind}/{o['metadata']['name']}" for kind in ("Pod", "ResourceClaim")
                   for o in api.list(kind, namespace) if not (kind == "Pod" and released is not None and released(o))]:
        if time.monotonic() >= deadline:
            break
        if refused is not None and time.monotonic() - asked >= 1.0:  # a kubelet log read: once a second
            asked = time.monotonic()
            if refused():
                break
        time.sleep(0.1)
    api.delete("Namespace", namespace, None)
    for kind, name, ns in reversed(created):
        if ns is None:
            api.delete(kind, name, None)
    return left


def say_left(case: str, namespace: str, left: list[str], refusals: list[str],
             on_held: Callable[[str, str, str], None] | None) -> None:
    """Log what a case left (``remove_case_objects``) and why; when the kubelet refused to
    unprepare (``refusals``, its words), hand the case to ``on_held``: the driver suite sets
    later cases aside rather than fail them for the devices these pods hold."""
    logging.getLogger("drakit.cluster").warning(
        "case %s: still there after deleting them (%s): %s", case,
        refusals[0] if refusals else f"for {CLEANUP_TIMEOUT:.0f} s; a NodeUnprepareResources that keeps failing "
        "keeps a pod Terminating", ", ".join(left[:5]))
    if refusals and on_held is not None:
        on_held(case, namespace, refusals[0])


class StuckWatch:
    """``remove_case_objects``' ``refused``: true once a failed unprepare for the case's pods
    (``seen()``: the kubelets logged one) is ``patience`` seconds old with the pods still there.
    The kubelet retries 10-15 s after a failure, so after 20 s its retry failed too (a kubelet
    may log one failure more than once: lines are not attempts)."""

    def __init__(self, seen: Callable[[], bool], patience: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seen, self.patience, self.clock = seen, patience, clock
        self.first: float | None = None

    def __call__(self) -> bool:
        if self.first is None:
            if not self.seen():
                return False
            self.first = self.clock()
        return self.clock() - self.first >= self.patience
