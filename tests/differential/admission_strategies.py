"""Hypothesis strategies for admission: valid objects of every kind, then one to three mutations
drawn from a table (names, counts, modes, selectors with wrong types and cost bombs, tolerations,
constraints, configs, capacity policies, slice node fields, attributes, taints, pod claim
references) and a gate set. Every choice is a ``sampled_from``/integer draw, so Hypothesis shrinks
a failure to the fewest, simplest mutations."""

from __future__ import annotations

import copy
from typing import Any, Callable

from hypothesis import strategies as st

NS = "ns"
NAMES = ("a", "gpu", "x-1", "Bad", "a.b", "a-", "-a", "", "a" * 63, "a" * 64, "a_b", "a/b", "ab/cd/ef")
EXPRESSIONS = (
    'device.driver == "gpu.example.com"', "true", 'device.attributes["gpu.example.com"].model == "a"',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("1Gi")) >= 0', "device.allowMultipleAllocations",
    "device.driver", "1", '"x"', 'device.attributes["gpu.example.com"]', "device.driver + 1 == 2", "device.driver > 1",
    "!device.driver", "device.driver && true", "device.nope", "1 +", "", " ", "noSuchVar", 'device.driver == 1',
    "device.attributes.all(d, device.attributes[d].all(a, device.attributes.all(e, device.attributes[e].all(b, a == b))))",
    'device.attributes["gpu.example.com"].all(a, device.attributes["gpu.example.com"].all(b, a == b))',
    'device.attributes["gpu.example.com"].s.startsWith("a")', '[1, "a"].size() > 0', 'device.driver.matches("[")',
    "x" * 10241, 'device.attributes["gpu.example.com"].?model.orValue("") == "a"',
)
QUALIFIED = ("gpu.example.com/numa", "numa", "/numa", "gpu.example.com/", "Bad_Domain/x", "a.b/c/d", "gpu.example.com/9x",
             "gpu.example.com/" + "n" * 33, "")
LABEL_KEYS = ("example.com/k", "k", "", "-bad", "a/b/c", "x" * 64, "Example.com/K")
LABEL_VALUES = ("v", "", "bad value", "-v", "v" * 64)
OPERATORS = ("Equal", "Exists", "", "In")
EFFECTS = ("NoSchedule", "NoExecute", "None", "", "Sometimes")
MODES = ("ExactCount", "All", "", "Some")
COUNTS = (None, -1, 0, 1, 3)
QUANTITIES = ("1", "2", "4", "8", "1Gi", "500m", "0", "-1", "1.5")
VERSIONS = ("1.0.0", "1.0", "v1.0.0", "1.0.0-rc.1+b", "01.0.0")
GATE_CHOICES = {"DRAConsumableCapacity": (True, False), "DRAListTypeAttributes": (False, True),
                "DRADerivedAttributes": (False, True), "DRANodeAllocatableResources": (False, True),
                "DRAOptionalNodeOperations": (False, True), "DRADeviceCompatibilityGroups": (False, True)}


def claim_spec() -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}


def base(kind: str) -> dict[str, Any]:
    if kind == "ResourceClaim":
        return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "c", "namespace": NS}, "spec": claim_spec()}
    if kind == "ResourceClaimTemplate":
        return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "t", "namespace": NS},
                "spec": {"spec": claim_spec()}}
    if kind == "DeviceClass":
        return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
    if kind == "ResourceSlice":
        return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "s"},
                "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                         "nodeName": "node-1",
                         "devices": [{"name": "d0", "attributes": {"model": {"string": "a"}},
                                      "capacity": {"memory": {"value": "8Gi"}}}]}}
    if kind == "DeviceTaintRule":
        return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "r"},
                "spec": {"deviceSelector": {"driver": "gpu.example.com"}, "taint": {"key": "example.com/k", "effect": "NoSchedule"}}}
    if kind == "ResourcePoolStatusRequest":
        return {"apiVersion": "resource.k8s.io/v1alpha3", "kind": kind, "metadata": {"name": "q"},
                "spec": {"driver": "gpu.example.com"}}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": "p", "namespace": NS},
                "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
                         "containers": [{"name": "c", "image": "pause", "resources": {"claims": [{"name": "gpu"}]}}]}}
    raise ValueError(kind)


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]


def _req(obj: dict[str, Any], i: int = 0) -> dict[str, Any]:
    reqs = _spec(obj)["devices"]["requests"]
    return reqs[min(i, len(reqs) - 1)] if reqs else {}


def _body(obj: dict[str, Any]) -> dict[str, Any]:
    r = _req(obj)
    if "exactly" in r and isinstance(r["exactly"], dict):
        return r["exactly"]
    if r.get("firstAvailable"):
        return r["firstAvailable"][0]
    r["exactly"] = {"deviceClassName": "gpu.example.com"}
    return r["exactly"]


Mutation = Callable[[dict[str, Any], Any], None]


def _set(path: tuple[Any, ...]) -> Mutation:
    def f(obj: dict[str, Any], v: Any) -> None:
        node = obj
        for p in path[:-1]:
            node = node.setdefault(p, {})
        if v is None:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = v
    return f


def _claim_mutations() -> dict[str, tuple[Mutation, st.SearchStrategy[Any]]]:
    def req_name(o: dict[str, Any], v: str) -> None: _req(o)["name"] = v
    def mode(o: dict[str, Any], v: str) -> None: _body(o)["allocationMode"] = v
    def count(o: dict[str, Any], v: Any) -> None:
        if v is None:
            _body(o).pop("count", None)
        else:
            _body(o)["count"] = v
    def class_name(o: dict[str, Any], v: str) -> None: _body(o)["deviceClassName"] = v
    def selector(o: dict[str, Any], v: str) -> None: _body(o).setdefault("selectors", []).append({"cel": {"expression": v}})
    def no_cel(o: dict[str, Any], _: Any) -> None: _body(o).setdefault("selectors", []).append({})
    def many_selectors(o: dict[str, Any], n: int) -> None:
        _body(o)["selectors"] = [{"cel": {"expression": "true"}}] * n
    def first_available(o: dict[str, Any], n: int) -> None:
        r = _req(o)
        r["firstAvailable"] = [{"name": f"s{i % 3 if n > 5 else i}", "deviceClassName": "gpu.example.com"} for i in range(n)]
        if n and r.get("exactly") is not None and n % 2:
            r.pop("exactly")
    def neither(o: dict[str, Any], _: Any) -> None:
        r = _req(o)
        r.pop("exactly", None)
        r.pop("firstAvailable", None)
    def requests(o: dict[str, Any], n: int) -> None:
        _spec(o)["devices"]["requests"] = [{"name": NAMES[i % 4], "exactly": {"deviceClassName": "gpu.example.com"}} for i in range(n)]
    def toleration(o: dict[str, Any], v: tuple[str, str, str, str]) -> None:
        k, op, val, eff = v
        t: dict[str, Any] = {"key": k, "value": val, "effect": eff}
        if op:
            t["operator"] = op
        _body(o).setdefault("tolerations", []).append({x: y for x, y in t.items() if y != ""})
    def constraint(o: dict[str, Any], v: tuple[str, str, tuple[str, ...]]) -> None:
        field, attr, reqs = v
        c: dict[str, Any] = {}
        if field:
            c[field] = attr
        if reqs:
            c["requests"] = list(reqs)
        _spec(o)["devices"].setdefault("constraints", []).append(c)
    def config(o: dict[str, Any], v: tuple[str, Any, tuple[str, ...]]) -> None:
        driver, params, reqs = v
        c: dict[str, Any] = {"opaque": {"driver": driver, "parameters": params}} if driver != "-" else {}
        if reqs:
            c["requests"] = list(reqs)
        _spec(o)["devices"].setdefault("config", []).append(c)
    def admin(o: dict[str, Any], v: bool) -> None: _body(o)["adminAccess"] = v
    def capacity(o: dict[str, Any], v: str) -> None: _body(o)["capacity"] = {"requests": {"memory": v}}
    return {
        "request name": (req_name, st.sampled_from(NAMES)), "mode": (mode, st.sampled_from(MODES)),
        "count": (count, st.sampled_from(COUNTS)), "class": (class_name, st.sampled_from(("gpu.example.com", "", "Bad", "a" * 254))),
        "selector": (selector, st.sampled_from(EXPRESSIONS)), "selector without cel": (no_cel, st.none()),
        "selectors": (many_selectors, st.sampled_from((2, 32, 33))), "firstAvailable": (first_available, st.integers(0, 9)),
        "neither": (neither, st.none()), "requests": (requests, st.sampled_from((0, 2, 5, 33))),
        "toleration": (toleration, st.tuples(st.sampled_from(LABEL_KEYS), st.sampled_from(OPERATORS),
                                              st.sampled_from(LABEL_VALUES), st.sampled_from(EFFECTS))),
        "constraint": (constraint, st.tuples(st.sampled_from(("matchAttribute", "distinctAttribute", "")),
                                             st.sampled_from(QUALIFIED),
                                             st.sampled_from(((), ("gpu",), ("nope",), ("gpu", "gpu"), ("gpu/s0",), ("a/b/c",))))),
        "config": (config, st.tuples(st.sampled_from(("gpu.example.com", "", "Bad_Driver", "-")),
                                     st.sampled_from(({"a": 1}, [1], "x", None, {})),
                                     st.sampled_from(((), ("gpu",), ("nope",))))),
        "adminAccess": (admin, st.booleans()), "capacity": (capacity, st.sampled_from(QUANTITIES)),
        "name": (_set(("metadata", "name")), st.sampled_from(NAMES)),
    }


def _slice_mutations() -> dict[str, tuple[Mutation, st.SearchStrategy[Any]]]:
    def dev(o: dict[str, Any]) -> dict[str, Any]:
        devs = o["spec"].setdefault("devices", [])
        if not devs:
            devs.append({"name": "d0"})
        return devs[0]
    def node_fields(o: dict[str, Any], v: tuple[Any, Any, Any, Any]) -> None:
        name, sel, alln, per = v
        s = o["spec"]
        for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection"):
            s.pop(k, None)
        for k, x in (("nodeName", name), ("nodeSelector", sel), ("allNodes", alln), ("perDeviceNodeSelection", per)):
            if x is not None:
                s[k] = x
    selectors = (None, {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]},
                 {"nodeSelectorTerms": []}, {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["v"]}]}, {}]},
                 {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]})
    def device_node(o: dict[str, Any], v: tuple[Any, Any]) -> None:
        name, alln = v
        d = dev(o)
        if name is not None:
            d["nodeName"] = name
        if alln is not None:
            d["allNodes"] = alln
    typed = {"string": ("a", "x" * 65, ""), "int": (1, -5), "bool": (True,), "version": ("1.0.0", "1.0", "x"),
             "strings": ([], ["a"], ["x" * 65]), "ints": ([], [1, 2]), "": (None,)}

    def attribute(o: dict[str, Any], v: tuple[str, str, int]) -> None:
        key, kind, i = v
        values = typed[kind]
        dev(o).setdefault("attributes", {})[key] = {kind: values[i % len(values)]} if kind else {}
    def two_values(o: dict[str, Any], _: Any) -> None: dev(o).setdefault("attributes", {})["two"] = {"int": 1, "string": "a"}
    def policy(o: dict[str, Any], v: tuple[bool, Any]) -> None:
        multi, pol = v
        d = dev(o)
        d["allowMultipleAllocations"] = multi
        d.setdefault("capacity", {})["bw"] = {"value": "8", "requestPolicy": pol}
    policies = ({"default": "1", "validValues": ["1", "2"]}, {"validValues": ["1"]}, {"default": "3", "validValues": ["2", "1"]},
                {"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}}, {"default": "1", "validRange": {"max": "4"}},
                {"default": "5", "validRange": {"min": "2", "max": "1", "step": "2"}}, {"default": "1", "validValues": ["1"], "validRange": {"min": "1"}},
                {"default": "1", "validRange": {"min": "1", "step": "0"}}, {"default": "2", "validRange": {"min": "1", "step": "3"}},
                {"default": "1", "validValues": [str(i) for i in range(1, 12)]})
    def taint(o: dict[str, Any], v: tuple[str, str, str]) -> None:
        k, val, eff = v
        dev(o).setdefault("taints", []).append({x: y for x, y in (("key", k), ("value", val), ("effect", eff)) if y})
    def device_name(o: dict[str, Any], v: str) -> None: dev(o)["name"] = v
    def dup_device(o: dict[str, Any], _: Any) -> None: o["spec"]["devices"].append(copy.deepcopy(dev(o)))
    def counters(o: dict[str, Any], v: str) -> None:
        o["spec"].setdefault("sharedCounters", []).append({"name": v, "counters": {"mem": {"value": "1"}}})
    def binding(o: dict[str, Any], v: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
        d = dev(o)
        d["bindingConditions"], d["bindingFailureConditions"] = list(v[0]), list(v[1])
    conds = ((), ("ready",), ("ready", "ready"), ("Bad Cond",), ("a", "b", "c", "d", "e"))
    return {
        "node fields": (node_fields, st.tuples(st.sampled_from((None, "node-1", "", "Bad")), st.sampled_from(selectors),
                                               st.sampled_from((None, True, False)), st.sampled_from((None, True, False)))),
        "device node": (device_node, st.tuples(st.sampled_from((None, "node-1", "")), st.sampled_from((None, True, False)))),
        "attribute": (attribute, st.tuples(st.sampled_from(("model", "gpu.example.com/x", "Bad-Name", "/x", "a" * 33, "d/e/f")),
                                           st.sampled_from(("string", "int", "bool", "version", "strings", "ints", "")),
                                           st.integers(0, 2))),
        "version": (lambda o, v: dev(o).setdefault("attributes", {}).update({"v": {"version": v}}), st.sampled_from(VERSIONS)),
        "two values": (two_values, st.none()),
        "policy": (policy, st.tuples(st.booleans(), st.sampled_from(policies))),
        "taint": (taint, st.tuples(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), st.sampled_from(EFFECTS))),
        "device name": (device_name, st.sampled_from(NAMES)), "duplicate device": (dup_device, st.none()),
        "counters": (counters, st.sampled_from(("cs", "", "Bad"))), "binding": (binding, st.tuples(st.sampled_from(conds), st.sampled_from(conds))),
        "driver": (_set(("spec", "driver")), st.sampled_from(("gpu.example.com", "", "Bad_Driver", "a" * 64))),
        "pool": (_set(("spec", "pool", "name")), st.sampled_from(("p", "", "a/b", "Bad", "a//b"))),
        "slice count": (_set(("spec", "pool", "resourceSliceCount")), st.sampled_from((1, 0, -1))),
        "generation": (_set(("spec", "pool", "generation")), st.sampled_from((0, 1, -1))),
        "name": (_set(("metadata", "name")), st.sampled_from(NAMES)),
    }


def _pod_mutations() -> dict[str, tuple[Mutation, st.SearchStrategy[Any]]]:
    def pod_claim(o: dict[str, Any], v: tuple[str, Any, Any]) -> None:
        name, rc, rct = v
        c: dict[str, Any] = {"name": name}
        if rc is not None:
            c["resourceClaimName"] = rc
        if rct is not None:
            c["resourceClaimTemplateName"] = rct
        o["spec"]["resourceClaims"].append(c)
    def container_claim(o: dict[str, Any], v: tuple[str, str]) -> None:
        name, req = v
        c = {"name": name, **({"request": req} if req else {})}
        o["spec"]["containers"][0]["resources"]["claims"].append(c)
    def no_claims(o: dict[str, Any], _: Any) -> None: o["spec"]["resourceClaims"] = []
    return {
        "pod claim": (pod_claim, st.tuples(st.sampled_from(NAMES), st.sampled_from((None, "c", "Bad", "")), st.sampled_from((None, "t", "Bad")))),
        "container claim": (container_claim, st.tuples(st.sampled_from(("gpu", "other", "", "Bad")), st.sampled_from(("", "r", "Bad")))),
        "no pod claims": (no_claims, st.none()), "name": (_set(("metadata", "name")), st.sampled_from(NAMES)),
    }


def _class_mutations() -> dict[str, tuple[Mutation, st.SearchStrategy[Any]]]:
    def selector(o: dict[str, Any], v: str) -> None: o["spec"]["selectors"].append({"cel": {"expression": v}})
    def ern(o: dict[str, Any], v: str) -> None: o["spec"]["extendedResourceName"] = v
    def cfg(o: dict[str, Any], v: tuple[str, Any]) -> None:
        o["spec"].setdefault("config", []).append({"opaque": {"driver": v[0], "parameters": v[1]}})
    return {"selector": (selector, st.sampled_from(EXPRESSIONS)),
            "extendedResourceName": (ern, st.sampled_from(("example.com/gpu", "gpu", "kubernetes.io/gpu", "requests.example.com/gpu",
                                                           "example.com/Bad Name", "example.com/" + "g" * 64))),
            "config": (cfg, st.tuples(st.sampled_from(("gpu.example.com", "", "Bad_Driver")), st.sampled_from(({"a": 1}, [1], None)))),
            "name": (_set(("metadata", "name")), st.sampled_from(NAMES))}


def _rule_mutations() -> dict[str, tuple[Mutation, st.SearchStrategy[Any]]]:
    return {"key": (_set(("spec", "taint", "key")), st.sampled_from(LABEL_KEYS)),
            "value": (_set(("spec", "taint", "value")), st.sampled_from(LABEL_VALUES)),
            "effect": (_set(("spec", "taint", "effect")), st.sampled_from(EFFECTS)),
            "selector driver": (_set(("spec", "deviceSelector", "driver")), st.sampled_from(("gpu.example.com", "", "Bad_Driver"))),
            "selector pool": (_set(("spec", "deviceSelector", "pool")), st.sampled_from(("p", "", "Bad"))),
            "selector device": (_set(("spec", "deviceSelector", "device")), st.sampled_from(("d", "Bad", ""))),
            "name": (_set(("metadata", "name")), st.sampled_from(NAMES))}


def _pool_status_mutations() -> dict[str, tuple[Mutation, st.SearchStrategy[Any]]]:
    return {"driver": (_set(("spec", "driver")), st.sampled_from(("gpu.example.com", "", "Bad_Driver", "a" * 254))),
            "pool": (_set(("spec", "poolName")), st.sampled_from(("p", "", "a/b", "Bad", "a//b"))),
            "limit": (_set(("spec", "limit")), st.sampled_from((None, 0, 1, 1000, 1001))),
            "name": (_set(("metadata", "name")), st.sampled_from(NAMES))}


MUTATIONS = {"ResourcePoolStatusRequest": _pool_status_mutations(), "ResourceClaim": _claim_mutations(), "ResourceClaimTemplate": _claim_mutations(), "DeviceClass": _class_mutations(),
             "ResourceSlice": _slice_mutations(), "Pod": _pod_mutations(), "DeviceTaintRule": _rule_mutations()}


@st.composite
def admission_inputs(draw: Any) -> dict[str, Any]:
    """``{"object", "old", "gates", "mutations"}``: a mutated object, the stored object it updates
    (or None: a create) and the gates it is admitted with."""
    kind = draw(st.sampled_from(tuple(MUTATIONS)))
    # Pod updates are refused upstream for any spec change with a diff of the spec in the message,
    # which the reference does not model: pods are only created here.
    update = kind != "Pod" and draw(st.sampled_from((False, False, False, True)))
    obj = base(kind)
    table = MUTATIONS[kind]
    names = draw(st.lists(st.sampled_from(sorted(table)), min_size=0, max_size=3))
    applied = []
    for n in names:
        fn, values = table[n]
        v = draw(values)
        fn(obj, v)
        applied.append(f"{n}={v!r}"[:80])
    gates = {g: draw(st.sampled_from(vals)) for g, vals in GATE_CHOICES.items()}
    if not gates["DRAConsumableCapacity"]:
        gates["DRAFractionalCapacityRange"] = False
    if kind == "ResourcePoolStatusRequest":
        gates["DRAResourcePoolStatus"] = True
    old = None
    if update:
        old = base(kind)
        old["metadata"].update({"uid": "0c5e0c1d-0000-4000-8000-000000000001", "resourceVersion": "7",
                                "creationTimestamp": "2026-01-01T00:00:00Z"})
        if kind == "DeviceTaintRule":
            old["metadata"]["generation"] = 1
    return {"object": obj, "old": old, "gates": gates, "mutations": applied + (["(update)"] if update else [])}
