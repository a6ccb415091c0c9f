"""Why a pod's claims cannot be met, node by node and device by device.

The pod goes through the reference scheduler's own attempt (:meth:`MiniScheduler.attempt` with a
watch): the same node filters, the same allocator, nothing written, every node tried. Where the
allocator finds nothing on a node, each request (and subrequest) of each pending claim is run
again through a :class:`~conformance.allocator.trace.Probe`, which shows every device of the
node to the allocator's checks in the search's order and notes each device's first failing
check with the values it saw. What only a combination of devices shows (a constraint no
combination meets, requests competing for the same devices) comes from the ordinary search,
traced. :mod:`.summary` then picks the closest node and the one change that makes the pod fit
there, and checks that change by running the allocator again on the changed state.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Mapping

from ..allocator import AllocatedState, AllocationError, Allocator, NodeInfo
from ..allocator.trace import Probe, Tracer
from ..allocator.types import CandidateDevice, DeviceID, device_id_str
from ..model.claim import ResourceClaim
from ..reference.clock import Clock
from ..reference.scheduler import MiniScheduler
from ..reference.state import ParsedCache, allocated_state
from ..reference.store import ObjectStore
from ..allocator import SelectorCache
from .summary import summarise

SCHEMA = "drakit.explain/v1"
COMBINATION = "cannot allocate all claims"


# What fails a whole attempt, by the words of the allocator's error (the check it comes from).
ERRORS = (("exceeds the claim limit", "claim-limit"), ("allocation max size exceeded", "claim-limit"),
          ("is currently being updated", "pool-incomplete"), ("is currently invalid", "pool-invalid"),
          ("claim constraint would not be satisfied", "constraint"), ("derived attribute", "derived-attribute"),
          ("checking capacity", "capacity"), ("CEL", "cel-error"), ("feature is disabled", "gate"))


def error_kind(message: str) -> str:
    return next((kind for words, kind in ERRORS if words in message), "error")


def holders_of(store: ObjectStore) -> dict[DeviceID, list[str]]:
    """Which claims hold each allocated device (their ``namespace/name``)."""
    out: dict[DeviceID, list[str]] = {}
    for c in store.list("ResourceClaim"):
        alloc = (c.get("status") or {}).get("allocation") or {}
        ref = f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}"
        for r in (alloc.get("devices") or {}).get("results") or []:
            out.setdefault((r["driver"], r["pool"], r["device"]), []).append(ref)
    return out


def taint_origins(store: ObjectStore) -> Any:
    """A function naming where a device's taint comes from: its slice, or a DeviceTaintRule."""
    own: dict[tuple[str, str], set[tuple[str, str | None, str]]] = {}
    for s in store.list("ResourceSlice"):
        for d in (s.get("spec") or {}).get("devices") or []:
            own[(s["metadata"]["name"], d.get("name", ""))] = {
                (t.get("key", ""), t.get("value"), t.get("effect", "")) for t in d.get("taints") or []}
    rules = [(r["metadata"]["name"], (r.get("spec") or {}).get("taint") or {}) for r in store.list("DeviceTaintRule")]

    def origin(cand: CandidateDevice, taint: Any) -> str:
        key = (taint.key, taint.value, taint.effect)
        if key in own.get((cand.slice.meta.name, cand.device.name), set()):
            return f"ResourceSlice {cand.slice.meta.name}"
        for name, t in rules:
            if (t.get("key"), t.get("value"), t.get("effect")) == key:
                return f"DeviceTaintRule {name}"
        return "a DeviceTaintRule"
    return origin


class _Watch:
    """What the scheduler's attempt tells an explanation, node by node."""

    def __init__(self, holders: Mapping[DeviceID, list[str]], origin: Any) -> None:
        self.holders = holders
        self.origin = origin
        self.full = Tracer(holders, origin)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.fit: list[str] = []
        self.inputs: dict[str, tuple[Allocator, NodeInfo, list[ResourceClaim]]] = {}
        self._local: dict[str, int] | None = None
        self._probes: dict[tuple[int, int], tuple[ResourceClaim, ResourceClaim, Probe]] = {}

    def tracer(self) -> Tracer:
        return self.full

    def _entry(self, name: str) -> dict[str, Any]:
        return self.nodes.setdefault(name, {"name": name, "fits": False, "refusals": [], "claims": []})

    def node(self, name: str, plugin: str, reason: str) -> None:
        self._entry(name)["refusals"].append({"plugin": plugin, "reason": reason})
        if reason != COMBINATION:
            self._reset()

    def fits(self, name: str) -> None:
        self.fit.append(name)
        self._entry(name)["fits"] = True
        self._reset()

    def _reset(self) -> None:
        self.full.refused.clear()
        self.full.constraints.clear()

    def dra(self, name: str, allocator: Allocator, node: NodeInfo, claims: list[ResourceClaim]) -> None:
        entry = self._entry(name)
        self.inputs[name] = (allocator, node, list(claims))
        entry["claims"] = [self._claim(allocator, node, claim) for claim in claims]
        seen = {f"{claims[ci].ref} {attr}": vals for (ci, attr), vals in self.full.constraints.items()}
        competing = sorted({c for per in self.full.refused.values() for r in per.values() if r.kind == "allocating"
                            for c in r.values.get("claims", ())})
        entry["combination"] = {"constraints": [{"claim": k.split(" ")[0], "attribute": k.split(" ", 1)[1],
                                                 "valuesSeen": {device_id_str(d): v for d, v in vals.items()}}
                                                for k, vals in seen.items()],
                                "competing": competing,
                                "checks": dict(Counter(r.kind for per in self.full.refused.values()
                                                       for r in per.values()).most_common())}
        if self._local is None:  # devices per node in node-local slices, counted once
            self._local = {n: sum(len(x.devices) for x in sl) for n, sl in allocator.index.node_local.items()}
        entry["otherNodes"] = _elsewhere(allocator, node, sum(self._local.values()) - self._local.get(node.name, 0))
        self._reset()

    def _claim(self, allocator: Allocator, node: NodeInfo, claim: ResourceClaim) -> dict[str, Any]:
        out: dict[str, Any] = {"claim": claim.ref, "requests": []}
        for ri, req in enumerate(claim.spec.requests):
            # One probe per request for all nodes (its plan is built once), a tracer per node.
            hit = self._probes.get((id(claim), ri))
            if hit is None or hit[0] is not claim:
                alone = dataclasses.replace(claim, spec=dataclasses.replace(claim.spec, requests=(req,),
                                                                             constraints=(), config=()))
                hit = self._probes[(id(claim), ri)] = (claim, alone, Probe(
                    allocator.features, allocator.classes, allocator.index, allocator.allocated,
                    cel_cache=allocator.cel, channels=allocator.channels, share_ids=lambda: "explain"))
            _, alone, probe = hit
            tr = Tracer(self.holders, self.origin)
            probe._trace = tr
            error = None
            try:
                probe.allocate(node, [alone])
            except AllocationError as exc:
                error = str(exc)
            requests = getattr(probe, "_requests", {})
            entries = sorted((k, rd) for k, rd in requests.items()) if requests else []
            view = getattr(probe, "_view", None)
            order = view.order if view is not None else []
            subs = []
            for _, rd in entries:
                refused = tr.refused.get((0, rd.result_name), {})
                ok = tr.accepted.get((0, rd.result_name), [])
                devices = []
                for cand in order:
                    r = refused.get(cand.id)
                    if r is not None:
                        devices.append({"device": device_id_str(cand.id), **r.to_json()})
                    elif cand.id in ok:
                        devices.append({"device": device_id_str(cand.id), "check": "ok", "message": "passes every check",
                                        "values": {}})
                subs.append({"request": req.name, "subrequest": rd.sub_name, "class": rd.device_class.name,
                             "mode": rd.spec.allocation_mode, "need": rd.num_devices, "pass": len(set(ok)),
                             "devices": devices})
            pools = [{"pool": f"{p.driver}/{p.name}", "problem": "incomplete: not all of its slices are published yet"
                      if p.incomplete else f"invalid: {p.invalid}"} for p in (view.pools if view is not None else [])
                     if p.incomplete or p.invalid]
            out["requests"].append({"request": req.name, "entries": subs, "error": error, "pools": pools})
        return out


def _elsewhere(allocator: Allocator, node: NodeInfo, local: int) -> dict[str, Any]:
    """Devices this node does not see: ``local`` in other nodes' node-local slices, and those of
    shared slices whose node selection leaves this node out."""
    index = allocator.index
    seen = {id(s) for p in allocator._node_view(node, allocator.channel or "incubating").pools
            for s in p.slices + p.other_slices}
    shared = sorted(s.meta.name for s in index.shared if id(s) not in seen)
    return {"devicesInOtherNodesSlices": local, "sharedSlicesNotForThisNode": shared}


def explain_pod(store: ObjectStore, pod: Mapping[str, Any], gates: Mapping[str, bool],
                subject: str | None = None) -> dict[str, Any]:
    """The explanation of one pod on the state in ``store`` (which is not changed)."""
    meta = pod["metadata"]
    subject = subject or f"pod {meta.get('namespace', '')}/{meta['name']}"
    bound = (pod.get("spec") or {}).get("nodeName")
    if bound:
        return {"schema": SCHEMA, "subject": subject, "nodeName": bound,
                "verdict": "scheduled", "fitsOn": [bound], "node": bound, "message": f"already scheduled on node {bound}",
                "nodes": [], "summary": None}
    watch = _Watch(holders_of(store), taint_origins(store))
    sched = MiniScheduler(store, ParsedCache(), dict(gates), Clock(), SelectorCache(), lambda: "explain")
    pod = dict(pod)
    outcome = sched.attempt(pod, watch)
    out: dict[str, Any] = {"schema": SCHEMA, "subject": subject, "nodeName": None}
    if watch.fit:
        out.update(verdict="fits", fitsOn=watch.fit, node=watch.fit[0], message=f"fits on {len(watch.fit)} of "
                   f"{len(watch.nodes)} nodes; the scheduler's pick would be among them (first in name order: "
                   f"{watch.fit[0]})")
    elif outcome.reason == "SchedulerError":
        out.update(verdict="error", fitsOn=[], message=f"scheduling fails before any node is chosen: {outcome.message}")
    elif outcome.reason is None and not watch.nodes:
        out.update(verdict="not-ready", fitsOn=[], message=f"the scheduler does not try the pod yet: {outcome.message}")
    else:
        out.update(verdict="unschedulable", fitsOn=[], message=outcome.message or "")
    out["nodes"] = list(watch.nodes.values())
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    for n in out["nodes"]:
        for r in n["refusals"]:
            if r["plugin"] == "NodeAffinity":
                labels = (((store.peek("Node", n["name"]) or {}).get("metadata") or {}).get("labels") or {})
                r["values"] = {"nodeSelector": selector, "labels": {k: labels.get(k) for k in selector}}
                r["reason"] += ": " + ", ".join(f"wants {k}={v}, has {labels[k] if k in labels else 'no such label'}"
                                                for k, v in selector.items() if labels.get(k) != v)
    if out["verdict"] == "error":
        cel = [r for per in watch.full.refused.values() for r in per.values() if r.kind == "cel-error"]
        out["refusal"] = cel[0].to_json() if cel else {"check": error_kind(out["message"]), "message": out["message"],
                                                        "values": {}}

    def released(alloc: Allocator, names: tuple[str, ...]) -> AllocatedState:
        kept = [c for c in store.list("ResourceClaim")
                if f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}" not in names]
        return allocated_state(kept, alloc.features)
    out["summary"] = summarise(out, watch.inputs, released) if out["verdict"] == "unschedulable" else None
    return out


def put(store: ObjectStore, obj: dict[str, Any]) -> None:
    """Add (or replace) an object in the explanation's store as it is."""
    meta = obj.setdefault("metadata", {})
    meta.setdefault("resourceVersion", "explain")
    meta.setdefault("uid", f"explain-{obj['kind']}-{meta.get('name')}")
    key = store.key(obj["kind"], meta["name"], meta.get("namespace"))
    store.order.setdefault(key, len(store.order) + 1_000_000)
    store.objects[key] = obj


def claim_pod(namespace: str, claim: str) -> dict[str, Any]:
    """A pod that asks for nothing but the claim: what "would this claim fit, and where?" schedules."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "drakit-explain", "namespace": namespace, "uid": "drakit-explain"},
            "spec": {"resourceClaims": [{"name": "claim", "resourceClaimName": claim}],
                     "containers": [{"name": "main", "image": "pause", "resources": {"claims": [{"name": "claim"}]}}]}}


def explain_claim(store: ObjectStore, claim: dict[str, Any], gates: Mapping[str, bool],
                  subject: str | None = None) -> dict[str, Any]:
    """Would the claim fit, and where? An allocated claim says where it is; otherwise the claim
    (added to the store if it is not there) is explained through a pod that asks only for it."""
    meta = claim["metadata"]
    ns = meta.get("namespace") or "default"
    meta["namespace"] = ns
    subject = subject or f"claim {ns}/{meta['name']}"
    alloc = (claim.get("status") or {}).get("allocation")
    if alloc:
        terms = ((alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or [])
        where = [f["values"][0] for t in terms for f in t.get("matchFields") or [] if f.get("values")]
        devices = [f"{r['driver']}/{r['pool']}/{r['device']}" for r in (alloc.get("devices") or {}).get("results") or []]
        return {"schema": SCHEMA, "subject": subject, "nodeName": where[0] if where else None, "verdict": "allocated",
                "fitsOn": where, "message": f"already allocated: {', '.join(devices)}"
                + (f" on node {where[0]}" if where else ""), "nodes": [], "summary": None}
    put(store, claim)
    return explain_pod(store, claim_pod(ns, meta["name"]), gates, subject)


def template_claim(template: Mapping[str, Any], namespace: str | None) -> dict[str, Any]:
    """The claim a ResourceClaimTemplate would give a pod (named after the template)."""
    meta = template["metadata"]
    spec = (template.get("spec") or {}).get("spec") or {}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{meta['name']}-explain", "namespace": namespace or meta.get("namespace") or "default"},
            "spec": spec}
