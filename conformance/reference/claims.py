"""The reference's resource claim controller: claims generated from templates for pods and
PodGroups (DRAWorkloadResourceClaims), their ownership, and their release when the owner goes
or stops needing them."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from .podclaims import FINALIZER, pod_group_name
from .store import name_suffix

from .host import ControllerHost

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
SCHEDULING_API = "scheduling.k8s.io/v1beta1"


class ClaimController:
    def __init__(self, cluster: ControllerHost) -> None:
        self.c = cluster

    def pod_group_claims(self) -> None:
        """Claims generated from templates for PodGroups (DRAWorkloadResourceClaims)."""
        if not (self.c.gates.get("DRAWorkloadResourceClaims") and self.c.gates.get("GenericWorkload")):
            return
        for pg in self.c.store.list("PodGroup"):
            if pg["metadata"].get("deletionTimestamp"):
                continue
            ns = pg["metadata"].get("namespace", "")
            have = {s["name"] for s in (pg.get("status") or {}).get("resourceClaimStatuses") or []}
            new: list[dict[str, str]] = []
            for gc in (pg.get("spec") or {}).get("resourceClaims") or []:
                tname = gc.get("resourceClaimTemplateName")
                if not tname or gc["name"] in have:
                    continue
                claim = self._find_generated(pg, gc["name"])
                if claim is None:
                    template = self.c.store.peek("ResourceClaimTemplate", tname, ns)
                    if template is None:
                        self.c.store.record("Warning", "FailedResourceClaimCreation", pg,
                                          f'PodGroupResourceClaim {gc["name"]}: resource claim template "{tname}": '
                                          f'resourceclaimtemplate.resource.k8s.io "{tname}" not found')
                        continue
                    claim = self._claim_from_template(pg, gc["name"], template, "PodGroup", SCHEDULING_API)
                new.append({"name": gc["name"], "resourceClaimName": claim["metadata"]["name"]})
            if new:
                p = self.c.store.get("PodGroup", pg["metadata"]["name"], ns)
                assert p is not None
                p.setdefault("status", {}).setdefault("resourceClaimStatuses", []).extend(new)
                self.c.store.update(p)

    def _find_generated(self, owner: dict[str, Any], entry: str) -> dict[str, Any] | None:
        for c in self.c.store.list("ResourceClaim", owner["metadata"].get("namespace")):
            if (c["metadata"].get("annotations") or {}).get(POD_CLAIM_NAME) == entry and any(
                    r.get("uid") == owner["metadata"]["uid"] and r.get("controller")
                    for r in c["metadata"].get("ownerReferences") or []):
                return c
        return None

    def _group_claim_for(self, pod: dict[str, Any], ref: dict[str, Any]) -> tuple[bool, str | None]:
        """(is a PodGroup claim, generated name once known) for a pod's template entry."""
        if not self.c.gates.get("DRAWorkloadResourceClaims"):
            return False, None
        group = pod_group_name(pod)
        pg = self.c.store.peek("PodGroup", group, pod["metadata"].get("namespace")) if group else None
        if pg is None:
            return False, None
        for gc in (pg.get("spec") or {}).get("resourceClaims") or []:
            if gc.get("name") == ref["name"] and gc.get("resourceClaimTemplateName") == ref.get("resourceClaimTemplateName") \
                    and gc.get("resourceClaimName") == ref.get("resourceClaimName"):
                st = {s["name"]: s.get("resourceClaimName") for s in (pg.get("status") or {}).get("resourceClaimStatuses") or []}
                return True, st.get(ref["name"])
        return False, None

    def sync_claims(self) -> None:
        for pod in self.c.store.list("Pod"):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            ns = pod["metadata"].get("namespace", "")
            group = pod_group_name(pod)
            if group and self.c.gates.get("GenericWorkload") and self.c.store.peek("PodGroup", group, ns) is None:
                continue  # upstream retries until the PodGroup exists
            have = {s["name"] for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
            new: list[dict[str, str]] = []
            for ref in pod["spec"].get("resourceClaims") or []:
                tname = ref.get("resourceClaimTemplateName")
                if not tname or ref["name"] in have:
                    continue
                is_group, group_claim = self._group_claim_for(pod, ref)
                if is_group:
                    if group_claim:
                        new.append({"name": ref["name"], "resourceClaimName": group_claim})
                    continue
                claim = self._find_generated(pod, ref["name"])
                if claim is None:
                    template = self.c.store.peek("ResourceClaimTemplate", tname, ns)
                    if template is None:
                        self.c.store.record("Warning", "FailedResourceClaimCreation", pod,
                                          f'PodResourceClaim {ref["name"]}: resource claim template "{tname}": '
                                          f'resourceclaimtemplate.resource.k8s.io "{tname}" not found')
                        continue
                    claim = self._claim_from_template(pod, ref["name"], template, "Pod", "v1")
                new.append({"name": ref["name"], "resourceClaimName": claim["metadata"]["name"]})
            if new:
                p = self.c.store.get("Pod", pod["metadata"]["name"], ns)
                assert p is not None
                statuses = (p.get("status") or {}).get("resourceClaimStatuses") or []
                merged = {s["name"]: s for s in statuses + new}
                p.setdefault("status", {})["resourceClaimStatuses"] = [merged[k] for k in sorted(merged)]
                self.c.store.update(p)

    def _claim_from_template(self, owner: dict[str, Any], entry: str, template: dict[str, Any], kind: str,
                             api_version: str) -> dict[str, Any]:
        ns = owner["metadata"].get("namespace", "")
        tmeta = template["spec"].get("metadata") or {}
        o = owner["metadata"]["name"]
        generate = f"{o}-{entry}-"
        if len(generate) > 57:
            # truncate both names in proportion, as the controller does (no trailing hyphen then)
            total = len(generate)
            generate = o[: len(o) * 57 // total] + "-" + entry[: len(entry) * 57 // total]
        digest = hashlib.sha256(f"{owner['metadata']['uid']}/{entry}".encode()).hexdigest()
        claim = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {
                "name": generate + name_suffix(digest), "generateName": generate, "namespace": ns,
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME: entry},
                "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": owner["metadata"]["name"],
                                     "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": copy.deepcopy(template["spec"]["spec"]),
        }
        return self.c.store.create(claim)

    def owner_gone(self, owner: dict[str, Any]) -> None:
        """A pod or PodGroup is gone: drop it from ``reservedFor``; garbage-collect what it owned."""
        uid = owner["metadata"]["uid"]
        for claim in list(self.c.store.list("ResourceClaim", owner["metadata"].get("namespace"))):
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            owned = any(r.get("uid") == uid for r in claim["metadata"].get("ownerReferences") or [])
            if any(r.get("uid") == uid for r in reserved):
                c = copy.deepcopy(claim)
                c["status"]["reservedFor"] = [r for r in reserved if r.get("uid") != uid]
                self.c.store.update(c)
            if owned:
                stored = self.c.store.get("ResourceClaim", claim["metadata"]["name"], claim["metadata"].get("namespace"))
                assert stored is not None
                stored["metadata"]["deletionTimestamp"] = self.c.clock.stamp()
                self.c.store.update(stored)

    def release_claims(self) -> None:
        """Deallocate claims nobody reserves any more; finish deleting claims being deleted."""
        for claim in list(self.c.store.list("ResourceClaim")):
            st = claim.get("status") or {}
            if st.get("reservedFor"):
                continue
            deleting = bool(claim["metadata"].get("deletionTimestamp"))
            if st.get("allocation") or FINALIZER in (claim["metadata"].get("finalizers") or []):
                c = copy.deepcopy(claim)
                c.get("status", {}).pop("allocation", None)
                c["status"].pop("reservedFor", None) if "status" in c else None
                c["status"].pop("devices", None) if "status" in c else None  # entries of deallocated devices go too
                c["metadata"]["finalizers"] = [f for f in c["metadata"].get("finalizers") or [] if f != FINALIZER]
                self.c.store.update(c)
            if deleting:
                self.c.store.delete("ResourceClaim", claim["metadata"]["name"], claim["metadata"].get("namespace"))

    # Scheduler ----------------------------------------------------------------------------------
