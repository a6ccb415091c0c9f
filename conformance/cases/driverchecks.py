"""Assertions of the driver suite: the DRA driver contract, checked on the driver under test.

The session gives the driver under test (``s.vendor.under_test``, from the vendor profile) and,
on drakit's local cluster, its nodes (``s.driver_nodes``: registration, CDI folders, what a
container got). Each check raises :class:`ExpectationFailed`; expect steps retry until
``within``, so a state still settling (a pool being republished) is not a failure.

- ``driverSlices``: the driver's ResourceSlices follow the contract and the profile;
- ``driverRegistered: {node}``: its plugin is registered with that node's kubelet;
- ``containerEnv: {pod, container, claim, request}``: the container got the environment the
  driver's CDI edits give (``driverUnderTest.containerEnv`` of the profile);
- ``preparedAsAllocated: {claim}``: the driver's NodePrepareResources answer names exactly the
  claim's allocated devices of it, with their requests (on drakit's nodes);
- ``cdiClean: {claim}``: no CDI spec on the driver's nodes names the claim's UID;
- ``unprepareSucceeded: {}``: no NodeUnprepareResources for a pod of the case failed (the
  kubelets' logs on the driver's nodes);
- ``deviceHealth: {pod, container, claim, health, absent}``, ``containerMetadata: {pod,
  container, claim, absent}``, ``deviceStatus: {claim}``: the optional behaviours health,
  device metadata and device status.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable

from ..backends.base import HarnessError, Session
from ..goregex import GoRegexp
from .checks import ExpectationFailed, _claim

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_POOL = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[a-z0-9]([-a-z0-9.]*[a-z0-9])?)*\Z")
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


def expected_env(dut: Any, claim: dict[str, Any], request: str | None, node: str = "") -> dict[str, Any]:
    """The environment the profile says a container using ``claim`` (``request``) on ``node``
    gets: a value is a string, or a compiled pattern its whole value must match."""
    from drakit.fake_driver.envtemplate import EnvPattern, render, values_for
    results = [r for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
               if r.get("driver") == dut.driver and (request is None or r["request"].partition("/")[0] == request)]
    out: dict[str, Any] = {}
    for r in results:
        values = values_for(r, claim, node)
        for key, value in dut.container_env:
            out[render(key, values)] = value.regex(values) if isinstance(value, EnvPattern) else render(value, values)
    return out


def _env_matches(want: Any, got: str | None) -> bool:
    if got is None:
        return False
    return want.fullmatch(got) if isinstance(want, GoRegexp) else got == want


def _shown(want: dict[str, Any]) -> dict[str, str]:
    return {k: f"/{v.pattern}/" if isinstance(v, GoRegexp) else v for k, v in want.items()}


def check_container_env(s: Session, body: dict[str, Any]) -> None:
    dut = _dut(s)
    claim = _claim(s, body["claim"])
    pod = s.get("Pod", body["pod"]) if hasattr(s, "get") else None
    node = ((pod or {}).get("spec") or {}).get("nodeName") or ""
    if not dut.container_env:
        _check_container_cdi(s, body)
        if dut.container_devices and body.get("devices"):
            _check_devices(dut, claim, body, _read(s, body, "its device nodes"), node)
        return None
    want = expected_env(dut, claim, body.get("request"), node)
    if not want:
        raise HarnessError("the vendor profile declares no containerEnv for the driver under test, or the claim has "
                           "no device of it")
    got = _read(s, body, _shown(want))
    if dut.container_devices and body.get("devices"):  # the case's container lists its device nodes
        _check_devices(dut, claim, body, got, node)
    if body.get("absent"):
        present = sorted(k for k, v in want.items() if _env_matches(v, got.get(k)))
        if present:
            raise ExpectationFailed(f"container {body.get('container')} of pod {body['pod']} got the driver's CDI edits "
                                    f"{present[:3]} though it does not use the claim", expected="absent",
                                    actual={k: got[k] for k in present})
        return None
    missing = {k: v for k, v in want.items() if not _env_matches(v, got.get(k))}
    if missing:
        # a variable present with another value stays so (a container's environment is set at its
        # start, and only whole lines are read): waiting longer cannot help; a missing one may still come
        raise ExpectationFailed(f"the container of pod {body['pod']} {env_mismatch(missing, got)}",
                                expected=_shown(want), actual={k: got.get(k) for k in want},
                                final=any(k in got for k in missing))
    if dut.cpuset_env:
        _check_cpuset(dut, claim, body, got, node)
    return None


def _read(s: Session, body: dict[str, Any], expected: Any) -> dict[str, str]:
    """What the pod's container got (its env, CPUs and device nodes), or ExpectationFailed."""
    reader: Callable[[str, str | None], dict[str, str] | None] | None = getattr(s, "container_env", None)
    if reader is None:
        raise HarnessError("this backend cannot see what a container got")
    got = reader(body["pod"], body.get("container"))
    if got is None:
        raise ExpectationFailed(f"no record yet of what pod {body['pod']}'s container got", expected=expected, actual=None)
    return got


def _check_devices(dut: Any, claim: dict[str, Any], body: dict[str, Any], got: dict[str, str], node: str) -> None:
    """The device nodes the profile says (``containerDevices``) are character devices in the
    container, as its shell listed them (``Chardev:`` lines); with ``absent``, none of them is."""
    from drakit.fake_driver.envtemplate import render, values_for
    from ..backends.containers import CHARDEVS
    results = [r for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
               if r.get("driver") == dut.driver and (body.get("request") is None
                                                     or r["request"].partition("/")[0] == body["request"])]
    want = sorted({render(t, values_for(r, claim, node)) for r in results for t in dut.container_devices})
    if CHARDEVS not in got:
        raise ExpectationFailed(f"the container of pod {body['pod']} has not listed its character devices (Chardev: "
                                "lines, then Chardevs: done)",
                                expected=want, actual=None)
    have = set(got[CHARDEVS].split())
    if body.get("absent"):
        present = [p for p in want if p in have]
        if present:
            raise ExpectationFailed(f"container {body.get('container')} of pod {body['pod']} has the driver's device nodes "
                                    f"{present[:3]} though it does not use the claim", expected="absent", actual=present)
        return
    missing = [p for p in want if p not in have]
    if missing:
        raise ExpectationFailed(f"the container of pod {body['pod']} lacks the device nodes {missing[:3]} the driver's "
                                f"CDI edits give it (a character device there)", expected=want, actual=sorted(have))


def env_mismatch(missing: dict[str, Any], got: dict[str, str]) -> str:
    """In words, how the container's environment differs from the driver's CDI edits for the
    variables in ``missing`` (name -> expected value or pattern): those it lacks, and for each
    variable present with another value, both values."""
    wrong = sorted(k for k in missing if k in got)
    lacking = sorted(k for k in missing if k not in got)
    parts = [f"lacks the driver's CDI edits {lacking[:3]}"] if lacking else []
    parts += [f"has {k}={got[k]!r}, expected {_shown({k: missing[k]})[k]!r} (the vendor profile's containerEnv)"
              for k in wrong[:3]]
    more = len(wrong) - 3
    return "; ".join(parts) + (f" (and {more} more variable(s) with other values)" if more > 0 else "")


def _cpus(text: str) -> set[int]:
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",") if p.strip()):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _check_cpuset(dut: Any, claim: dict[str, Any], body: dict[str, Any], got: dict[str, str], node: str) -> None:
    """The container's CPUs, as it read them itself, are exactly the cpuset the driver's CDI edit
    (``cpusetEnv``) names: the runtime confined it (dra-driver-cpu through NRI)."""
    from drakit.fake_driver.envtemplate import render, values_for
    from ..backends.containers import CPUS_ALLOWED
    results = [r for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
               if r.get("driver") == dut.driver]
    keys = {render(dut.cpuset_env, values_for(r, claim, node)) for r in results}
    allowed = got.get(CPUS_ALLOWED)
    if allowed is None:
        raise ExpectationFailed(f"the container of pod {body['pod']} printed no Cpus_allowed_list (its /proc status)",
                                expected="its CPUs", actual=None)
    want: set[int] = set()
    for key in keys:
        want |= _cpus(got[key])
    if _cpus(allowed) != want:
        raise ExpectationFailed(f"the container of pod {body['pod']} may run on CPUs {allowed}, not exactly the cpuset "
                                f"its driver gave it ({', '.join(f'{k}={got[k]}' for k in sorted(keys))})",
                                expected=sorted(want), actual=allowed)


def _check_container_cdi(s: Session, body: dict[str, Any]) -> None:
    """``containerEnv`` for a driver whose CDI edits give no environment (device nodes, mounts):
    on drakit's nodes, the runtime's record says the container was given CDI devices (the
    driver's: the pod's claims are of the driver alone) and applied them, and a container
    without the claim got none."""
    nodes = getattr(s, "driver_nodes", None)
    if nodes is None or not hasattr(nodes, "container_record"):
        raise HarnessError("the vendor profile declares no containerEnv for the driver under test; without it only "
                           "drakit's own nodes show what a container got")
    container = body.get("container") or "main"
    rec = nodes.container_record(s.namespace, body["pod"], container)
    if rec is None:
        raise ExpectationFailed(f"no record yet of what pod {body['pod']}'s container {container} got",
                                expected="CDI devices", actual=None)
    got = list(rec.get("cdiDevices") or [])
    if body.get("absent"):
        if got:
            raise ExpectationFailed(f"container {container} of pod {body['pod']} got CDI devices {got[:3]} though it "
                                    "does not use the claim", expected=[], actual=got)
        return
    if not got or rec.get("error"):
        raise ExpectationFailed(f"the container {container} of pod {body['pod']} was given no CDI device of the "
                                f"claim{': ' + str(rec['error']) if rec.get('error') else ''}",
                                expected="the claim's CDI devices", actual=rec)


def check_prepared_as_allocated(s: Session, body: dict[str, Any]) -> None:
    """The devices the driver's NodePrepareResources answer named for the claim are exactly its
    allocated devices of the driver, each with the requests it was allocated for: on drakit's
    nodes, as the kubelet recorded the answer (its DRA checkpoint). Elsewhere the kubelet keeps
    the answer to itself (``drakit node-check`` checks it there, calling the plugin itself)."""
    from ..nodecheck.inspect import devices_against_allocation
    nodes = getattr(s, "driver_nodes", None)
    if nodes is None:
        return
    dut = _dut(s)
    claim = _claim(s, body["claim"])
    results = [r for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
               if r.get("driver") == dut.driver]
    found = nodes.prepared_answer(claim["metadata"]["uid"])
    if found is None:
        raise ExpectationFailed(f"no node holds claim {body['claim']} prepared (the kubelet's DRA checkpoint)",
                                expected="prepared", actual=None)
    node, devices = found
    problems = devices_against_allocation(results, devices)
    if problems:
        shown = [f"{p}/{d} for {list(r)}" for r, p, d in devices]
        # once the answer has devices the kubelet keeps it until it unprepares the claim: final
        raise ExpectationFailed(f"the {dut.driver} driver's NodePrepareResources answer for claim {body['claim']} on "
                                f"{node} (as the kubelet recorded it): {problems[0]}",
                                expected=[f"{r['pool']}/{r['device']} for {[r['request'].partition('/')[0]]}"
                                          for r in results], actual=shown, final=bool(devices))


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
        raise ExpectationFailed(f"the kubelet failed to unprepare: {errors[0]}"
                                + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
                                expected=[], actual=errors[:5], final=True)


def _pod_claim(pod: dict[str, Any], claim: str) -> str | None:
    """The pod's name for ResourceClaim ``claim`` (its ``spec.resourceClaims`` entry)."""
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        if ref.get("resourceClaimName") == claim:
            return str(ref["name"])
    for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if st.get("resourceClaimName") == claim:
            return str(st["name"])
    return None


def check_device_health(s: Session, body: dict[str, Any]) -> None:
    """The kubelet reports the health the driver streams for the claim's devices in the
    container's ``allocatedResourcesStatus`` (KEP-4680: ``claim:<pod claim>``), every one
    ``health``; with ``absent``, the container has no entry for the claim."""
    pod = s.get("Pod", body["pod"])
    if pod is None:
        raise ExpectationFailed(f"pod {body['pod']} does not exist")
    ref = _pod_claim(pod, body["claim"])
    if ref is None:
        raise ExpectationFailed(f"pod {body['pod']} does not use claim {body['claim']}")
    statuses = [c for c in (pod.get("status") or {}).get("containerStatuses") or [] if c.get("name") == body["container"]]
    if not statuses:
        raise ExpectationFailed(f"pod {body['pod']} has no status for container {body['container']} yet")
    entries = [e for e in statuses[0].get("allocatedResourcesStatus") or [] if str(e.get("name", "")).split("/")[0] == f"claim:{ref}"]
    if body.get("absent"):
        if entries:
            raise ExpectationFailed(f"container {body['container']} reports the health of claim {body['claim']} though it "
                                    f"does not use it", expected="absent", actual=entries)
        return
    found = [r for e in entries for r in e.get("resources") or []]
    want = body.get("health", "Healthy")
    if not found or any(r.get("health") != want for r in found):
        raise ExpectationFailed(f"container {body['container']} of pod {body['pod']}: the health of claim {body['claim']}'s "
                                f"devices is {[r.get('health') for r in found] or 'not reported'}, expected {want}",
                                expected=want, actual=entries)


def check_container_metadata(s: Session, body: dict[str, Any]) -> None:
    """The container gets the driver's device metadata (KEP-5304): for each request of the claim
    with devices of the driver, a file mounted at the standard path that names exactly the
    allocated devices (``nodecheck.metadata``); with ``absent``, no metadata of the claim."""
    from ..nodecheck.metadata import check_stream, parse_container_path
    dut = _dut(s)
    claim = _claim(s, body["claim"])
    rec = _nodes(s).container_record(s.namespace, body["pod"], body["container"])
    if rec is None:
        raise ExpectationFailed(f"no record yet of what pod {body['pod']}'s container {body['container']} got")
    mounts = {}
    for m in rec["mounts"]:
        where = parse_container_path(str(m.get("containerPath", "")))
        if where and where["claim"] == claim["metadata"]["name"] and where["driver"] == dut.driver:
            mounts[where["request"]] = m
    if body.get("absent"):
        if mounts:
            raise ExpectationFailed(f"container {body['container']} got the metadata of claim {body['claim']} though it "
                                    f"does not use it", expected="absent", actual=sorted(mounts))
        return
    results = [r for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
               if r.get("driver") == dut.driver]
    problems = []
    for request in sorted({r["request"].partition("/")[0] for r in results}):
        m = mounts.get(request)
        if m is None:
            problems.append(f"request {request}: no metadata file mounted (mounts: {[x.get('containerPath') for x in rec['mounts']][:6]})")
            continue
        from ..inputs import DRIVER_FILE, InputError, read_text
        try:  # a path the driver named: drakit's one reader (a regular file, its size bounded)
            text = read_text(str(m["hostPath"]), DRIVER_FILE)
        except InputError as exc:
            problems.append(f"request {request}: cannot read {m['hostPath']}: {exc.reason}")
            continue
        expected = [(r["pool"], r["device"]) for r in results if r["request"].partition("/")[0] == request]
        problems += [f"request {request}: {p}" for p in check_stream(text, claim=claim, driver=dut.driver,
                                                                      request=request, expected=expected)]
    if problems:
        raise ExpectationFailed(f"device metadata of claim {body['claim']}: {problems[0]}", expected="valid metadata",
                                actual=problems[:10])


def check_device_status(s: Session, body: dict[str, Any]) -> None:
    """The driver writes the status of each device it prepared for the claim (KEP-4817:
    ``status.devices`` entries for its driver, pool and device with conditions, data or
    networkData), and none for a device the claim was not allocated."""
    dut = _dut(s)
    claim = _claim(s, body["claim"])
    status = claim.get("status") or {}
    allocated = {(r["driver"], r["pool"], r["device"]) for r in (status.get("allocation") or {}).get("devices", {}).get("results") or []
                 if r.get("driver") == dut.driver}
    entries = [e for e in status.get("devices") or [] if e.get("driver") == dut.driver]
    written = {(e["driver"], e["pool"], e["device"]) for e in entries if e.get("conditions") or e.get("data") or e.get("networkData")}
    stray = sorted({(e["driver"], e["pool"], e["device"]) for e in entries} - allocated)
    if stray:
        raise ExpectationFailed(f"claim {body['claim']}: the driver wrote the status of devices it was not allocated: {stray[:3]}",
                                expected=sorted(allocated), actual=entries)
    if not allocated or written != allocated:
        raise ExpectationFailed(f"claim {body['claim']}: no device status written for {sorted(allocated - written)[:3] or 'its devices'}",
                                expected=sorted(allocated), actual=entries)


DRIVER_CHECKS: dict[str, Callable[[Session, dict[str, Any]], None]] = {
    "driverSlices": check_driver_slices,
    "driverRegistered": check_driver_registered,
    "containerEnv": check_container_env,
    "cdiClean": check_cdi_clean,
    "preparedAsAllocated": check_prepared_as_allocated,
    "unprepareSucceeded": check_unprepare_succeeded,
    "deviceHealth": check_device_health,
    "containerMetadata": check_container_metadata,
    "deviceStatus": check_device_status,
}
