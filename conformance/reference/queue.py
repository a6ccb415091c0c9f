"""The mini scheduler's scheduling queue: an active queue, the unschedulable pool, a backoff
set for pods whose attempt failed with an error, and cluster events that move pods back.

It follows the 1.37 ``PriorityQueue`` in what a conformance case can observe:

- A pod that failed scheduling waits in the unschedulable pool with the set of plugins that
  rejected it. A cluster event moves it back only if a plugin that rejected it registered the
  event and that plugin's queueing hint says ``Queue``; a pod rejected by no plugin moves on
  any event. Unschedulable pods are flushed back after five minutes of (simulated) time.
- Events registered per plugin (DynamicResources, NodeAffinity, NodeResourcesFit, as
  upstream): Node add/update; ResourceClaim add/update/delete with the DynamicResources hint
  (``isSchedulableAfterClaimChange``); the pod's own update that adds generated claim names;
  DeviceClass and ResourceSlice add/update (DeviceTaintRule changes reach the scheduler as
  ResourceSlice updates through the slice tracker); assigned pod deletion.
- With ``SchedulerPreQueueingHints`` a ResourceClaim event first runs the DynamicResources
  pre-hint: deallocation or deletion of an allocated claim means "all pods", otherwise only the
  pods whose ``spec.resourceClaims`` / ``status.resourceClaimStatuses`` name the claim are
  evaluated. Without the gate every unschedulable pod is evaluated.

``QueueMetrics`` counts what happened so a case can check the narrowing (reference only: a real
scheduler exposes ``scheduler_pre_queueing_hint_evaluations_total`` but not per-event counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping

from ..features import DEFAULT_GATES

DRA, NODE_AFFINITY, NODE_RESOURCES = "DynamicResources", "NodeAffinity", "NodeResourcesFit"
UNSCHEDULABLE_FLUSH = timedelta(minutes=5)  # podMaxInUnschedulablePodsDuration


@dataclass
class QueueMetrics:
    schedule_attempts: int = 0
    claim_events: int = 0
    claim_event_pods_examined: int = 0           # unschedulable pods evaluated for claim events
    max_claim_event_pods_examined: int = 0
    last_claim_event_pods_examined: int = 0
    queueing_hint_calls: int = 0                 # DynamicResources claim hint invocations
    pods_requeued: int = 0
    pre_queueing_hint_all_pods: int = 0
    pre_queueing_hint_narrowed: int = 0
    flushes: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)  # one record per ResourceClaim event

    def snapshot(self, pending: Mapping[str, int]) -> dict[str, Any]:
        return {
            "scheduleAttempts": self.schedule_attempts,
            "claimEvents": self.claim_events,
            "claimEventPodsExamined": self.claim_event_pods_examined,
            "maxClaimEventPodsExamined": self.max_claim_event_pods_examined,
            "lastClaimEventPodsExamined": self.last_claim_event_pods_examined,
            "queueingHintCalls": self.queueing_hint_calls,
            "podsRequeued": self.pods_requeued,
            "preQueueingHintAllPods": self.pre_queueing_hint_all_pods,
            "preQueueingHintNarrowed": self.pre_queueing_hint_narrowed,
            "unschedulableFlushes": self.flushes,
            **pending,
        }


@dataclass
class _Entry:
    key: tuple[str, str]          # (namespace, name)
    plugins: frozenset[str]
    since: datetime


def pod_claim_names(pod: Mapping[str, Any]) -> list[str]:
    """Names of the claims a pod references (upstream podResourceClaimIndexFunc: spec entries
    that name a claim, plus generated names from status; not the extended-resource claim)."""
    statuses = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    out = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = ref.get("resourceClaimName") or statuses.get(ref.get("name"))
        if name and name not in out:
            out.append(name)
    return out


def _unbound(pod: Mapping[str, Any] | None) -> bool:
    return pod is not None and not (pod.get("spec") or {}).get("nodeName") and not pod["metadata"].get("deletionTimestamp")


class SchedulingQueue:
    def __init__(self, gates: Mapping[str, bool], now: Callable[[], datetime],
                 lookup: Callable[[str, str, str], dict[str, Any] | None]) -> None:
        self.gates = dict(DEFAULT_GATES if gates is None else gates)
        self.now = now
        self.lookup = lookup                 # (kind, name, namespace) -> stored object
        self.active: dict[str, tuple[str, str]] = {}      # uid -> key
        self.backoff: dict[str, tuple[str, str]] = {}     # uid -> key, retried on the next event
        self.unschedulable: dict[str, _Entry] = {}        # uid -> entry
        self.metrics = QueueMetrics()

    # -- the scheduler's side ----------------------------------------------------------------

    def pop_all(self) -> list[tuple[str, tuple[str, str]]]:
        """Every pod that is ready for an attempt (active, plus backoff that has served its
        time: in the reference, backoff ends with the next round)."""
        ready = list(self.active.items()) + list(self.backoff.items())
        self.active.clear()
        self.backoff.clear()
        return ready

    def unschedulable_pod(self, uid: str, key: tuple[str, str], plugins: frozenset[str]) -> None:
        self.unschedulable[uid] = _Entry(key, plugins, self.now())

    def error_pod(self, uid: str, key: tuple[str, str]) -> None:
        self.backoff[uid] = key

    def forget(self, uid: str) -> None:
        self.active.pop(uid, None)
        self.backoff.pop(uid, None)
        self.unschedulable.pop(uid, None)

    def pending_counts(self) -> dict[str, int]:
        return {"activePods": len(self.active), "backoffPods": len(self.backoff), "unschedulablePods": len(self.unschedulable)}

    def flush(self) -> None:
        """flushUnschedulablePodsLeftover: pods waiting longer than five minutes move back."""
        now = self.now()
        for uid, e in list(self.unschedulable.items()):
            if now - e.since >= UNSCHEDULABLE_FLUSH:
                self._move(uid)
                self.metrics.flushes += 1

    # -- cluster events ----------------------------------------------------------------------

    def on_event(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if kind == "Pod":
            self._pod_event(old, new)
        elif kind == "ResourceClaim":
            self._claim_event(old, new)
        elif kind in ("ResourceSlice", "DeviceClass", "DeviceTaintRule"):
            if kind == "ResourceSlice" and new is None:
                return  # DynamicResources registers slice add/update only
            self._move_where(lambda e: DRA in e.plugins)
        elif kind == "Node":
            if old is not None and new is not None and not _node_changed(old, new):
                return
            self._move_where(lambda e: bool(e.plugins & {DRA, NODE_AFFINITY, NODE_RESOURCES}))
        # backoff pods need no event: pop_all retries them on the next round

    def _pod_event(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            assert old is not None
            self.forget(old["metadata"]["uid"])
            if (old.get("spec") or {}).get("nodeName"):
                self._move_where(lambda e: NODE_RESOURCES in e.plugins or not e.plugins)
            return
        uid = new["metadata"]["uid"]
        key = (new["metadata"].get("namespace", ""), new["metadata"]["name"])
        if not _unbound(new):
            self.forget(uid)
            return
        if (new.get("spec") or {}).get("schedulingGates"):
            self.forget(uid)
            return
        if old is None or (old.get("spec") or {}).get("schedulingGates"):
            self.active[uid] = key
            return
        entry = self.unschedulable.get(uid)
        if entry is None:
            return
        before = (old.get("status") or {}).get("resourceClaimStatuses")
        after = (new.get("status") or {}).get("resourceClaimStatuses")
        if before != after and (DRA in entry.plugins or not entry.plugins):
            # UpdatePodGeneratedResourceClaim: isSchedulableAfterTargetPodUpdate
            if self._pod_claims_resolvable(new):
                self._move(uid)

    def _claim_event(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        m = self.metrics
        m.claim_events += 1
        obj = new if new is not None else old
        assert obj is not None
        ns = obj["metadata"].get("namespace", "")
        candidates: set[str] | None = None  # uids; None = every unschedulable pod
        if self.gates.get("SchedulerPreQueueingHints"):
            deallocated = (old is not None and new is not None and (old.get("status") or {}).get("allocation")
                           and not (new.get("status") or {}).get("allocation"))
            deleted_allocated = new is None and old is not None and (old.get("status") or {}).get("allocation")
            if deallocated or deleted_allocated:
                m.pre_queueing_hint_all_pods += 1
            else:
                m.pre_queueing_hint_narrowed += 1
                candidates = set()
                for uid, e in self.unschedulable.items():
                    pod = self.lookup("Pod", e.key[1], e.key[0])
                    if pod is not None and e.key[0] == ns and obj["metadata"]["name"] in pod_claim_names(pod):
                        candidates.add(uid)
        entries = [(uid, e) for uid, e in self.unschedulable.items() if candidates is None or uid in candidates]
        examined = len(entries)
        m.claim_event_pods_examined += examined
        m.max_claim_event_pods_examined = max(m.max_claim_event_pods_examined, examined)
        m.last_claim_event_pods_examined = examined
        queued = 0
        for uid, e in entries:
            if not e.plugins:
                self._move(uid)
                queued += 1
                continue
            if DRA not in e.plugins:
                continue
            m.queueing_hint_calls += 1
            pod = self.lookup("Pod", e.key[1], e.key[0])
            if pod is not None and self._claim_hint(pod, old, new):
                self._move(uid)
                queued += 1
        m.events.append({"claim": f"{ns}/{obj['metadata']['name']}",
                         "action": "add" if old is None else "delete" if new is None else "update",
                         "podsExamined": examined, "podsQueued": queued})

    # -- hints -----------------------------------------------------------------------------

    def _pod_claims_resolvable(self, pod: dict[str, Any]) -> bool:
        statuses = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        ns = pod["metadata"].get("namespace", "")
        for ref in pod["spec"].get("resourceClaims") or []:
            name = ref.get("resourceClaimName")
            if name is None:
                if ref["name"] not in statuses:
                    return False
                name = statuses[ref["name"]]
                if name is None:
                    continue
            if self.lookup("ResourceClaim", name, ns) is None:
                return False
        return True

    def _claim_hint(self, pod: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
        """isSchedulableAfterClaimChange: True means Queue."""
        if new is None:
            return bool(old and (old.get("status") or {}).get("allocation"))
        if not self._pod_claims_resolvable(pod):
            return False
        uses = (new["metadata"].get("namespace", "") == pod["metadata"].get("namespace", "")
                and new["metadata"]["name"] in pod_claim_names(pod))
        if old is not None and (old.get("status") or {}).get("allocation") and not (new.get("status") or {}).get("allocation"):
            return True
        if not uses:
            return False
        if old is None:
            return True
        return (old.get("status") or {}) != (new.get("status") or {})

    # -- moving ------------------------------------------------------------------------------

    def _move(self, uid: str) -> None:
        e = self.unschedulable.pop(uid, None)
        if e is not None:
            self.active[uid] = e.key
            self.metrics.pods_requeued += 1

    def _move_where(self, pred: Callable[[_Entry], bool]) -> None:
        for uid, e in list(self.unschedulable.items()):
            if not e.plugins or pred(e):
                self._move(uid)


def _node_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Node add/UpdateNodeLabel/UpdateNodeAllocatable (and declared features, which gate
    allocation of devices that skip node operations)."""
    def view(n: dict[str, Any]) -> tuple[Any, ...]:
        st = n.get("status") or {}
        return ((n.get("metadata") or {}).get("labels"), st.get("allocatable"), st.get("declaredFeatures"),
                (n.get("spec") or {}).get("taints"), (n.get("spec") or {}).get("unschedulable"))
    return view(old) != view(new)
