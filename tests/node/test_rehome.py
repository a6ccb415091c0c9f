"""A running plugin takes its node's new hardware on its running sockets (FakePlugin.rehome):
the registration stays, the health stream moves to the new devices without a reconnect, the
DRA service prepares the new devices only, and the driver starts from nothing."""

from __future__ import annotations

import grpc
import pytest

from drakit.fake_driver._gen import dra_health_v1_pb2 as h1, dra_health_v1_pb2_grpc as h1g, dra_v1_pb2
from drakit.fake_driver.plugin import FakePlugin, MemoryClaimSource
from drakit.fake_driver.sampleclaims import sample_claims
from drakit.fake_hw.faults import Fault
from drakit.fake_hw.inventory import build_inventory

from .conftest import GPU, NODE, by_name, claim_msg, config_for, dra_stub


def test_rehome_keeps_the_sockets_and_serves_the_new_devices(short_tmp):
    server = build_inventory("server-8gpu", NODE)
    small = build_inventory("small-1gpu", NODE)
    before = by_name(sample_claims(server, GPU, namespace="before"))
    after = by_name(sample_claims(small, GPU, namespace="after"))
    plugin = FakePlugin(config_for(short_tmp), server, MemoryClaimSource([*before.values(), *after.values()]),
                        resend_seconds=0.2)
    plugin.start()
    try:
        reg_inode = plugin.registration_socket.stat().st_ino
        dra_inode = plugin.dra_socket.stat().st_ino
        channel, stub = dra_stub(plugin.dra_socket)
        with channel, grpc.insecure_channel(f"unix://{plugin.dra_socket}") as hchannel:
            stream = h1g.DRAResourceHealthStub(hchannel).NodeWatchResources(h1.NodeWatchResourcesRequest(), timeout=20)
            assert len(next(stream).devices) == 4
            claim = before["concurrent-3"]  # gpu3: the server's, not the small node's
            ok = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=[claim_msg(claim)]))
            assert not ok.claims[claim["metadata"]["uid"]].error
            plugin.inject_fault(Fault("gpu1", "ecc", "NoExecute"))
            with pytest.raises(RuntimeError, match="still has claims prepared"):
                plugin.rehome(config_for(short_tmp), small)
            stub.NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(claims=[claim_msg(claim)]))
            assert plugin.driver.calls

            plugin.rehome(config_for(short_tmp, device_metadata=True), small)

            # the same sockets (the kubelet's registration stays), the same health stream
            assert plugin.registration_socket.stat().st_ino == reg_inode
            assert plugin.dra_socket.stat().st_ino == dra_inode
            message = next(stream)
            while len(message.devices) != 1:  # a resend of the old list may come first
                message = next(stream)
            assert [d.device.device_name for d in message.devices] == ["gpu0"]
            assert all(d.health == h1.HEALTHY for d in message.devices), "faults do not carry over"
            stream.cancel()
            # nothing of the last hardware: no calls, no faults, new devices only
            assert not plugin.driver.calls and plugin.health.faults == ()
            assert plugin.config.device_metadata and plugin.driver.prepared() == {}
            again = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=[claim_msg(claim)]))
            assert again.claims[claim["metadata"]["uid"]].error, "gpu3 is gone with the old hardware"
            single = after["single"]
            fresh = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=[claim_msg(single)]))
            assert not fresh.claims[single["metadata"]["uid"]].error
            assert [d.device_name for d in fresh.claims[single["metadata"]["uid"]].devices] == ["gpu0"]
            assert [s["spec"]["devices"][0]["name"] for s in plugin.slices.slices] == ["gpu0"]
    finally:
        plugin.stop(grace=0)


def test_rehome_refuses_another_driver_or_other_sockets(short_tmp):
    server = build_inventory("server-8gpu", NODE)
    plugin = FakePlugin(config_for(short_tmp), server, MemoryClaimSource([]))
    plugin.start()
    try:
        with pytest.raises(ValueError, match="another driver or other sockets"):
            plugin.rehome(config_for(short_tmp / "elsewhere"), server)
        with pytest.raises(ValueError, match="another driver or other sockets"):
            plugin.rehome(config_for(short_tmp, "nic.swift.example.com"), server)
    finally:
        plugin.stop(grace=0)
