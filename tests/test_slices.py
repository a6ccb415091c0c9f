"""Tests for the fake driver's ResourceSlices, DeviceClasses and vendor profile."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drakit.fake_driver.classes import device_classes
from drakit.fake_driver.profile import ProfileError, load_profile, load_vendor_profile
from drakit.fake_driver.slices import publish_slices, split_devices, uses_advanced_features
from drakit.fake_hw.faults import Fault
from drakit.fake_hw.inventory import build_inventory
from drakit.fake_hw.shapes import bundled_shapes, shape_from_text
from drakit.fake_hw.vendors import ACME, NOVA, SWIFT, VENDORS

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?|[kmun]|e[0-9]+)?$")
ATTRIBUTE_KINDS = {"int", "bool", "string", "version", "ints", "bools", "strings", "versions"}
LIST_KINDS = {"ints", "bools", "strings", "versions"}


def label_ok(name: str) -> bool:
    return len(name) <= 63 and bool(DNS_LABEL.match(name))


def subdomain_ok(name: str, limit: int = 253) -> bool:
    return len(name) <= limit and bool(DNS_SUBDOMAIN.match(name))


def qualified_name_ok(name: str) -> bool:
    domain, slash, ident = name.rpartition("/")
    if slash and not subdomain_ok(domain, 63):
        return False
    return len(ident) <= 32 and bool(C_IDENTIFIER.match(ident))


def device_problems(device: dict[str, Any]) -> list[str]:
    """What the API server would reject in one ``spec.devices[]`` entry."""
    problems = []
    name = device.get("name", "")
    if not label_ok(name):
        problems.append(f"device name {name!r} is not a DNS label")
    attributes = device.get("attributes", {})
    capacity = device.get("capacity", {})
    if len(attributes) + len(capacity) > 32:
        problems.append(f"{name}: more than 32 attributes and capacities")
    values = 0
    for key, value in attributes.items():
        if not qualified_name_ok(key):
            problems.append(f"{name}: bad attribute name {key!r}")
        if len(value) != 1 or set(value) - ATTRIBUTE_KINDS:
            problems.append(f"{name}.{key}: must have exactly one known field, has {value}")
            continue
        ((kind, payload),) = value.items()
        items = payload if kind in LIST_KINDS else [payload]
        values += len(items)
        element = kind[:-1] if kind in LIST_KINDS else kind
        for item in items:
            if element == "int" and (isinstance(item, bool) or not isinstance(item, int)):
                problems.append(f"{name}.{key}: {item!r} is not an int")
            if element == "bool" and not isinstance(item, bool):
                problems.append(f"{name}.{key}: {item!r} is not a bool")
            if element in ("string", "version"):
                if not isinstance(item, str) or len(item) > 64:
                    problems.append(f"{name}.{key}: string longer than 64 or not a string")
                elif element == "version" and not SEMVER.match(item):
                    problems.append(f"{name}.{key}: {item!r} is not semver")
    if values > 48:
        problems.append(f"{name}: {values} attribute values, at most 48")
    for key, value in capacity.items():
        if not qualified_name_ok(key):
            problems.append(f"{name}: bad capacity name {key!r}")
        if set(value) != {"value"} or not isinstance(value["value"], str) \
                or not QUANTITY.match(value["value"]):
            problems.append(f"{name}.{key}: capacity must be {{value: <quantity string>}}")
    consumes = device.get("consumesCounters", [])
    if len(consumes) > 2 or len({c["counterSet"] for c in consumes}) != len(consumes):
        problems.append(f"{name}: at most 2 consumesCounters, one per counter set")
    for use in consumes:
        if len(use["counters"]) > 32:
            problems.append(f"{name}: more than 32 counters consumed from one set")
    taints = device.get("taints", [])
    if len(taints) > 16:
        problems.append(f"{name}: more than 16 taints")
    for taint in taints:
        if taint.get("effect") not in ("None", "NoSchedule", "NoExecute") or not taint.get("key"):
            problems.append(f"{name}: bad taint {taint}")
    return problems


def slice_problems(manifest: dict[str, Any]) -> list[str]:
    """What the API server would reject in one ResourceSlice on its own."""
    problems = []
    if manifest.get("apiVersion") != "resource.k8s.io/v1" or manifest.get("kind") != "ResourceSlice":
        problems.append("not a resource.k8s.io/v1 ResourceSlice")
    name = manifest["metadata"]["name"]
    if not subdomain_ok(name):
        problems.append(f"slice name {name!r} is not a DNS subdomain")
    spec = manifest["spec"]
    if not subdomain_ok(spec["driver"], 63):
        problems.append(f"driver {spec['driver']!r} is not a DNS subdomain of <= 63 characters")
    selection = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
                 if spec.get(k)]
    if len(selection) != 1:
        problems.append(f"exactly one node selection field needed, got {selection}")
    pool = spec["pool"]
    if not all(subdomain_ok(part) for part in pool["name"].split("/")) or len(pool["name"]) > 253:
        problems.append(f"bad pool name {pool['name']!r}")
    if not isinstance(pool["generation"], int) or pool["resourceSliceCount"] < 1:
        problems.append("pool generation must be an int and resourceSliceCount > 0")
    devices = spec.get("devices", [])
    counters = spec.get("sharedCounters", [])
    if devices and counters:
        problems.append("a slice may hold devices or sharedCounters, not both")
    limit = 64 if any(uses_advanced_features(d) for d in devices) else 128
    if len(devices) > limit:
        problems.append(f"{len(devices)} devices, at most {limit}")
    for device in devices:
        problems += device_problems(device)
    if len(counters) > 8:
        problems.append("more than 8 counter sets")
    for counter_set in counters:
        if not label_ok(counter_set["name"]) or len(counter_set["counters"]) > 32:
            problems.append(f"bad counter set {counter_set['name']!r}")
        for counter, value in counter_set["counters"].items():
            if not label_ok(counter) or not QUANTITY.match(value["value"]):
                problems.append(f"bad counter {counter!r}")
    return problems


def pool_problems(slices: list[dict[str, Any]]) -> list[str]:
    """Cross-slice rules: consistent pools, unique names, resolvable counter references."""
    problems = []
    pools: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for manifest in slices:
        pools[(manifest["spec"]["driver"], manifest["spec"]["pool"]["name"])].append(manifest)
    for (driver, pool), members in pools.items():
        specs = [m["spec"] for m in members]
        if {s["pool"]["generation"] for s in specs} != {specs[0]["pool"]["generation"]}:
            problems.append(f"{driver}/{pool}: mixed generations")
        if any(s["pool"]["resourceSliceCount"] != len(members) for s in specs):
            problems.append(f"{driver}/{pool}: resourceSliceCount is not {len(members)}")
        names = [d["name"] for s in specs for d in s.get("devices", [])]
        if len(names) != len(set(names)):
            problems.append(f"{driver}/{pool}: duplicate device names")
        sets = {c["name"]: set(c["counters"]) for s in specs for c in s.get("sharedCounters", [])}
        if len(sets) != sum(len(s.get("sharedCounters", [])) for s in specs):
            problems.append(f"{driver}/{pool}: duplicate counter set names")
        for s in specs:
            for d in s.get("devices", []):
                for use in d.get("consumesCounters", []):
                    if not set(use["counters"]) <= sets.get(use["counterSet"], set()):
                        problems.append(f"{d['name']}: consumes an unknown counter")
    names = [m["metadata"]["name"] for m in slices]
    if len(names) != len(set(names)):
        problems.append("duplicate slice names")
    return problems


def devices_of(slices: list[dict[str, Any]], driver: str | None = None) -> list[dict[str, Any]]:
    return [d for m in slices if driver in (None, m["spec"]["driver"])
            for d in m["spec"].get("devices", [])]


def shape(text: str):
    return shape_from_text(text, "test.yaml")


# --- slices ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", bundled_shapes())
def test_bundled_shapes_publish_valid_slices(name):
    inventory = build_inventory(name, "node-a")
    slices = publish_slices(inventory)
    for manifest in slices:
        assert slice_problems(manifest) == []
        assert manifest["spec"]["nodeName"] == "node-a"
        assert manifest["spec"]["pool"]["name"] == "node-a"
    assert pool_problems(slices) == []
    assert {m["spec"]["driver"] for m in slices} == set(inventory.drivers)
    assert [d["name"] for d in devices_of(slices)] == [d.name for d in inventory.devices()]
    json.dumps(slices)  # plain data only


@pytest.mark.parametrize("name", bundled_shapes())
def test_publishing_is_deterministic(name):
    faults = [Fault("gpu0", "ecc", "NoExecute")]
    first = publish_slices(build_inventory(name, "node-a"), generation=3, faults=faults)
    again = publish_slices(build_inventory(name, "node-a"), generation=3, faults=faults)
    assert json.dumps(first) == json.dumps(again)


def test_other_node_other_identities():
    a = devices_of(publish_slices(build_inventory("server-8gpu", "node-a")))
    b = devices_of(publish_slices(build_inventory("server-8gpu", "node-b")))
    assert [d["name"] for d in a] == [d["name"] for d in b]
    assert a[0]["attributes"]["uuid"] != b[0]["attributes"]["uuid"]
    mac_a = {d["attributes"]["mac"]["string"] for d in a if "mac" in d["attributes"]}
    mac_b = {d["attributes"]["mac"]["string"] for d in b if "mac" in d["attributes"]}
    assert mac_a and mac_a.isdisjoint(mac_b)


def test_one_pool_per_driver_with_named_slices():
    slices = publish_slices(build_inventory("server-8gpu", "node-a"), generation=7)
    assert [m["metadata"]["name"] for m in slices] == [
        "node-a-acme-0", "node-a-nova-0", "node-a-swift-0"]
    assert [m["spec"]["driver"] for m in slices] == [ACME.driver, NOVA.driver, SWIFT.driver]
    assert all(m["spec"]["pool"] == {"name": "node-a", "generation": 7, "resourceSliceCount": 1}
               for m in slices)


def test_wire_form_of_a_device():
    slices = publish_slices(build_inventory("small-1gpu", "node-a"))
    gpu, nic = devices_of(slices)
    assert gpu == {
        "name": "gpu0",
        "attributes": {
            "type": {"string": "gpu"},
            "model": {"string": "acme-a30"},
            "uuid": {"string": gpu["attributes"]["uuid"]["string"]},
            "driverVersion": {"version": "550.54.15"},
            "index": {"int": 0},
            "numa": {"int": 0},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:1a"},
            "resource.kubernetes.io/pciBusID": {"string": "0000:1b:00.0"},
        },
        "capacity": {"memory": {"value": "24Gi"}},
    }
    assert nic["attributes"]["resource.kubernetes.io/numaNode"] == {"int": 0}
    assert nic["capacity"] == {"bandwidth": {"value": "25G"}}


def test_partitionable_pool_has_a_counter_slice():
    slices = publish_slices(build_inventory("acme-partitionable", "node-a"))
    assert [m["metadata"]["name"] for m in slices] == ["node-a-acme-0", "node-a-acme-1"]
    devices_slice, counters_slice = slices
    assert len(devices_slice["spec"]["devices"]) == 28
    assert "sharedCounters" not in devices_slice["spec"]
    assert "devices" not in counters_slice["spec"]
    assert counters_slice["spec"]["sharedCounters"] == [
        {"name": "gpu0-counters", "counters": {"compute": {"value": "7"},
                                               "memory": {"value": "80Gi"}}},
        {"name": "gpu1-counters", "counters": {"compute": {"value": "7"},
                                               "memory": {"value": "80Gi"}}},
    ]
    assert all(m["spec"]["pool"]["resourceSliceCount"] == 2 for m in slices)
    part = devices_slice["spec"]["devices"][1]
    assert part["name"] == "gpu0-1g10gb-0"
    assert part["consumesCounters"] == [{"counterSet": "gpu0-counters", "counters": {
        "compute": {"value": "1"}, "memory": {"value": "10Gi"}}}]
    assert pool_problems(slices) == []


def test_many_counter_sets_spread_over_counter_slices():
    inventory = build_inventory(shape(
        "name: t\npartitioning: partitionable\ngpus: [{vendor: acme, count: 10}]\n"), "n")
    slices = publish_slices(inventory)
    counts = [(len(m["spec"].get("devices", [])), len(m["spec"].get("sharedCounters", [])))
              for m in slices]
    # 140 devices that consume counters: 64 + 64 + 12; 10 counter sets: 8 + 2.
    assert counts == [(64, 0), (64, 0), (12, 0), (0, 8), (0, 2)]
    assert all(m["spec"]["pool"]["resourceSliceCount"] == 5 for m in slices)
    assert pool_problems(slices) == [] and all(slice_problems(m) == [] for m in slices)


def test_two_hundred_plain_devices_need_two_slices():
    inventory = build_inventory(shape("name: t\nnics: [{vendor: swift, vfs: 199}]\n"), "n")
    assert len(inventory.devices()) == 200
    slices = publish_slices(inventory)
    assert [len(m["spec"]["devices"]) for m in slices] == [128, 72]
    assert [m["metadata"]["name"] for m in slices] == ["n-swift-0", "n-swift-1"]
    assert all(m["spec"]["pool"]["resourceSliceCount"] == 2 for m in slices)
    assert [d["name"] for d in devices_of(slices)] == [d.name for d in inventory.devices()]
    assert pool_problems(slices) == [] and all(slice_problems(m) == [] for m in slices)


def test_two_hundred_gpus_need_two_slices():
    inventory = build_inventory(shape("name: t\ngpus: [{vendor: nova, count: 200}]\n"), "n")
    slices = publish_slices(inventory)
    assert [len(m["spec"]["devices"]) for m in slices] == [128, 72]
    assert pool_problems(slices) == [] and all(slice_problems(m) == [] for m in slices)


def test_tainted_devices_lower_the_limit_to_64():
    inventory = build_inventory(shape("name: t\nnics: [{vendor: swift, vfs: 199}]\n"), "n")
    slices = publish_slices(inventory, faults=[Fault("nic0", "link-down")])
    assert [len(m["spec"]["devices"]) for m in slices] == [64, 64, 64, 8]
    assert all(m["spec"]["pool"]["resourceSliceCount"] == 4 for m in slices)
    assert all(d["taints"] == [{"key": "drakit.dev/fault", "value": "link-down",
                                "effect": "NoSchedule"}] for d in devices_of(slices))


def test_one_tainted_device_only_shrinks_its_own_slice():
    inventory = build_inventory(shape("name: t\nnics: [{vendor: swift, vfs: 199}]\n"), "n")
    slices = publish_slices(inventory, faults=[Fault("nic0-vf150", "degraded", "NoExecute")])
    # 128 untainted; then vf127..vf190 (64, including the tainted vf150); then the last 8.
    assert [len(m["spec"]["devices"]) for m in slices] == [128, 64, 8]
    assert all(slice_problems(m) == [] for m in slices)
    tainted = [d["name"] for d in devices_of(slices) if "taints" in d]
    assert tainted == ["nic0-vf150"]


def test_list_attributes_lower_the_limit_to_64():
    inventory = build_inventory(shape(
        "name: t\nsockets: 2\nnumaNodeForm: list\nnics: [{vendor: swift, vfs: 99}]\n"), "n")
    slices = publish_slices(inventory)
    assert [len(m["spec"]["devices"]) for m in slices] == [64, 36]


def test_max_devices_forces_more_slices():
    slices = publish_slices(build_inventory("server-8gpu", "node-a"), max_devices=3)
    acme = [m for m in slices if m["spec"]["driver"] == ACME.driver]
    assert [len(m["spec"]["devices"]) for m in acme] == [3, 1]
    assert [m["metadata"]["name"] for m in acme] == ["node-a-acme-0", "node-a-acme-1"]
    assert all(m["spec"]["pool"]["resourceSliceCount"] == 2 for m in acme)
    swift = [m for m in slices if m["spec"]["driver"] == SWIFT.driver]
    assert [len(m["spec"]["devices"]) for m in swift] == [3, 3, 3, 3]
    assert pool_problems(slices) == []


def test_bad_arguments():
    inventory = build_inventory("small-1gpu", "node-a")
    with pytest.raises(ValueError, match="generation"):
        publish_slices(inventory, generation=-1)
    with pytest.raises(ValueError, match="max_devices"):
        publish_slices(inventory, max_devices=0)
    with pytest.raises(ValueError, match="unknown device 'gpu7'"):
        publish_slices(inventory, faults=[Fault("gpu7", "ecc")])


def test_empty_device_list_still_gives_one_slice():
    assert split_devices([]) == [[]]


@settings(max_examples=60, deadline=None)
@given(
    vfs=st.integers(0, 255),
    max_devices=st.one_of(st.none(), st.integers(1, 150)),
    tainted=st.lists(st.integers(0, 255), max_size=5),
    list_form=st.booleans(),
)
def test_split_respects_every_limit(vfs, max_devices, tainted, list_form):
    form = "list" if list_form else "scalar"
    inventory = build_inventory(shape(
        f"name: t\nsockets: 2\nnumaNodeForm: {form}\n"
        f"nics: [{{vendor: swift, vfs: {vfs}}}]\n"), "n")
    faults = [Fault(f"nic0-vf{i}", "ecc") for i in tainted if i < vfs]
    slices = publish_slices(inventory, faults=faults, max_devices=max_devices)
    assert pool_problems(slices) == []
    for manifest in slices:
        assert slice_problems(manifest) == []
        assert 1 <= len(manifest["spec"]["devices"]) <= (max_devices or 128)
    assert [d["name"] for d in devices_of(slices)] == [d.name for d in inventory.devices()]
    # Greedy: every slice but the last was full for its own limit when it was closed.
    for manifest, following in zip(slices, slices[1:]):
        devices = manifest["spec"]["devices"]
        limit = 64 if any(uses_advanced_features(d)
                          for d in devices + following["spec"]["devices"][:1]) else 128
        assert len(devices) + 1 > min(limit, max_devices or limit)


# --- classes -----------------------------------------------------------------------------

def test_one_class_per_vendor_named_after_its_driver():
    classes = {c["metadata"]["name"]: c for c in device_classes()}
    for vendor in VENDORS:
        manifest = classes[vendor.driver]
        assert manifest["apiVersion"] == "resource.k8s.io/v1"
        assert manifest["kind"] == "DeviceClass"
        assert manifest["spec"]["selectors"] == [
            {"cel": {"expression": f'device.driver == "{vendor.driver}"'}}]
    assert "gpu.example.com" in classes
    assert "gpu-partition.acme.example.com" in classes
    assert all(subdomain_ok(name) for name in classes)


# --- vendor profile ----------------------------------------------------------------------

def test_bundled_profile_placeholders():
    flat = load_profile()
    assert flat["driver.gpu"] == "gpu.acme.example.com"
    assert flat["driver.gpu2"] == "gpu.nova.example.com"
    assert flat["driver.nic"] == "nic.swift.example.com"
    assert flat["class.gpu"] == "gpu.acme.example.com"
    assert flat["class.gpu2"] == "gpu.nova.example.com"
    assert flat["class.nic"] == "nic.swift.example.com"
    assert flat["attr.gpu.model"] == "gpu.acme.example.com/model"
    assert flat["attr.gpu.numa"] == "gpu.acme.example.com/numa"
    assert flat["attr.gpu2.numa"] == "resource.kubernetes.io/numaNode"
    assert flat["attr.nic.numa"] == "resource.kubernetes.io/numaNode"
    assert flat["attr.gpu.memory"] == "gpu.acme.example.com/memory"
    assert flat["attr.gpu2.memory"] == "gpu.nova.example.com/vram"
    assert flat["cel.gpu.model"] == "device.attributes['gpu.acme.example.com'].model"
    assert flat["cel.gpu2.memory"] == "device.capacity['gpu.nova.example.com'].vram"
    assert flat["value.gpu.model"] == "acme-a100"
    assert flat["value.nic.linkSpeed"] == "100"
    assert all(isinstance(v, str) for v in flat.values())


def test_bundled_profile_matches_what_the_drivers_publish():
    profile = load_vendor_profile()
    classes = {c["metadata"]["name"] for c in device_classes()}
    assert {name for _, name in profile.classes} <= classes
    assert set(profile.shapes) <= set(bundled_shapes())
    published: dict[str, set[str]] = defaultdict(set)
    capacities: dict[str, set[str]] = defaultdict(set)
    models: dict[str, set[str]] = defaultdict(set)
    for name in profile.shapes:
        for manifest in publish_slices(build_inventory(name, "node-a")):
            driver = manifest["spec"]["driver"]
            for device in manifest["spec"].get("devices", []):
                for key in device.get("attributes", {}):
                    published[driver].add(key if "/" in key else f"{driver}/{key}")
                for key, value in device.get("capacity", {}).items():
                    capacities[driver].add(f"{driver}/{key}")
                    models[driver].add(value["value"])
                for value in device.get("attributes", {}).values():
                    models[driver].update(str(v) for v in value.values())
    for ref in profile.attributes:
        assert ref.qualified in published[profile.driver(ref.role)], ref
    for ref in profile.capacities:
        assert ref.qualified in capacities[profile.driver(ref.role)], ref
    for role, key, value in profile.values:
        assert value in models[profile.driver(role)], (role, key, value)


def test_profile_logical_keys_match_the_vendor_table():
    profile = load_vendor_profile()
    roles = {"gpu": ACME, "gpu2": NOVA, "nic": SWIFT}
    for ref in profile.attributes:
        vendor = roles[ref.role]
        name = vendor.attribute_name(ref.key)
        assert name is not None, ref
        assert ref.qualified == (name if "/" in name else f"{vendor.driver}/{name}")


def test_custom_profile_file(tmp_path):
    path = tmp_path / "vendor.yaml"
    path.write_text(
        "name: example\n"
        "drivers: {gpu: gpu.vendor.example}\n"
        "classes: {gpu: gpu.vendor.example}\n"
        "attributes: {gpu: {numa: resource.kubernetes.io/numaNode, model: family}}\n"
        "capacities: {gpu: {memory: hbm}}\n"
        "values: {gpu: {model: v9, big: true}}\n")
    flat = load_profile(path)
    assert flat == {
        "profile.name": "example",
        "driver.gpu": "gpu.vendor.example",
        "class.gpu": "gpu.vendor.example",
        "attr.gpu.numa": "resource.kubernetes.io/numaNode",
        "cel.gpu.numa": "device.attributes['resource.kubernetes.io'].numaNode",
        "attr.gpu.model": "gpu.vendor.example/family",
        "cel.gpu.model": "device.attributes['gpu.vendor.example'].family",
        "attr.gpu.memory": "gpu.vendor.example/hbm",
        "cel.gpu.memory": "device.capacity['gpu.vendor.example'].hbm",
        "value.gpu.model": "v9",
        "value.gpu.big": "true",
        "dut.role": "gpu",  # the driver under test: the first role unless driverUnderTest says
        "dut.driver": "gpu.vendor.example",
        "dut.class": "gpu.vendor.example",
    }


BAD_PROFILES = [
    ("drivers: {gpu: a.b}\n", "name: required"),
    ("name: x\n", "drivers: at least one driver role is required"),
    ("name: x\ndrivers: {gpu: Not_A_Driver}\n", "drivers.gpu: driver name must be a DNS"),
    ("name: x\ndrivers: {gpu: a.b}\nattributes: {nic: {model: m}}\n",
     "attributes.nic: role 'nic' has no entry under drivers"),
    ("name: x\ndrivers: {gpu: a.b}\nattributes: {gpu: {model: 'bad name'}}\n",
     "attributes.gpu.model: not a qualified name"),
    ("name: x\ndrivers: {gpu: a.b}\nattributes: {gpu: {m: m}}\ncapacities: {gpu: {m: c}}\n",
     "capacities.gpu.m: also defined under attributes"),
    ("name: x\ndrivers: {gpu: a.b}\nextra: 1\n", "extra: unknown field"),
    ("name: x\ndrivers: {gpu: a.b}\nvalues: {gpu: {m: [1]}}\n", "values.gpu.m: expected a single"),
    ("name: x\ndrivers: {gpu: a.b}\nvalues: {nic: {m: 1}}\n",
     "values.nic: role 'nic' has no entry under drivers"),
    ("name: x\ndrivers: {gpu: a.b}\nshapes: server\n", "shapes: expected a list"),
    ("name: [x\n", "invalid YAML"),
]


@pytest.mark.parametrize(("text", "message"), BAD_PROFILES, ids=[m for _, m in BAD_PROFILES])
def test_bad_profile_gives_one_line_error(tmp_path, text, message):
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert str(caught.value).startswith(f"{path}:")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
