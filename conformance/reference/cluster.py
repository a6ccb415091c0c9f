"""The mini control plane: an object store with admission, the claim controller, the mini
scheduler with its queue, the device-taint eviction controller, the pool status controller and
a node agent, reacting synchronously after every change until nothing moves.

Time is simulated (:class:`~conformance.reference.clock.Clock`): it only moves when a case
advances it, and everything that depends on time (toleration seconds, binding timeouts, rule
status periods, the scheduler's flush of unschedulable pods) runs when it does.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any, List, Mapping

from ..allocator import SelectorCache
from ..yamlmarks import copy_tree
from ..errors import FieldError
from ..features import DEFAULT_GATES
from ..model.status import MAX_RULE_CONDITIONS, validate_claim_devices, validate_conditions
from ..validation.admit import KINDS as ADMITTED_KINDS, admit
from .admission import ApiRejected, check_served, default_pod, default_taint_times, rejected, validate
from .claims import ClaimController
from .clock import Clock
from ..validation.fieldgates import drop_disabled_fields
from .poolstatus import PoolStatusController
from .queue import SchedulingQueue
from .scheduler import MiniScheduler, Outcome, set_condition
from .state import ParsedCache
from .store import Conflict, NotFound, ObjectStore, public
from .taints import TaintEvictionController

MAX_ROUNDS = 100
STATUS_KINDS = ("ResourceClaim", "DeviceTaintRule", "Pod", "PodGroup", "ResourcePoolStatusRequest", "Node")


class ReferenceCluster:
    def __init__(self, gates: Mapping[str, bool] | None = None, *, seed: str = "drakit", clock: Clock | None = None,
                 scheduler_gates: Mapping[str, bool] | None = None) -> None:
        self.gates = dict(DEFAULT_GATES if gates is None else gates)
        # The kubelet's and the scheduler's gates: the same set unless a test or a case
        # (schedulerFeatureGates) models version or configuration skew.
        self.kubelet_gates: dict[str, bool] = self.gates
        self.scheduler_gates: dict[str, bool] = {**self.gates, **scheduler_gates} if scheduler_gates else self.gates
        self.clock = clock or Clock()
        self.store = ObjectStore(clock=self.clock.stamp)
        self.cache = ParsedCache()
        self.cel_cache = SelectorCache()
        self._share_counter = itertools.count()
        self._seed = seed
        self.queue = SchedulingQueue(self.scheduler_gates, self.clock.now, self.store.peek)
        self.store.watchers.append(self.queue.on_event)
        self.scheduler = MiniScheduler(self.store, self.cache, self.scheduler_gates, self.clock, self.cel_cache, self._next_share_id)
        self.taint_controller = TaintEvictionController(self)
        self.claims = ClaimController(self)
        self.pool_status = PoolStatusController(self)
        self.node_operations: list[dict[str, Any]] = []   # the kubelet's NodePrepare/NodeUnprepare calls
        # (node, claim uid, driver) -> (claim ns/name, operations skipped), as the kubelet's checkpoint keeps it
        self._prepared: dict[tuple[str, str, str], tuple[str, set[str]]] = {}
        self._prepare_failed: set[str] = set()  # pods whose claims the kubelet refused to prepare
        self._pod_prepared: dict[str, set[tuple[str, str, str]]] = {}  # running pod uid -> its prepared keys
        # The kubelet's real side, when a backend provides one: prepares a pod's claims through the
        # drivers' gRPC sockets (returns an error text or None) and unprepares them when it goes.
        self.node_runtime: Any = None

    # -- API ------------------------------------------------------------------------------------

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or update one object (like ``kubectl apply``), then let the controllers react."""
        obj = copy_tree(obj)
        check_served(obj, self.gates)
        kind = obj.get("kind", "")
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace")
        existing = self.store.peek(kind, meta["name"], ns) if meta.get("name") else None
        # Defaulting (decode), then PrepareForCreate/Update (disabled fields), then validation.
        if kind in ("ResourceSlice", "DeviceTaintRule"):
            default_taint_times(obj, existing, self.clock.stamp())
        if kind == "Pod":
            default_pod(obj.get("spec") or {})
            if existing is None:  # the API server's PrepareForCreate: a new pod is Pending
                obj["status"] = {**(obj.get("status") or {}), "phase": "Pending"}
        if kind == "ResourcePoolStatusRequest" and isinstance(obj.get("spec"), dict):
            obj["spec"].setdefault("limit", 100)
        if (obj.get("apiVersion"), kind) in ADMITTED_KINDS:
            # The API server's admission (conformance.validation): decode, defaults, gate-off
            # fields dropped, validation with upstream's errors and words.
            ns_obj = self.store.peek("Namespace", ns) if ns else None
            labels = ((ns_obj or {}).get("metadata") or {}).get("labels") or {}
            verdict = admit(obj, existing, gates=self.gates, namespace_labels=labels, stamp=self.clock.stamp())
            if not verdict.accepted:
                raise ApiRejected(verdict.message)
            stored = verdict.stored or obj
            if not ns:
                stored["metadata"].pop("namespace", None)
            if existing is not None:
                stored.pop("status", None)  # the store keeps the existing status
            obj, meta = stored, stored["metadata"]
        else:
            drop_disabled_fields(obj, existing, self.gates)
        validate(obj)
        if ns:
            self._ensure_namespace(ns)
        if existing is None:
            if kind in ("ResourceClaim", "DeviceTaintRule", "ResourcePoolStatusRequest", "PodGroup"):
                obj.pop("status", None)  # status cannot be set on create
            if kind == "DeviceTaintRule":
                meta["generation"] = 1
            out = self.store.create(obj)
        else:
            out = self._update(existing, obj)
        self.reconcile()
        return public(self.store.get(kind, out["metadata"]["name"], ns) or out)

    def _update(self, existing: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
        kind = obj["kind"]
        if kind in ("ResourceClaim", "ResourceClaimTemplate", "ResourcePoolStatusRequest") and obj.get("spec") != existing.get("spec"):
            raise rejected(obj, "spec: Invalid value: field is immutable")
        if kind == "PodGroup":
            for f in ("resourceClaims", "workloadRef"):
                if (obj.get("spec") or {}).get(f) != (existing.get("spec") or {}).get(f):
                    raise rejected(obj, f"spec.{f}: Invalid value: field is immutable")
        merged = copy_tree(existing)
        merged["spec"] = obj.get("spec", existing.get("spec"))
        for k in ("labels", "annotations"):
            if k in obj["metadata"]:
                merged["metadata"][k] = obj["metadata"][k]
        if kind == "DeviceTaintRule" and merged.get("spec") != existing.get("spec"):
            merged["metadata"]["generation"] = existing["metadata"].get("generation", 1) + 1
        if kind == "Node" and "status" in obj:
            merged["status"] = obj["status"]  # the manifest plays the kubelet
        return self.store.update(merged)

    def update_status(self, kind: str, name: str, namespace: str | None, status: dict[str, Any]) -> dict[str, Any]:
        """A write through the ``status`` subresource (the whole status is replaced, as with
        UpdateStatus): what drivers and controllers use, validated and stripped like upstream."""
        if kind not in STATUS_KINDS:
            raise ApiRejected(f"{kind} has no status subresource in the reference")
        existing = self.store.peek(kind, name, namespace)
        if existing is None:
            raise NotFound(f'{kind} "{name}" not found')
        new = copy_tree(existing)
        new["status"] = copy_tree(status)
        drop_disabled_fields(new, existing, self.gates, status=True)
        try:
            if kind == "ResourceClaim":
                self._prepare_claim_status(new, existing)
            elif kind == "DeviceTaintRule":
                validate_conditions((new.get("status") or {}).get("conditions"), ("status", "conditions"), MAX_RULE_CONDITIONS)
        except FieldError as exc:
            raise rejected(new, str(exc)) from None
        out = self.store.update(new)
        self.reconcile()
        return public(self.store.get(kind, name, namespace) or out)

    @staticmethod
    def _prepare_claim_status(new: dict[str, Any], old: dict[str, Any]) -> None:
        st = new.get("status") or {}
        alloc = st.get("allocation") or {}
        results = (alloc.get("devices") or {}).get("results") or []
        if st.get("reservedFor") and not alloc:
            raise FieldError(("status", "reservedFor"), "Forbidden: may not be specified when `allocated` is not set")
        current = {(r["driver"], r["pool"], r["device"], r.get("shareID")) for r in results}
        # dropDeallocatedStatusDevices: entries of devices that left the allocation go away.
        before = {(r["driver"], r["pool"], r["device"], r.get("shareID"))
                  for r in ((((old.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])}
        gone = before - current
        if gone and st.get("devices"):
            st["devices"] = [d for d in st["devices"] if (d.get("driver"), d.get("pool"), d.get("device"), d.get("shareID")) not in gone]
            if not st["devices"]:
                del st["devices"]
        validate_claim_devices(st.get("devices"), current)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        obj = self.store.peek(kind, name, namespace)
        if obj is None:
            raise NotFound(f'{kind} "{name}" not found')
        if kind == "ResourceClaim" and (obj.get("status") or {}).get("reservedFor"):
            o = copy_tree(obj)
            o["metadata"]["deletionTimestamp"] = self.clock.stamp()
            self.store.update(o)
        elif kind == "Pod":
            self.delete_pod(obj)
        else:
            self.store.delete(kind, name, namespace)
            if kind == "PodGroup":
                self.claims.owner_gone(obj)
        self.reconcile()

    def delete_pod(self, pod: dict[str, Any]) -> None:
        """Remove a pod (its containers are stopped at once) and let its claims go."""
        if self.node_runtime is not None and pod["spec"].get("nodeName"):
            self.node_runtime.unprepare(pod["spec"]["nodeName"], pod)
        self.store.delete("Pod", pod["metadata"]["name"], pod["metadata"].get("namespace"))
        self.scheduler.waiting.pop(pod["metadata"]["uid"], None)
        self._pod_prepared.pop(pod["metadata"]["uid"], None)
        self.claims.owner_gone(pod)

    def advance(self, seconds: float) -> None:
        """Let simulated time pass, then let every controller catch up."""
        self.clock.advance(seconds)
        self.reconcile()

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        obj = self.store.peek(kind, name, namespace)
        return public(obj) if obj is not None else None

    def last_seen(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or the last state of a deleted one (what a watch would have shown)."""
        obj = self.store.peek(kind, name, namespace) or self.store.tombstones.get(self.store.key(kind, name, namespace))
        return public(obj) if obj is not None else None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [public(o) for o in self.store.list(kind, namespace)]

    def events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [e.to_wire() for e in self.store.events if namespace is None or e.namespace == namespace]

    @property
    def scheduling_attempts(self) -> int:
        return self.queue.metrics.schedule_attempts

    @property
    def metrics(self) -> dict[str, Any]:
        """Scheduler queue counters (see :class:`~conformance.reference.queue.QueueMetrics`) and
        the kubelet's node operation counts."""
        out = self.queue.metrics.snapshot(self.queue.pending_counts())
        ops = self.node_operations
        out["nodePrepareCalls"] = sum(1 for o in ops if o["operation"] == "NodePrepareResources" and not o["skipped"])
        out["nodePrepareSkips"] = sum(1 for o in ops if o["operation"] == "NodePrepareResources" and o["skipped"])
        out["nodeUnprepareCalls"] = sum(1 for o in ops if o["operation"] == "NodeUnprepareResources" and not o["skipped"])
        out["nodeUnprepareSkips"] = sum(1 for o in ops if o["operation"] == "NodeUnprepareResources" and o["skipped"])
        return out

    # -- controllers ----------------------------------------------------------------------------

    def reconcile(self) -> None:
        for _ in range(MAX_ROUNDS):
            before = self.store.revision
            self._node_status()
            self.claims.pod_group_claims()
            self.claims.sync_claims()
            self.claims.release_claims()
            self.taint_controller.sync()
            self.pool_status.sync()
            self._schedule()
            self._node_agent()
            if self.store.revision == before:
                return
        raise RuntimeError("reference control plane did not settle")  # a bug in drakit, never user input

    def _ensure_namespace(self, ns: str) -> None:
        if self.store.peek("Namespace", ns) is None:
            self.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def _node_status(self) -> None:
        """The kubelet declares its features (NodeDeclaredFeatures) in ``status.declaredFeatures``."""
        if not self.kubelet_gates.get("DRAOptionalNodeOperations"):
            return
        for node in self.store.list("Node"):
            st = node.get("status") or {}
            if "declaredFeatures" in st:
                continue
            n = copy_tree(node)
            n.setdefault("status", {})["declaredFeatures"] = ["DRAOptionalNodeOperations"]
            self.store.update(n)

    # ResourceClaim controller -----------------------------------------------------------------

    def _schedule(self) -> None:
        self.queue.flush()
        ready = self.queue.pop_all()
        order = self.store.order
        ready.sort(key=lambda item: order.get(self.store.key("Pod", item[1][1], item[1][0]), 1 << 62))
        for uid, (ns, name) in ready:
            pod = self.store.peek("Pod", name, ns)
            if pod is None or pod["metadata"]["uid"] != uid or pod["spec"].get("nodeName") \
                    or pod["spec"].get("schedulingGates") or uid in self.scheduler.waiting:
                continue
            self.queue.metrics.schedule_attempts += 1
            self._handle(pod, self.scheduler.attempt(pod))
        for uid in list(self.scheduler.waiting):
            pod = next((p for p in self.store.list("Pod") if p["metadata"]["uid"] == uid), None)
            outcome = self.scheduler.check_waiting(uid)
            if pod is not None and outcome is not None and outcome.node is None:
                self._handle(pod, outcome)

    def _handle(self, pod: dict[str, Any], outcome: Outcome) -> None:
        if outcome.node is not None or outcome.waiting:
            return
        self._mark_unschedulable(pod, outcome)
        uid = pod["metadata"]["uid"]
        key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        if outcome.reason == "SchedulerError":
            self.queue.error_pod(uid, key)
        else:
            self.queue.unschedulable_pod(uid, key, outcome.plugins)

    def _mark_unschedulable(self, pod: dict[str, Any], outcome: Outcome) -> None:
        p = self.store.get("Pod", pod["metadata"]["name"], pod["metadata"].get("namespace"))
        if p is None or outcome.reason is None:
            return
        if set_condition(p, "PodScheduled", "False", outcome.reason, outcome.message):
            p["status"]["phase"] = "Pending"
            self.store.update(p)
            self.store.record("Warning", "FailedScheduling", p, outcome.message or "")

    # Node agent (the kubelet's DRA part) -------------------------------------------------------

    def _node_agent(self) -> None:
        """Prepare the claims of bound pods through their drivers (NodePrepareResources, unless
        every device of a driver in the claim skips it), then mark the pods Running; unprepare
        claims no pod on the node uses any more."""
        in_use: set[tuple[str, str, str]] = set()
        for pod in self.store.list("Pod"):
            node = pod["spec"].get("nodeName")
            if not node:
                continue
            uid = pod["metadata"]["uid"]
            if (pod.get("status") or {}).get("phase") == "Running" and uid in self._pod_prepared:
                in_use.update(self._pod_prepared[uid])  # prepared when it started; nothing to do
                continue
            ok = True
            keys: set[tuple[str, str, str]] = set()
            added: list[tuple[str, str, str]] = []
            calls_from = len(self.node_operations)
            for claim in self._pod_claims(pod):
                for driver, skips in self._claim_drivers(claim).items():
                    key = (node, claim["metadata"]["uid"], driver)
                    in_use.add(key)
                    keys.add(key)
                    if key in self._prepared:
                        continue
                    skip = bool(skips & {"NodePrepareResources", "*"})
                    if skips and not self.kubelet_gates.get("DRAOptionalNodeOperations"):
                        if pod["metadata"]["uid"] not in self._prepare_failed:
                            self._prepare_failed.add(pod["metadata"]["uid"])
                            self.store.record("Warning", "FailedPrepareDynamicResources", pod,
                                              "Failed to prepare dynamic resources: DRAOptionalNodeOperations feature "
                                              "gate is disabled on kubelet")
                        ok = False
                        continue
                    self._prepared[key] = (f"{claim['metadata'].get('namespace')}/{claim['metadata']['name']}", skips)
                    added.append(key)
                    self._node_op(node, pod, claim, driver, "NodePrepareResources", skip)
            _batch(self.node_operations[calls_from:])  # one call per driver for the pod's claims
            if ok and self.node_runtime is not None and (pod.get("status") or {}).get("phase") != "Running":
                error = self.node_runtime.prepare(node, pod, self._pod_claims(pod))
                if error:
                    if uid not in self._prepare_failed:
                        self._prepare_failed.add(uid)
                        self.store.record("Warning", "FailedPrepareDynamicResources", pod,
                                          f"Failed to prepare dynamic resources: {error}")
                    for key in added:  # not prepared: the kubelet calls NodePrepareResources again
                        self._prepared.pop(key, None)
                    ok = False
            if not ok:
                continue
            self._pod_prepared[uid] = keys
            if (pod.get("status") or {}).get("phase") == "Running":
                continue
            p = copy_tree(pod)
            p.setdefault("status", {})["phase"] = "Running"
            set_condition(p, "Ready", "True", None, None)
            self.store.update(p)
            if self.node_runtime is not None:  # the kubelet's status of a running pod: device health
                self.node_runtime.started(node, uid)
        calls_from = len(self.node_operations)
        for key in [k for k in self._prepared if k not in in_use]:
            node, _claim_uid, driver = key
            ref, skips = self._prepared.pop(key)
            self.node_operations.append({"node": node, "claim": ref, "driver": driver, "pod": None,
                                         "operation": "NodeUnprepareResources",
                                         "skipped": bool(skips & {"NodeUnprepareResources", "*"})})
        _batch(self.node_operations[calls_from:])

    def _pod_claims(self, pod: dict[str, Any]) -> "List[dict[str, Any]]":
        ns = pod["metadata"].get("namespace", "")
        statuses = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        names = [ref.get("resourceClaimName") or statuses.get(ref["name"]) for ref in pod["spec"].get("resourceClaims") or []]
        ext = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        out = []
        for n in names + [ext]:
            c = self.store.peek("ResourceClaim", n, ns) if n else None
            if c is not None and (c.get("status") or {}).get("allocation"):
                out.append(c)
        return out

    @staticmethod
    def _claim_drivers(claim: dict[str, Any]) -> dict[str, set[str]]:
        """driver -> operations skipped by every allocated device of that driver in the claim."""
        out: dict[str, set[str]] = {}
        for r in ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []):
            ops = set(r.get("skipNodeOperations") or [])
            out[r["driver"]] = ops if r["driver"] not in out else out[r["driver"]] & ops
        return out

    def _node_op(self, node: str, pod: dict[str, Any], claim: dict[str, Any], driver: str, op: str, skipped: bool) -> None:
        self.node_operations.append({"node": node, "claim": f"{claim['metadata'].get('namespace')}/{claim['metadata']['name']}",
                                     "driver": driver, "pod": pod["metadata"]["name"], "operation": op, "skipped": skipped})

    def _next_share_id(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self._seed}/share/{next(self._share_counter)}"))


def _batch(ops: "List[dict[str, Any]]") -> None:
    """Give the node operations of one kubelet pass their ``batch``: the claims that went in the
    same call, as the kubelet makes one call per node, driver and operation for a pod's claims."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for o in ops:
        if not o["skipped"]:
            groups.setdefault((o["node"], o["driver"], o["operation"]), []).append(o)
    for group in groups.values():
        claims = sorted(o["claim"] for o in group)
        for o in group:
            o["batch"] = claims


__all__ = ["ReferenceCluster", "ApiRejected", "Conflict", "NotFound"]
