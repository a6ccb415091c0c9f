"""The clusters the cluster backend runs cases on, with everything a case session takes from one.

A :class:`Target` is one cluster as the backend sees it: its API client, version, what discovery
found (served APIs, feature gates), and, on a cluster drakit started, the node side and the
control plane's logs folder. :class:`LocalTarget` is a local control plane (upstream 1.37
binaries plus kwok, stage set "prepared") that drakit starts with given feature gates and stops
again: the main cluster of ``--cluster local``, or the alternate one that runs the cases whose
``featureGates`` the main cluster does not have.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..features import DEFAULT_GATES
from .base import HarnessError
from .discovery import Discovery, discover

if TYPE_CHECKING:
    from .kubeapi import KubeApi


class Target:
    """One cluster cases run on. ``node_side`` and ``logs_dir`` exist only on a local cluster."""

    def __init__(self, api: KubeApi, discovery: Discovery, node_side: Any = None,
                 logs_dir: Path | None = None) -> None:
        self.api = api
        self.version = discovery.version
        self.discovery = discovery
        self.gates = dict(discovery.gates)
        self.node_side = node_side  # clusternode.ClusterNodeSide
        self.logs_dir = logs_dir


def _say_socket_folders_on_the_console() -> None:
    """A folder for Unix sockets outside a too long TMPDIR is said in one line on drakit run's
    console (``clusters.sockdir``; pytest captures stderr while cases run)."""
    import sys

    from drakit.clusters import sockdir

    from ..interrupt import INTERRUPTS

    def say(line: str) -> None:
        if INTERRUPTS.announcing:
            INTERRUPTS.say(f"drakit: {line}")
        else:
            sys.stderr.write(f"drakit: {line}\n")
    sockdir.set_notice(say)


class LocalTarget(Target):
    """A local control plane started here with ``requested`` gates on top of drakit's DRA
    defaults; :meth:`stop` stops its node side, then the cluster."""

    def __init__(self, requested: Mapping[str, bool], first: Any = None, scheduler: Mapping[str, bool] | None = None) -> None:
        from drakit.clusters.local.kwokconfig import PREPARED
        from drakit.clusters.local.launcher import ClusterError, LocalCluster
        from .kubeletside import kubelet_nodes_of
        _say_socket_folders_on_the_console()
        self.requested = dict(requested)
        self.scheduler = dict(scheduler or {})  # the gates its kube-scheduler alone has otherwise
        # Real kubelet nodes for the cases' fake hardware, unless DRAKIT_NODE_SIDE=agent asks for
        # kwok nodes with drakit's node agent (or the machine cannot run kubelets: no root).
        real = os.environ.get("DRAKIT_NODE_SIDE", "kubelet") != "agent"
        # The kubelets of the ``first`` case to run here start with the cluster, beside its
        # controllers (a kubelet takes about a second); a case with gates of its own runs on
        # an alternate cluster, so none start for it.
        early = (kubelet_nodes_of(first) if real and first is not None and not first.feature_gates
                 and not first.scheduler_gates else [])
        self.cluster = LocalCluster(gates=self.requested or None, stage_set=PREPARED, real_nodes=real,
                                    prestart_kubelet_nodes=early,
                                    component_gates={"kube-scheduler": self.scheduler} if self.scheduler else None)
        try:
            self.cluster.up()
        except ClusterError as exc:
            raise HarnessError(f"the local cluster{_with(self.requested)}"
                               + (f" and a kube-scheduler{_with(self.scheduler)}" if self.scheduler else "")
                               + f" cannot start: {exc}") from None
        try:
            from .kubeapi import KubeApi
            from .clusternode import ClusterNodeSide
            from .kubeletside import KubeletNodeSide
            api = KubeApi(str(self.cluster.kubeconfig), None, cache_dir=self.cluster.run_dir)
            started = {g: v for comp in self.cluster.gates.values() for g, v in comp.items()}
            found = discover(api.version(), api.get_json, None,
                             known_gates={g: v for g, v in started.items() if g in DEFAULT_GATES})
            node_side: Any = (KubeletNodeSide(self.cluster, api.api_client, found.gates, started=dict(early))
                              if self.cluster.real is not None else ClusterNodeSide(api.api_client, found.gates))
            self.flagged = frozenset(started)  # the gates it was started with a flag for
        except BaseException:
            self.cluster.down()
            raise
        super().__init__(api, found, node_side, self.cluster.logs_dir)

    def stop(self) -> None:
        """Stop the fake nodes' plugins first (they talk to this API server), then the cluster."""
        try:
            if self.node_side is not None:
                self.node_side.stop()
        finally:
            self.cluster.down()


def _with(gates: Mapping[str, bool]) -> str:
    return " with " + ",".join(f"{g}={str(v).lower()}" for g, v in sorted(gates.items())) if gates else ""


class Alternate:
    """The alternate local cluster of a run on drakit's local cluster: it runs the cases whose
    ``featureGates`` the main cluster does not have, started with the main cluster's
    ``requested`` gates plus the case's. One at most is alive; :meth:`target` restarts it only
    when a case needs a different gate set, stopping the old one first."""

    def __init__(self, main: LocalTarget) -> None:
        self.requested = dict(main.requested)
        self.main_gates = dict(main.gates)
        self.flagged = main.flagged
        self.bin_dir = main.cluster.bin_dir
        self._accepted: dict[tuple[str, bool, tuple[tuple[str, bool], ...]], bool] = {}
        self.current: LocalTarget | None = None

    def settable(self, gate: str, value: bool, together: Mapping[str, bool] | None = None) -> bool:
        """Whether a local cluster can start with ``gate=value`` (and the ``together`` gates the
        case also changes): a gate the main cluster was started with a flag for, or one a
        component binary accepts alone or together with those (a GA gate not yet locked; the
        launcher asks the binaries the same way). Gates drakit does not know are not."""
        if gate not in DEFAULT_GATES or gate in self.flagged:
            return gate in DEFAULT_GATES
        others = tuple(sorted((together or {}).items()))
        if (gate, value, others) not in self._accepted:
            from drakit.clusters.local.gates import probe_gate
            from drakit.clusters.local.launcher import KUBE_COMPONENTS
            self._accepted[gate, value, others] = any(
                probe_gate(self.bin_dir / b, gate, value) or (bool(others) and probe_gate(self.bin_dir / b, gate, value, dict(others)))
                for b in KUBE_COMPONENTS)
        return self._accepted[gate, value, others]

    def scheduler_differs(self, case: Any) -> dict[str, bool]:
        """The case's ``schedulerFeatureGates`` that differ from the gates its cluster has."""
        cluster = {**self.main_gates, **case.feature_gates}
        return {g: v for g, v in case.scheduler_gates.items() if cluster.get(g, False) != v}

    def gates_for(self, case: Any) -> tuple[dict[str, bool], dict[str, bool]] | None:
        """The gates the alternate needs for ``case`` (all components', and its scheduler's
        own), or None: the main cluster has the case's gates, or one it lacks cannot be set on a
        local cluster (:meth:`settable`); such a case stays skipped."""
        differ = {g: v for g, v in case.feature_gates.items() if self.main_gates.get(g, False) != v}
        scheduler = self.scheduler_differs(case)
        if not differ and not scheduler:
            return None
        if not all(self.settable(g, v, {o: w for o, w in differ.items() if o != g}) for g, v in differ.items()):
            return None
        if not all(self.settable(g, v) for g, v in scheduler.items()):
            return None
        gates = with_dependents_off({**self.requested, **case.feature_gates}, self.main_gates, case.feature_gates)
        return gates, scheduler

    def target(self, case: Any) -> LocalTarget | None:
        """The alternate that runs ``case`` (started here if need be), or None: the main one does."""
        want = self.gates_for(case)
        if want is None:
            return None
        if self.current is None or (self.current.requested, self.current.scheduler) != want:
            self.stop()
            self.current = LocalTarget(want[0], scheduler=want[1])
        return self.current

    def stop(self) -> None:
        current, self.current = self.current, None
        if current is not None:
            current.stop()

    def planned(self, items: Any, backend: str) -> list[dict[str, Any]]:
        """For results.json: one entry per gate set (only the gates that differ from the main
        cluster's) that the collected ``items`` of ``backend`` need an alternate for, with how
        many cases."""
        counts: dict[tuple[tuple[tuple[str, bool], ...], tuple[tuple[str, bool], ...]], int] = {}
        for item in items:
            case = getattr(item, "case", None)
            if getattr(item, "backend", None) != backend or case is None or self.gates_for(case) is None:
                continue
            key = (tuple(sorted((g, v) for g, v in case.feature_gates.items() if self.main_gates.get(g, False) != v)),
                   tuple(sorted(self.scheduler_differs(case).items())))
            counts[key] = counts.get(key, 0) + 1
        return [{"featureGates": dict(gates), **({"schedulerFeatureGates": dict(sched)} if sched else {}), "cases": n}
                for (gates, sched), n in sorted(counts.items())]


def with_dependents_off(gates: Mapping[str, bool], base: Mapping[str, bool], fixed: Mapping[str, bool]) -> dict[str, bool]:
    """``gates`` plus, turned off, every gate of ``base`` that depends on a gate turned off
    (transitively): the binaries refuse to start with ``DRAPartitionableDevicesType`` on and
    ``DRAPartitionableDevices`` off. Gates in ``fixed`` (the case's own) are never changed."""
    from ..features import GATE_DEPENDENCIES

    out = dict(gates)
    effective = {**base, **out}
    changed = True
    while changed:
        changed = False
        for gate, deps in GATE_DEPENDENCIES.items():
            if gate in fixed or not effective.get(gate):
                continue
            if any(not effective.get(d, False) for d in deps):
                out[gate] = effective[gate] = False
                changed = True
    return out


def gates_unmet(case: Any, target: Target, alternate_runs: bool, alternate: Alternate | None) -> tuple[str, str] | None:
    """Why ``target`` cannot run ``case`` for its gates (skip category and message), or None:
    a ``featureGates`` gate it lacks or could not observe, or a ``schedulerFeatureGates`` gate
    its kube-scheduler lacks (only an alternate local cluster's scheduler is started so).
    ``alternate_runs``: the target is the alternate local cluster."""
    where = "the alternate local cluster" if alternate_runs else "the cluster"
    for gate, want in case.feature_gates.items():
        if gate in target.discovery.unknown:
            return ("gate-unknown", f"the case needs {gate}={str(want).lower()} and drakit could not observe "
                                    f"{gate} on {where} ({target.discovery.sources.get(gate, 'unknown')}); "
                                    f"state it with --feature-gates {gate}=true|false")
        if target.gates.get(gate, False) != want:
            how = target.discovery.sources.get(gate, "")
            refused = alternate is not None and not alternate.settable(gate, want)
            return ("feature-disabled", f"the case needs {gate}={str(want).lower()}; {where} has "
                                        f"{str(target.gates.get(gate, False)).lower()}" + (f" ({how})" if how else "")
                    + ("; the local binaries do not accept it" if refused else ""))
    for gate, want in case.scheduler_gates.items():
        has = getattr(target, "scheduler", {}).get(gate, target.gates.get(gate, False))
        if has != want:
            return ("feature-disabled", f"the case needs a kube-scheduler with {gate}={str(want).lower()} beside "
                                        f"{where}'s {gate}={str(target.gates.get(gate, False)).lower()}; drakit "
                                        f"starts such a scheduler on its own local cluster only (--cluster local)")
    return None
