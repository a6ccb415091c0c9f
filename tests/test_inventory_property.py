"""Property test of the driver suite's inventory binding over generated inventories.

Inventories are drawn from the space the API allows and real drivers use: dedicated devices,
devices that allow multiple allocations with capacities under every kind of request policy
(none, default, validValues, validRange; a default that is the whole device among them),
partitions that consume a pool's shared counters, attribute values repeated across devices
(partitions sharing ``uuid`` and ``index`` with their parent, a partition number repeated across
parents). For each optional driver case of the bundled suite:

- whenever a valid, unique selection exists (decided independently: by brute force over the
  devices, with the reference allocator as the judge of what fits), the binding finds one;
- what the case then asks for (its claims, with the bound values substituted) is allocated or
  refused by the reference allocator exactly as the case's expectations say, committed one
  after another as the scheduler would;
- a bound selector is true for its device alone among the devices of its node (the case's pods
  run there) and never fails with a CEL error on another device of the driver (such an error
  fails the whole allocation).
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drakit.conformance.allocator import Allocator, Features, NodeInfo
from drakit.conformance.allocator.selectors import SelectorCache
from drakit.conformance.cases.loader import load_file
from drakit.conformance.cases.placeholders import substitute_runtime
from drakit.conformance.model import parse_object
from drakit.conformance.reference.state import allocated_state
from drakit.conformance.spec.inventory import Unbound, bind, published_devices

DRIVER = "gpu.vendor.example"
CLASS = "gpu.vendor.example"
SUITE = Path(__file__).resolve().parents[1] / "conformance" / "suites" / "driver" / "optional.case.yaml"
PROFILE = {"dut.class": CLASS, "dut.driver": DRIVER, "dut.role": "gpu", "profile.name": "prop"}
FEATURES = Features()
DEVICE_CLASS = parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
                             "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})


def _cases() -> dict[str, Any]:
    res = load_file(SUITE, PROFILE)
    assert not res.errors, res.errors
    return {c.id: c for c in res.cases if c.inventory is not None}


CASES = _cases()
CHECKED = ("driver/admin-access", "driver/admin-access-shared", "driver/consumable-capacity", "driver/partitionable-devices")

# -- generated inventories ------------------------------------------------------------------

_GI = 1024 ** 3
def _values(vs: list[int], pick: int) -> dict[str, Any]:
    vs = sorted(set(vs))
    return {"default": f"{vs[pick % len(vs)]}Gi", "validValues": [f"{v}Gi" for v in vs]}


def _range(m: int, s: int, k: int) -> dict[str, Any]:
    return {"default": f"{min(m + k * s, m + ((80 - m) // s) * s)}Gi", "validRange": {"min": f"{m}Gi", "step": f"{s}Gi"}}


# the API's rules: validValues and validRange need a default the policy allows, within the value
policies = st.one_of(
    st.none(),
    st.builds(lambda d: {"default": f"{d}Gi"}, st.sampled_from([10, 40, 80])),
    st.builds(_values, st.lists(st.sampled_from([10, 20, 40, 80]), min_size=1, max_size=3), st.integers(0, 2)),
    st.builds(_range, st.sampled_from([10, 30, 50]), st.sampled_from([10, 20]), st.integers(0, 8)),
)


@st.composite
def attrs(draw: Any, parent: int, part: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["uuid"] = {"string": f"u{draw(st.sampled_from([parent, parent, 0]))}"}  # repeated across parents sometimes
    if draw(st.booleans()):
        out["index"] = {"int": draw(st.sampled_from([parent, 0]))}
    if part is not None and draw(st.booleans()):
        out["partition"] = {"int": part}
    if draw(st.booleans()):
        out["model"] = {"string": draw(st.sampled_from(["x100", "x200"]))}
    if draw(st.booleans()):
        out["driverVersion"] = {"version": "1.2.3"}
    return out


@st.composite
def pool(draw: Any, node: str) -> list[dict[str, Any]]:
    devices: list[dict[str, Any]] = []
    counter_sets: list[dict[str, Any]] = []
    for parent in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["dedicated", "multi", "partitioned"]))
        if kind == "dedicated":
            devices.append({"name": f"gpu{parent}", "attributes": draw(attrs(parent, None))})
        elif kind == "multi":
            caps = {}
            for cap in draw(st.lists(st.sampled_from(["memory", "cores"]), max_size=2, unique=True)):
                entry: dict[str, Any] = {"value": "80Gi"}
                policy = draw(policies)
                if policy:
                    entry["requestPolicy"] = policy
                caps[cap] = entry
            d: dict[str, Any] = {"name": f"gpu{parent}", "attributes": draw(attrs(parent, None)),
                                 "allowMultipleAllocations": True}
            if caps:
                d["capacity"] = caps
            devices.append(d)
        else:
            total = draw(st.sampled_from([80, 100]))
            counter_sets.append({"name": f"set{parent}", "counters": {"memory": {"value": f"{total}Gi"}}})
            whole = {"name": f"gpu{parent}", "attributes": draw(attrs(parent, None)),
                     "consumesCounters": [{"counterSet": f"set{parent}", "counters": {"memory": {"value": "80Gi"}}}]}
            devices.append(whole)
            for p in range(draw(st.integers(1, 3))):
                size = draw(st.sampled_from([10, 40, 60]))
                devices.append({"name": f"gpu{parent}-p{p}", "attributes": draw(attrs(parent, p)),
                                "consumesCounters": [{"counterSet": f"set{parent}", "counters": {"memory": {"value": f"{size}Gi"}}}]})
    count = 2 if counter_sets else 1
    out = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-s"},
            "spec": {"driver": DRIVER, "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": count}}}]
    if counter_sets:  # a slice holds devices or shared counters, not both
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-c"},
                    "spec": {"driver": DRIVER, "nodeName": node, "sharedCounters": counter_sets,
                             "pool": {"name": node, "generation": 1, "resourceSliceCount": count}}})
    return out


inventories = st.builds(lambda a, b: a + b, pool("n1"), st.one_of(st.just([]), pool("n2")))

# -- the reference allocator as the judge ------------------------------------------------------


class Cluster:
    """Claims allocated one after another on one node, each committed before the next."""

    def __init__(self, slices: list[dict[str, Any]]) -> None:
        self.models = [parse_object(s) for s in slices]
        self.committed: list[dict[str, Any]] = []

    def allocate(self, claim: dict[str, Any], node: str) -> list[tuple[str, str]] | None:
        alloc = Allocator(FEATURES, {CLASS: DEVICE_CLASS}, self.models, allocated_state(self.committed, FEATURES))
        got = alloc.allocate(NodeInfo(node, {"kubernetes.io/hostname": node}), [parse_object(claim)])
        if got is None:
            return None
        claim = copy.deepcopy(claim)
        claim.setdefault("metadata", {})["uid"] = f"uid-{len(self.committed)}"
        claim["status"] = {"allocation": {"devices": {"results": [d.to_wire() for d in got[0].devices]}}}
        self.committed.append(claim)
        return [(d.pool, d.device) for d in got[0].devices]


def claims_of(case: Any, bound: dict[str, str] | None) -> list[dict[str, Any]]:
    out = []
    for step in case.steps:
        for m in step.manifests:
            if m.get("kind") == "ResourceClaim":
                claim = substitute_runtime(copy.deepcopy(dict(m)), "ns", bound)
                claim["metadata"] = {**claim["metadata"], "namespace": "ns"}
                out.append(claim)
    return out


def expectations(case: Any) -> tuple[dict[str, Any], set[str]]:
    allocated: dict[str, Any] = {}
    refused: set[str] = set()
    for step in case.steps:
        for _line, kind, body in step.assertions:
            if kind == "allocated":
                allocated[body["claim"]] = body
            elif kind == "notAllocated":
                refused.add(body["claim"])
    return allocated, refused


def play(case: Any, slices: list[dict[str, Any]], bound: dict[str, str]) -> str | None:
    """Allocate the case's claims in order on the bound device's node; a problem in words, or None."""
    cluster = Cluster(slices)
    allocated, refused = expectations(case)
    node = bound["inv.a.node"]
    for claim in claims_of(case, bound):
        name = claim["metadata"]["name"]
        got = cluster.allocate(claim, node)
        if name in refused:
            if got is not None:
                return f"claim {name} was allocated {got}; the case expects it refused"
            continue
        if got is None:
            return f"claim {name} was not allocated (bound {bound})"
        want = allocated.get(name) or {}
        devices = [substitute_runtime(d, "ns", bound) for d in want.get("devices") or []]
        if devices and sorted(d for _, d in got) != sorted(devices):
            return f"claim {name} got {got}, the case expects {devices}"
    return None


def unique_selector_problem(slices: list[dict[str, Any]], cel: str, device: str, node: str) -> str | None:
    cache = SelectorCache()
    hits = []
    for s in (parse_object(x) for x in slices):
        for d in s.devices:
            try:
                if cache.evaluate(cel, d, DRIVER, d.allow_multiple_allocations) and s.node_name == node:
                    hits.append((s.node_name, d.name))  # the case's pods run on the device's node
            except Exception as exc:  # noqa: BLE001 - any CEL error is the finding
                return f"selector {cel!r} fails on {d.name}: {exc}"
    return None if hits == [(node, device)] else f"selector {cel!r} matches {hits}, not only {device}"


# -- independent existence: brute force over devices, the allocator as judge ------------------

def _full_selector(d: dict[str, Any]) -> str | None:
    """A conjunction of every scalar attribute of the device (guarded), or None without any."""
    parts = []
    for k, v in sorted((d.get("attributes") or {}).items()):
        kind, value = next(iter(v.items()))
        if kind == "version":
            continue
        lit = ("true" if value else "false") if kind == "bool" else str(value) if kind == "int" else f'"{value}"'
        parts.append(f'"{k}" in device.attributes["{DRIVER}"] && device.attributes["{DRIVER}"].{k} == {lit}')
    return " && ".join(parts) or None


def _devices(slices: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(s["spec"]["nodeName"], d) for s in slices for d in s["spec"].get("devices") or []]


def _amounts(cap: dict[str, Any]) -> list[str]:
    p = cap.get("requestPolicy") or {}
    found = {p.get("default"), *(p.get("validValues") or []), (p.get("validRange") or {}).get("min"), "40Gi", "10Gi", "20Gi"}
    return sorted(a for a in found if a)


def _claim(name: str, cel: str, caps: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": CLASS, "selectors": [{"cel": {"expression": cel}}], **extra}
    if caps:
        exactly["capacity"] = {"requests": caps}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": exactly}]}}}


def _singled_out(slices: list[dict[str, Any]], node: str, d: dict[str, Any]) -> str | None:
    cel = _full_selector(d)
    if cel is None or unique_selector_problem(slices, cel, d["name"], node) is not None:
        return None
    return cel


def exists(case_id: str, slices: list[dict[str, Any]]) -> bool:
    devices = _devices(slices)
    for node, d in devices:
        multi = bool(d.get("allowMultipleAllocations"))
        cel = _singled_out(slices, node, d)
        if case_id in ("driver/consumable-capacity", "driver/admin-access-shared") and multi and cel:
            caps = d.get("capacity") or {}
            for amounts in itertools.product(*(_amounts(c) for c in caps.values())):
                want = dict(zip(caps, amounts))
                cluster = Cluster(slices)
                extra = {"adminAccess": True} if case_id == "driver/admin-access-shared" else {}
                if cluster.allocate(_claim("one", cel, want), node) and cluster.allocate(_claim("two", cel, want, **extra), node):
                    return True
        if case_id == "driver/admin-access" and not multi:
            for sel in ([cel] if cel else []) + ["true"]:
                cluster = Cluster(slices)
                owner = _claim("owner", sel, allocationMode="All")
                got = cluster.allocate(owner, node)
                if not got or (sel == "true" and any(o.get("allowMultipleAllocations") or o.get("consumesCounters")
                                                     for n, o in devices if n == node)):
                    continue
                if cluster.allocate(_claim("admin", sel, adminAccess=True), node) and \
                        cluster.allocate(_claim("user", sel), node) is None:
                    return True
        if case_id == "driver/partitionable-devices" and d.get("consumesCounters") and cel:
            for node2, b in devices:
                cel_b = _singled_out(slices, node2, b)
                if b is d or node2 != node or not cel_b:
                    continue
                cluster = Cluster(slices)
                if cluster.allocate(_claim("first", cel), node) and cluster.allocate(_claim("second", cel_b), node) is None:
                    return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inventories, st.sampled_from(CHECKED))
def test_binding_finds_a_valid_unique_selection_whenever_one_exists(slices: list[dict[str, Any]], case_id: str) -> None:
    case = CASES[case_id]
    got = bind(case.inventory, published_devices(slices, DRIVER), DRIVER)
    if isinstance(got, Unbound):
        assert not exists(case_id, slices), f"{case_id}: a selection exists but the binding says: {got.message}"
        assert got.message.startswith("the case needs device") or "no choice of them" in got.message
        return
    for name in ("a", "b"):
        cel = got.get(f"inv.{name}.cel")
        if cel and cel != "true":
            problem = unique_selector_problem(slices, cel, got[f"inv.{name}.device"], got[f"inv.{name}.node"])
            assert problem is None, f"{case_id}: {problem}"
    problem = play(case, slices, got)
    assert problem is None, f"{case_id}: {problem}"


def test_the_issue_inventories_bind() -> None:
    """The shapes of the issue: a shareable device whose default is the whole device, partitions
    told apart only by a pair of attributes, every device consuming counters."""
    whole_default = [{"name": "gpu0", "attributes": {"uuid": {"string": "u0"}}, "allowMultipleAllocations": True,
                      "capacity": {"memory": {"value": "16Gi", "requestPolicy": {
                          "default": "16Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}}]
    slices = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
               "spec": {"driver": DRIVER, "nodeName": "n1", "devices": whole_default,
                        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}}}]
    got = bind(CASES["driver/consumable-capacity"].inventory, published_devices(slices, DRIVER), DRIVER)
    assert not isinstance(got, Unbound) and got["inv.a.capacity"] == '{"memory": "1Gi"}', got
    assert play(CASES["driver/consumable-capacity"], slices, got) is None
    for case_id, size in (("driver/partitionable-devices", "12Gi"), ("driver/admin-access", "10Gi")):
        parts = [{"name": f"gpu{p}-{i}", "attributes": {"uuid": {"string": f"u{p}"}, "index": {"int": p}, "partition": {"int": i}},
                  "consumesCounters": [{"counterSet": f"s{p}", "counters": {"memory": {"value": size}}}]}
                 for p in range(2) for i in range(2)]
        whole = [{"name": f"gpu{p}", "attributes": {"uuid": {"string": f"u{p}"}, "index": {"int": p}},
                  "consumesCounters": [{"counterSet": f"s{p}", "counters": {"memory": {"value": "20Gi"}}}]} for p in range(2)]
        pool = {"name": "n1", "generation": 1, "resourceSliceCount": 2}
        slices = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
                   "spec": {"driver": DRIVER, "nodeName": "n1", "devices": whole + parts, "pool": pool}},
                  {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "c"},
                   "spec": {"driver": DRIVER, "nodeName": "n1", "pool": pool, "sharedCounters": [
                       {"name": f"s{p}", "counters": {"memory": {"value": "20Gi"}}} for p in range(2)]}}]
        got = bind(CASES[case_id].inventory, published_devices(slices, DRIVER), DRIVER)
        assert not isinstance(got, Unbound), (case_id, got)
        assert play(CASES[case_id], slices, got) is None
        assert " && " in got["inv.a.cel"]  # a pair of attributes tells a partition apart
    # two 12Gi partitions of a 20Gi GPU cannot both be admin-allocated (the counters are reserved
    # again): no legitimate choice, and the skip says what is missing
    got = bind(CASES["driver/admin-access"].inventory, published_devices(slices[:0] + [
        {**slices[0], "spec": {**slices[0]["spec"], "devices": [
            {**d, "consumesCounters": [{"counterSet": d["consumesCounters"][0]["counterSet"],
                                        "counters": {"memory": {"value": "12Gi" if "-" in d["name"] else "20Gi"}}}]}
            for d in slices[0]["spec"]["devices"]]}}, slices[1]], DRIVER), DRIVER)
    assert isinstance(got, Unbound) and "with room for two allocations at once" in got.message \
        and "(0 of 6)" in got.message, got
