"""The mini control plane: an object store, admission, the claim controller, the scheduler and a
node agent, reacting synchronously after every change until nothing moves."""

from __future__ import annotations

import copy
import hashlib
import itertools
import uuid
from typing import Any, Mapping

from ..allocator import SelectorCache
from ..features import DEFAULT_GATES
from .admission import ApiRejected, check_admin_namespace, default_claim_spec, rejected, validate
from .scheduler import FINALIZER, Outcome, schedule, set_condition
from .state import ParsedCache
from .store import Conflict, NotFound, ObjectStore, name_suffix, public

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
MAX_ROUNDS = 100


class ReferenceCluster:
    def __init__(self, gates: Mapping[str, bool] | None = None, *, seed: str = "drakit") -> None:
        self.gates = dict(DEFAULT_GATES if gates is None else gates)
        self.store = ObjectStore()
        self.cache = ParsedCache()
        self.cel_cache = SelectorCache()
        self._share_counter = itertools.count()
        self._seed = seed
        self.scheduling_attempts = 0
        self._attempted_at: dict[str, int] = {}

    # -- API ------------------------------------------------------------------------------------

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or update one object (like ``kubectl apply``), then let the controllers react."""
        obj = copy.deepcopy(obj)
        validate(obj)
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace")
        if ns:
            self._ensure_namespace(ns)
        if kind in ("ResourceClaim",):
            default_claim_spec(obj["spec"])
            check_admin_namespace(obj, obj["spec"], self.store.peek("Namespace", ns or ""))
        if kind == "ResourceClaimTemplate":
            default_claim_spec(obj["spec"]["spec"])
            check_admin_namespace(obj, obj["spec"]["spec"], self.store.peek("Namespace", ns or ""))
        existing = self.store.peek(kind, meta["name"], ns) if meta.get("name") else None
        if existing is None:
            obj.pop("status", None) if kind in ("ResourceClaim",) else None
            out = self.store.create(obj)
        else:
            out = self._update(existing, obj)
        self.reconcile()
        return public(self.store.get(kind, out["metadata"]["name"], ns) or out)

    def _update(self, existing: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate") and obj.get("spec") != existing.get("spec"):
            raise rejected(obj, "spec: Invalid value: field is immutable")
        merged = copy.deepcopy(existing)
        merged["spec"] = obj.get("spec", existing.get("spec"))
        for k in ("labels", "annotations"):
            if k in obj["metadata"]:
                merged["metadata"][k] = obj["metadata"][k]
        return self.store.update(merged)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        obj = self.store.peek(kind, name, namespace)
        if obj is None:
            raise NotFound(f'{kind} "{name}" not found')
        if kind == "ResourceClaim" and (obj.get("status") or {}).get("reservedFor"):
            o = copy.deepcopy(obj)
            o["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            self.store.update(o)
        else:
            self.store.delete(kind, name, namespace)
            if kind == "Pod":
                self._pod_gone(obj)
        self.reconcile()

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        obj = self.store.peek(kind, name, namespace)
        return public(obj) if obj is not None else None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [public(o) for o in self.store.list(kind, namespace)]

    def events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [e.to_wire() for e in self.store.events if namespace is None or e.namespace == namespace]

    # -- controllers ----------------------------------------------------------------------------

    def reconcile(self) -> None:
        for _ in range(MAX_ROUNDS):
            before = self.store.revision
            self._claim_controller()
            self._release_claims()
            self._schedule()
            self._node_agent()
            if self.store.revision == before:
                return
        raise RuntimeError("reference control plane did not settle")  # a bug in drakit, never user input

    def _ensure_namespace(self, ns: str) -> None:
        if self.store.peek("Namespace", ns) is None:
            self.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def _claim_controller(self) -> None:
        for pod in self.store.list("Pod"):
            ns = pod["metadata"].get("namespace", "")
            have = {s["name"] for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
            for ref in pod["spec"].get("resourceClaims") or []:
                tname = ref.get("resourceClaimTemplateName")
                if not tname or ref["name"] in have:
                    continue
                template = self.store.peek("ResourceClaimTemplate", tname, ns)
                if template is None:
                    self.store.record("Warning", "FailedResourceClaimCreation", pod,
                                      f'PodResourceClaim {ref["name"]}: resource claim template "{tname}": '
                                      f'resourceclaimtemplate.resource.k8s.io "{tname}" not found')
                    continue
                claim = self._claim_from_template(pod, ref["name"], template)
                p = self.store.get("Pod", pod["metadata"]["name"], ns)
                assert p is not None
                p.setdefault("status", {}).setdefault("resourceClaimStatuses", []).append(
                    {"name": ref["name"], "resourceClaimName": claim["metadata"]["name"]})
                self.store.update(p)

    def _claim_from_template(self, pod: dict[str, Any], entry: str, template: dict[str, Any]) -> dict[str, Any]:
        ns = pod["metadata"].get("namespace", "")
        tmeta = template["spec"].get("metadata") or {}
        base = f"{pod['metadata']['name']}-{entry}"
        digest = hashlib.sha256(f"{pod['metadata']['uid']}/{entry}".encode()).hexdigest()
        claim = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {
                "name": f"{base[:57]}-{name_suffix(digest)}", "namespace": ns,
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME: entry},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                                     "uid": pod["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": copy.deepcopy(template["spec"]["spec"]),
        }
        return self.store.create(claim)

    def _pod_gone(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        for claim in list(self.store.list("ResourceClaim", pod["metadata"].get("namespace"))):
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            owned = any(r.get("uid") == uid for r in claim["metadata"].get("ownerReferences") or [])
            if any(r.get("uid") == uid for r in reserved):
                c = copy.deepcopy(claim)
                c["status"]["reservedFor"] = [r for r in reserved if r.get("uid") != uid]
                self.store.update(c)
            if owned:
                c = self.store.get("ResourceClaim", claim["metadata"]["name"], claim["metadata"].get("namespace"))
                assert c is not None
                c["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                self.store.update(c)

    def _release_claims(self) -> None:
        """Deallocate claims nobody reserves any more; finish deleting claims being deleted."""
        for claim in list(self.store.list("ResourceClaim")):
            st = claim.get("status") or {}
            if st.get("reservedFor"):
                continue
            deleting = bool(claim["metadata"].get("deletionTimestamp"))
            if st.get("allocation") or FINALIZER in (claim["metadata"].get("finalizers") or []):
                c = copy.deepcopy(claim)
                c.get("status", {}).pop("allocation", None)
                c["status"].pop("reservedFor", None) if "status" in c else None
                c["metadata"]["finalizers"] = [f for f in c["metadata"].get("finalizers") or [] if f != FINALIZER]
                self.store.update(c)
            if deleting:
                self.store.delete("ResourceClaim", claim["metadata"]["name"], claim["metadata"].get("namespace"))

    def _schedule(self) -> None:
        for pod in list(self.store.list("Pod")):
            if pod["spec"].get("nodeName") or pod["spec"].get("schedulingGates"):
                continue
            uid = pod["metadata"]["uid"]
            if self._attempted_at.get(uid) == self.store.revision:
                continue  # nothing changed since the last attempt
            self.scheduling_attempts += 1
            outcome = schedule(self.store, self.cache, pod, self.gates, self.cel_cache, self._next_share_id)
            if outcome.node is None:
                self._mark_unschedulable(pod, outcome)
            self._attempted_at[uid] = self.store.revision

    def _mark_unschedulable(self, pod: dict[str, Any], outcome: Outcome) -> None:
        p = self.store.get("Pod", pod["metadata"]["name"], pod["metadata"].get("namespace"))
        assert p is not None
        if set_condition(p, "PodScheduled", "False", outcome.reason, outcome.message):
            p["status"]["phase"] = "Pending"
            self.store.update(p)
            self.store.record("Warning", "FailedScheduling", p, outcome.message or "")

    def _node_agent(self) -> None:
        """The kubelet's part: a bound pod whose claims are all reserved for it starts running."""
        for pod in self.store.list("Pod"):
            if not pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") == "Running":
                continue
            p = copy.deepcopy(pod)
            p.setdefault("status", {})["phase"] = "Running"
            set_condition(p, "Ready", "True", None, None)
            self.store.update(p)

    def _next_share_id(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self._seed}/share/{next(self._share_counter)}"))


__all__ = ["ReferenceCluster", "ApiRejected", "Conflict", "NotFound"]
