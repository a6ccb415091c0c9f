"""Tests for the emulated hardware: shapes, topology, inventories, identities and faults."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from drakit.conformance.hwshapes import build_inventory as edge_inventory, read_shape
from drakit.fake_hw.faults import FAULT_TAINT_KEY, Fault, Taint, device_taints
from drakit.fake_hw.identity import device_mac, device_uuid
from drakit.fake_hw.inventory import build_inventory
from drakit.fake_hw.shapes import ShapeError, bundled_shapes, load_shape, shape_from_text
from drakit.fake_hw.vendors import ACME, NOVA, NUMA_NODE, PCIE_ROOT, SWIFT, VENDORS, find_vendor

REQUIRED_SHAPES = ("server-8gpu", "small-1gpu", "nova-4gpu", "acme-partitionable")


def names(inventory, driver=None):
    return [d.name for d in inventory.devices(driver)]


def wire(device):
    return {name: value.to_wire() for name, value in device.attributes}


# --- shapes ------------------------------------------------------------------------------

def test_required_shapes_are_bundled():
    assert set(REQUIRED_SHAPES) <= set(bundled_shapes())


@pytest.mark.parametrize("name", bundled_shapes())
def test_every_bundled_shape_loads_and_is_named_after_its_file(name):
    shape = load_shape(name)
    assert shape.name == name
    assert shape.gpus or shape.nics
    assert build_inventory(shape, "node-a").devices()


def test_shape_loads_from_a_path(tmp_path):
    bundled = Path(__file__).parents[1] / "fake_hw" / "profiles" / "small-1gpu.yaml"
    copy = tmp_path / "mine.yaml"
    copy.write_text(bundled.read_text())
    shape = read_shape(str(copy))
    assert shape.source == str(copy)
    assert read_shape(copy) == shape
    assert edge_inventory(str(copy), "n1") == build_inventory("small-1gpu", "n1")


def test_the_pure_core_reads_no_shape_file(tmp_path):
    """fake_hw takes text: a shape file is read at the edge (drakit.conformance.hwshapes)."""
    copy = tmp_path / "mine.yaml"
    copy.write_text("name: t\ngpus: [{vendor: acme}]\n")
    with pytest.raises(ShapeError, match="read by drakit.conformance.hwshapes.read_shape"):
        build_inventory(str(copy), "n1")


def test_unknown_shape_name_lists_the_bundled_ones():
    with pytest.raises(ShapeError, match=r"unknown shape 'nope' \(bundled: .*server-8gpu"):
        load_shape("nope")


def test_missing_shape_file(tmp_path):
    with pytest.raises(ShapeError, match=r"missing\.yaml: cannot read shape file"):
        read_shape(tmp_path / "missing.yaml")


GOOD = "name: t\ngpus: [{vendor: acme}]\n"

BAD_SHAPES = [
    ("name: t\ngpus: [{vendor: x}]\n", "gpus[0].vendor: unknown vendor 'x'"),
    ("name: t\ngpus: [{model: acme-a100}]\n", "gpus[0].vendor: required field is missing"),
    ("name: t\ngpus: [{vendor: swift}]\n", "gpus[0].vendor: 'swift' makes nics, not gpus"),
    ("name: t\nnics: [{vendor: acme}]\n", "nics[0].vendor: 'acme' makes gpus, not nics"),
    ("name: t\ngpus: [{vendor: acme, model: b200}]\n",
     "gpus[0].model: unknown model 'b200' for vendor acme (known: acme-a100, acme-a30)"),
    ("name: t\ncolour: red\ngpus: [{vendor: acme}]\n", "colour: unknown field"),
    ("name: t\ngpus: [{vendor: acme, vfs: 2}]\n", "gpus[0].vfs: unknown field"),
    ("name: t\nnics: [{vendor: swift, vfs: 300}]\n", "nics[0].vfs: must be between 0 and 255"),
    ("name: t\ngpus: [{vendor: acme, count: 0}]\n", "gpus[0].count: must be between 1 and 256"),
    ("name: t\ngpus: [{vendor: acme, count: two}]\n",
     "gpus[0].count: expected an integer, got a string"),
    ("name: t\ngpus: [{vendor: acme, count: true}]\n",
     "gpus[0].count: expected an integer, got a boolean"),
    ("name: t\nsockets: 2\ngpus: [{vendor: acme, numa: 2}]\n",
     "gpus[0].numa: NUMA node 2 does not exist (this shape has nodes 0..1)"),
    ("name: t\nsockets: 2\ngpus: [{vendor: acme, numa: 0, pcieRoot: 0}]\n"
     "nics: [{vendor: swift, numa: 1, pcieRoot: 0}]\n",
     "nics[0].pcieRoot: root 0 is on NUMA node 0 (gpus[0]), not 1"),
    ("name: t\ngpus: [{vendor: acme, count: 15, pcieRoot: 0}]\n",
     "gpus[0].pcieRoot: root 0 would hold 15 devices, at most 14 fit"),
    ("name: t\npartitioning: partitionable\ngpus: [{vendor: nova}]\n",
     "partitioning: no GPU in this shape has partition profiles"),
    ("name: t\npartitioning: sometimes\ngpus: [{vendor: acme}]\n",
     "partitioning: must be one of none, partitionable, got 'sometimes'"),
    ("name: t\nnumaNodeForm: set\ngpus: [{vendor: nova}]\n",
     "numaNodeForm: must be one of scalar, list, got 'set'"),
    ("name: Big_Node\ngpus: [{vendor: acme}]\n", "name: must be a DNS label"),
    ("name: t\n", "gpus: a shape needs at least one GPU or NIC"),
    ("name: t\ngpus: {vendor: acme}\n", "gpus: expected a list, got a mapping"),
    ("name: t\ngpus: [acme]\n", "gpus[0]: expected a mapping, got a string"),
    ("- just\n- a list\n", "shape: expected a mapping, got a list"),
    ("", "shape: the file is empty"),
    ("name: t\ngpus: [{vendor: acme\n", "invalid YAML"),
]


@pytest.mark.parametrize(("text", "message"), BAD_SHAPES, ids=[m for _, m in BAD_SHAPES])
def test_bad_shape_file_gives_one_line_error(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ShapeError) as caught:
        read_shape(path)
    text_of_error = str(caught.value)
    assert text_of_error.startswith(f"{path}: ")
    assert message in text_of_error
    assert "\n" not in text_of_error


def test_good_minimal_shape_uses_defaults():
    shape = shape_from_text(GOOD, "t.yaml")
    assert shape.sockets == 1 and shape.numa_per_socket == 1
    assert shape.partitioning == "none" and shape.numa_node_form == "scalar"
    (group,) = shape.gpus
    assert (group.vendor, group.model, group.count, group.numa, group.pcie_root) == (
        "acme", "acme-a100", 1, 0, None)


def test_vendor_may_be_given_by_driver_name():
    shape = shape_from_text("name: t\ngpus: [{vendor: gpu.nova.example.com}]\n")
    assert shape.gpus[0].vendor == "nova"


# --- vendors -----------------------------------------------------------------------------

def test_three_vendors_with_distinct_drivers():
    assert len(VENDORS) >= 3
    assert len({v.driver for v in VENDORS}) == len(VENDORS)
    assert find_vendor("acme") is ACME and find_vendor("nic.swift.example.com") is SWIFT
    assert find_vendor("nobody") is None


def test_partition_profiles_fit_their_gpu():
    a100 = ACME.gpu_model("acme-a100")
    assert [p.name for p in a100.partitions] == ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]
    assert [a100.instances(p) for p in a100.partitions] == [7, 3, 2, 1]


# --- inventory ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape", bundled_shapes())
def test_inventory_is_deterministic(shape):
    first = build_inventory(shape, "node-a")
    again = build_inventory(load_shape(shape), "node-a")
    assert first == again
    assert hash(first) == hash(again)


@pytest.mark.parametrize("shape", bundled_shapes())
def test_other_node_gets_other_uuids_and_macs_but_same_names(shape):
    a = build_inventory(shape, "node-a")
    b = build_inventory(shape, "node-b")
    assert names(a) == names(b)
    assert [d.pcie_root for d in a.devices()] == [d.pcie_root for d in b.devices()]
    uuids_a = {d.uuid for d in a.devices() if d.uuid}
    uuids_b = {d.uuid for d in b.devices() if d.uuid}
    macs_a = {d.mac for d in a.devices() if d.mac}
    macs_b = {d.mac for d in b.devices() if d.mac}
    assert uuids_a.isdisjoint(uuids_b)
    assert macs_a.isdisjoint(macs_b)


@pytest.mark.parametrize("shape", bundled_shapes())
def test_names_uuids_and_macs_are_unique_on_a_node(shape):
    inv = build_inventory(shape, "node-a")
    devices = inv.devices()
    assert len({d.name for d in devices}) == len(devices)
    uuids = [d.uuid for d in devices if d.uuid]
    macs = [d.mac for d in devices if d.mac]
    assert len(set(uuids)) == len(uuids)
    assert len(set(macs)) == len(macs)


def test_uuid_is_version_5_of_node_and_device():
    inv = build_inventory("small-1gpu", "node-a")
    gpu = inv.device("gpu0")
    assert gpu.uuid == "GPU-" + device_uuid("node-a", "gpu0")
    assert uuid.UUID(device_uuid("node-a", "gpu0")).version == 5
    assert gpu.attribute("uuid").value == gpu.uuid


def test_macs_are_locally_administered_unicast():
    inv = build_inventory("server-8gpu", "node-a")
    for device in inv.devices(SWIFT.driver):
        assert re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", device.mac)
        first = int(device.mac[:2], 16)
        assert first & 0b10 and not first & 0b01
        assert device.mac == device_mac("node-a", device.name)


def test_server_8gpu_layout():
    inv = build_inventory("server-8gpu", "node-a")
    assert inv.drivers == (ACME.driver, NOVA.driver, SWIFT.driver)
    assert names(inv, ACME.driver) == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert names(inv, NOVA.driver) == ["gpu4", "gpu5", "gpu6", "gpu7"]
    assert names(inv, SWIFT.driver) == [
        "nic0", "nic0-vf0", "nic0-vf1", "nic0-vf2", "nic0-vf3", "nic1",
        "nic2", "nic2-vf0", "nic2-vf1", "nic2-vf2", "nic2-vf3", "nic3"]
    assert [inv.device(f"gpu{i}").numa for i in range(8)] == [0] * 4 + [1] * 4
    assert [inv.device(f"nic{i}").numa for i in range(4)] == [0, 0, 1, 1]
    roots = {d.name: d.pcie_root for d in inv.devices()}
    assert roots["gpu0"] == roots["gpu1"] == roots["nic0"] == "pci0000:1a"
    assert roots["gpu2"] == roots["gpu3"] == roots["nic1"] == "pci0000:2a"
    assert roots["gpu4"] == roots["gpu5"] == roots["nic2"] == "pci0000:3a"
    assert roots["gpu6"] == roots["gpu7"] == roots["nic3"] == "pci0000:4a"
    assert [r.numa for r in inv.topology.pcie_roots] == [0, 0, 1, 1]
    assert [(n.id, n.socket) for n in inv.topology.numa_nodes] == [(0, 0), (1, 1)]
    # Each vendor counts its own GPUs from zero.
    assert [inv.device(f"gpu{i}").attribute("minor").value for i in range(4, 8)] == [0, 1, 2, 3]


def test_node_labels():
    labels = build_inventory("server-8gpu", "node-a").node_labels()
    assert labels["drakit.dev/shape"] == "server-8gpu"
    assert labels["drakit.dev/sockets"] == "2"
    assert labels["drakit.dev/numa-nodes"] == "2"
    assert labels["drakit.dev/gpus"] == "8" and labels["drakit.dev/nics"] == "4"
    assert labels["drakit.dev/driver.gpu.nova.example.com"] == "true"
    for key, value in labels.items():
        prefix, _, name = key.partition("/")
        assert prefix == "drakit.dev"
        assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", name)
        assert re.fullmatch(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?", value)


def test_attribute_names_differ_per_vendor():
    inv = build_inventory("server-8gpu", "node-a")
    acme = wire(inv.device("gpu0"))
    nova = wire(inv.device("gpu4"))
    swift = wire(inv.device("nic0"))
    assert acme["model"] == {"string": "acme-a100"}
    assert acme["driverVersion"] == {"version": "550.54.15"}
    assert acme["index"] == {"int": 0}
    assert acme["numa"] == {"int": 0}
    assert NUMA_NODE not in acme
    assert acme[PCIE_ROOT] == {"string": "pci0000:1a"}
    assert inv.device("gpu0").capacity == (("memory", "80Gi"),)

    assert nova["productName"] == {"string": "Nova X1"}
    assert nova["firmware"] == {"version": "3.2.1"}
    assert nova["minor"] == {"int": 0}
    assert nova[NUMA_NODE] == {"int": 1}
    assert "model" not in nova and "numa" not in nova
    assert inv.device("gpu4").capacity == (("vram", "48Gi"),)

    assert swift["model"] == {"string": "swift-cx100"}
    assert swift["linkSpeedGbps"] == {"int": 100}
    assert swift["interface"] == {"string": "eth1"}
    assert swift["sriov"] == {"bool": True}
    assert swift[NUMA_NODE] == {"int": 0}
    assert swift["mac"] == {"string": inv.device("nic0").mac}
    assert inv.device("nic0").capacity == (("bandwidth", "100G"),)


def test_virtual_functions():
    inv = build_inventory("server-8gpu", "node-a")
    vfs = inv.children("nic0")
    assert [vf.name for vf in vfs] == ["nic0-vf0", "nic0-vf1", "nic0-vf2", "nic0-vf3"]
    for j, vf in enumerate(vfs):
        attrs = wire(vf)
        assert vf.kind == "nic-vf" and vf.parent == "nic0"
        assert attrs["physicalFunction"] == {"string": "nic0"}
        assert attrs["sriov"] == {"bool": False}
        assert attrs["interface"] == {"string": f"eth1v{j}"}
        assert vf.pcie_root == inv.device("nic0").pcie_root
        assert vf.pci_bus_id == f"0000:1d:00.{j + 1}"
        assert vf.capacity == (("bandwidth", "25G"),)
        assert not vf.consumes
    assert "physicalFunction" not in wire(inv.device("nic1"))
    assert wire(inv.device("nic1"))["sriov"] == {"bool": False}


def test_uneven_vf_bandwidth_is_given_in_megabits():
    inv = build_inventory(shape_from_text("name: t\nnics: [{vendor: swift, vfs: 3}]\n"), "n")
    assert inv.device("nic0-vf0").capacity == (("bandwidth", "33333M"),)


def test_partitionable_gpus_share_counters():
    inv = build_inventory("acme-partitionable", "node-a")
    pool = inv.pool(ACME.driver)
    assert [c.name for c in pool.counter_sets] == ["gpu0-counters", "gpu1-counters"]
    assert pool.counter_sets[0].counters == (("compute", "7"), ("memory", "80Gi"))
    gpu0 = [d for d in pool.devices if d.name == "gpu0" or d.parent == "gpu0"]
    assert [d.name for d in gpu0] == [
        "gpu0",
        *(f"gpu0-1g10gb-{n}" for n in range(7)),
        *(f"gpu0-2g20gb-{n}" for n in range(3)),
        "gpu0-3g40gb-0", "gpu0-3g40gb-1",
        "gpu0-7g80gb-0",
    ]
    assert len(pool.devices) == 28
    whole = inv.device("gpu0")
    assert whole.kind == "gpu" and wire(whole)["type"] == {"string": "gpu"}
    assert whole.consumes[0].counters == (("compute", "7"), ("memory", "80Gi"))
    part = inv.device("gpu1-3g40gb-1")
    attrs = wire(part)
    assert part.kind == "gpu-partition" and part.parent == "gpu1"
    assert attrs["type"] == {"string": "partition"}
    assert attrs["profile"] == {"string": "3g.40gb"}
    assert attrs["parentUUID"] == {"string": inv.device("gpu1").uuid}
    assert attrs["index"] == {"int": 1}
    assert part.capacity == (("memory", "40Gi"),)
    assert part.consumes[0].counter_set == "gpu1-counters"
    assert part.consumes[0].counters == (("compute", "3"), ("memory", "40Gi"))


def test_without_partitioning_no_counters_are_used():
    inv = build_inventory("server-8gpu", "node-a")
    assert all(not d.consumes for d in inv.devices())
    assert all(not p.counter_sets for p in inv.pools)
    assert wire(inv.device("gpu0"))["type"] == {"string": "gpu"}


def test_list_form_numa_node():
    inv = build_inventory("snc-numa-list", "node-a")
    assert [(n.id, n.socket) for n in inv.topology.numa_nodes] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert wire(inv.device("gpu0"))[NUMA_NODE] == {"ints": [0, 1]}
    assert wire(inv.device("gpu1"))[NUMA_NODE] == {"ints": [2, 3]}
    assert wire(inv.device("nic0"))[NUMA_NODE] == {"ints": [1, 0]}
    assert wire(inv.device("nic1"))[NUMA_NODE] == {"ints": [3, 2]}
    assert inv.device("nic0").has_list_attributes


def test_device_without_numa_affinity_publishes_no_numa_attribute():
    shape = shape_from_text("name: t\ngpus: [{vendor: acme, numa: null}, {vendor: nova, "
                            "numa: null}]\nnics: [{vendor: swift, numa: 0}]\n")
    inv = build_inventory(shape, "n")
    assert "numa" not in wire(inv.device("gpu0"))
    assert NUMA_NODE not in wire(inv.device("gpu1"))
    # Roots of NUMA-less devices are numbered after the others.
    assert inv.device("nic0").pcie_root == "pci0000:1a"
    assert inv.device("gpu0").pcie_root == "pci0000:2a"


def test_many_roots_move_to_the_next_pci_domain():
    inv = build_inventory(shape_from_text("name: t\ngpus: [{vendor: nova, count: 30}]\n"), "n")
    roots = [r.name for r in inv.topology.pcie_roots]
    assert len(set(roots)) == 30
    assert roots[0] == "pci0000:1a" and roots[13] == "pci0000:ea" and roots[14] == "pci0001:1a"
    bus_ids = [d.pci_bus_id for d in inv.devices()]
    assert len(set(bus_ids)) == 30


def test_bad_node_name():
    with pytest.raises(ValueError, match="invalid node name 'Node_A'"):
        build_inventory("small-1gpu", "Node_A")


# --- faults ------------------------------------------------------------------------------

def test_fault_parse_and_validation():
    assert Fault.parse("gpu1=ecc:NoExecute") == Fault("gpu1", "ecc", "NoExecute")
    assert Fault.parse("nic0=link-down") == Fault("nic0", "link-down", "NoSchedule")
    with pytest.raises(ValueError, match="unknown fault kind 'melted'"):
        Fault("gpu0", "melted")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown taint effect 'PreferNoSchedule'"):
        Fault("gpu0", "ecc", "PreferNoSchedule")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected device=kind"):
        Fault.parse("gpu0")


def test_faults_become_taints_and_reach_children():
    inv = build_inventory("acme-partitionable", "node-a")
    faults = [Fault("gpu0", "ecc", "NoExecute"), Fault("gpu1-1g10gb-2", "degraded"),
              Fault("gpu0", "ecc", "NoExecute")]
    taints = device_taints(inv, faults)
    ecc = Taint(FAULT_TAINT_KEY, "ecc", "NoExecute")
    assert taints["gpu0"] == (ecc,)
    assert taints["gpu0-7g80gb-0"] == (ecc,)
    assert len([n for n in taints if n.startswith("gpu0")]) == 14
    assert taints["gpu1-1g10gb-2"] == (Taint(FAULT_TAINT_KEY, "degraded", "NoSchedule"),)
    assert "gpu1" not in taints
    assert ecc.to_wire() == {"key": "drakit.dev/fault", "value": "ecc", "effect": "NoExecute"}


def test_fault_on_unknown_device():
    inv = build_inventory("small-1gpu", "node-a")
    with pytest.raises(ValueError, match="fault on unknown device 'gpu9' of node node-a"):
        device_taints(inv, [Fault("gpu9", "lost")])
