"""Read-only discovery of a cluster: its version, the DRA API versions it serves, and its feature
gates as far as the API shows them.

Nothing here changes the cluster. Gates are inferred two ways:

- **served resources**: a gated resource (DeviceTaintRule, ResourcePoolStatusRequest, PodGroup)
  is listed by API discovery only when its gate is on;
- **server-side dry run**: an object that uses a gated field is created with ``dryRun=All``
  (nothing is stored). When the gate is off the API server drops the field before validation
  (the rules of :mod:`conformance.validation.fieldgates`), so the field is missing from the
  answer; when it is on, the field comes back. A few probes are rejected in a way that tells the
  same (a list attribute that lost its only value, admin access refused for the namespace label,
  a field the server's schema does not know).

Before both, the components' own values are read where they can be
(:mod:`conformance.backends.gatemetrics`: ``kubernetes_feature_enabled`` in the API server's
``/metrics``, and the scheduler's on a local cluster drakit started); a gate the user states
(``--feature-gates``) fills in what nothing showed. A gate still not known is listed in
``unknown`` (its value is not guessed): a case whose outcome depends on it is skipped as
``gate-unknown``. ``sources`` says for every gate how its value is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..errors import ApiRejected
from ..features import DEFAULT_GATES, LOCKED_GATES
from ..validation.fieldgates import RULES, in_use

GROUPS = ("resource.k8s.io", "scheduling.k8s.io")
PROBE_NAME = "drakit-probe"
PROBE_DRIVER = "probe.drakit.dev"
SERVED_API = "served API"
DRY_RUN = "dry-run"
ASSUMED = "assumed: 1.37 default, not observable from the API"
UNKNOWN = "unknown"
STATED = "stated: --feature-gates"


@dataclass
class Discovery:
    version: str
    served: tuple[str, ...]                       # group versions, e.g. resource.k8s.io/v1
    resources: dict[str, frozenset[str]]          # group version -> resource names (plural)
    kinds: dict[str, frozenset[str]] = field(default_factory=dict)  # group version -> kinds
    gates: dict[str, bool] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # gate -> how its value is known
    unknown: set[str] = field(default_factory=set)  # gates whose value nothing showed (not in gates)

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the cluster serves ``kind`` in ``api_version`` (core kinds are assumed)."""
        group = api_version.rpartition("/")[0]
        if group not in GROUPS:
            return True
        return kind in self.kinds.get(api_version, frozenset())


# (gate, group version, resource) present -> gate on
_RESOURCE_GATES = (
    ("DynamicResourceAllocation", "resource.k8s.io/v1", "resourceclaims"),
    ("DRADeviceTaintRules", "resource.k8s.io/v1", "devicetaintrules"),
    ("DRAResourcePoolStatus", "resource.k8s.io/v1alpha3", "resourcepoolstatusrequests"),
    ("GenericWorkload", "scheduling.k8s.io/v1beta1", "podgroups"),
)


def _slice(devices: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": PROBE_DRIVER, "pool": {"name": "probe", "generation": 1, "resourceSliceCount": 1},
                            "allNodes": True, **spec}
    if devices is not None:
        body["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": PROBE_NAME}, "spec": body}


def _device(**fields: Any) -> list[dict[str, Any]]:
    return [{"name": "d0", **fields}]


def _claim(ns: str, request: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": PROBE_NAME, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "r", **request}], **devices}}}


def _exactly(**fields: Any) -> dict[str, Any]:
    return {"exactly": {"deviceClassName": PROBE_NAME, **fields}}


_COUNTERS = [{"counterSet": "c", "counters": {"mem": {"value": "1"}}}]

# gate -> (object builder taking the probe namespace, rejection texts that still decide: text -> value)
PROBES: dict[str, tuple[Callable[[str], dict[str, Any]], dict[str, bool]]] = {
    "DRAPrioritizedList": (lambda ns: _claim(ns, {"firstAvailable": [{"name": "a", "deviceClassName": PROBE_NAME}]}),
                           {}),
    "DRADeviceTaints": (lambda ns: _slice(_device(taints=[{"key": "drakit.dev/probe", "effect": "NoSchedule"}])), {}),
    "DRAAdminAccess": (lambda ns: _claim(ns, _exactly(adminAccess=True)), {"admin-access": True}),
    "DRAConsumableCapacity": (lambda ns: _slice(_device(allowMultipleAllocations=True)), {}),
    "DRADerivedAttributes": (lambda ns: _claim(
        ns, _exactly(derivedAttributes=[{"name": f"{PROBE_DRIVER}/x", "expression": "device.driver"}]),
        constraints=[{"matchAttribute": f"{PROBE_DRIVER}/x"}]), {}),
    "DRAPartitionableDevices": (lambda ns: _slice(sharedCounters=[{"name": "c", "counters": {"mem": {"value": "1"}}}]),
                                {}),
    "DRADeviceBindingConditions": (lambda ns: _slice(_device(bindingConditions=["probe"],
                                                             bindingFailureConditions=["probe-failed"])), {}),
    "DRADeviceCompatibilityGroups": (lambda ns: _slice(_device(consumesCounters=[
        {**_COUNTERS[0], "compatibilityGroups": ["g"]}])), {}),
    "DRANodeAllocatableResources": (lambda ns: _slice(_device(
        nodeAllocatableResources={"cpu": {"mapping": {"deviceMultiplier": "1"}}})), {}),
    "DRAListTypeAttributes": (lambda ns: _slice(_device(attributes={"x": {"ints": [1, 2]}})),
                              {"must specify one of": False}),
    "DRAOptionalNodeOperations": (lambda ns: _slice(_device(), skipNodeOperations=["*"]), {}),
    "DRAPartitionableDevicesType": (lambda ns: _slice(_device(consumesCounters=_COUNTERS,
                                                              attributes={"x": {"string": "a"}}),
                                                      partitionTypeAttribute=f"{PROBE_DRIVER}/x"), {}),
    "DRAExtendedResource": (lambda ns: {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                        "metadata": {"name": PROBE_NAME},
                                        "spec": {"extendedResourceName": f"{PROBE_DRIVER}/x"}}, {}),
    "DRAWorkloadResourceClaims": (lambda ns: {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                              "metadata": {"name": PROBE_NAME, "namespace": ns},
                                              "spec": {"schedulingPolicy": {"basic": {}},
                                                       "resourceClaims": [{"name": "c", "resourceClaimName": "x"}]}},
                                  {}),
}


def _rule(kind: str, gate: str) -> Any:
    return next(r for r in RULES if r.kind == kind and gate in r.gates and not r.status)


def probe_gate(dry_run: Callable[[dict[str, Any]], dict[str, Any]], gate: str, namespace: str) -> tuple[bool | None, str]:
    """(value or None when inconclusive, how it was decided) for one gate's dry-run probe."""
    build, on_rejection = PROBES[gate]
    obj = build(namespace)
    try:
        answer = dry_run(obj)
    except ApiRejected as exc:
        text = str(exc)
        if "unknown field" in text:
            return False, f"{DRY_RUN}: the server does not know the field"
        for needle, value in on_rejection.items():
            if needle in text:
                return value, f"{DRY_RUN}: rejected as {'on' if value else 'off'}"
        return None, f"dry-run rejected: {text[:160]}"
    except Exception as exc:  # the probe could not run (RBAC, webhooks, network): keep the default
        return None, f"dry-run failed: {type(exc).__name__}"
    return (True, f"{DRY_RUN}: field kept") if in_use(answer, _rule(obj["kind"], gate)) \
        else (False, f"{DRY_RUN}: field dropped")


def served_resources(get_json: Callable[[str], dict[str, Any]]
                     ) -> tuple[tuple[str, ...], dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """The served group versions of the DRA groups, their resources and their kinds, from API
    discovery."""
    served: list[str] = []
    resources: dict[str, frozenset[str]] = {}
    kinds: dict[str, frozenset[str]] = {}
    for group in get_json("/apis").get("groups") or []:
        if group.get("name") not in GROUPS:
            continue
        for version in group.get("versions") or []:
            gv = version.get("groupVersion") or f"{group['name']}/{version.get('version')}"
            served.append(gv)
            listed = [r for r in get_json(f"/apis/{gv}").get("resources") or [] if "/" not in r.get("name", "/")]
            resources[gv] = frozenset(r["name"] for r in listed)
            kinds[gv] = frozenset(r.get("kind", "") for r in listed)
    return tuple(sorted(served)), resources, kinds


def discover(version: str, get_json: Callable[[str], dict[str, Any]],
             dry_run: Callable[[dict[str, Any]], dict[str, Any]] | None, namespace: str = "default",
             known_gates: dict[str, bool] | None = None,
             observed: Mapping[str, Mapping[str, bool]] | None = None,
             stated: Mapping[str, bool] | None = None) -> Discovery:
    """Discover the cluster. ``known_gates`` (a cluster drakit started itself) are taken as they
    are; otherwise gates are inferred (``dry_run`` None: from served resources only), then
    replaced by what the components report (``observed``: component -> gate -> value, from their
    ``/metrics``), and what is still unknown is taken from ``stated`` or left unknown."""
    found = _discover(version, get_json, dry_run, namespace, known_gates)
    if known_gates is None:
        settle_gates(found, observed or {}, stated or {})
    return found


def settle_gates(found: Discovery, observed: Mapping[str, Mapping[str, bool]], stated: Mapping[str, bool]) -> None:
    """Apply the components' own values and the user's statements to the inferred gates of
    ``found``; gates nothing decided go to ``found.unknown``."""
    from .gatemetrics import SCHEDULER_ONLY_GATES
    api = observed.get("kube-apiserver") or {}
    scheduler = observed.get("kube-scheduler") or {}
    for gate in DEFAULT_GATES:
        inferred = found.sources.get(gate, ASSUMED)
        if gate in LOCKED_GATES and gate not in api and inferred.startswith(ASSUMED):
            found.gates[gate], found.sources[gate] = True, "locked on in 1.37"  # nothing else showed it
            continue
        if gate in SCHEDULER_ONLY_GATES:
            if gate in scheduler:
                found.gates[gate], found.sources[gate] = scheduler[gate], "kube-scheduler /metrics"
            else:
                found.unknown.add(gate)
                found.sources[gate] = (f"{UNKNOWN}: acts in the scheduler only, whose /metrics drakit cannot read"
                                       + (f" (the API server has it {'on' if api[gate] else 'off'})" if gate in api else ""))
            continue
        if gate in api:
            agree = "" if inferred.startswith(ASSUMED) else (
                f"; {inferred}: agrees" if found.gates.get(gate) == api[gate] else f"; {inferred}: disagrees")
            found.gates[gate], found.sources[gate] = api[gate], "kube-apiserver /metrics" + agree
        elif inferred.startswith(ASSUMED):
            found.unknown.add(gate)
            found.sources[gate] = f"{UNKNOWN}: " + inferred.removeprefix(ASSUMED).strip(" ()") if inferred != ASSUMED \
                else f"{UNKNOWN}: not observable from the API and no /metrics"
    for gate, value in stated.items():
        if gate in found.unknown:
            found.unknown.discard(gate)
            found.gates[gate], found.sources[gate] = value, STATED
        elif gate in found.gates and found.gates[gate] != value:
            found.sources[gate] += f" (--feature-gates says {str(value).lower()}; the observed value is used)"
    for gate in found.unknown:
        found.gates.pop(gate, None)


def _discover(version: str, get_json: Callable[[str], dict[str, Any]],
              dry_run: Callable[[dict[str, Any]], dict[str, Any]] | None, namespace: str,
              known_gates: dict[str, bool] | None) -> Discovery:
    served, resources, kinds = served_resources(get_json)
    found = Discovery(version, served, resources, kinds)
    for gate, default in DEFAULT_GATES.items():
        if known_gates is not None:
            found.gates[gate] = known_gates.get(gate, default)
            found.sources[gate] = ("set by drakit (local cluster flags)" if gate in known_gates
                                   else "1.37 default (not set by drakit)")
            continue
        found.gates[gate], found.sources[gate] = default, ASSUMED
    if known_gates is not None:
        return found
    for gate, gv, resource in _RESOURCE_GATES:
        found.gates[gate] = resource in resources.get(gv, frozenset())
        found.sources[gate] = f"{SERVED_API}: {gv} {resource} {'listed' if found.gates[gate] else 'not listed'}"
    if dry_run is None:
        return found
    for gate in PROBES:
        if gate == "DRAWorkloadResourceClaims" and not found.gates.get("GenericWorkload"):
            found.gates[gate], found.sources[gate] = False, f"{SERVED_API}: PodGroup not served"
            continue
        value, how = probe_gate(dry_run, gate, namespace)
        if value is None:
            found.sources[gate] = f"{ASSUMED} ({how})"
        else:
            found.gates[gate], found.sources[gate] = value, how
    return found
