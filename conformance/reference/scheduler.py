"""The mini scheduler: one scheduling attempt for one pod, with the plugins DRA depends on.

PreEnqueue/PreFilter resolve the pod's claims (generated names from the pod status, ownership
by the pod or, with DRAWorkloadResourceClaims, by its PodGroup) and the classes they need; the
DRA-backed extended resources of the pod become an in-memory claim (DRAExtendedResource).
Filter runs, node by node in name order: NodeAffinity (``spec.nodeSelector``), NodeResourcesFit
(pod requests against ``status.allocatable`` minus what bound pods request), and
DynamicResources (allocated claims usable on the node, the reference allocator for the pending
ones, node-allocatable accounting with DRANodeAllocatableResources). The first feasible node
wins. PreBind writes allocations (with ``allocationTimestamp`` when binding conditions are
enabled), ``reservedFor`` (the pod, or its PodGroup), creates the extended-resource claim,
patches the pod status and then either binds or, when a device has binding conditions, leaves
the pod waiting until the driver reports them (see :meth:`MiniScheduler.check_waiting`).
Unschedulable pods get upstream's reason texts in ``PodScheduled`` and a ``FailedScheduling``
event.
"""

from __future__ import annotations

import copy
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Mapping

from ..allocator import Allocator, AllocationError, Features, NodeAllocationError, NodeInfo, SelectorCache
from ..model import parse_object
from ..model.meta import selector_matches
from . import resources as res
from .clock import Clock, parse_time
from .queue import DRA, NODE_AFFINITY, NODE_RESOURCES
from .state import (ParsedCache, allocated_state, classes, extended_resource_classes,
                    slices_with_taint_rules)
from .store import ObjectStore, name_suffix

from .podclaims import (BINDING_TIMEOUT, EXTENDED_CLAIM_ANNOTATION, FINALIZER, NOT_AVAILABLE, OPTIONAL_NODE_OPERATIONS,
                        binding_for, binding_state, controller_of, node_selector_of, reserved_for_pod, resolve_claims)
from .extended import (extended_requests, extended_requests_and_mappings, has_mapped_device,
                       node_allocatable_statuses)

@dataclass
class Outcome:
    node: str | None
    reason: str | None = None  # condition reason: Unschedulable | SchedulerError
    message: str | None = None
    plugins: frozenset[str] = frozenset()  # plugins that rejected the pod
    waiting: bool = False  # PreBind done, waiting for binding conditions


@dataclass
class Waiting:
    """A pod whose claims are allocated and reserved, waiting in PreBind."""
    node: str
    claims: list[str]                       # claim names in the pod's namespace
    extended_claim: str | None = None
    since: str = ""
    reserved: list[str] = field(default_factory=list)  # claims this attempt reserved (for Unreserve)


# --- claims -------------------------------------------------------------------------------------

class MiniScheduler:
    def __init__(self, store: ObjectStore, cache: ParsedCache, gates: Mapping[str, bool], clock: Clock,
                 cel_cache: SelectorCache, share_ids: Callable[[], str]) -> None:
        self.store = store
        self.cache = cache
        self.gates = gates
        self.clock = clock
        self.cel_cache = cel_cache
        self.share_ids = share_ids
        self.waiting: dict[str, Waiting] = {}  # pod uid -> PreBind wait

    @property
    def binding_conditions_on(self) -> bool:
        return bool(self.gates.get("DRADeviceBindingConditions") and self.gates.get("DRAResourceClaimDeviceStatus"))

    # -- one attempt -----------------------------------------------------------------------

    def attempt(self, pod: dict[str, Any], watch: Any = None) -> Outcome:
        """One attempt. ``watch`` (an explaining run, see :mod:`conformance.explain`) is told each
        node's refusal (``node(name, plugin, reason)``), hands over the allocator on a node where it
        finds nothing (``dra(name, allocator, node, claims)``) and hears of each node that fits
        (``fits(name)``): then every node is tried and nothing is written."""
        g = self.gates
        workload = bool(g.get("DRAWorkloadResourceClaims"))
        claims, problem = resolve_claims(self.store, pod, g)
        if claims is None:
            # Rejected in PreEnqueue: the pod is never attempted, so it gets no condition and no event.
            return Outcome(None, None, problem, frozenset({DRA}))
        nodes = sorted(self.store.list("Node"), key=lambda n: n["metadata"]["name"])
        if not nodes:
            return Outcome(None, "Unschedulable", "0/0 nodes are available: no nodes available to schedule pods.")
        features = Features.from_gates(g)
        now = self.clock.now()
        device_classes = classes(self.store, self.cache)

        # PreFilter: extended resources backed by DRA.
        class_map = extended_resource_classes(self.store) if g.get("DRAExtendedResource") else {}
        ext = extended_requests(pod, class_map) if class_map else {}
        ext_claim = self._existing_extended_claim(pod) if ext else None
        if ext_claim is not None and (ext_claim.get("status") or {}).get("allocation"):
            claims = claims + [ext_claim]
            ext = {}  # already allocated for this pod: nothing to add

        pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
        allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
        for c in pending:
            m = self.cache.get(c)
            for req in m.spec.requests:
                for spec in ([req.exactly] if req.exactly else list(req.first_available)):
                    if spec.device_class_name not in device_classes:
                        name = f"{req.name}/{spec.name}" if req.first_available else req.name
                        return Outcome(None, "Unschedulable", f"request {name}: device class {spec.device_class_name} does not exist",
                                       frozenset({DRA}))
        # Claims that cannot be used anywhere: binding failed or timed out.
        unavailable: set[str] = set()
        for c in allocated:
            ready, failure = binding_state(c, now, self.binding_conditions_on)
            if failure is not None:
                unavailable.add(c["metadata"]["name"])

        slices = slices_with_taint_rules(self.store, self.cache, g)
        devices = {(s.driver, s.pool.name, d.name): d for s in slices for d in s.devices}
        allocator = None
        if pending or ext:
            in_flight = {c["metadata"]["uid"] for c in pending}
            state = allocated_state(self.store.list("ResourceClaim"), features, in_flight)
            allocator = Allocator(features, device_classes, slices, state, share_ids=self.share_ids, cel_cache=self.cel_cache)
            allocator._trace = watch.tracer() if watch is not None else None
        pending_models = [self.cache.get(c) for c in pending]
        pod_reqs = res.pod_requests(pod)
        all_pods = self.store.list("Pod")
        reasons: Counter[str] = Counter()
        plugins: set[str] = set()
        pod_selector = pod["spec"].get("nodeSelector") or {}
        ext_models: dict[tuple[str, ...], Any] = {}
        # DynamicResources Score: with prioritized lists, prefer the node where earlier alternatives
        # fit; every feasible node is then evaluated (ties go to the first in name order).
        scoring = any(req.first_available for m in pending_models for req in m.spec.requests)
        best: tuple[int, tuple[Any, ...]] | None = None

        def refuse(node: str, plugin: str, reason: str) -> None:
            reasons[reason] += 1
            plugins.add(plugin)
            if watch is not None:
                watch.node(node, plugin, reason)
        for node in nodes:
            name = node["metadata"]["name"]
            labels = node["metadata"].get("labels") or {}
            if any(labels.get(k) != v for k, v in pod_selector.items()):
                refuse(name, NODE_AFFINITY, "node(s) didn't match Pod's node affinity/selector")
                continue
            node_alloc = res.allocatable(node)
            used = res.node_requested(all_pods, name, exclude_uid=pod["metadata"]["uid"]) if node_alloc is not None else {}
            dra_ext = [k for k in ext if k in class_map and (node_alloc is None or node_alloc.get(k, Fraction(0)) == 0)]
            fit = res.insufficient(pod_reqs, node_alloc, used, skip=dra_ext)
            if fit:
                for r in fit:
                    refuse(name, NODE_RESOURCES, r)
                continue
            # DynamicResources Filter.
            declared = tuple((node.get("status") or {}).get("declaredFeatures") or ())
            problem = None
            for c in allocated:
                sel = node_selector_of(c)
                skips = any(r.get("skipNodeOperations") for r in ((c["status"]["allocation"].get("devices") or {}).get("results") or []))
                if c["metadata"]["name"] in unavailable or (sel is not None and not selector_matches(sel, name, labels)) \
                        or (skips and OPTIONAL_NODE_OPERATIONS not in declared):
                    problem = NOT_AVAILABLE
                    break
                if g.get("DRANodeAllocatableResources") and has_mapped_device(c["status"]["allocation"], devices) \
                        and (c.get("status") or {}).get("reservedFor") and not reserved_for_pod(c, pod, workload):
                    problem = (f"node allocatable resource claim {c['metadata']['name']} has a mapped device and cannot be "
                               f"shared across pods")
                    break
            if problem is None and ext:
                for k in ext:
                    if k in dra_ext:
                        continue
                    if node_alloc is None or k not in node_alloc:
                        problem = "cannot fit resource"
                        break
            if problem is not None:
                refuse(name, DRA, problem)
                continue
            models = list(pending_models)
            ext_spec: list[dict[str, Any]] = []
            mappings: list[dict[str, str]] = []
            if dra_ext:
                key = tuple(sorted(dra_ext))
                if key not in ext_models:
                    ext_spec, mappings = extended_requests_and_mappings(pod, list(key), class_map)
                    ext_models[key] = (self._extended_claim_model(pod, ext_spec) if ext_spec else None, ext_spec, mappings)
                model, ext_spec, mappings = ext_models[key]
                if model is not None:
                    models.append(model)
            results = []
            if allocator is not None and models:
                try:
                    got = allocator.allocate(NodeInfo(name, labels, declared), models)
                except NodeAllocationError as exc:
                    refuse(name, DRA, str(exc))
                    continue
                except AllocationError as exc:
                    return Outcome(None, "SchedulerError", str(exc), frozenset({DRA}))
                if got is None:
                    refuse(name, DRA, "cannot allocate all claims")
                    if watch is not None:
                        watch.dra(name, allocator, NodeInfo(name, labels, declared), models)
                    continue
                results = got
            new_allocs = [r.to_wire() for r in results]
            na_statuses: list[dict[str, Any]] = []
            if g.get("DRANodeAllocatableResources"):
                na_statuses, problem = self._node_allocatable(pod, claims, pending, new_allocs, ext_spec, devices)
                if problem is None:
                    footprint = res.pod_requests(pod, dra_statuses=na_statuses)
                    fit = res.insufficient(footprint, node_alloc, used, only=[k for k in footprint if k in ("cpu", "memory", "ephemeral-storage") or k.startswith("hugepages-")])
                    if fit:
                        for r in fit:
                            refuse(name, DRA, r)
                        continue
                    problem = self._pod_level_check(pod, na_statuses)
                if problem is not None:
                    refuse(name, DRA, problem)
                    continue
            if watch is not None:
                watch.fits(name)
                continue
            args = (pod, name, pending, new_allocs[:len(pending)], allocated,
                    new_allocs[len(pending)] if ext_spec and len(new_allocs) > len(pending) else None,
                    ext_spec, mappings, na_statuses)
            if not scoring:
                return self._prebind(*args)
            score = prioritized_list_score(pending_models, results[:len(pending)])
            if best is None or score > best[0]:
                best = (score, args)
        if best is not None:
            return self._prebind(*best[1])
        detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda x: x[0]))
        return Outcome(None, "Unschedulable", f"0/{len(nodes)} nodes are available: {detail}.", frozenset(plugins))

    # -- helpers ---------------------------------------------------------------------------

    def _existing_extended_claim(self, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        ns = pod["metadata"].get("namespace", "")
        for c in self.store.list("ResourceClaim", ns):
            if (c["metadata"].get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) == "true":
                owner = controller_of(c)
                if owner and owner.get("uid") == pod["metadata"]["uid"] and owner.get("name") == pod["metadata"]["name"]:
                    return c
        return None

    def _extended_claim_model(self, pod: Mapping[str, Any], requests: list[dict[str, Any]]) -> Any:
        obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"generateName": f"{pod['metadata']['name']}-extended-resources-",
                            "namespace": pod["metadata"].get("namespace", "")},
               "spec": {"devices": {"requests": copy.deepcopy(requests)}}}
        return parse_object(obj)

    def _node_allocatable(self, pod: dict[str, Any], claims: list[dict[str, Any]], pending: list[dict[str, Any]],
                          new_allocs: list[dict[str, Any]], ext_spec: list[dict[str, Any]],
                          devices: Mapping[tuple[str, str, str], Any]) -> tuple[list[dict[str, Any]], str | None]:
        statuses = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        by_name = {c["metadata"]["name"]: c for c in claims}
        fresh = {c["metadata"]["name"]: a for c, a in zip(pending, new_allocs)}
        triples: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        for ref in pod["spec"].get("resourceClaims") or []:
            name = ref.get("resourceClaimName") or statuses.get(ref["name"])
            c = by_name.get(name or "")
            if c is None:
                continue
            alloc = fresh.get(c["metadata"]["name"]) or (c.get("status") or {}).get("allocation")
            if alloc:
                triples.append((ref["name"], c, alloc))
        return node_allocatable_statuses(pod, triples, devices)

    def _pod_level_check(self, pod: Mapping[str, Any], statuses: list[dict[str, Any]]) -> str | None:
        pod_level = (pod["spec"].get("resources") or {}).get("requests") or {}
        if not pod_level or not statuses:
            return None
        spec_only = {**pod, "spec": {**pod["spec"], "resources": {}}}
        need = res.pod_requests(spec_only, dra_statuses=statuses)
        for k, v in pod_level.items():
            if k in need and need[k] > res.q(v):
                return f"pod level request for {k} is insufficient to cover the aggregated container and node-allocatable DRA requests"
        return None

    # -- PreBind / bind ----------------------------------------------------------------------

    def _prebind(self, pod: dict[str, Any], node: str, pending: list[dict[str, Any]], allocs: list[dict[str, Any]],
                 allocated: list[dict[str, Any]], ext_alloc: dict[str, Any] | None, ext_spec: list[dict[str, Any]],
                 mappings: list[dict[str, str]], na_statuses: list[dict[str, Any]]) -> Outcome:
        g = self.gates
        workload = bool(g.get("DRAWorkloadResourceClaims"))
        ns = pod["metadata"].get("namespace", "")
        stamp = self.clock.stamp()
        touched: list[str] = []
        for claim, alloc in zip(pending, allocs):
            c = self.store.get("ResourceClaim", claim["metadata"]["name"], ns)
            assert c is not None
            c.setdefault("status", {})["allocation"] = alloc
            self._reserve(c, binding_for(self.store, pod, c, g), stamp)
            self.store.update(c)
            touched.append(c["metadata"]["name"])
        for claim in allocated:
            if reserved_for_pod(claim, pod, workload):
                continue
            c = self.store.get("ResourceClaim", claim["metadata"]["name"], ns)
            assert c is not None
            self._reserve(c, binding_for(self.store, pod, c, g), stamp)
            self.store.update(c)
            touched.append(c["metadata"]["name"])
        ext_name = None
        if ext_alloc is not None:
            ext_name = self._create_extended_claim(pod, ext_spec, ext_alloc, stamp)
            touched.append(ext_name)
        p = self.store.get("Pod", pod["metadata"]["name"], ns)
        assert p is not None
        changed = False
        if ext_name is not None:
            p.setdefault("status", {})["extendedResourceClaimStatus"] = {"requestMappings": mappings, "resourceClaimName": ext_name}
            changed = True
        if na_statuses:
            p.setdefault("status", {})["nodeAllocatableResourceClaimStatuses"] = na_statuses
            changed = True
        if changed:
            self.store.update(p)
        names = [c["metadata"]["name"] for c in pending + allocated] + ([ext_name] if ext_name else [])
        if self.binding_conditions_on and any(self._has_binding_conditions(n, ns) for n in names):
            self.waiting[p["metadata"]["uid"]] = Waiting(node, names, ext_name, stamp, touched)
            self.store.record("Normal", "BindingConditionsPending", p, f"waiting for binding conditions for device on node {node}")
            outcome = self.check_waiting(p["metadata"]["uid"])
            return outcome or Outcome(None, waiting=True)
        self.bind(p, node)
        return Outcome(node)

    def _has_binding_conditions(self, claim: str, ns: str) -> bool:
        c = self.store.peek("ResourceClaim", claim, ns)
        alloc = ((c or {}).get("status") or {}).get("allocation") or {}
        return any(r.get("bindingConditions") for r in (alloc.get("devices") or {}).get("results") or [])

    def _reserve(self, claim: dict[str, Any], ref: dict[str, str], stamp: str) -> bool:
        st = claim.setdefault("status", {})
        reserved = st.setdefault("reservedFor", [])
        fins = claim["metadata"].setdefault("finalizers", [])
        if FINALIZER not in fins:
            fins.append(FINALIZER)
        if self.binding_conditions_on and st.get("allocation") and not st["allocation"].get("allocationTimestamp"):
            st["allocation"]["allocationTimestamp"] = stamp
        if any(r.get("uid") == ref["uid"] for r in reserved):
            return False
        reserved.append(dict(ref))
        return True

    def _create_extended_claim(self, pod: dict[str, Any], spec: list[dict[str, Any]], alloc: dict[str, Any], stamp: str) -> str:
        ns = pod["metadata"].get("namespace", "")
        base = f"{pod['metadata']['name']}-extended-resources-"
        digest = hashlib.sha256(f"{pod['metadata']['uid']}/extended".encode()).hexdigest()
        claim = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": base + name_suffix(digest), "generateName": base, "namespace": ns,
                         "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                         "finalizers": [FINALIZER],
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                                              "uid": pod["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"devices": {"requests": copy.deepcopy(spec)}},
        }
        created = self.store.create(claim)
        c = self.store.get("ResourceClaim", created["metadata"]["name"], ns)
        assert c is not None
        c["status"] = {"allocation": alloc}
        self._reserve(c, {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}, stamp)
        self.store.update(c)
        return str(c["metadata"]["name"])

    def bind(self, pod: dict[str, Any], node: str) -> None:
        p = self.store.get("Pod", pod["metadata"]["name"], pod["metadata"].get("namespace"))
        assert p is not None
        p["spec"]["nodeName"] = node
        set_condition(p, "PodScheduled", "True", None, None)
        self.store.update(p)
        self.store.record("Normal", "Scheduled", p, f"Successfully assigned {p['metadata'].get('namespace')}/{p['metadata']['name']} to {node}")

    # -- binding conditions ------------------------------------------------------------------

    def check_waiting(self, uid: str) -> Outcome | None:
        """Poll one waiting pod: bind it when every binding condition is True, fail PreBind
        (unreserve, error) on a failure condition or timeout, else keep waiting (None)."""
        w = self.waiting.get(uid)
        if w is None:
            return None
        pod = next((p for p in self.store.list("Pod") if p["metadata"]["uid"] == uid), None)
        if pod is None:
            del self.waiting[uid]
            return None
        ns = pod["metadata"].get("namespace", "")
        now = self.clock.now()
        for name in w.claims:
            c = self.store.peek("ResourceClaim", name, ns)
            if c is None:
                return self._prebind_failed(pod, w, f'resourceclaim.resource.k8s.io "{name}" not found')
            ready, failure = binding_state(c, now, self.binding_conditions_on)
            if failure is not None:
                return self._prebind_failed(pod, w, failure)
            if not ready:
                if parse_time(w.since) + BINDING_TIMEOUT <= now:  # the PreBind poll itself gives up
                    return self._prebind_failed(pod, w, "device binding timeout: context deadline exceeded")
                return None
        del self.waiting[uid]
        self.bind(pod, w.node)
        return Outcome(w.node)

    def _prebind_failed(self, pod: dict[str, Any], w: Waiting, error: str) -> Outcome:
        """Unreserve: take the pod out of ``reservedFor`` of the claims it reserved, delete the
        extended-resource claim, clear node-allocatable status; the pod goes to backoff."""
        del self.waiting[pod["metadata"]["uid"]]
        ns = pod["metadata"].get("namespace", "")
        uid = pod["metadata"]["uid"]
        for name in w.reserved:
            c = self.store.get("ResourceClaim", name, ns)
            if c is None:
                continue
            reserved = (c.get("status") or {}).get("reservedFor") or []
            if any(r.get("uid") == uid for r in reserved):
                c["status"]["reservedFor"] = [r for r in reserved if r.get("uid") != uid]
                if not c["status"]["reservedFor"]:
                    del c["status"]["reservedFor"]
                self.store.update(c)
        if w.extended_claim:
            c = self.store.get("ResourceClaim", w.extended_claim, ns)
            if c is not None:
                c["metadata"]["finalizers"] = [f for f in c["metadata"].get("finalizers") or [] if f != FINALIZER]
                c["metadata"]["deletionTimestamp"] = self.clock.stamp()
                c.get("status", {}).pop("reservedFor", None)
                self.store.update(c)
        p = self.store.get("Pod", pod["metadata"]["name"], ns)
        assert p is not None
        st = p.get("status") or {}
        if st.pop("extendedResourceClaimStatus", None) is not None or st.pop("nodeAllocatableResourceClaimStatuses", None) is not None:
            self.store.update(p)
        return Outcome(None, "SchedulerError", f'running PreBind plugin "DynamicResources": {error}', frozenset({DRA}))


def schedule(store: ObjectStore, cache: ParsedCache, pod: dict[str, Any], gates: Mapping[str, bool],
             cel_cache: SelectorCache, share_ids: Any, clock: Clock | None = None) -> Outcome:
    """One attempt for one pod (kept for callers of the earlier function API)."""
    return MiniScheduler(store, cache, gates, clock or Clock(), cel_cache, share_ids).attempt(pod)


MAX_SUBREQUESTS = 8


def prioritized_list_score(claims: list[Any], results: list[Any]) -> int:
    """Upstream's DynamicResources score: per firstAvailable request, 8 minus the index of the
    chosen alternative, summed over the pod's claims."""
    score = 0
    for claim, result in zip(claims, results):
        chosen = {d.request for d in result.devices}
        for req in claim.spec.requests:
            for i, sub in enumerate(req.first_available):
                if f"{req.name}/{sub.name}" in chosen:
                    score += MAX_SUBREQUESTS - i
                    break
    return score


def set_condition(pod: dict[str, Any], ctype: str, status: str, reason: str | None, message: str | None) -> bool:
    conds = pod.setdefault("status", {}).setdefault("conditions", [])
    new = {"type": ctype, "status": status}
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    for i, c in enumerate(conds):
        if c.get("type") == ctype:
            if c == new:
                return False
            conds[i] = new
            return True
    conds.append(new)
    return True
