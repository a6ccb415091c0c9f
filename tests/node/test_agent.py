"""NodeAgent end to end with the fake plugins: registration, prepare/unprepare, health."""

from __future__ import annotations

import copy
import threading
import time
from concurrent import futures

import grpc
import pytest

from drakit.clusters.nodeagent import (LocalNode, NodeAgent, PluginInfo, RegistrationError,
                                container_cdi_devices, validate_info)
from drakit.fake_driver._gen import pluginregistration_v1_pb2 as rpb, pluginregistration_v1_pb2_grpc as rpg
from drakit.fake_driver.sampleclaims import allocated_claim
from drakit.fake_hw.faults import Fault

from .conftest import GPU, NIC, NODE

POD, POD2 = "pod-uid-1", "pod-uid-2"


def reserved(claim, *pods):
    claim = copy.deepcopy(claim)
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": p, "uid": p} for p in pods]
    return claim


def claim(name, *results, uid=None):
    return allocated_claim(name, "ns", uid or f"uid-{name}", NODE,
                           [{"request": r, "driver": drv, "pool": NODE, "device": dev}
                            for r, drv, dev in results])


@pytest.mark.parametrize("info, message", [
    (PluginInfo("CSIPlugin", GPU, "/x.sock", ("v1.DRAPlugin",)), "no handler registered"),
    (PluginInfo("DRAPlugin", "Bad_Name", "/x.sock", ("v1.DRAPlugin",)), "invalid DRA driver name"),
    (PluginInfo("DRAPlugin", GPU, "rel.sock", ("v1.DRAPlugin",)), "not an absolute path"),
    (PluginInfo("DRAPlugin", GPU, "/x.sock", ("v1alpha4.DRAPlugin",)),
     "none of services supported by the plugin (v1alpha4.DRAPlugin) are supported by the kubelet"),
])
def test_validation_rejects(info, message):
    with pytest.raises(RegistrationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_info(info, "/reg.sock")


def test_validation_picks_versions():
    reg = validate_info(PluginInfo("DRAPlugin", GPU, "", ("v1beta1.DRAPlugin", "v1.DRAPlugin",
                                                          "v1alpha1.DRAResourceHealth",
                                                          "v1.DRAResourceHealth")), "/reg.sock")
    assert reg.service == "v1beta1.DRAPlugin"  # the plugin's order decides
    assert reg.health_service == "v1.DRAResourceHealth"
    assert reg.endpoint == "/reg.sock"  # empty endpoint: the registration socket


def test_agent_registers_and_prepares_across_two_drivers(start_plugin, short_tmp):
    shared = reserved(claim("shared", ("gpu", GPU, "gpu0"), ("net", NIC, "nic0-vf0")), POD, POD2)
    gpu_plugin, _ = start_plugin(GPU, [shared])
    nic_plugin, nic_source = start_plugin(NIC, [shared])
    with NodeAgent(short_tmp / "registry", NODE, state_dir=short_tmp / "agent") as agent:
        assert agent.wait_for_driver(GPU) and agent.wait_for_driver(NIC)
        drivers = agent.drivers()
        assert drivers[GPU].service == "v1.DRAPlugin"
        assert drivers[GPU].health_service == "v1.DRAResourceHealth"
        assert drivers[GPU].endpoint == str(gpu_plugin.dra_socket)
        assert gpu_plugin.server.registered.wait(2)
        result = agent.prepare(POD, [shared])
        assert result.ok, result.error
        got = result.claim("shared")
        assert [(d.driver, d.device) for d in got.devices] == [(GPU, "gpu0"), (NIC, "nic0-vf0")]
        assert got.cdi_ids("gpu") == [f"k8s.{GPU}/gpu=uid-shared-gpu0"]
        pod = {"spec": {"resourceClaims": [{"name": "c", "resourceClaimName": "shared"}],
                        "containers": [{"name": "a", "resources": {"claims": [{"name": "c", "request": "net"}]}},
                                       {"name": "b", "resources": {"claims": [{"name": "c"}]}},
                                       {"name": "z"}]}}
        assert container_cdi_devices(pod, result) == {
            "a": [f"k8s.{NIC}/nic=uid-shared-nic0-vf0"],
            "b": [f"k8s.{GPU}/gpu=uid-shared-gpu0", f"k8s.{NIC}/nic=uid-shared-nic0-vf0"],
            "z": []}
        # a second pod sharing the claim: no new NodePrepareResources (the plugin's state is proof)
        gpu_plugin.driver._prepared.clear()
        assert agent.prepare(POD2, [shared]).ok
        assert gpu_plugin.driver.prepared() == {}
        assert agent.unprepare(POD).ok  # POD2 still uses it: nothing unprepared
        assert "uid-shared" in nic_plugin.driver.prepared()
        assert agent.unprepare(POD2).ok
        assert nic_plugin.driver.prepared() == {}
        assert agent.claim_infos() == {}
        assert nic_source.get_claim("ns", "shared")["status"]["devices"][0]["device"] == "nic0-vf0"


def test_agent_refuses_what_the_kubelet_refuses(start_plugin, short_tmp):
    c = claim("c", ("gpu", GPU, "gpu1"))
    bad = reserved(claim("bad", ("gpu", GPU, "gpu7")), POD)
    start_plugin(GPU, [c, bad])
    with NodeAgent(short_tmp / "registry", NODE, driver_wait=0.5) as agent:
        assert "is not allowed to use ResourceClaim ns/c" in agent.prepare(POD, [c]).error
        unallocated = copy.deepcopy(reserved(c, POD))
        del unallocated["status"]["allocation"]
        assert "is not allocated" in agent.prepare(POD, [unallocated]).error
        other = reserved(claim("o", ("x", "other.example.com", "d0")), POD)
        assert agent.prepare(POD, [other]).error == "DRA driver other.example.com is not registered"
        result = agent.prepare(POD, [bad])
        assert result.error.startswith("NodePrepareResources failed for ResourceClaim bad: ")
        assert "gpu7 is not a device" in result.claim("bad").error
        clash = reserved(claim("bad", ("gpu", GPU, "gpu1"), uid="uid-bad-2"), POD2)
        assert "old ResourceClaim with same name bad" in agent.prepare(POD2, [clash]).error
        assert agent.unprepare(POD).ok


def test_skip_node_operations(start_plugin, short_tmp):
    skipping = reserved(claim("s", ("gpu", GPU, "gpu3")), POD)
    skipping["status"]["allocation"]["devices"]["results"][0]["skipNodeOperations"] = ["*"]
    with NodeAgent(short_tmp / "registry", NODE, driver_wait=0.2) as agent:
        assert "DRAOptionalNodeOperations feature gate is disabled" in agent.prepare(POD, [skipping]).error
    with NodeAgent(short_tmp / "registry", NODE, driver_wait=0.2,
                   optional_node_operations=True) as agent:
        result = agent.prepare(POD, [skipping])  # no plugin registered at all: not needed
        assert result.ok and result.claim("s").devices == () and result.claim("s").skipped_drivers == (GPU,)
        assert agent.unprepare(POD).ok


def test_checkpoint_survives_an_agent_restart(start_plugin, short_tmp):
    c = reserved(claim("c", ("gpu", GPU, "gpu2")), POD)
    plugin, source = start_plugin(GPU, [c])
    with NodeAgent(short_tmp / "registry", NODE, state_dir=short_tmp / "agent") as agent:
        assert agent.prepare(POD, [c]).ok
    source.delete("ns", "c")  # claim deleted while the agent was down
    with NodeAgent(short_tmp / "registry", NODE, state_dir=short_tmp / "agent") as agent:
        info = agent.claim_infos()["uid-c"]
        assert info.pod_uids == {POD} and not info.prepared
        assert [d.device for d in info.drivers[GPU]] == ["gpu2"]
        results = agent.reconcile(active_pod_uids=[])
        assert [r.ok for r in results] == [True]
    assert plugin.driver.prepared() == {}


def test_deregistration_and_health(start_plugin, short_tmp):
    plugin, _ = start_plugin(GPU, [], resend_seconds=0.2)
    seen = []
    gone = threading.Event()
    with NodeAgent(short_tmp / "registry", NODE, on_health=lambda d, devs: seen.append(devs),
                   on_driver_gone=lambda d: gone.set(), wipe_delay=0.1) as agent:
        assert agent.wait_for_driver(GPU)
        plugin.inject_fault(Fault("gpu3", "ecc"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(
                d.device == "gpu3" and d.health == "Unhealthy" for d in agent.health(GPU)):
            time.sleep(0.05)
        assert {d.device: d.health for d in agent.health(GPU)}["gpu3"] == "Unhealthy"
        plugin.stop(grace=0)
        deadline = time.monotonic() + 5
        while GPU in agent.drivers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert GPU not in agent.drivers()
        assert gone.wait(5)
    assert seen


def test_agent_rejects_a_wrong_plugin_type_and_tells_it(short_tmp):
    statuses = []

    class Wrong(rpg.RegistrationServicer):
        def GetInfo(self, request, context):
            return rpb.PluginInfo(type="DevicePlugin", name="x.example.com", endpoint="/nope",
                                  supported_versions=["v1.DRAPlugin"])

        def NotifyRegistrationStatus(self, request, context):
            statuses.append((request.plugin_registered, request.error))
            return rpb.RegistrationStatusResponse()

    (short_tmp / "registry").mkdir()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    rpg.add_RegistrationServicer_to_server(Wrong(), server)
    server.add_insecure_port(f"unix://{short_tmp}/registry/x-reg.sock")
    server.start()
    try:
        with NodeAgent(short_tmp / "registry", NODE) as agent:
            assert agent.drivers() == {}
            assert "no handler registered" in agent.registration_failures()[f"{short_tmp}/registry/x-reg.sock"]
        assert statuses and statuses[0][0] is False and "DevicePlugin" in statuses[0][1]
    finally:
        server.stop(0)


def test_local_node_for_the_reference_backend(inventory):
    claims = {"c": reserved(claim("c", ("gpu", GPU, "gpu0"), ("n", NIC, "nic1")), POD)}
    statuses = []
    with LocalNode(inventory, lambda ns, name: claims.get(name),
                   write_status=lambda *args: statuses.append(args), device_metadata=True) as node:
        assert set(node.agent.drivers()) == set(inventory.drivers)
        result = node.prepare(POD, [claims["c"]])
        assert result.ok, result.error
        assert len(result.claim("c").cdi_ids()) == 4  # two devices, two metadata mounts
        assert statuses[0][3] == NIC
        assert node.unprepare(POD).ok
        assert list(node.cdi_dir.iterdir()) == []
        root = node.root
    assert not root.exists()


def test_a_failed_call_fails_each_of_its_claims(short_tmp, inventory):
    """A NodePrepareResources call that fails as a whole (here: the driver answers after the
    call's deadline) leaves none of its claims prepared, and each claim of the answer says so."""
    from drakit.clusters.nodeagent import RetryPolicy
    from drakit.fake_driver.plugin import FakePlugin, FunctionClaimSource

    from .conftest import config_for
    claims = {c["metadata"]["name"]: c for c in (reserved(claim("a", ("gpu", GPU, "gpu0")), POD),
                                                 reserved(claim("b", ("gpu", GPU, "gpu1")), POD))}

    def slow_get(namespace, name):
        time.sleep(0.6)
        return copy.deepcopy(claims.get(name))

    plugin = FakePlugin(config_for(short_tmp), inventory, FunctionClaimSource(slow_get))
    plugin.start()
    try:
        with NodeAgent(short_tmp / "registry", NODE, call_timeout=0.3,
                       retry=RetryPolicy(attempts=1)) as agent:
            result = agent.prepare(POD, list(claims.values()))
            assert not result.ok and "DEADLINE_EXCEEDED" in result.error
            answer = result.to_json()["claims"]
            assert [c["name"] for c in answer] == ["a", "b"]
            assert all(c["error"] == result.error and c["devices"] == [] for c in answer), answer
            assert not any(i.prepared for i in agent.claim_infos().values())
        deadline = time.monotonic() + 10  # the driver finishes the call its caller gave up on
        while len(plugin.driver.prepared()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        plugin.stop()
