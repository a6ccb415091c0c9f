"""What a shard's Job, pod and node say about the shard (pure): still coming, running, ended
(its log holds the results), or lost, with why in one line.

A shard is lost when nothing can bring its results back: its pod ended without them (killed,
out of memory, an error before the end), was deleted, or sits on a node that is gone or no
longer answers, or its image cannot be pulled. A lost shard makes the run INCOMPLETE, named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

PENDING, RUNNING, ENDED, LOST = "pending", "running", "ended", "lost"
_IMAGE_WAITS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
_STUCK = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})


@dataclass(frozen=True, slots=True)
class Seen:
    state: str
    why: str = ""
    pod: str | None = None


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (status.get("state") or {}).get("terminated")
        if term:
            return term  # type: ignore[no-any-return]
    return None


def _waiting(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        wait = (status.get("state") or {}).get("waiting")
        if wait:
            return wait  # type: ignore[no-any-return]
    return None


def ended_why(pod: Mapping[str, Any]) -> str:
    """How a pod's container ended, in words: ``exit code 137 (Error)``."""
    term = _terminated(pod) or {}
    code, reason = term.get("exitCode"), term.get("reason")
    return f"exit code {code}" + (f" ({reason})" if reason else "") if code is not None else "ended"


def classify(job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]], nodes: set[str] | None,
             seen_pod: str | None) -> Seen:
    """The shard's state from its Job (None: gone), its pods (the Job's, newest last), the names
    of the cluster's nodes (None: unknown) and the name of a pod seen before for it."""
    if job is None:
        return Seen(LOST, "its Job was deleted", seen_pod)
    if not pods:
        if seen_pod is not None:
            return Seen(LOST, f"its pod {seen_pod} was deleted before it ended", seen_pod)
        failed = [c for c in (job.get("status") or {}).get("conditions") or []
                  if c.get("type") == "Failed" and c.get("status") == "True"]
        if failed:
            return Seen(LOST, f"its Job failed: {failed[0].get('reason')}: {failed[0].get('message')}")
        return Seen(PENDING)
    pod = pods[-1]
    name = (pod.get("metadata") or {}).get("name")
    status = pod.get("status") or {}
    phase = status.get("phase")
    node = (pod.get("spec") or {}).get("nodeName")
    if phase in ("Succeeded", "Failed"):
        return Seen(ENDED, ended_why(pod), name)
    if node and nodes is not None and node not in nodes:
        return Seen(LOST, f"its node {node} went away (pod {name})", name)
    if phase == "Unknown":
        return Seen(LOST, f"its node {node} does not answer (pod {name} phase Unknown)", name)
    wait = _waiting(pod) or {}
    if wait.get("reason") in _IMAGE_WAITS:
        image = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("image")
        return Seen(LOST, f"image {image} cannot be pulled on {node}: {wait.get('reason')}: {wait.get('message', '')}"
                    .rstrip(": "), name)
    if wait.get("reason") in _STUCK:
        return Seen(LOST, f"its container cannot start: {wait.get('reason')}: {wait.get('message', '')}".rstrip(": "),
                    name)
    if phase == "Running":
        return Seen(RUNNING, "", name)
    return Seen(PENDING, "", name)
