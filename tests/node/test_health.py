"""Injected faults: taints in the published slices and Unhealthy on the health stream."""

from __future__ import annotations

import time

import grpc

from drakit.fake_driver._gen import (dra_health_v1_pb2 as h1, dra_health_v1_pb2_grpc as h1g,
                              dra_health_v1alpha1_pb2 as ha, dra_health_v1alpha1_pb2_grpc as hag)
from drakit.fake_driver.plugin.publisher import CallbackSlicePublisher
from drakit.fake_hw.faults import FAULT_TAINT_KEY, Fault
from drakit.fake_hw.inventory import build_inventory

from .conftest import GPU, NODE


def unhealthy(message):
    return {d.device.device_name: d.message for d in message.devices if d.health == h1.UNHEALTHY}


def test_fault_shows_on_the_stream_and_as_a_taint(start_plugin):
    published = []
    plugin, _ = start_plugin(GPU, [], publisher=CallbackSlicePublisher(
        lambda driver, slices: published.append(slices)), resend_seconds=0.2)
    assert published[-1][0]["spec"]["pool"]["generation"] == 1
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    with channel:
        stream = h1g.DRAResourceHealthStub(channel).NodeWatchResources(
            h1.NodeWatchResourcesRequest(), timeout=10)
        first = next(stream)
        assert len(first.devices) == 4 and not unhealthy(first)
        assert all(d.device.pool_name == NODE and d.health_check_timeout_seconds == 30
                   for d in first.devices)
        assert abs(first.devices[0].last_updated_time - time.time()) < 5
        plugin.inject_fault(Fault("gpu1", "ecc", "NoExecute"))
        message = next(stream)
        assert unhealthy(message) == {"gpu1": f"fault ecc: taint {FAULT_TAINT_KEY}=ecc:NoExecute"}
        again = next(stream)  # periodic resend without a change
        assert unhealthy(again) == unhealthy(message)
        plugin.clear_faults()
        assert not unhealthy(next(stream))
        stream.cancel()
    tainted = [(s["spec"]["pool"]["generation"], d["name"], d.get("taints"))
               for s in published[1] for d in s["spec"]["devices"] if d.get("taints")]
    assert tainted == [(2, "gpu1", [{"key": FAULT_TAINT_KEY, "value": "ecc", "effect": "NoExecute"}])]
    assert published[-1][0]["spec"]["pool"]["generation"] == 3


def test_fault_on_a_gpu_makes_its_partitions_unhealthy_on_v1alpha1(short_tmp):
    from drakit.fake_driver.plugin import FakePlugin, MemoryClaimSource
    from .conftest import config_for
    inventory = build_inventory("acme-partitionable", NODE)
    plugin = FakePlugin(config_for(short_tmp), inventory, MemoryClaimSource(), resend_seconds=0.2)
    plugin.start()
    try:
        plugin.inject_fault(Fault("gpu0", "thermal"))
        with grpc.insecure_channel(f"unix://{plugin.dra_socket}") as channel:
            stream = hag.DRAResourceHealthStub(channel).NodeWatchResources(
                ha.NodeWatchResourcesRequest(), timeout=10)
            bad = {d.device.device_name for d in next(stream).devices if d.health == ha.UNHEALTHY}
            stream.cancel()
        assert "gpu0" in bad and {c.name for c in inventory.children("gpu0")} <= bad
        assert not any(name.startswith("gpu1") for name in bad)
    finally:
        plugin.stop(grace=0)


def test_faults_file_is_polled(start_plugin, short_tmp):
    faults = short_tmp / "faults"
    faults.write_text("# none yet\n")
    plugin, _ = start_plugin(GPU, [], faults_file=faults, poll_seconds=0.05)
    assert plugin.health.faults == ()
    faults.write_text("gpu2=lost:NoExecute\n")
    deadline = time.monotonic() + 5
    while not plugin.health.faults and time.monotonic() < deadline:
        time.sleep(0.05)
    assert plugin.health.faults == (Fault("gpu2", "lost", "NoExecute"),)
    assert any(d.get("taints") for s in plugin.slices.slices for d in s["spec"]["devices"])


def test_stop_ends_open_streams_quickly(start_plugin):
    plugin, _ = start_plugin(GPU, [], resend_seconds=30)
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    stream = h1g.DRAResourceHealthStub(channel).NodeWatchResources(h1.NodeWatchResourcesRequest())
    next(stream)
    t0 = time.monotonic()
    plugin.stop(grace=1)
    assert time.monotonic() - t0 < 3
    channel.close()
