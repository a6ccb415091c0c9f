"""What a target's nodes and drivers let a case observe: a node side drakit can read (device
metadata files), and a driver whose pools are all the case's own (pool status counts)."""

from __future__ import annotations

from typing import Any

from ..spec.case import Case


#: What a case can only see on a node drakit runs itself: assertion -> what it reads there.
NODE_SIDE_ASSERTIONS = {"deviceMetadata": "the device metadata files the driver writes on the node",
                        "container": "what the container runtime gave a container",
                        "nodeOperations": "the kubelet's calls to the driver"}
NODE_SIDE_STEPS = {"restart": "restarts of a node's kubelet or driver"}


def node_side_unmet(case: Case, target: Any, api: Any) -> tuple[str, str] | None:
    """``no-node-side`` for a case that observes the node side (device metadata files, container
    records, the kubelet's calls, restarts) when drakit does not run that node side itself
    (``target.node_side``): through the API a node's files and processes cannot be seen,
    whichever kubelet serves the driver there."""
    if target.node_side is not None:
        return None
    needs = [what for step in case.steps for what in
             ([NODE_SIDE_STEPS[step.kind]] if step.kind in NODE_SIDE_STEPS else [])
             + [NODE_SIDE_ASSERTIONS[name] for _line, name, _body in step.assertions if name in NODE_SIDE_ASSERTIONS]
             + ["the container statuses a kubelet writes" for _line, name, body in step.assertions
                if name == "object" and body.get("kind") == "Pod"
                and "containerStatuses" in ((body.get("match") or {}).get("status") or {})]]
    if not needs:
        return None
    drivers = sorted({str(body.get("driver")) for step in case.steps for _line, name, body in step.assertions
                      if name in NODE_SIDE_ASSERTIONS and body.get("driver")})
    seen = ""
    if drivers:
        served = nodes_serving(api, drivers)
        names = ", ".join(drivers)
        seen = (f"; {served} Ready node(s) publish ResourceSlices of {names}, but their node side is not drakit's"
                if served else f"; no Ready node publishes ResourceSlices of {names}")
    return ("no-node-side", f"the case observes {', '.join(dict.fromkeys(needs))}{seen}: drakit sees that only on "
                            f"nodes it runs itself (--cluster local)")


def nodes_serving(api: Any, drivers: list[str]) -> int:
    """How many Ready nodes publish node-local slices of one of *drivers* (0 when unknown)."""
    try:
        nodes = {n["metadata"]["name"] for n in api.list("Node", None)
                 if any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (n.get("status") or {}).get("conditions") or [])}
        return len({(sl.get("spec") or {}).get("nodeName") for sl in api.list("ResourceSlice", None)
                    if (sl.get("spec") or {}).get("driver") in drivers} & nodes)
    except Exception:  # noqa: BLE001 - only the message's detail depends on it
        return 0


#: Container runtimes that run no process: a container's output (what the driver suite's pods
#: print of their environment) never exists on their nodes. drakit's fake CRI is one; a cluster
#: drakit started, reached through its kubeconfig, has it.
FAKE_CRI = "drakit-fakecri"  # the RuntimeName clusters/local/fakecri reports
SILENT_RUNTIMES = (FAKE_CRI,)


def node_runtimes(api: Any) -> dict[str, Any]:
    """``environment.backends.<cluster>.nodes`` of results.json: how many Nodes run each container
    runtime and kubelet version (from their ``status.nodeInfo``, as the API server has them when the
    run starts), e.g. ``{"containerd://2.4.2": 3}``; empty when the Nodes cannot be listed."""
    runtimes: dict[str, int] = {}
    kubelets: dict[str, int] = {}
    try:
        nodes = api.list("Node", None)
    except Exception:  # noqa: BLE001 - a cluster that hides its Nodes: nothing to say
        return {}
    for n in nodes:
        info = (n.get("status") or {}).get("nodeInfo") or {}
        rt, kv = str(info.get("containerRuntimeVersion") or "unknown"), str(info.get("kubeletVersion") or "unknown")
        runtimes[rt] = runtimes.get(rt, 0) + 1
        kubelets[kv] = kubelets.get(kv, 0) + 1
    return {"nodes": {"count": len(nodes), "containerRuntimes": dict(sorted(runtimes.items())),
                      "kubeletVersions": dict(sorted(kubelets.items()))}} if nodes else {}


def silent_runtime_unmet(case: Case, api: Any, driver: str) -> tuple[str, str] | None:
    """``no-node-side`` for a case that reads what a container printed (``containerEnv`` through
    the pod's log) when every Ready node publishing slices of *driver* runs a container runtime
    that runs no process (:data:`SILENT_RUNTIMES`): the log stays empty whatever the driver did."""
    if not any(name == "containerEnv" for step in case.steps for _line, name, _body in step.assertions):
        return None
    try:
        nodes = {n["metadata"]["name"]: str(((n.get("status") or {}).get("nodeInfo") or {})
                                            .get("containerRuntimeVersion") or "")
                 for n in api.list("Node", None)
                 if any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (n.get("status") or {}).get("conditions") or [])}
        serving = sorted({str((sl.get("spec") or {}).get("nodeName")) for sl in api.list("ResourceSlice", None)
                          if (sl.get("spec") or {}).get("driver") == driver} & set(nodes))
    except Exception:  # noqa: BLE001 - cannot tell: let the case run and say what it sees
        return None
    runtimes = sorted({nodes[n].partition("://")[0] for n in serving})
    if not serving or any(r not in SILENT_RUNTIMES for r in runtimes):
        return None
    return ("no-node-side", f"the case reads what a container printed, and the {len(serving)} node(s) serving {driver} "
                            f"({', '.join(serving[:3])}{', ...' if len(serving) > 3 else ''}) run {', '.join(runtimes)}, "
                            f"a container runtime that runs no process: what a container got is read from drakit's "
                            f"record on the nodes it runs itself (--cluster local)")


def shared_driver_unmet(case: Case, api: Any, run_label: str) -> tuple[str, str] | None:
    """``not-applicable`` for a case that counts every pool of a driver (a
    ResourcePoolStatusRequest without a pool name) on a cluster where that driver has pools the
    case did not publish (the cluster's own nodes): the count is the cluster's, not the case's."""
    drivers = sorted({str((m.get("spec") or {}).get("driver")) for step in case.steps if not step.expect_error
                      for m in step.manifests if m.get("kind") == "ResourcePoolStatusRequest"
                      and (m.get("spec") or {}).get("driver") and not (m.get("spec") or {}).get("poolName")})
    if not drivers:
        return None
    try:
        foreign = sorted({f"{(sl.get('spec') or {}).get('driver')}/{((sl.get('spec') or {}).get('pool') or {}).get('name')}"
                          for sl in api.list("ResourceSlice", None)
                          if (sl.get("spec") or {}).get("driver") in drivers
                          and run_label not in ((sl.get("metadata") or {}).get("labels") or {})})
    except Exception:  # noqa: BLE001 - cannot tell: let the case run and say what it sees
        return None
    if not foreign:
        return None
    return ("not-applicable", f"the case counts every pool of {', '.join(drivers)}, and the cluster has "
                              f"{len(foreign)} pool(s) of it the case did not publish ({', '.join(foreign[:3])}"
                              f"{', ...' if len(foreign) > 3 else ''})")


#: What only a real kubelet node drakit runs can show on a cluster: the container runtime's
#: record, restarts of the kubelet or driver, the calls the driver served, device health in
#: pod status (written by the kubelet from the driver's health stream).
KUBELET_ASSERTIONS = ("container", "nodeOperations")


def kubelet_side_unmet(case: Case, target: Any) -> tuple[str, str] | None:
    """``no-node-side`` for a case that needs drakit's real kubelet nodes (``kubeletside``) on a
    target without them: a cluster drakit did not start, or a local one without root (kwok
    nodes and the node agent)."""
    if getattr(target.node_side, "prepare", None) is not None:
        return None
    what = []
    for step in case.steps:
        if step.kind == "restart":
            what.append("a restart step")
        for _line, name, body in step.assertions:
            if name in KUBELET_ASSERTIONS:
                what.append(f"the {name} assertion")
            elif name == "object" and "allocatedResourcesStatus" in repr(body.get("match")):
                what.append("device health in pod status")
    if not what:
        return None
    have = "kwok nodes with drakit's node agent" if target.node_side is not None else "no node side drakit runs"
    return ("no-node-side", f"the case uses {', '.join(sorted(set(what)))}, which needs drakit's real kubelet "
                            f"nodes (--cluster local, as root); the cluster has {have}")


#: What driver-suite assertions read that only a kubelet node gives: a container's mounts (the
#: runtime's record of the device metadata files the kubelet mounted) and the container statuses
#: the kubelet writes from the driver's health stream.
AGENT_NODE_ASSERTIONS = {
    "containerMetadata": "the device metadata files mounted into a container (the container runtime's record)",
    "deviceHealth": "device health in pod status (allocatedResourcesStatus, written by the kubelet from the "
                    "driver's health stream)"}


def agent_nodes_unmet(case: Case, nodes: Any) -> tuple[str, str] | None:
    """``no-node-side`` for a driver-suite case that reads :data:`AGENT_NODE_ASSERTIONS` when the
    driver's nodes (``drivernodes.DriverNodes``) are kwok nodes with drakit's node agent (no root,
    or ``DRAKIT_NODE_SIDE=agent``): no container runs there and kwok, not a kubelet, writes the
    pods' status, so a correct driver would fail."""
    if nodes is None or getattr(nodes, "real", True):
        return None
    what = [AGENT_NODE_ASSERTIONS[name] for step in case.steps for _line, name, _body in step.assertions
            if name in AGENT_NODE_ASSERTIONS]
    if not what:
        return None
    return ("no-node-side", f"the case reads {'; '.join(dict.fromkeys(what))}, which needs drakit's real kubelet "
                            f"nodes (--cluster local, as root, without DRAKIT_NODE_SIDE=agent); the driver's nodes "
                            f"are kwok nodes with drakit's node agent, where no container runs and kwok writes the "
                            f"pods' status")
