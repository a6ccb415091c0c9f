"""Per-worker names for a cluster shared by parallel workers, mapped both ways (pure, no I/O).

Cases name their cluster-scoped objects plainly (``node-a``, the drivers' DeviceClasses, pool
``node-a``). When several xdist workers run cases on one cluster at once (``-n N`` against a
kubeconfig), each worker's case writes those names with the worker's prefix (``gw1-node-a``):
:meth:`NameMap.outgoing` rewrites an object a case sends (the names of cluster-scoped objects
and every field that refers to one: nodeName, the hostname label and selectors, pool names,
deviceClassName, the implicit extended resource of a class), and :meth:`NameMap.incoming`
strips the prefix from whatever the cluster returns (objects, events, error messages), so
checks, results and failure messages see the case's own names. A worker runs one case at a
time, and a case removes its cluster-scoped objects when it ends, so a per-worker prefix keeps
concurrent cases apart while a worker's later cases can reuse (say) a node. The shards of a run
(``drakit run --shard i/N``) on one cluster do the same with the shard's prefix (``s2-node-a``,
``s2-gw1-node-a`` for a worker of a shard).

Only names that are valid DNS subdomains (pool names: slash-separated) and stay within 63
characters with the prefix are rewritten; an invalid or long name is sent as written, so the
API server's answer to it is the one the case expects.

What a prefix cannot keep apart makes a case *cluster-wide* (:func:`cluster_wide`): it runs with
no other case on the cluster and with its plain names (``clusterlock``).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Iterable

HOSTNAME_LABEL = "kubernetes.io/hostname"
IMPLICIT_EXTENDED = "deviceclass.resource.kubernetes.io/"
NAMESPACED_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "Pod", "Event", "PodGroup", "Workload",
                              "Namespace"})  # Namespace: each case's own, named after the case
_VALID = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[a-z0-9]([-a-z0-9.]*[a-z0-9])?)*\Z")
MAX_NAME = 63  # a node's name is also its hostname label value
WORKER_PREFIX = re.compile(r"^(?:s\d+-gw\d+-|s\d+-|gw\d+-)")  # a shard's, a worker's, or both


def worker_prefix(worker: str | None, shard: int | None = None) -> str:
    """The prefix of xdist worker ``worker`` (``gw1`` -> ``gw1-``) in shard ``shard`` of a
    sharded run (``s2-``, ``s2-gw1-``); none for one process of an unsharded run."""
    own = f"{worker}-" if worker and re.fullmatch(r"gw\d+", worker) else ""
    return (f"s{shard}-" if shard is not None else "") + own


class NameMap:
    """The mapping of one worker (``prefix`` empty: the identity)."""

    def __init__(self, prefix: str = "", owned: Iterable[str] = ()) -> None:
        self.prefix = prefix
        self.owned = frozenset(owned)  # the case's own cluster-scoped names (:func:`owned_names`)
        self._strip = re.compile(r"(?<![A-Za-z0-9_.-])" + re.escape(prefix)) if prefix else None

    # -- case names -> cluster names -------------------------------------------------------

    def name(self, name: Any) -> Any:
        """The cluster's name for one of the case's own cluster-scoped names; any other name (the
        cluster's own nodes, a vendor's DeviceClass, a class that does not exist) unchanged."""
        if (not self.prefix or not isinstance(name, str) or name not in self.owned or not _VALID.match(name)
                or len(self.prefix + name) > MAX_NAME):
            return name
        return self.prefix + name

    def object_name(self, kind: str, name: Any) -> Any:
        return name if kind in NAMESPACED_KINDS else self.name(name)

    def outgoing(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``obj`` (a case's manifest) with its cluster-scoped names rewritten."""
        if not self.prefix:
            return obj
        obj = copy.deepcopy(obj)
        kind = obj.get("kind")
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        if kind not in NAMESPACED_KINDS:
            for key in ("name", "generateName"):
                if key in meta:
                    meta[key] = self.name(meta[key])
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        if kind == "Node":
            labels = meta.get("labels")
            if isinstance(labels, dict) and HOSTNAME_LABEL in labels:
                labels[HOSTNAME_LABEL] = self.name(labels[HOSTNAME_LABEL])
        elif kind == "ResourceSlice":
            self._slice(spec)
        elif kind == "DeviceTaintRule":
            sel = spec.get("deviceSelector")
            if isinstance(sel, dict):
                for key in ("pool", "deviceClassName"):
                    if key in sel:
                        sel[key] = self.name(sel[key])
        elif kind == "ResourcePoolStatusRequest":
            if "poolName" in spec:
                spec["poolName"] = self.name(spec["poolName"])
        elif kind == "ResourceClaim":
            self._claim_spec(spec)
            if isinstance(obj.get("status"), dict):
                obj["status"] = self.claim_status(obj["status"])
        elif kind == "ResourceClaimTemplate":
            inner = spec.get("spec")
            if isinstance(inner, dict):
                self._claim_spec(inner)
        elif kind == "Pod":
            self._pod(spec)
        return obj

    def claim_status(self, status: dict[str, Any]) -> dict[str, Any]:
        """A claim's status as a case writes it (``driverStatus``): pools and node selector mapped."""
        if not self.prefix:
            return status
        status = copy.deepcopy(status)
        alloc = status.get("allocation")
        if isinstance(alloc, dict):
            for r in _dicts((alloc.get("devices") or {}).get("results")):
                if "pool" in r:
                    r["pool"] = self.name(r["pool"])
            self._node_selector(alloc.get("nodeSelector"))
        for d in _dicts(status.get("devices")):
            if "pool" in d:
                d["pool"] = self.name(d["pool"])
        return status

    def _slice(self, spec: dict[str, Any]) -> None:
        if "nodeName" in spec:
            spec["nodeName"] = self.name(spec["nodeName"])
        pool = spec.get("pool")
        if isinstance(pool, dict) and "name" in pool:
            pool["name"] = self.name(pool["name"])
        self._node_selector(spec.get("nodeSelector"))
        for d in _dicts(spec.get("devices")):
            if "nodeName" in d:
                d["nodeName"] = self.name(d["nodeName"])
            self._node_selector(d.get("nodeSelector"))

    def _claim_spec(self, spec: dict[str, Any]) -> None:
        for req in _dicts((spec.get("devices") or {}).get("requests") if isinstance(spec.get("devices"), dict) else None):
            exactly = req.get("exactly")
            for sub in ([exactly] if isinstance(exactly, dict) else []) + list(_dicts(req.get("firstAvailable"))):
                if "deviceClassName" in sub:
                    sub["deviceClassName"] = self.name(sub["deviceClassName"])

    def _pod(self, spec: dict[str, Any]) -> None:
        if "nodeName" in spec:
            spec["nodeName"] = self.name(spec["nodeName"])
        sel = spec.get("nodeSelector")
        if isinstance(sel, dict) and HOSTNAME_LABEL in sel:
            sel[HOSTNAME_LABEL] = self.name(sel[HOSTNAME_LABEL])
        affinity = (spec.get("affinity") or {}).get("nodeAffinity") if isinstance(spec.get("affinity"), dict) else None
        if isinstance(affinity, dict):
            self._node_selector(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
            for pref in _dicts(affinity.get("preferredDuringSchedulingIgnoredDuringExecution")):
                self._term(pref.get("preference"))
        for container in list(_dicts(spec.get("containers"))) + list(_dicts(spec.get("initContainers"))):
            resources = container.get("resources")
            for key in ("requests", "limits"):
                amounts = resources.get(key) if isinstance(resources, dict) else None
                if isinstance(amounts, dict):
                    resources[key] = {self._resource(k): v for k, v in amounts.items()}

    def _resource(self, name: str) -> str:
        if isinstance(name, str) and name.startswith(IMPLICIT_EXTENDED):
            return IMPLICIT_EXTENDED + str(self.name(name[len(IMPLICIT_EXTENDED):]))
        return name

    def _node_selector(self, sel: Any) -> None:
        if isinstance(sel, dict):
            for term in _dicts(sel.get("nodeSelectorTerms")):
                self._term(term)

    def _term(self, term: Any) -> None:
        if not isinstance(term, dict):
            return
        for req in _dicts(term.get("matchFields")):
            if req.get("key") == "metadata.name" and isinstance(req.get("values"), list):
                req["values"] = [self.name(v) for v in req["values"]]
        for req in _dicts(term.get("matchExpressions")):
            if req.get("key") == HOSTNAME_LABEL and isinstance(req.get("values"), list):
                req["values"] = [self.name(v) for v in req["values"]]

    # -- cluster names -> case names -------------------------------------------------------

    def text(self, text: str) -> str:
        """``text`` (a message, a name) with this worker's prefix taken off every name in it."""
        return self._strip.sub("", text) if self._strip is not None else text

    def incoming(self, value: Any) -> Any:
        """A copy of ``value`` (an object, a list of them) as the case sees it: every string and
        key with this worker's prefix taken off."""
        if self._strip is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.incoming(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.incoming(v) for v in value]
        return value

    def foreign(self, name: Any) -> bool:
        """Whether a cluster-scoped object of that name is another worker's (hidden from lists)."""
        return bool(self.prefix) and isinstance(name, str) and bool(WORKER_PREFIX.match(name)) \
            and not name.startswith(self.prefix)


def owned_names(nodes: Iterable[str], objects: Iterable[dict[str, Any]]) -> set[str]:
    """The cluster-scoped names a case owns: its nodes, and the names of the cluster-scoped
    ``objects`` it publishes or applies, with the nodes and pools its ResourceSlices name."""
    out = set(nodes)
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        if obj.get("kind") not in NAMESPACED_KINDS and isinstance(meta.get("name"), str):
            out.add(meta["name"])
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        if obj.get("kind") == "ResourceSlice":
            pool = spec.get("pool") if isinstance(spec.get("pool"), dict) else {}
            names = [spec.get("nodeName"), pool.get("name")] + [d.get("nodeName") for d in _dicts(spec.get("devices"))]
            out.update(n for n in names if isinstance(n, str))
    return out


def _dicts(items: Any) -> Iterable[dict[str, Any]]:
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def cluster_wide(case: Any) -> str | None:
    """Why ``case`` sees or changes more of a shared cluster than its own prefixed objects (so
    it must run alone there), or None. Derived from what the case applies:

    - a ResourcePoolStatusRequest without a pool name counts every pool of a driver;
    - a DeviceTaintRule naming no pool taints devices of every pool of a driver;
    - a ResourceSlice with ``allNodes`` or a node selector (or per-device node selection by
      label) offers devices to nodes beyond the case's own;
    - a DeviceClass with an ``extendedResourceName`` claims a cluster-wide resource name;
    - a driver-suite case works on the driver under test's own nodes and pools."""
    if "driver" in case.features:
        return "it is a driver-suite case (the driver under test's own nodes and pools)"
    for step in case.steps:
        for m in step.manifests:
            kind, spec = m.get("kind"), m.get("spec") or {}
            if not isinstance(spec, dict):
                continue
            if kind == "ResourcePoolStatusRequest" and not step.expect_error and not spec.get("poolName"):
                return "it counts every pool of a driver (a ResourcePoolStatusRequest without poolName)"
            if kind == "DeviceTaintRule" and not step.expect_error and not (spec.get("deviceSelector") or {}).get("pool"):
                return "its DeviceTaintRule names no pool (it taints every pool of the driver)"
            if kind == "ResourceSlice" and not step.expect_error and _beyond_own_nodes(spec):
                return "its ResourceSlice offers devices to nodes by selector or to all nodes"
            if kind == "DeviceClass" and not step.expect_error and spec.get("extendedResourceName"):
                return "its DeviceClass names a cluster-wide extended resource"
    return None


def _beyond_own_nodes(spec: dict[str, Any]) -> bool:
    if spec.get("allNodes") or _by_label(spec.get("nodeSelector")):
        return True
    return any(d.get("allNodes") or _by_label(d.get("nodeSelector")) for d in _dicts(spec.get("devices")))


def _by_label(sel: Any) -> bool:
    """A node selector that may match nodes other than named ones (any matchExpressions but on
    the hostname label, or matchFields on anything but metadata.name)."""
    if not isinstance(sel, dict):
        return False
    for term in _dicts(sel.get("nodeSelectorTerms")):
        if any(r.get("key") != HOSTNAME_LABEL or r.get("operator") != "In" for r in _dicts(term.get("matchExpressions"))):
            return True
        if any(r.get("key") != "metadata.name" or r.get("operator") != "In" for r in _dicts(term.get("matchFields"))):
            return True
    return False
