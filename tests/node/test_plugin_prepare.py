"""NodePrepareResources / NodeUnprepareResources against the fake plugin, over real gRPC."""

from __future__ import annotations

import copy
import json
import os
import stat
import threading

import pytest

from drakit.conformance.nodecheck import cdi as cdicheck
from drakit.conformance.nodecheck import metadata as mdcheck
from drakit.fake_driver.plugin.checkpoint import Checkpoint
from drakit.fake_driver._gen import dra_v1_pb2 as pb, dra_v1beta1_pb2 as pbb, dra_v1beta1_pb2_grpc as pbbg
from drakit.fake_driver.sampleclaims import allocated_claim, sample_claims

from .conftest import GPU, NIC, NODE, by_name, claim_msg, dra_stub

UID = "3f9a1c2e-0000-4000-8000-000000000001"


def prepare(stub, *claims, pb2=pb):
    return stub.NodePrepareResources(
        pb2.NodePrepareResourcesRequest(claims=[claim_msg(c, pb2) for c in claims]), timeout=10)


def unprepare(stub, *claims, pb2=pb):
    return stub.NodeUnprepareResources(
        pb2.NodeUnprepareResourcesRequest(claims=[claim_msg(c, pb2) for c in claims]), timeout=10)


def devices(entry):
    return [(list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids))
            for d in entry.devices]


@pytest.fixture
def gpu(start_plugin, inventory):
    claims = sample_claims(inventory, GPU)
    plugin, source = start_plugin(GPU, claims)
    channel, stub = dra_stub(plugin.dra_socket)
    yield plugin, source, stub, by_name(claims)
    channel.close()


def test_prepare_returns_cdi_ids_for_exactly_the_allocated_devices(gpu):
    plugin, _, stub, claims = gpu
    multi = claims["multi"]
    uid = multi["metadata"]["uid"]
    reply = prepare(stub, multi)
    assert list(reply.claims) == [uid]
    assert devices(reply.claims[uid]) == [
        (["first"], NODE, "gpu0", [f"k8s.{GPU}/gpu={uid}-gpu0"]),
        (["second"], NODE, "gpu1", [f"k8s.{GPU}/gpu={uid}-gpu1"]),
    ]
    for d in reply.claims[uid].devices:
        assert not d.HasField("share_id")
        for cdi_id in d.cdi_device_ids:
            cdicheck.parse_device_id(cdi_id)


def test_prepare_and_unprepare_are_idempotent(gpu):
    plugin, _, stub, claims = gpu
    single = claims["single"]
    uid = single["metadata"]["uid"]
    first = prepare(stub, single)
    spec = plugin.config.cdi_dir / f"k8s.{GPU}-gpu_{uid}.json"
    spec.unlink()  # e.g. /var/run/cdi was wiped: a second prepare puts it back
    second = prepare(stub, single)
    assert devices(first.claims[uid]) == devices(second.claims[uid])
    assert spec.exists()
    for _ in range(2):
        reply = unprepare(stub, single)
        assert list(reply.claims) == [uid] and reply.claims[uid].error == ""
    assert not spec.exists()
    assert uid not in plugin.driver.prepared()


def test_unprepare_of_unknown_claims_succeeds(gpu):
    _, _, stub, _ = gpu
    ghost = {"metadata": {"namespace": "x", "name": "ghost", "uid": "0000-ghost"}}
    reply = unprepare(stub, ghost, ghost)
    assert list(reply.claims) == ["0000-ghost"] and reply.claims["0000-ghost"].error == ""


def test_bad_claims_fail_alone(gpu, inventory):
    plugin, source, stub, claims = gpu
    replaced = copy.deepcopy(claims["single"])
    replaced["metadata"]["uid"] = "new-uid"
    unallocated = allocated_claim("pending", "node-check", "uid-pending", NODE, [])
    del unallocated["status"]
    source.put(unallocated)
    reply = prepare(stub, claims["single"], claims["unknown-device"], unallocated,
                    {"metadata": {"namespace": "node-check", "name": "nope", "uid": "uid-nope"}})
    single_uid = claims["single"]["metadata"]["uid"]
    unknown_uid = claims["unknown-device"]["metadata"]["uid"]
    assert set(reply.claims) == {single_uid, unknown_uid, "uid-pending", "uid-nope"}
    assert reply.claims[single_uid].error == "" and len(reply.claims[single_uid].devices) == 1
    assert "no-such-device-0 is not a device of driver" in reply.claims[unknown_uid].error
    assert "is not allocated" in reply.claims["uid-pending"].error
    assert "not found" in reply.claims["uid-nope"].error
    source.put(replaced)  # same name, new UID: the kubelet's UID is stale
    stale = {"metadata": {"namespace": "node-check", "name": "single", "uid": "old-uid"}}
    assert "was replaced" in prepare(stub, stale).claims["old-uid"].error


def test_a_device_in_use_by_another_claim_is_refused(gpu):
    _, _, stub, claims = gpu
    first = prepare(stub, claims["single"])
    assert first.claims[claims["single"]["metadata"]["uid"]].error == ""
    second = prepare(stub, claims["concurrent-0"])  # also gpu0
    assert "already prepared for ResourceClaim node-check/single" in \
        second.claims[claims["concurrent-0"]["metadata"]["uid"]].error
    unprepare(stub, claims["single"])
    third = prepare(stub, claims["concurrent-0"])
    assert third.claims[claims["concurrent-0"]["metadata"]["uid"]].error == ""


def test_admin_access_and_share_ids_may_share_a_device(start_plugin):
    claims = [allocated_claim(f"c{i}", "ns", f"uid-{i}", NODE,
                              [{"request": "r", "driver": GPU, "pool": NODE, "device": "gpu0",
                                "shareID": f"share-{i}"}]) for i in range(2)]
    claims.append(allocated_claim("admin", "ns", "uid-admin", NODE,
                                  [{"request": "r", "driver": GPU, "pool": NODE, "device": "gpu0",
                                    "adminAccess": True}]))
    plugin, _ = start_plugin(GPU, claims)
    channel, stub = dra_stub(plugin.dra_socket)
    with channel:
        reply = prepare(stub, *claims)
        assert all(e.error == "" for e in reply.claims.values())
        assert reply.claims["uid-1"].devices[0].share_id == "share-1"
        beta = pbbg.DRAPluginStub(channel).NodePrepareResources(
            pbb.NodePrepareResourcesRequest(claims=[claim_msg(claims[0], pbb)]), timeout=5)
        assert beta.claims["uid-0"].devices[0].cdi_device_ids == \
            reply.claims["uid-0"].devices[0].cdi_device_ids


def test_concurrent_prepares_and_unprepares(start_plugin, inventory):
    nics = [d.name for d in inventory.devices(NIC)]
    claims = [allocated_claim(f"c{i}", "ns", f"uid-{i:02d}", NODE,
                              [{"request": "nic", "driver": NIC, "pool": NODE, "device": name}])
              for i, name in enumerate(nics)]
    plugin, _ = start_plugin(NIC, claims)
    errors: list[str] = []
    barrier = threading.Barrier(len(claims) * 2)

    def worker(claim):
        channel, stub = dra_stub(plugin.dra_socket)
        with channel:
            barrier.wait()
            for _ in range(3):  # the same claim concurrently too
                reply = prepare(stub, claim)
                errors.extend(e.error for e in reply.claims.values() if e.error)

    threads = [threading.Thread(target=worker, args=(c,)) for c in claims for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(plugin.driver.prepared()) == len(claims)
    # what a restarted driver would read back (snapshot plus journal)
    checkpoint = Checkpoint(plugin.config.checkpoint_path)
    assert sorted(checkpoint.load()) == sorted(c["metadata"]["uid"] for c in claims)
    assert checkpoint.interrupted() == {}
    channel, stub = dra_stub(plugin.dra_socket)
    with channel:
        threads = [threading.Thread(target=unprepare, args=(stub, c)) for c in claims]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert plugin.driver.prepared() == {}
    assert list(plugin.config.cdi_dir.iterdir()) == []


def test_cdi_spec_content_and_mode(gpu):
    plugin, _, stub, claims = gpu
    multi = claims["multi"]
    uid = multi["metadata"]["uid"]
    prepare(stub, multi)
    path = plugin.config.cdi_dir / f"k8s.{GPU}-gpu_{uid}.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    spec = json.loads(path.read_text())
    assert cdicheck.check_spec(spec)[0] == []
    assert spec["cdiVersion"] == "1.1.0" and spec["kind"] == f"k8s.{GPU}/gpu"
    assert [d["name"] for d in spec["devices"]] == [f"{uid}-gpu0", f"{uid}-gpu1"]
    env = spec["devices"][0]["containerEdits"]["env"]
    assert "DRAKIT_GPU0_DEVICE=gpu0" in env and any(e.startswith("DRAKIT_GPU0_UUID=GPU-") for e in env)
    # the text pre-rendered per device is exactly the spec built from the devices, byte for byte
    from drakit.fake_driver.plugin import cdi
    devices = [plugin.driver.devices["gpu0"], plugin.driver.devices["gpu1"]]
    assert path.read_text() == cdi.spec_text(cdi.claim_spec(GPU, "gpu", uid, devices))
    index = cdicheck.SpecIndex.load([plugin.config.cdi_dir])
    assert sorted(index.devices) == sorted(f"k8s.{GPU}/gpu={uid}-{d}" for d in ("gpu0", "gpu1"))
    assert not [p for p in plugin.config.cdi_dir.iterdir() if p.name.startswith(".")]


def test_device_metadata_files(start_plugin, inventory):
    claims = sample_claims(inventory, NIC)
    template = allocated_claim("pod-abc-net", "ns1", UID, NODE,
                               [{"request": "net/fast", "driver": NIC, "pool": NODE, "device": "nic0-vf1"}],
                               {"resource.kubernetes.io/pod-claim-name": "net"})
    plugin, _ = start_plugin(NIC, claims + [template], device_metadata=True,
                             metadata_versions=("v1beta1", "v1alpha1"))
    channel, stub = dra_stub(plugin.dra_socket)
    with channel:
        reply = prepare(stub, template)
        ids = list(reply.claims[UID].devices[0].cdi_device_ids)
        assert ids == [f"k8s.{NIC}/nic={UID}-nic0-vf1", f"{NIC}/metadata={UID}_net"]
        spec_path = plugin.config.cdi_dir / f"{NIC}_metadata_{UID}_net.json"
        spec = json.loads(spec_path.read_text())
        assert cdicheck.check_spec(spec)[0] == []
        mount = spec["devices"][0]["containerEdits"]["mounts"][0]
        assert mount["containerPath"] == ("/var/run/kubernetes.io/dra-device-attributes/"
                                          f"resourceclaimtemplates/net/net/{NIC}-metadata.json")
        assert mount["options"] == ["ro", "bind"]
        host = plugin.config.data_dir / "dra-device-metadata" / "ns1_pod-abc-net" / "net" / "metadata.json"
        assert mount["hostPath"] == str(host)
        assert stat.S_IMODE(os.stat(host).st_mode) == 0o644
        assert stat.S_IMODE(os.stat(host.parent).st_mode) == 0o755
        objects = mdcheck.parse_stream(host.read_text())
        assert [o["apiVersion"] for o in objects] == ["metadata.resource.k8s.io/v1beta1",
                                                     "metadata.resource.k8s.io/v1alpha1"]
        obj = objects[0]
        assert obj["metadata"] == {"name": "pod-abc-net", "namespace": "ns1", "uid": UID, "generation": 1}
        assert obj["podClaimName"] == "net"
        assert obj["requests"][0]["name"] == "net/fast"
        device = obj["requests"][0]["devices"][0]
        assert (device["driver"], device["pool"], device["name"]) == (NIC, NODE, "nic0-vf1")
        assert device["attributes"]["physicalFunction"] == {"string": "nic0"}
        assert device["networkData"]["hardwareAddress"] == inventory.device("nic0-vf1").mac
        assert mdcheck.check_stream(host.read_text(), claim=template, driver=NIC, request="net",
                                    expected=[(NODE, "nic0-vf1")]) == []
        unprepare(stub, template)
        assert not spec_path.exists() and not host.parent.parent.exists()


def test_nic_status_is_written_to_the_claim(start_plugin, inventory):
    claim = allocated_claim("net", "ns", "uid-net", NODE,
                            [{"request": "a", "driver": NIC, "pool": NODE, "device": "nic1"},
                             {"request": "b", "driver": NIC, "pool": NODE, "device": "nic0-vf0"}])
    plugin, source = start_plugin(NIC, [claim])
    channel, stub = dra_stub(plugin.dra_socket)
    with channel:
        assert prepare(stub, claim).claims["uid-net"].error == ""
    status = source.get_claim("ns", "net")["status"]["devices"]
    assert [(e["device"], e["networkData"]["interfaceName"]) for e in status] == [
        ("nic1", "net1"), ("nic0-vf0", "net2")]
    assert status[1]["networkData"]["hardwareAddress"] == inventory.device("nic0-vf0").mac


def test_planted_unprepare_fails_fails_the_first_unprepare_of_a_claim_only(start_plugin, inventory, monkeypatch, tmp_path):
    monkeypatch.setenv("DRAKIT_FAKE_DRIVER_PLANT", "unprepare-fails")
    monkeypatch.setenv("DRAKIT_CRASH_DIR", str(tmp_path / "crashes"))
    claims = sample_claims(inventory, GPU)
    plugin, _ = start_plugin(GPU, claims)
    channel, stub = dra_stub(plugin.dra_socket)
    single = by_name(claims)["single"]
    uid = single["metadata"]["uid"]
    prepare(stub, single)
    first = unprepare(stub, single)
    assert "planted fault unprepare-fails" in first.claims[uid].error and uid in plugin.driver.prepared()
    second = unprepare(stub, single)  # the kubelet's retry
    assert second.claims[uid].error == "" and uid not in plugin.driver.prepared()
    channel.close()
    assert not list((tmp_path / "crashes").glob("*")), "a fault planted on purpose is no drakit bug: no crash file"
