"""The driver under test, as the cluster backend sees it: its inventory, nodes and version.

:class:`DriverSide` serves the driver suite (cases with ``features: [driver]``):

- ``unmet(case)``: binds the case's ``inventory`` to the devices the driver under test publishes
  in the target's ResourceSlices (``conformance.spec.inventory``), or skips it as ``inventory``
  naming what is missing (a cluster where the driver is absent publishes nothing: every case
  of the suite is skipped and the run is INCOMPLETE); a case needing what only drakit's own
  nodes can do (registration, restarts, CDI files) is skipped as ``backend`` elsewhere, and one
  reading what only a kubelet gives (mounted metadata files, device health in pod status) as
  ``no-node-side`` when the driver's nodes are kwok nodes with drakit's node agent.
  A declared behaviour whose devices are published but contradict it (shared counters that
  constrain nothing: overcommit, ``conformance.spec.contradictions``) is no skip: the case
  fails at its first step, saying why (``session.contradiction``).
- ``bindings(case)``: the ``${inv.*}`` values for the case's session.
- on drakit's local cluster, :class:`~.drivernodes.DriverNodes`: nodes that run the driver's
  kubelet plugin (started from the vendor profile's command template, or drakit's fake
  drivers), started with the first driver case and stopped at the end of the run.
- ``describe()``: the driver's name and version as published (the profile's ``version``
  attribute of the driver's devices, when it has one) for results.json.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from ..spec.case import Case
from ..spec.contradictions import contradiction
from ..spec.inventory import Unbound, bind, published_devices
from .base import HarnessError
from .nodeside import agent_nodes_unmet, silent_runtime_unmet

LOCAL_ONLY = {"registration": "registration is seen on the nodes drakit runs (--cluster local)",
              "plugin-restart": "drakit restarts plugins only on the nodes it runs (--cluster local)",
              "kubelet-restart": "drakit restarts kubelets only on the nodes it runs (--cluster local)",
              "unprepare": "leftover CDI specs are read on the nodes drakit runs (--cluster local)",
              "device-metadata": "metadata files a container gets are read on the nodes drakit runs (--cluster local)"}


class DriverSide:
    def __init__(self, api: Any, vendor: Any, *, local: Any = None, pod_image: str | None = None,
                 out: str | None = None) -> None:
        self.api = api
        self.out = out  # the run's out folder: the driver's logs go to <out>/driver-logs
        self.base = vendor  # the profile as written; self.vendor: as the current configuration runs it
        self.vendor = vendor
        self.dut = vendor.under_test if vendor is not None else None
        self.configuration: str | None = None
        self.local = local  # localtarget.LocalTarget when drakit runs the cluster
        self.pod_image = pod_image or "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
        self.nodes: Any = None  # drivernodes.DriverNodes, started on first use
        self.start_error: str | None = None
        self._bound: dict[str, dict[str, str]] = {}
        self._contradicted: dict[str, str] = {}  # case id -> why its behaviour fails without running
        from .heldclaims import HeldClaims
        self.held = HeldClaims(api)  # devices earlier cases' stuck pods hold (their unprepare keeps failing)

    def _ensure_nodes(self) -> None:
        if self.local is None or self.nodes is not None or self.start_error is not None:
            return
        from .drivernodes import DriverNodes
        try:
            from pathlib import Path
            self.nodes = DriverNodes(self.local, self.vendor, Path(self.out) if self.out else None)
            self.nodes.start()
        except HarnessError as exc:
            self.start_error = str(exc)
            self.nodes = None

    def stop(self) -> None:
        if self.nodes is not None:
            self.nodes.stop()
            self.nodes = None

    def _configure(self, name: str | None) -> None:
        """Profile v2 configurations: the driver's nodes restart with the case's configuration."""
        if name == self.configuration or self.base is None:
            return
        self.stop()
        self.start_error = None
        self.vendor = self.base.configured(name) if name else self.base
        self.dut = self.vendor.under_test
        self.configuration = name

    def unmet(self, case: Case) -> tuple[str, str] | None:
        self._configure(case.configuration)
        if self.dut is None:
            return ("not-applicable", "the vendor profile names no driver under test")
        if case.behaviour in _OPTIONAL and case.behaviour not in self.dut.optional:
            return ("not-applicable", f"the vendor profile does not declare {case.behaviour!r} under "
                                      f"driverUnderTest.optional for {self.dut.driver}")
        if case.behaviour in LOCAL_ONLY and self.local is None:
            return ("backend", LOCAL_ONLY[case.behaviour])
        if self.local is None:
            silent = silent_runtime_unmet(case, self.api, self.dut.driver)
            if silent is not None:
                return silent
        self._ensure_nodes()
        if self.start_error is not None:
            raise HarnessError(f"the driver's nodes cannot start: {self.start_error}")
        agent = agent_nodes_unmet(case, self.nodes)
        if agent is not None:
            return agent
        if case.behaviour in ("plugin-restart", "kubelet-restart") and self.nodes is not None \
                and not self.nodes.can_restart(case.behaviour.split("-")[0]):
            return ("backend", "drakit's fake driver runs in drakit's own process here and cannot be restarted "
                               "alone; restarts are checked on a driver started from a profile's plugin command")
        self._contradicted.pop(case.id, None)
        slices = self._slices()
        devices = published_devices(slices, self.dut.driver)
        attributes = {r.key: r.qualified for r in self.vendor.attributes if r.role == self.dut.role}
        held = self.held.devices(self.dut.driver) if self.held.records else {}
        if held and case.behaviour != "unprepare" and any(m.get("kind") == "Pod" for st in case.steps for m in st.manifests):
            return ("held", self.held.reason(held))  # its pods would meet the held devices (unprepare: its own failure)
        bound = bind(case.inventory or _NO_NEEDS, devices, self.dut.driver, attributes)
        if isinstance(bound, Unbound):
            broken = contradiction(case.behaviour, slices, self.dut.driver)
            if broken is not None:  # published, but against the behaviour: a failure of it, not a skip
                self._contradicted[case.id] = (f"the devices published for {case.behaviour} contradict it: {broken} "
                                               f"(the case could not be bound: {bound.message})")
                return None
            hint = ""
            if self.local is not None and self.dut.plugin is None and not self.vendor.fake:
                hint = ("; drakit started nothing for it: on drakit's local cluster the vendor profile must say how "
                        "to start its kubelet plugin (driverUnderTest.plugin)")
            return ("inventory", bound.message + hint)
        bound["podImage"] = self.pod_image
        self._bound[case.id] = bound
        return None

    def _slices(self) -> list[dict[str, Any]]:
        if self.nodes is not None:
            self.nodes.wait_for_slices()
        return self.api.list("ResourceSlice", None)

    def bindings(self, case: Case) -> dict[str, str]:
        return dict(self._bound.get(case.id) or {})

    def prepare_session(self, session: Any, case: Case) -> None:
        """Give a driver case's session the vendor profile, its bound inventory and the driver's
        nodes, once no claim of an earlier case is still prepared there (a force-deleted pod's
        claims are unprepared by the kubelet a moment later)."""
        if self.nodes is not None:
            held = self.nodes.settle(ignore=self.held.namespaces())  # stuck pods' claims: waiting frees nothing
            if held:
                logging.getLogger("drakit.cluster").warning("claims of earlier cases still prepared: %s", held[:5])
        session.on_held = self.held.add
        session.refusal_patience = 0.0 if self.held.records else 20.0  # the driver's refusals are known to last
        session.vendor = self.vendor
        session.bindings = self.bindings(case)
        session.contradiction = self._contradicted.get(case.id)
        session.driver_nodes = self.nodes
        session.log_marks = self.nodes.log_marks() if self.nodes is not None else {}
        session.driver_logs = (self.nodes.logs, self.nodes.logs.marks()) if self.nodes is not None else None
        session.container_env = functools.partial(container_env, session.api, session.namespace, self.nodes)

    def keep_to_driver_cases(self, case: Case) -> None:
        """The driver's own nodes exist only while driver cases run: stopped (nodes, slices and
        classes gone) when another case comes, started again by the next driver case. Otherwise
        that case's pods could go to them and a case counting every pool of a driver would count
        theirs (under ``-n N`` the order of the cases is not the files')."""
        if self.nodes is not None and "driver" not in case.features:
            self.stop()

    def describe(self, items: Any = ()) -> dict[str, Any]:
        """When the collected ``items`` hold driver cases, the driver's nodes start now (their
        slices carry the version)."""
        if self.dut is None:
            return {}
        first = next((i.case for i in items if "driver" in getattr(getattr(i, "case", None), "features", ())), None)
        if first is not None:
            self._configure(first.configuration)
            self._ensure_nodes()
            if self.nodes is not None:
                self.nodes.wait_for_slices()
        version = "not published"
        key = next((r.qualified for r in self.vendor.attributes if r.role == self.dut.role and r.key == "version"), None)
        try:
            slices = [s for s in self.api.list("ResourceSlice", None) if (s.get("spec") or {}).get("driver") == self.dut.driver]
        except Exception:  # noqa: BLE001 - the environment must not break the run
            slices = []
        found: list[str] = []
        if key:
            domain, _, ident = key.partition("/")
            found = sorted({str(next(iter(v.values()))) for s in slices for d in s["spec"].get("devices") or []
                            for k, v in (d.get("attributes") or {}).items()
                            if k == key or (k == ident and domain == self.dut.driver)})
        seen = self.nodes.published() if self.nodes is not None else {}
        sources = ([f"{', '.join(found)} (device attribute {key})"] if found else []) + (
            [f"{seen['buildVersion']} ({seen['buildVersionSource']})"] if seen.get("buildVersion") else [])
        if sources:
            version = "; ".join(sources)
        else:  # say where drakit looked
            version = (f"not published (no device attribute {key}" if key else
                       "not published (the profile names no version attribute") + (
                f"; {version_from_metrics(self.dut.plugin, seen)})" if self.nodes is not None else ")")
        out: dict[str, Any] = {"name": self.dut.driver, "version": version, "role": self.dut.role,
                               "deviceClass": self.dut.class_name, "publishedSlices": len(slices)}
        if self.base is not None and self.base.under_test is not None and self.base.under_test.configurations:
            out["configurations"] = [c.name for c in self.base.under_test.configurations]
        if seen.get("registration"):
            reg = seen["registration"]
            out["registration"] = (f"GetInfo: {reg['name']}, serving {', '.join(reg['supportedVersions'])} "
                                   f"(DRA gRPC API versions, not a driver version)")
        if seen.get("buildVersionError"):
            out["versionError"] = seen["buildVersionError"]
        if self.nodes is not None:
            out["nodes"] = self.nodes.describe()
        elif self.start_error:
            out["nodesError"] = self.start_error
        return out


def version_from_metrics(plugin: Any, seen: dict[str, Any]) -> str:
    """Why the plugin's metrics gave no version, in words for the report."""
    if plugin is None or not plugin.metrics_path:
        return "the profile gives no plugin.metricsPath to read a *_build_info metric from"
    if not any("{metricsPort}" in arg for arg in plugin.command):
        return "the profile's plugin command has no {metricsPort} for its metrics endpoint"
    return seen.get("buildVersionError") or "the metrics endpoint was not read"


_OPTIONAL = {"admin-access", "prioritized-list", "partitionable-devices", "consumable-capacity", "device-status",
             "device-metadata", "health", "device-taints", "binding-conditions"}


class _NoNeeds:
    devices: tuple[()] = ()
    nodes = 0


_NO_NEEDS: Any = _NoNeeds()


def container_env(api: Any, namespace: str, nodes: Any, pod: str, container: str | None) -> dict[str, str] | None:
    """What the pod's container got from the driver's CDI edits: on drakit's nodes, what the node
    recorded (``DriverNodes.container_env``); elsewhere, the ``KEY=value`` lines the pod printed
    (driver-suite pods print their environment). None while there is nothing to read yet."""
    if nodes is not None:
        return nodes.container_env(namespace, pod, container)  # type: ignore[no-any-return]
    from .containers import env_from_log
    return env_from_log(api, namespace, pod, container)


def driver_exercise(session: Any) -> list[str]:
    """What the case did with the driver under test: ``allocated`` (a claim of the case got a
    device of it) and ``ran a pod`` (a pod using such a claim runs: the kubelet had the driver
    prepare it). A vendor's own driver case that did either counts as exercising the driver."""
    dut = getattr(session.vendor, "under_test", None)
    if dut is None:
        return []
    claims = {c["metadata"]["name"] for c in session.list("ResourceClaim")
              if any(r.get("driver") == dut.driver for r in (((c.get("status") or {}).get("allocation") or {})
                                                              .get("devices") or {}).get("results") or [])}
    if not claims:
        return []
    done = ["allocated"]
    for pod in session.list("Pod"):
        st = pod.get("status") or {}
        used = {x.get("resourceClaimName") for x in st.get("resourceClaimStatuses") or []} | {
            r.get("resourceClaimName") for r in (pod.get("spec") or {}).get("resourceClaims") or []}
        if st.get("phase") == "Running" and used & claims:
            done.append("ran a pod")
            break
    return done
