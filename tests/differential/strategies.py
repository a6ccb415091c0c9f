"""Hypothesis strategies for random allocator inputs (the shape :mod:`conformance.oracle.compare` reads).

The inputs are small on purpose (a handful of pools, at most about fifteen devices, one to three
claims) so that an exhaustive backtracking search stays cheap on both sides, but they reach the
rules where implementations differ: pool gathering (generations, incomplete and invalid pools,
node selection of every kind), ExactCount and All, firstAvailable, selectors on int, string,
version, bool, list and quantity attributes (guarded and unguarded), matchAttribute and
distinctAttribute, admin access, taints and tolerations, shared counters, consumable capacity with
request policies and shares, binding conditions, configs, committed allocations and feature gates.

Everything generated passes drakit's API validation: a rejected input is a generator bug (or a
validation bug) and the test says so.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

DRIVERS = ("a.example.com", "b.example.com")
NODE = "node-1"
OTHER_NODE = "node-2"
NAMESPACE = "ns"

GATES_MOSTLY_ON = ("DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices", "DRADeviceTaints",
                   "DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus", "DRAConsumableCapacity",
                   "DRAFractionalCapacityRange")
GATES_SOMETIMES_ON = ("DRAListTypeAttributes", "DRADeviceCompatibilityGroups", "DRAOptionalNodeOperations")
GATES_OFTEN_ON = ("DRADerivedAttributes",)
GATES_STABLE = ("DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices", "DRADeviceTaints")

CLASS_SELECTORS: dict[str, tuple[str, ...]] = {
    "any": (),
    "a": ('device.driver == "a.example.com"',),
    "b": ('device.driver == "b.example.com"',),
    "big": ('device.capacity[device.driver].?memory.orValue(quantity("0")).compareTo(quantity("8Gi")) >= 0',),
    "shared": ("device.allowMultipleAllocations",),
    "cfg": (),
}

# Request selectors: most guard against missing attributes, a few do not (runtime errors are
# part of what is compared).
SELECTORS = (
    'device.attributes[device.driver].?numa.orValue(-1) == 0',
    'device.attributes[device.driver].?numa.orValue(-1) >= 1',
    'device.attributes[device.driver].?model.orValue("") == "a100"',
    'device.attributes[device.driver].?model.orValue("").startsWith("h")',
    'device.attributes[device.driver].?driverVersion.hasValue() && '
    'device.attributes[device.driver].driverVersion.isGreaterThan(semver("1.1.0"))',
    'device.attributes[device.driver].?driverVersion.orValue(semver("0.0.1")).compareTo(semver("2.0.0")) < 0',
    'device.capacity[device.driver].?memory.orValue(quantity("0")).compareTo(quantity("8Gi")) >= 0',
    'device.capacity[device.driver].?memory.orValue(quantity("0")).isLessThan(quantity("16Gi"))',
    'device.attributes[device.driver].?ecc.orValue(false)',
    'device.attributes["resource.kubernetes.io"].?numaNode.orValue(7) == 1',
    'device.attributes[device.driver].?links.orValue(["none"]).includes("y")',
    'device.driver == "b.example.com" || device.attributes[device.driver].?ecc.orValue(true)',
    'device.attributes[device.driver].model == "h100"',              # error when model is missing
    'device.attributes["a.example.com"].numa > 0',                     # error off driver a / no numa
)

CONSTRAINT_ATTRIBUTES = ("a.example.com/numa", "b.example.com/numa", "a.example.com/model",
                         "resource.kubernetes.io/numaNode", "a.example.com/links", "b.example.com/driverVersion",
                         "a.example.com/ecc")

MEMORY = ("2Gi", "4Gi", "8Gi", "16Gi")

# Derived attributes (DRADerivedAttributes): a request-scoped attribute computed by CEL, used by
# a matchAttribute or distinctAttribute constraint of the claim.
DERIVED = (
    'device.attributes[device.driver].?numa.orValue(0) % 2',
    'device.attributes[device.driver].?model.orValue("none")',
    'device.capacity[device.driver].?memory.orValue(quantity("0")).compareTo(quantity("8Gi")) >= 0',
    'device.attributes[device.driver].?links.orValue(["q"])',
    'device.attributes[device.driver].numa',                           # error when numa is missing
    'device.driver',
)
DERIVED_NAME = "derived.example.com/x"
CLASS_WEIGHTS = ("any",) * 7 + ("a",) * 3 + ("b",) * 2 + ("big",) * 2 + ("shared",) + ("cfg",) * 3


def _weighted_bool(p_true: float) -> st.SearchStrategy[bool]:
    """True with probability ``p_true``; shrinks towards False (the simpler input)."""
    k = max(0, min(100, round(p_true * 100)))
    return st.integers(0, 99).map(lambda x: x >= 100 - k)


@st.composite
def features(draw: st.DrawFn) -> dict[str, bool]:
    out = {g: draw(_weighted_bool(0.9)) for g in GATES_MOSTLY_ON}
    out.update({g: draw(_weighted_bool(0.4)) for g in GATES_SOMETIMES_ON})
    out.update({g: draw(_weighted_bool(0.9)) for g in GATES_OFTEN_ON})
    return out


@st.composite
def attributes(draw: st.DrawFn) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if draw(_weighted_bool(0.7)):
        attrs["numa"] = {"int": draw(st.integers(0, 2))}
    if draw(_weighted_bool(0.6)):
        attrs["model"] = {"string": draw(st.sampled_from(["a100", "h100", "h200"]))}
    if draw(_weighted_bool(0.5)):
        attrs["driverVersion"] = {"version": draw(st.sampled_from(["1.0.0", "1.2.0", "2.0.0", "2.0.0-rc.1"]))}
    if draw(_weighted_bool(0.4)):
        attrs["ecc"] = {"bool": draw(st.booleans())}
    if draw(_weighted_bool(0.3)):
        attrs["links"] = {"strings": draw(st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, max_size=3,
                                                   unique=True))}
    if draw(_weighted_bool(0.3)):
        attrs["resource.kubernetes.io/numaNode"] = {"int": draw(st.integers(0, 1))}
    return attrs


@st.composite
def capacity(draw: st.DrawFn, consumable: bool, multi: bool) -> dict[str, Any]:
    """Capacities; request policies only on devices that allow multiple allocations (the API
    refuses them elsewhere) and only in shapes the API accepts (options, max and one step
    within the capacity)."""
    caps: dict[str, Any] = {}
    policies = consumable and multi
    if draw(_weighted_bool(0.7)):
        value = draw(st.sampled_from(MEMORY))
        mem: dict[str, Any] = {"value": value}
        if policies and draw(_weighted_bool(0.5)):
            kinds = ["range", "values", "default-only"] + (["range-nomax"] if value != "2Gi" else [])
            kind = draw(st.sampled_from(kinds))
            if kind == "range":
                mem["requestPolicy"] = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi", "max": value}}
            elif kind == "range-nomax":
                mem["requestPolicy"] = {"default": "2Gi", "validRange": {"min": "2Gi", "step": "2Gi"}}
            elif kind == "values":
                options = ["1Gi", "2Gi"] + (["4Gi"] if value != "2Gi" else [])   # none above the capacity
                mem["requestPolicy"] = {"default": "1Gi", "validValues": options}
            else:
                mem["requestPolicy"] = {"default": "2Gi"}
        caps["memory"] = mem
    if policies and draw(_weighted_bool(0.3)):
        caps["bandwidth"] = {"value": draw(st.sampled_from(["1", "2", "10"])),
                             "requestPolicy": {"default": "500m",
                                               "validRange": {"min": "500m", "step": "250m"}}}
    return caps


@st.composite
def taints(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.sampled_from([0] * 10 + [1, 1, 2]))
    out = []
    for _ in range(n):
        t: dict[str, Any] = {"key": draw(st.sampled_from(["k1", "k2"])),
                             "effect": draw(st.sampled_from(["NoSchedule", "NoExecute", "None"]))}
        if draw(st.booleans()):
            t["value"] = draw(st.sampled_from(["v1", "v2"]))
        out.append(t)
    return out


@st.composite
def tolerations(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.sampled_from([0, 0, 0, 1, 1, 2]))
    out = []
    for _ in range(n):
        op = draw(st.sampled_from(["Equal", "Exists"]))
        t: dict[str, Any] = {"operator": op}
        if op == "Equal" or draw(st.booleans()):
            t["key"] = draw(st.sampled_from(["k1", "k2"]))
        if op == "Equal":
            t["value"] = draw(st.sampled_from(["v1", "v2"]))
        if draw(st.booleans()):
            t["effect"] = draw(st.sampled_from(["NoSchedule", "NoExecute"]))
        out.append(t)
    return out


NODE_REQUIREMENTS = (
    {"key": "region", "operator": "In", "values": ["r1"]},
    {"key": "region", "operator": "In", "values": ["r2", "r3"]},
    {"key": "region", "operator": "NotIn", "values": ["r2"]},
    {"key": "zone", "operator": "Exists"},
    {"key": "zone", "operator": "DoesNotExist"},
    {"key": "gpus", "operator": "Gt", "values": ["4"]},
    {"key": "gpus", "operator": "Lt", "values": ["16"]},
)


def _selector_for(draw: st.DrawFn, where: str, per_device: bool) -> dict[str, Any]:
    """Node selection fields for a slice (``per_device`` False) or a device."""
    choice = draw(st.sampled_from(["node"] * 14 + ["other", "other", "all", "all", "labels", "labels", "labels",
                                   "fields"]))
    if choice == "node":
        return {"nodeName": NODE}
    if choice == "other":
        return {"nodeName": OTHER_NODE}
    if choice == "all":
        return {"allNodes": True}
    if choice == "fields":
        term: dict[str, Any] = {"matchFields": [{"key": "metadata.name", "operator": draw(st.sampled_from(["In", "NotIn"])),
                                                 "values": [draw(st.sampled_from([NODE, OTHER_NODE]))]}]}
    else:
        term = {"matchExpressions": draw(st.lists(st.sampled_from(NODE_REQUIREMENTS), min_size=1, max_size=2,
                                                  unique_by=lambda r: (r["key"], r["operator"])))}
    return {"nodeSelector": {"nodeSelectorTerms": [term]}}


@st.composite
def pool(draw: st.DrawFn, index: int, consumable: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One pool: its slices and the device descriptions (for committed allocations)."""
    driver = draw(st.sampled_from(DRIVERS))
    # Usually a fresh pool name; sometimes an earlier pool's (same or other driver: drivers may
    # reuse pool names, and one driver's slices may disagree about a pool).
    tag = f"p{index}"                               # slice and device names stay unique
    name = tag if index == 0 or not draw(_weighted_bool(0.08)) else f"p{draw(st.integers(0, index - 1))}"
    n_devices = draw(st.integers(1, 6))
    n_device_slices = 1 if n_devices == 1 else draw(st.sampled_from([1, 1, 2]))
    with_counters = draw(_weighted_bool(0.3))
    per_device = draw(_weighted_bool(0.12))
    placement = {} if per_device else _selector_for(draw, "slice", False)
    counter_sets: list[dict[str, Any]] = []
    if with_counters:
        for ci in range(draw(st.integers(1, 2))):
            counter_sets.append({"name": f"cs{ci}", "counters": {"mem": {"value": draw(st.sampled_from(["4", "6", "8", "12"]))},
                                                                  "sm": {"value": draw(st.sampled_from(["2", "3"]))}}})
    devices: list[dict[str, Any]] = []
    for di in range(n_devices):
        dname = f"{tag}-d{di}"
        if draw(_weighted_bool(0.04)) and devices:
            dname = devices[-1]["name"]          # duplicate name across slices: an invalid pool
        d: dict[str, Any] = {"name": dname}
        attrs = draw(attributes())
        if attrs:
            d["attributes"] = attrs
        multi = consumable and draw(_weighted_bool(0.2))
        caps = draw(capacity(consumable, multi))
        if caps:
            d["capacity"] = caps
        if multi:
            d["allowMultipleAllocations"] = True
        ts = draw(taints())
        if ts:
            d["taints"] = ts
        if draw(_weighted_bool(0.06)):
            d["bindingConditions"] = ["Ready"]
            d["bindingFailureConditions"] = ["Failed"]
            if draw(st.booleans()):
                d["bindsToNode"] = True
        elif draw(_weighted_bool(0.03)):
            d["bindsToNode"] = True                  # without binding conditions: allowed
        if with_counters and draw(_weighted_bool(0.8)):
            consumes = []
            for cs in draw(st.lists(st.sampled_from(counter_sets), min_size=1, max_size=len(counter_sets),
                                    unique_by=lambda c: c["name"])):
                counters = {"mem": {"value": draw(st.sampled_from(["1", "2", "4"]))}}
                if draw(st.booleans()):
                    counters["sm"] = {"value": "1"}
                entry: dict[str, Any] = {"counterSet": cs["name"], "counters": counters}
                if draw(_weighted_bool(0.12)):
                    entry["compatibilityGroups"] = draw(st.lists(st.sampled_from(["mig", "vgpu"]), min_size=1,
                                                                 max_size=2, unique=True))
                consumes.append(entry)
            d["consumesCounters"] = consumes
        if per_device:
            d.update(_selector_for(draw, "device", True))
        devices.append(d)
    # Split devices over slices; a duplicate name may only sit in another slice.
    chunks: list[list[dict[str, Any]]] = [[] for _ in range(n_device_slices)]
    for i, d in enumerate(devices):
        chunks[min(i * n_device_slices // n_devices, n_device_slices - 1)].append(d)
    for chunk in chunks:
        seen: set[str] = set()
        for k, d in enumerate(chunk):
            if d["name"] in seen:
                d["name"] = f"{d['name']}-{k}"     # still unique inside its own slice
            seen.add(d["name"])
    chunks = [c for c in chunks if c]
    slices_spec: list[dict[str, Any]] = []
    for si, chunk in enumerate(chunks):
        spec: dict[str, Any] = {"devices": chunk}
        if per_device:
            spec["perDeviceNodeSelection"] = True
        else:
            spec.update(placement)
        slices_spec.append({"name": f"{tag}-s{si}", "spec": spec})
    if with_counters:
        # Counter slices carry their own node selection: usually the pool's, sometimes all nodes.
        where = {"allNodes": True} if per_device or draw(_weighted_bool(0.2)) else dict(placement)
        slices_spec.append({"name": f"{tag}-counters", "spec": {"sharedCounters": counter_sets, **where}})
    if draw(_weighted_bool(0.1)):
        # An empty slice (sometimes on another node): completes or disturbs the count.
        slices_spec.append({"name": f"{tag}-empty", "spec": {"nodeName": draw(st.sampled_from([NODE, OTHER_NODE]))}})
    generation = 1
    count = len(slices_spec)
    if draw(_weighted_bool(0.03)):
        count += 1                                  # one slice is still missing: incomplete pool
    out = []
    for s in slices_spec:
        gen = generation
        if draw(_weighted_bool(0.03)):
            gen = draw(st.sampled_from([0, 2]))      # a stale or newer generation
        spec = {"driver": driver, "pool": {"name": name, "generation": gen, "resourceSliceCount": count}, **s["spec"]}
        if draw(_weighted_bool(0.03)) and spec.get("devices"):
            spec["skipNodeOperations"] = ["*"]
        out.append({"metadata": {"name": s["name"]}, "spec": spec})
    return out, [{"id": f"{driver}/{name}/{d['name']}", "multi": bool(d.get("allowMultipleAllocations")),
                  "capacity": d.get("capacity", {})} for d in devices]


def _request_body(draw: st.DrawFn, *, sub: bool, consumable: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": draw(st.sampled_from(CLASS_WEIGHTS))}
    if draw(_weighted_bool(0.3)):
        body["selectors"] = [{"cel": {"expression": draw(st.sampled_from(SELECTORS))}}]
    if draw(_weighted_bool(0.07)):
        body["allocationMode"] = "All"
    else:
        body["allocationMode"] = "ExactCount"
        body["count"] = draw(st.sampled_from([1] * 6 + [2, 2, 2, 3]))
    if not sub:
        admin = draw(st.sampled_from([None] * 8 + [True, True, False]))
        if admin is not None:
            body["adminAccess"] = admin
    tols = draw(tolerations())
    if tols:
        body["tolerations"] = tols
    if draw(_weighted_bool(0.06)):
        body["derivedAttributes"] = [{"name": DERIVED_NAME, "expression": draw(st.sampled_from(DERIVED))}]
    if consumable and draw(_weighted_bool(0.2)):
        reqs: dict[str, str] = {}
        if draw(_weighted_bool(0.8)):
            # now and then a request upstream refuses to compute with: negative (fatal without a
            # policy), or past int64 (fatal in a policy's step arithmetic)
            reqs["memory"] = draw(st.sampled_from(["1Gi", "2Gi", "3Gi", "5Gi"] * 3
                                                  + ["-1Gi", "9223372036854775807", "18446744073709551616"]))
        if draw(_weighted_bool(0.3)):
            reqs["bandwidth"] = draw(st.sampled_from(["100m", "600m", "1"]))
        body["capacity"] = {"requests": reqs}
    return body


@st.composite
def claim(draw: st.DrawFn, index: int, consumable: bool) -> dict[str, Any]:
    requests: list[dict[str, Any]] = []
    names: list[str] = []
    sub_names: list[str] = []
    for ri in range(draw(st.sampled_from([1] * 6 + [2, 2, 2, 3]))):
        rname = f"r{ri}"
        names.append(rname)
        if draw(_weighted_bool(0.25)):
            subs = []
            for si in range(draw(st.integers(1, 3))):
                subs.append({"name": f"s{si}", **_request_body(draw, sub=True, consumable=consumable)})
                sub_names.append(f"{rname}/s{si}")
            requests.append({"name": rname, "firstAvailable": subs})
        else:
            requests.append({"name": rname, "exactly": _request_body(draw, sub=False, consumable=consumable)})
    devices: dict[str, Any] = {"requests": requests}
    constraints = []
    for _ in range(draw(st.sampled_from([0] * 6 + [1, 1, 2]))):
        c: dict[str, Any] = {}
        attr = draw(st.sampled_from(CONSTRAINT_ATTRIBUTES))
        c["distinctAttribute" if draw(_weighted_bool(0.35)) else "matchAttribute"] = attr
        if draw(st.booleans()):
            c["requests"] = draw(st.lists(st.sampled_from(names + sub_names), min_size=1, max_size=2, unique=True))
        constraints.append(c)
    uses_derived = any("derivedAttributes" in b for r in requests
                       for b in ([r["exactly"]] if "exactly" in r else r["firstAvailable"]))
    if uses_derived:
        # validation: a derived attribute must be used by a constraint
        constraints.append({("distinctAttribute" if draw(_weighted_bool(0.3)) else "matchAttribute"): DERIVED_NAME})
    if constraints:
        devices["constraints"] = constraints
    if draw(_weighted_bool(0.15)):
        cfg: dict[str, Any] = {"opaque": {"driver": "a.example.com", "parameters": {"claim": index}}}
        if draw(st.booleans()):
            cfg["requests"] = draw(st.lists(st.sampled_from(names + sub_names), min_size=1, max_size=2, unique=True))
        devices["config"] = [cfg]
    return {"metadata": {"name": f"c{index}", "namespace": NAMESPACE}, "spec": {"devices": devices}}


def classes() -> list[dict[str, Any]]:
    out = []
    for name, sels in CLASS_SELECTORS.items():
        spec: dict[str, Any] = {}
        if sels:
            spec["selectors"] = [{"cel": {"expression": e}} for e in sels]
        if name == "cfg":
            spec["config"] = [{"opaque": {"driver": "a.example.com", "parameters": {"class": "cfg"}}}]
        out.append({"metadata": {"name": name}, "spec": spec})
    return out


@st.composite
def allocated(draw: st.DrawFn, devices: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not devices or not draw(_weighted_bool(0.35)):
        return out
    chosen = draw(st.lists(st.sampled_from(devices), min_size=1, max_size=3, unique_by=lambda d: d["id"]))
    for d in chosen:
        if d["multi"] and draw(_weighted_bool(0.7)):
            out.setdefault("shares", []).append({"device": d["id"], "shareID": f"committed-{len(out.get('shares', []))}"})
            mem = d["capacity"].get("memory")
            if mem is not None and draw(_weighted_bool(0.7)):
                out.setdefault("capacity", {})[d["id"]] = {"memory": draw(st.sampled_from(["1Gi", "2Gi", "4Gi"]))}
        else:
            out.setdefault("devices", []).append(d["id"])
    return out


@st.composite
def stable_features(draw: st.DrawFn) -> dict[str, bool]:
    """Gates under which upstream picks its stable implementation: GA-level switches only
    (DeviceBindingAndStatus needs both of its gates, so one of them may be on)."""
    out = {g: draw(_weighted_bool(0.8)) for g in GATES_STABLE}
    binding = draw(st.sampled_from([None, "DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"]))
    if binding:
        out[binding] = True
    return out


@st.composite
def inputs(draw: st.DrawFn, stable: bool = False) -> dict[str, Any]:
    """One random allocator input. ``stable``: switches the stable implementation supports and a
    single pool (upstream's stable implementation searches pools in random order)."""
    feats = draw(stable_features() if stable else features())
    consumable = draw(_weighted_bool(0.5))
    slices: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    for pi in range(1 if stable else draw(st.sampled_from([1, 2, 2, 3, 3, 4]))):
        ss, ds = draw(pool(pi, consumable))
        slices.extend(ss)
        devices.extend(ds)
    claims = [draw(claim(ci, consumable)) for ci in range(draw(st.sampled_from([1] * 5 + [2, 2, 2, 3, 3])))]
    labels = {"region": draw(st.sampled_from(["r1", "r1", "r2"])), "gpus": draw(st.sampled_from(["8", "4", "16"]))}
    if draw(st.booleans()):
        labels["zone"] = "z1"
    node: dict[str, Any] = {"name": NODE, "labels": labels}
    if draw(_weighted_bool(0.3)):
        node["declaredFeatures"] = ["DRAOptionalNodeOperations"]
    return {"features": feats, "node": node, "classes": classes(), "slices": slices, "claims": claims,
            "allocated": draw(allocated(devices))}
