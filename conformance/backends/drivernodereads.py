"""What the driver checks read on the driver suite's nodes: the kubelet's failed unprepares, the
devices the driver's prepare answer named, CDI specs left behind, and what a container got (a
mixin of :class:`~.drivernodes.DriverNodes`)."""

from __future__ import annotations

import re
from typing import Any

from .base import HarnessError
from .driverreads import cdi_env

_MAX_LOG_READ = 64 << 20  # a kubelet log read per case, at most
_ERR = re.compile(r'\berr="((?:[^"\\]|\\.)*)"')


def unprepare_refusal(line: str, namespace: str, pod: str | None = None) -> tuple[str, str] | None:
    """(pod name, error) when a kubelet log ``line`` says it failed to unprepare the claims of a
    pod of ``namespace`` (``pod``: that one): its pod worker's "Error syncing pod" with
    err="unprepare dynamic resources: NodeUnprepareResources failed for ResourceClaim c: ..."."""
    if "unprepare dynamic resources" not in line:
        return None
    m = re.search(r'\bpod="([^"/]+)/([^"]+)"', line)
    if m is None or m.group(1) != namespace or (pod is not None and m.group(2) != pod):
        return None
    err = _ERR.search(line)
    text = err.group(1).replace('\\"', '"') if err else line[-300:]
    return m.group(2), text.removeprefix("unprepare dynamic resources: ")[:500]


class NodeReads:
    nodes: dict[str, Any]
    target: Any
    dut: Any

    def unprepare_errors(self, namespace: str, since: dict[str, int]) -> list[str]:
        """The kubelet's failed unprepares for pods of ``namespace`` since ``since``, one line
        each: node, pod and the kubelet's error (which names NodeUnprepareResources, the claim and
        the driver's message). Its pod worker logs "Error syncing pod" with err="unprepare dynamic
        resources: ..." and retries 10-15 s later; kubelet 1.37.2 records no event. Empty on agent
        nodes: drakit's node agent records FailedUnprepare events."""
        return [f"pod {pod} on {node}: {error}" for node, pod, error in self.unprepare_refusals(namespace, since)]

    def unprepare_refusals(self, namespace: str, since: dict[str, int], pod: str | None = None) -> list[tuple[str, str, str]]:
        """(node, pod name, the kubelet's error) of each failed unprepare the kubelets logged for
        pods of ``namespace`` (``pod``: that pod only) since ``since``, oldest first."""
        found = []
        for node in self.nodes.values():
            if node.kubelet is None:
                continue
            try:
                with node.kubelet_log().open("rb") as fh:
                    fh.seek(since.get(node.name, 0))
                    text = fh.read(_MAX_LOG_READ).decode(errors="replace")
            except OSError:
                continue
            found += [(node.name, *got) for ln in text.splitlines() if (got := unprepare_refusal(ln, namespace, pod))]
        return found

    def prepared_answer(self, uid: str) -> tuple[str, list[tuple[tuple[str, ...], str, str]]] | None:
        """The node holding claim ``uid`` prepared and the devices the driver's NodePrepareResources
        answer named for it (request names, pool, device), as that node's kubelet recorded them in
        its DRA checkpoint (``dra_manager_state``: the kubelet keeps the answer's devices there
        until it unprepared the claim) or the node agent in its claim info; None when no node
        holds the claim."""
        import json
        for node in self.nodes.values():
            if node.kubelet is not None:
                try:
                    outer = json.loads((node.kubelet.paths.root_dir / "dra_manager_state").read_text())
                    entries = json.loads(outer.get("Data") or "{}").get("ClaimInfoStateList") or []
                except (OSError, ValueError, AttributeError):
                    continue  # none yet, or being replaced: the expect step reads it again
                for e in entries:
                    if isinstance(e, dict) and e.get("ClaimUID") == uid:
                        state = (e.get("DriverState") or {}).get(self.dut.driver) or {}
                        return node.name, [(tuple(d.get("RequestNames") or ()), str(d.get("PoolName", "")),
                                            str(d.get("DeviceName", ""))) for d in state.get("Devices") or []]
            elif node.agent is not None:
                info = node.agent.claim_infos().get(uid)
                if info is not None and info.prepared:
                    return node.name, [(tuple(d.request_names), d.pool, d.device)
                                       for d in info.drivers.get(self.dut.driver, ())]
        return None

    def cdi_specs_naming(self, uid: str) -> list[str]:
        found = []
        for node in self.nodes.values():
            folder = node.cdi_dir
            if not folder.is_dir():
                continue
            for path in sorted(folder.iterdir()):
                try:
                    if uid in path.name or uid in path.read_text(errors="replace"):
                        found.append(f"{node.name}:{path.name}")
                except OSError:
                    continue
        return found

    def container_record(self, namespace: str, pod_name: str, container: str) -> dict[str, Any] | None:
        """What the runtime of the pod's (real kubelet) node gave the container (the fake CRI's
        record, or containerd's): its CDI devices, env and mounts (``containers.record``); None
        before it was created."""
        pod = self.target.api.get("Pod", pod_name, namespace)
        node = self.nodes.get((pod or {}).get("spec", {}).get("nodeName") or "")
        if node is None:
            return None
        if node.kubelet is None:
            raise HarnessError("what a container got is recorded on drakit's real kubelet nodes only (as root)")
        from .containers import from_cri_event
        found = node.kubelet.containers(namespace, pod_name, container)
        return from_cri_event(found[-1]) if found else None

    def container_env(self, namespace: str, pod_name: str, container: str | None) -> dict[str, str] | None:
        """The environment the CDI devices prepared for the pod's claims resolve to on its node
        (what a CDI-aware runtime would give the container), or None before the pod is prepared."""
        pod = self.target.api.get("Pod", pod_name, namespace)
        if pod is None or (pod.get("spec") or {}).get("nodeName") not in self.nodes:
            return None
        node = self.nodes[pod["spec"]["nodeName"]]
        if node.kubelet is not None and node.kubelet.containerd is not None:
            # a real runtime ran the container: what it printed, read as on any cluster
            from .containers import env_from_log
            return env_from_log(self.target.api, namespace, pod_name, container)
        if node.kubelet is not None:  # what the fake CRI recorded: the env the CDI devices resolved to
            name = container or (pod["spec"].get("containers") or [{}])[0].get("name")
            found = node.kubelet.containers(namespace, pod_name, name)
            if not found:
                return None
            from .containers import CHARDEVS, from_cri_event
            rec = from_cri_event(found[-1])
            got = dict(str(kv).partition("=")[::2] for kv in rec["env"])
            got[CHARDEVS] = " ".join(str(d.get("containerPath")) for d in rec["deviceNodes"])  # what it was given
            return got
        containers = pod["spec"].get("containers") or []
        chosen = next((c for c in containers if container is None or c["name"] == container), None)
        if chosen is None:
            return None
        used = {c["name"] for c in (chosen.get("resources") or {}).get("claims") or []}
        names = {}
        for ref in pod["spec"].get("resourceClaims") or []:
            if ref["name"] in used:
                name = ref.get("resourceClaimName") or next(
                    (st.get("resourceClaimName") for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []
                     if st.get("name") == ref["name"]), None)
                if name:
                    names[ref["name"]] = name
        infos = node.agent.claim_infos() if node.agent is not None else {}
        ids: list[str] = []
        for claim_name in names.values():
            claim = self.target.api.get("ResourceClaim", claim_name, namespace)
            info = infos.get(claim["metadata"]["uid"]) if claim else None
            if info is None or not info.prepared:
                return None
            ids += [i for d in info.drivers.get(self.dut.driver, ()) for i in d.cdi_ids]
        edits = cdi_env(node.cdi_dir)
        env: dict[str, str] = {}
        for cdi_id in ids:
            for entry in edits.get(cdi_id, []):
                key, _, value = entry.partition("=")
                env[key] = value
        return env
