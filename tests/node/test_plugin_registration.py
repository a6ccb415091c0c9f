"""The plugin's registration socket and socket hygiene, over real gRPC."""

from __future__ import annotations

import os
import stat

import grpc
import pytest

from drakit.fake_driver._gen import pluginregistration_v1_pb2 as rpb, pluginregistration_v1_pb2_grpc as rpg
from drakit.fake_driver.plugin import FakePlugin, MemoryClaimSource
from drakit.fake_driver.plugin.files import PathTooLong

from .conftest import GPU, config_for


def registration(plugin):
    channel = grpc.insecure_channel(f"unix://{plugin.registration_socket}")
    return channel, rpg.RegistrationStub(channel)


def test_get_info_advertises_v1_first(start_plugin):
    plugin, _ = start_plugin()
    channel, stub = registration(plugin)
    with channel:
        info = stub.GetInfo(rpb.InfoRequest(), timeout=1)
    assert info.type == "DRAPlugin"
    assert info.name == GPU
    assert info.endpoint == str(plugin.dra_socket) and os.path.isabs(info.endpoint)
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin",
                                             "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]
    assert plugin.registration_socket.name == f"{GPU}-reg.sock"
    assert plugin.dra_socket == plugin.config.plugin_dir / GPU / "dra.sock"


def test_health_is_not_advertised_when_off(start_plugin):
    plugin, _ = start_plugin(health=False)
    channel, stub = registration(plugin)
    with channel:
        info = stub.GetInfo(rpb.InfoRequest(), timeout=1)
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]


def test_notify_status_is_recorded_and_rejection_is_an_error(start_plugin):
    plugin, _ = start_plugin()
    channel, stub = registration(plugin)
    with channel:
        stub.NotifyRegistrationStatus(rpb.RegistrationStatus(plugin_registered=True), timeout=5)
        assert plugin.server.registered.is_set()
        with pytest.raises(grpc.RpcError) as err:
            stub.NotifyRegistrationStatus(
                rpb.RegistrationStatus(plugin_registered=False, error="nope"), timeout=5)
    assert "failed registration process: nope" in err.value.details()
    assert [e.registered for e in plugin.server.registrations] == [True, False]


def test_socket_and_folder_modes(start_plugin):
    plugin, _ = start_plugin()
    for sock in (plugin.registration_socket, plugin.dra_socket):
        st = os.stat(sock)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(plugin.dra_socket.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(plugin.registration_socket.parent).st_mode) == 0o700
    assert not [p for p in plugin.dra_socket.parent.iterdir() if p.name.startswith(".reg")]


def test_stop_removes_sockets_registration_first(start_plugin):
    plugin, _ = start_plugin()
    plugin.stop(grace=0)
    assert not plugin.registration_socket.exists() and not plugin.dra_socket.exists()


def test_stale_socket_is_replaced_but_a_regular_file_is_not(short_tmp, inventory):
    config = config_for(short_tmp)
    first = FakePlugin(config, inventory, MemoryClaimSource())
    first.start()
    first.server._reg_server.stop(0).wait()  # a crash: sockets stay behind
    first.server._dra_server.stop(0).wait()
    assert first.registration_socket.exists()
    second = FakePlugin(config, inventory, MemoryClaimSource())
    second.start()
    try:
        channel, stub = registration(second)
        with channel:
            assert stub.GetInfo(rpb.InfoRequest(), timeout=1).name == GPU
    finally:
        second.stop(grace=0)
    config.registration_socket.write_text("not a socket")
    third = FakePlugin(config, inventory, MemoryClaimSource())
    with pytest.raises(FileExistsError, match="not a socket"):
        third.start()
    third.stop(grace=0)


def test_socket_path_too_long_is_a_clear_error(short_tmp, inventory):
    deep = short_tmp / ("x" * 90)
    with pytest.raises(PathTooLong, match="at most 107"):
        FakePlugin(config_for(deep), inventory, MemoryClaimSource())
