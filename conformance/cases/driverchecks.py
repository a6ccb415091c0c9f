"""Assertions of the driver suite: the DRA driver contract, checked on the driver under test.

The session gives the driver under test (``s.vendor.under_test``, from the vendor profile) and,
on drakit's local cluster, its nodes (``s.driver_nodes``: registration, CDI folders, what a
container got). Each check raises :class:`ExpectationFailed`; expect steps retry until
``within``, so a state still settling (a pool being republished) is not a failure.

- ``driverSlices``: the driver's ResourceSlices follow the contract and the profile;
- ``driverRegistered: {node}``: its plugin is registered with that node's kubelet;
- ``containerEnv: {pod, container, claim, request}``: the container got the environment the
  driver's CDI edits give (``driverUnderTest.containerEnv`` of the profile);
- ``cdiClean: {claim}``: no CDI spec on the driver's nodes names the claim's UID;
- ``unprepareSucceeded: {}``: no NodeUnprepareResources for a pod of the case failed (the
  kubelets' logs on the driver's nodes).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable

from ..backends.base import HarnessError, Session
from .checks import ExpectationFailed, _claim

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_POOL = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[a-z0-9]([-a-z0-9.]*[a-z0-9])?)*$")
NUMA_NODE = "resource.kubernetes.io/numaNode"


def _dut(s: Session) -> Any:
    vendor = getattr(s, "vendor", None)
    dut = getattr(vendor, "under_test", None)
    if dut is None:
        raise HarnessError("driver-suite checks need a vendor profile with a driver under test")
    return dut


def _nodes(s: Session) -> Any:
    nodes = getattr(s, "driver_nodes", None)
    if nodes is None:
        raise HarnessError("this check reads the driver's nodes, which only drakit's local cluster runs")
    return nodes


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def slice_problems(slices: list[dict[str, Any]], dut: Any, capacities: list[str]) -> list[str]:
    """What is wrong with a driver's published ResourceSlices (pure; also used by tests)."""
    driver = dut.driver
    mine = [x for x in slices if (x.get("spec") or {}).get("driver") == driver]
    if not mine:
        return [f"the driver {driver} publishes no ResourceSlice"]
    problems: list[str] = []
    pools: dict[str, list[dict[str, Any]]] = {}
    for x in mine:
        spec = x["spec"]
        pools.setdefault(spec["pool"]["name"], []).append(x)
        if not _POOL.match(spec["pool"]["name"]) or len(spec["pool"]["name"]) > 253:
            problems.append(f"pool name {spec['pool']['name']!r} is not valid")
    for pool, items in sorted(pools.items()):
        newest = max(int(x["spec"]["pool"]["generation"]) for x in items)
        current = [x for x in items if int(x["spec"]["pool"]["generation"]) == newest]
        counts = {int(x["spec"]["pool"]["resourceSliceCount"]) for x in current}
        if len(counts) != 1:
            problems.append(f"pool {pool}: slices of generation {newest} disagree on resourceSliceCount {sorted(counts)}")
        elif len(current) != counts.pop():
            problems.append(f"pool {pool}: {len(current)} slices of generation {newest}, resourceSliceCount says "
                            f"{current[0]['spec']['pool']['resourceSliceCount']}")
        stale = [x["metadata"]["name"] for x in items if x not in current]
        if stale:
            problems.append(f"pool {pool}: slices of older generations left: {stale}")
        nodes = {x["spec"].get("nodeName") for x in current}
        if dut.pools == "per-node" and (len(nodes) != 1 or None in nodes):
            problems.append(f"pool {pool}: expected one pool per node (nodeName set, one node), got nodes {sorted(map(str, nodes))}")
        names = Counter(d["name"] for x in current for d in x["spec"].get("devices") or [])
        dup = sorted(n for n, k in names.items() if k > 1)
        if dup:
            problems.append(f"pool {pool}: device names published twice: {dup}")
        for x in current:
            for d in x["spec"].get("devices") or []:
                problems += _device_problems(pool, d, dut, capacities)
    return problems


def _device_problems(pool: str, d: dict[str, Any], dut: Any, capacities: list[str]) -> list[str]:
    where = f"device {pool}/{d.get('name')}"
    if not _DNS_LABEL.match(str(d.get("name", ""))):
        return [f"{where}: the name is not a DNS label"]
    attrs = {_qualified(k, dut.driver): v for k, v in (d.get("attributes") or {}).items()}
    caps = {_qualified(k, dut.driver) for k in (d.get("capacity") or {})}
    problems = []
    for key, qualified, kind in dut.attribute_types:
        if qualified not in attrs:
            problems.append(f"{where}: attribute {qualified} ({key}) is not published")
        elif set(attrs[qualified]) != {kind}:
            problems.append(f"{where}: attribute {qualified} ({key}) is {'/'.join(sorted(attrs[qualified]))}, "
                            f"the profile declares {kind}")
    for qualified in capacities:
        if qualified not in caps:
            problems.append(f"{where}: capacity {qualified} is not published")
    numa = attrs.get(NUMA_NODE)
    if dut.numa_node and numa is None:
        problems.append(f"{where}: {NUMA_NODE} is not published (the profile says every device has it)")
    if numa is not None:
        values = numa.get("ints") if "ints" in numa else [numa.get("int")]
        if not values or any(not isinstance(v, int) or v < 0 or v >= 1024 for v in values):
            problems.append(f"{where}: {NUMA_NODE} must be an int (or ints) in 0..1023, got {numa}")
    return problems


def check_driver_slices(s: Session, body: dict[str, Any]) -> None:
    dut = _dut(s)
    capacities = [r.qualified for r in getattr(s.vendor, "capacities", ()) if r.role == dut.role]  # type: ignore[attr-defined]
    problems = slice_problems(s.list("ResourceSlice"), dut, capacities)
    if problems:
        raise ExpectationFailed(problems[0], expected="slices that follow the contract and the vendor profile",
                                actual=problems[:20])


def check_driver_registered(s: Session, body: dict[str, Any]) -> None:
    ok, detail = _nodes(s).registered(body["node"])
    if not ok:
        raise ExpectationFailed(f"the {_dut(s).driver} plugin is not registered on node {body['node']}: {detail}",
                                expected="registered", actual=detail)


def expected_env(dut: Any, claim: dict[str, Any], request: str | None) -> dict[str, str]:
    """The environment the profile says a container using ``claim`` (``request``) gets."""
    name = claim["metadata"]["name"]
    results = [r for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
               if r.get("driver") == dut.driver and (request is None or r["request"].partition("/")[0] == request)]

    def ident(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9]", "_", text)
    out: dict[str, str] = {}
    for r in results:
        req = r["request"].partition("/")[0]
        values = {"claim": name, "request": req, "device": r["device"], "claimId": ident(name),
                  "requestId": ident(req), "deviceId": ident(r["device"]), "DEVICE": ident(r["device"]).upper()}
        for key, value in dut.container_env:
            out[key.format_map(values)] = value.format_map(values)
    return out


def check_container_env(s: Session, body: dict[str, Any]) -> None:
    dut = _dut(s)
    claim = _claim(s, body["claim"])
    want = expected_env(dut, claim, body.get("request"))
    if not want:
        raise HarnessError("the vendor profile declares no containerEnv for the driver under test, or the claim has "
                           "no device of it")
    reader: Callable[[str, str | None], dict[str, str] | None] | None = getattr(s, "container_env", None)
    if reader is None:
        raise HarnessError("this backend cannot see what a container got")
    got = reader(body["pod"], body.get("container"))
    if got is None:
        raise ExpectationFailed(f"no record yet of what pod {body['pod']}'s container got", expected=want, actual=None)
    if body.get("absent"):
        present = sorted(k for k, v in want.items() if got.get(k) == v)
        if present:
            raise ExpectationFailed(f"container {body.get('container')} of pod {body['pod']} got the driver's CDI edits "
                                    f"{present[:3]} though it does not use the claim", expected="absent",
                                    actual={k: got[k] for k in present})
        return
    missing = {k: v for k, v in want.items() if got.get(k) != v}
    if missing:
        raise ExpectationFailed(f"the container of pod {body['pod']} lacks the driver's CDI edits "
                                f"{sorted(missing)[:3]}", expected=want, actual={k: got.get(k) for k in want})


def check_cdi_clean(s: Session, body: dict[str, Any]) -> None:
    uid = body.get("uid") or _claim(s, body["claim"])["metadata"]["uid"]
    left = _nodes(s).cdi_specs_naming(uid)
    if left:
        raise ExpectationFailed(f"CDI specs naming claim {body['claim']} ({uid}) are left on the node: {left[:3]}",
                                expected=[], actual=left)


def check_unprepare_succeeded(s: Session, body: dict[str, Any]) -> None:
    """No NodeUnprepareResources call for a pod of the case failed, as the kubelets of the
    driver's nodes logged it (a failure the kubelet's retry repaired still failed)."""
    errors = _nodes(s).unprepare_errors(s.namespace, getattr(s, "log_marks", None) or {})
    if errors:
        raise ExpectationFailed(f"NodeUnprepareResources failed: {errors[0]}", expected=[], actual=errors[:5],
                                final=True)


DRIVER_CHECKS: dict[str, Callable[[Session, dict[str, Any]], None]] = {
    "driverSlices": check_driver_slices,
    "driverRegistered": check_driver_registered,
    "containerEnv": check_container_env,
    "cdiClean": check_cdi_clean,
    "unprepareSucceeded": check_unprepare_succeeded,
}
