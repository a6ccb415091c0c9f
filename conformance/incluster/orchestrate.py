"""Create, follow, bring back, merge, delete: one ``drakit run --in-cluster`` (see the package).

The caller's kubeconfig creates the run's objects (``manifests``); the shards' pods run with
their own ServiceAccount. Every :data:`POLL` seconds the run reads its Jobs, pods and the nodes,
decides each shard's state (``outcome.classify``) and reads the progress line of the running
ones' logs; a pod that ended has its log read once, and its results taken out of it
(``frames``). At the end (all shards ended or lost, the time is up, or SIGINT/SIGTERM) the run
deletes what it created (unless ``keep``): the Jobs and their pods first, so that a shard still
running stops and removes its case, then whatever objects the shards' cases left (by their
``drakit.dev/run`` label, one value per shard), the namespace, the ClusterRole and its binding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from . import manifests as m
from .frames import find_results, last_progress
from .outcome import ENDED, LOST, PENDING, RUNNING, classify

POLL = 2.0
CASE_LABEL_KEY = "drakit.dev/run"  # backends.kubeapi.RUN_LABEL: what the shards' cases label
CASE_KINDS = (("v1", "Namespace"), ("v1", "Node"), ("resource.k8s.io/v1", "ResourceSlice"),
              ("resource.k8s.io/v1", "DeviceClass"), ("resource.k8s.io/v1", "DeviceTaintRule"))


@dataclass
class ShardState:
    index: int
    state: str = PENDING
    why: str = ""
    pod: str | None = None
    done: int = 0
    total: int | None = None
    results: dict[str, Any] | None = None
    since: float = field(default_factory=time.monotonic)


class InCluster:
    def __init__(self, api: Any, run_id: str, count: int, image: str, args: Sequence[str],
                 files: Sequence[tuple[str, str]] | None, *, say: Callable[[str], None],
                 start_timeout: float = 300.0, api_server: str | None = None,
                 profile: tuple[str, str] | None = None, part: int | None = None,
                 component_gates: dict[str, dict[str, bool]] | None = None) -> None:
        self.api = api
        self.run_id = run_id
        self.count = count
        self.image = image
        self.args = list(args)
        self.files = files
        self.profile = profile  # the vendor profile: (file name, text), carried in a ConfigMap
        self.part = part  # the size of the shards' results parts (None: channel.PART)
        self.component_gates = component_gates  # the scheduler's and controller manager's, read here
        self.say = say
        self.start_timeout = start_timeout
        self.api_server = api_server  # host-network shards reach the API server here
        self.namespace = m.namespace_of(run_id)
        self.shards = [ShardState(i) for i in range(1, count + 1)]
        self.created: list[dict[str, Any]] = []
        from kubernetes.client import CoreV1Api
        self.core = CoreV1Api(api.api_client)

    # -- create ------------------------------------------------------------------------------

    def objects(self) -> list[dict[str, Any]]:
        objs = m.rbac_objects(self.run_id)
        items = None
        args = list(self.args)
        if self.files is not None:
            cm, paths = m.case_files(self.files, self.run_id)
            items = cm.pop("items")
            objs.append(cm)
            args += paths
        in_pod = None
        if self.profile is not None:
            cm, in_pod = m.profile_configmap(*self.profile, self.run_id)
            objs.append(cm)
        objs += [m.shard_job(self.run_id, s.index, self.count, self.image, args, items, self.api_server, in_pod,
                             self.part, self.component_gates)
                 for s in self.shards]
        return objs

    def create(self) -> None:
        for obj in self.objects():
            self.created.append(obj)
            self.api.create(obj)
        for shard in self.shards:  # the start timeout counts from the Jobs' creation
            shard.since = time.monotonic()
        self.say(f"drakit: created namespace {self.namespace}, its ServiceAccount and RBAC, {self.count} shard Jobs")

    # -- follow ------------------------------------------------------------------------------

    def _list(self, api_version: str, kind: str, namespace: str | None, selector: str) -> list[dict[str, Any]]:
        res = self.api.resource(api_version, kind)
        return [i.to_dict() for i in res.get(namespace=namespace, label_selector=selector).items]

    def poll(self) -> None:
        selector = f"{m.RUN_LABEL}={self.run_id}"
        jobs = {int(j["metadata"]["labels"][m.SHARD_LABEL]): j
                for j in self._list("batch/v1", "Job", self.namespace, selector)}
        pods: dict[int, list[dict[str, Any]]] = {}
        for pod in sorted(self._list("v1", "Pod", self.namespace, selector),
                          key=lambda p: p["metadata"].get("creationTimestamp") or ""):
            pods.setdefault(int(pod["metadata"]["labels"][m.SHARD_LABEL]), []).append(pod)
        try:
            nodes: set[str] | None = {n["metadata"]["name"] for n in self._list("v1", "Node", None, "")}
        except Exception:  # noqa: BLE001 - cannot tell which nodes exist: decide without
            nodes = None
        for shard in self.shards:
            if shard.state in (ENDED, LOST):
                continue
            seen = classify(jobs.get(shard.index), pods.get(shard.index, []), nodes, shard.pod)
            shard.pod = seen.pod or shard.pod
            if seen.state == ENDED:
                self._collect(shard, seen.why)
            elif seen.state == LOST:
                shard.state, shard.why = LOST, seen.why
            elif seen.state == RUNNING:
                shard.state = RUNNING
                self._progress(shard)
            elif time.monotonic() - shard.since > self.start_timeout:
                shard.state, shard.why = LOST, f"its pod did not start within {self.start_timeout:.0f} s"

    def _log(self, pod: str, tail: int | None = None) -> str:
        kwargs = {"tail_lines": tail} if tail else {}
        return str(self.core.read_namespaced_pod_log(pod, self.namespace, container="drakit", **kwargs))

    def _progress(self, shard: ShardState) -> None:
        """Cases done: from the shard's ConfigMap (``channel``), else its log."""
        from .channel import read_progress
        try:
            found = read_progress(self.api, self.namespace, m.shard_configmap(shard.index))
            if found is None:
                found = last_progress(self._log(str(shard.pod), tail=20).splitlines())
        except Exception:  # noqa: BLE001 - the next poll reads again
            return
        if found:
            shard.done, shard.total = found

    def _collect(self, shard: ShardState, how: str) -> None:
        """The results of an ended shard: from its ConfigMaps, else its log; else it is lost."""
        from drakit.conformance.backends.kubeapi import first_line
        from .channel import read_results
        try:
            results = read_results(self.api, self.namespace, m.shard_configmap(shard.index))
        except Exception:  # noqa: BLE001 - the log may still have them
            results = None
        problem = "without results (in its ConfigMap or its log)"
        if results is None:
            try:
                results = find_results(self._log(str(shard.pod)))
            except Exception as exc:  # noqa: BLE001 - neither way back: the shard is lost
                problem = f"without results in its ConfigMap, and its log cannot be read: {first_line(exc)}"
        if results is None:
            shard.state, shard.why = LOST, f"its pod {shard.pod} ended ({how}) {problem}"
            return
        shard.state, shard.results = ENDED, results
        shard.done = shard.total = len(results.get("cases") or [])

    def finished(self) -> bool:
        return all(s.state in (ENDED, LOST) for s in self.shards)

    def progress_line(self) -> str:
        parts = []
        for s in self.shards:
            count = f"{s.done}/{s.total if s.total is not None else '?'}"
            parts.append(f"{s.index}/{self.count} {s.state}" + ("" if s.state in (PENDING, LOST) else f" {count}"))
        return "shards: " + ", ".join(parts)

    # -- delete ------------------------------------------------------------------------------

    def delete(self, wait: float = 150.0) -> list[str]:
        """Delete what the run created and what its shards' cases left; the problems, if any."""
        problems: list[str] = []
        selector = f"{m.RUN_LABEL}={self.run_id}"

        def attempt(what: str, fn: Callable[[], Any]) -> None:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - the others are still deleted; said at the end
                from drakit.conformance.backends.kubeapi import first_line
                if getattr(exc, "status", None) != 404:
                    problems.append(f"{what}: {first_line(exc)}")

        jobs = self.api.resource("batch/v1", "Job")
        attempt("Jobs", lambda: jobs.delete(namespace=self.namespace, label_selector=selector,
                                            body={"propagationPolicy": "Background"}))
        pods = self.api.resource("v1", "Pod")
        attempt("pods", lambda: pods.delete(namespace=self.namespace, label_selector=selector))
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:  # a shard still running stops and removes its case first
            try:
                if not self._list("v1", "Pod", self.namespace, selector):
                    break
            except Exception:  # noqa: BLE001 - the namespace may already be going
                break
            time.sleep(1.0)
        runs = ",".join(f"{self.run_id}s{s.index}" for s in self.shards)
        for api_version, kind in CASE_KINDS:
            res = self.api.resource(api_version, kind)
            sel = f"{CASE_LABEL_KEY} in ({runs})"
            attempt(f"the shards' {kind}s", lambda res=res, sel=sel: [
                res.delete(name=o.metadata.name) for o in res.get(label_selector=sel).items])
        for api_version, kind in (("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
                                  ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("v1", "Namespace")):
            res = self.api.resource(api_version, kind)
            attempt(f"{kind} {self.namespace}", lambda res=res: res.delete(name=self.namespace))
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:  # namespaces take a while (their contents go first)
            try:
                if not self.leftovers():
                    break
            except Exception:  # noqa: BLE001 - asked again below, and said
                pass
            time.sleep(1.0)
        return problems

    def leftovers(self) -> list[str]:
        """What of the run is still in the cluster (a namespace being deleted counts)."""
        runs = ",".join(f"{self.run_id}s{s.index}" for s in self.shards)
        found = []
        for api_version, kind in (*CASE_KINDS, ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                                  ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")):
            for sel in (f"{CASE_LABEL_KEY} in ({runs})", f"{m.RUN_LABEL}={self.run_id}"):
                found += [f"{kind} {o['metadata']['name']}" for o in self._list(api_version, kind, None, sel)]
        return sorted(set(found))
