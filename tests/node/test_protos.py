"""The .proto files: wire names as the kubelet expects, and committed stubs up to date."""

from __future__ import annotations

import pytest

from drakit.fake_driver._gen import (dra_health_v1_pb2, dra_health_v1alpha1_pb2, dra_v1_pb2,
                              dra_v1beta1_pb2, pluginregistration_v1_pb2)


def methods(module):
    return sorted(f"/{s.full_name}/{m.name}" for s in module.DESCRIPTOR.services_by_name.values()
                  for m in s.methods)


def test_method_paths_match_the_kubelet():
    assert methods(pluginregistration_v1_pb2) == [
        "/pluginregistration.Registration/GetInfo",
        "/pluginregistration.Registration/NotifyRegistrationStatus"]
    assert methods(dra_v1_pb2) == [
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"]
    assert methods(dra_v1beta1_pb2) == [
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources"]
    assert methods(dra_health_v1_pb2) == ["/v1.DRAResourceHealth/NodeWatchResources"]
    assert methods(dra_health_v1alpha1_pb2) == ["/v1alpha1.DRAResourceHealth/NodeWatchResources"]


def fields(message):
    return [(f.name, f.number, f.type) for f in message.DESCRIPTOR.fields]


def test_field_numbers_and_types():
    assert [(n, i) for n, i, *_ in fields(dra_v1_pb2.Device)] == [
        ("request_names", 1), ("pool_name", 2), ("device_name", 3), ("cdi_device_ids", 4),
        ("share_id", 5)]
    assert dra_v1_pb2.Device.DESCRIPTOR.fields_by_name["share_id"].has_presence
    assert "share_id" not in dra_v1beta1_pb2.Device.DESCRIPTOR.fields_by_name
    assert [(n, i) for n, i, *_ in fields(dra_v1_pb2.Claim)] == [("namespace", 1), ("uid", 2), ("name", 3)]
    assert [(n, i) for n, i, *_ in fields(pluginregistration_v1_pb2.PluginInfo)] == [
        ("type", 1), ("name", 2), ("endpoint", 3), ("supported_versions", 4)]
    assert [(n, i) for n, i, *_ in fields(dra_health_v1_pb2.DeviceHealth)] == [
        ("device", 1), ("health", 2), ("last_updated_time", 3),
        ("health_check_timeout_seconds", 4), ("message", 5)]
    assert dra_health_v1_pb2.HealthStatus.Name(2) == "UNHEALTHY"


def test_v1_and_v1beta1_are_wire_compatible_without_share_id():
    v1 = dra_v1_pb2.NodePrepareResourcesResponse()
    dev = v1.claims["uid-1"].devices.add(request_names=["r"], pool_name="p", device_name="d",
                                         cdi_device_ids=["a/b=c"])
    beta = dra_v1beta1_pb2.NodePrepareResourcesResponse.FromString(v1.SerializeToString())
    assert beta.claims["uid-1"].devices[0].cdi_device_ids == ["a/b=c"]
    dev.share_id = ""
    assert dra_v1_pb2.NodePrepareResourcesResponse.FromString(
        v1.SerializeToString()).claims["uid-1"].devices[0].HasField("share_id")


def test_empty_unprepare_entry_is_serialised():
    response = dra_v1_pb2.NodeUnprepareResourcesResponse()
    response.claims["uid-1"]  # touching the map creates the entry
    again = dra_v1_pb2.NodeUnprepareResourcesResponse.FromString(response.SerializeToString())
    assert list(again.claims) == ["uid-1"] and again.claims["uid-1"].error == ""


def test_regenerating_gives_the_committed_files():
    pytest.importorskip("grpc_tools", reason="grpcio-tools (test extra) is needed to regenerate")
    from drakit.fake_driver.protos.regenerate import differences, generated_names
    from drakit.fake_driver.protos.regenerate import PACKAGE_DIR
    assert sorted(p.name for p in PACKAGE_DIR.iterdir() if p.suffix in (".py", ".pyi")) == generated_names()
    assert differences() == []


def test_the_stubs_accept_grpcio_from_the_lower_bound_of_the_range():
    import re
    import tomllib
    from pathlib import Path

    import grpc

    from drakit.fake_driver import _gen
    from drakit.fake_driver.protos.regenerate import GRPC_LOWEST
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    spec = next(d for d in pyproject["project"]["dependencies"] if d.startswith("grpcio"))
    lower = re.search(r">=\s*([0-9.]+)", spec)
    assert lower and "==" not in spec, spec  # a range, not a pin
    assert tuple(map(int, lower.group(1).split("."))) == tuple(map(int, GRPC_LOWEST.split(".")))[:len(lower.group(1).split("."))]
    stubs = sorted(Path(_gen.__file__).parent.glob("*_pb2_grpc.py"))
    assert stubs and all(f"GRPC_GENERATED_VERSION = '{GRPC_LOWEST}'" in s.read_text() for s in stubs)
    # the installed grpcio is inside the range (CI: the newest pip picks, and GRPC_LOWEST in a second venv)
    installed = tuple(int(x) for x in grpc.__version__.split(".")[:2])
    assert installed >= tuple(int(x) for x in GRPC_LOWEST.split(".")[:2]), grpc.__version__
