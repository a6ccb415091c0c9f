"""The plugin's gRPC server (``LoopServer``): quick calls answered on its own thread, calls
that wait in a pool without holding up the others, unknown methods, failing handlers and
stopping with a call still running. Both servers (``loop`` and grpcio's) answer alike."""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import grpc
import pytest

from drakit.fake_driver._gen import dra_v1_pb2 as pb, dra_v1_pb2_grpc as pbg
from drakit.fake_driver.plugin import FakePlugin, FunctionClaimSource, MemoryClaimSource
from drakit.fake_driver.sampleclaims import sample_claims

from .conftest import GPU, claim_msg, config_for


@pytest.fixture(autouse=True)
def crash_files_in_tmp(tmp_path, monkeypatch):
    """A servicer that raises on purpose is logged as a bug with a crash file: keep those here."""
    from drakit.conformance import crash
    monkeypatch.setenv(crash.CRASH_DIR_ENV, str(tmp_path))


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dkr", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def started(root: Path, inventory: Any, source: Any, server: str = "loop") -> FakePlugin:
    plugin = FakePlugin(config_for(root, GPU), inventory, source, health=False,
                        server_options={"server": server})
    plugin.start()
    return plugin


def test_quick_calls_are_answered_on_the_server_thread(root, inventory) -> None:
    claims = sample_claims(inventory, GPU)
    plugin = started(root, inventory, MemoryClaimSource(claims))
    seen: list[str] = []
    real = plugin.driver.prepare
    plugin.driver.prepare = lambda refs: (seen.append(threading.current_thread().name), real(refs))[1]  # type: ignore[method-assign]
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    try:
        single = next(c for c in claims if c["metadata"]["name"] == "single")
        got = pbg.DRAPluginStub(channel).NodePrepareResources(
            pb.NodePrepareResourcesRequest(claims=[claim_msg(single)]), timeout=10)
        assert got.claims[single["metadata"]["uid"]].devices
        assert plugin.driver.answers_inline and seen == ["drakit-plugin"]  # the queue thread, no pool thread
    finally:
        channel.close()
        plugin.stop(grace=0)


@pytest.mark.parametrize("server", ["loop", "grpcio"])
def test_a_claim_source_that_waits_holds_up_only_its_own_call(root, inventory, server) -> None:
    claims = {c["metadata"]["name"]: c for c in sample_claims(inventory, GPU)}
    release, waiting = threading.Event(), threading.Event()

    def get(namespace: str, name: str) -> dict[str, Any] | None:
        if name == "concurrent-0":  # as an API server that is slow to answer
            waiting.set()
            release.wait(20)
        return claims.get(name)

    plugin = started(root, inventory, FunctionClaimSource(get), server)
    assert not plugin.driver.answers_inline
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    stub = pbg.DRAPluginStub(channel)
    slow: list[Any] = []
    caller = threading.Thread(target=lambda: slow.append(stub.NodePrepareResources(
        pb.NodePrepareResourcesRequest(claims=[claim_msg(claims["concurrent-0"])]), timeout=20)))
    try:
        caller.start()
        assert waiting.wait(10)
        t0 = time.monotonic()
        other = stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=[claim_msg(claims["concurrent-1"])]),
                                          timeout=10)
        assert other.claims[claims["concurrent-1"]["metadata"]["uid"]].devices and time.monotonic() - t0 < 5
        assert not slow  # still waiting for its claim
        release.set()
        caller.join(20)
        assert slow and slow[0].claims[claims["concurrent-0"]["metadata"]["uid"]].devices
    finally:
        release.set()
        channel.close()
        plugin.stop(grace=0)


@pytest.mark.parametrize("server", ["loop", "grpcio"])
def test_an_unknown_method_is_unimplemented(root, inventory, server) -> None:
    plugin = started(root, inventory, MemoryClaimSource(), server)
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    try:
        call = channel.unary_unary("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeFrobnicate")
        with pytest.raises(grpc.RpcError) as err:
            call(b"", timeout=10)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert pbg.DRAPluginStub(channel).NodeUnprepareResources(  # and the server goes on
            pb.NodeUnprepareResourcesRequest(claims=[pb.Claim(namespace="ns", name="n", uid="u")]), timeout=10
        ).claims["u"].error == ""
    finally:
        channel.close()
        plugin.stop(grace=0)


def test_undecodable_request_and_failing_handler(root, inventory, caplog) -> None:
    plugin = started(root, inventory, MemoryClaimSource())
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    prepare = channel.unary_unary("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources")
    try:
        with pytest.raises(grpc.RpcError) as err:
            prepare(b"\xff\xff\xff", timeout=10)  # not a protobuf message
        assert err.value.code() == grpc.StatusCode.INTERNAL

        def broken(refs: Any) -> Any:
            raise KeyError("a bug in the driver")

        plugin.driver.prepare = broken  # type: ignore[method-assign]
        with caplog.at_level(logging.INFO), pytest.raises(grpc.RpcError) as err:
            pbg.DRAPluginStub(channel).NodePrepareResources(pb.NodePrepareResourcesRequest(
                claims=[pb.Claim(namespace="ns", name="n", uid="u")]), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNKNOWN and "a bug in the driver" in err.value.details()
        (record,) = [r for r in caplog.records if "failed" in r.getMessage()]
        assert record.exc_info is None  # one line, no traceback on the user's terminal
    finally:
        channel.close()
        plugin.stop(grace=0)


def test_stop_cancels_a_call_still_running_after_the_grace(root, inventory) -> None:
    claims = {c["metadata"]["name"]: c for c in sample_claims(inventory, GPU)}
    release, waiting = threading.Event(), threading.Event()

    def get(namespace: str, name: str) -> dict[str, Any] | None:
        waiting.set()
        release.wait(30)
        return None  # after the stop: nothing is written

    plugin = started(root, inventory, FunctionClaimSource(get))
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    failed: list[grpc.StatusCode] = []

    def call() -> None:
        try:
            pbg.DRAPluginStub(channel).NodePrepareResources(
                pb.NodePrepareResourcesRequest(claims=[claim_msg(claims["single"])]), timeout=30)
        except grpc.RpcError as err:
            failed.append(err.code())

    caller = threading.Thread(target=call)
    try:
        caller.start()
        assert waiting.wait(10)
        t0 = time.monotonic()
        plugin.server.stop(grace=0.3)
        assert time.monotonic() - t0 < 5
        caller.join(10)
        assert failed and failed[0] in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
        assert not plugin.dra_socket.exists()
    finally:
        release.set()
        channel.close()
        plugin.stop(grace=0)


def test_a_call_in_flight_within_the_grace_is_answered(root, inventory) -> None:
    claims = {c["metadata"]["name"]: c for c in sample_claims(inventory, GPU)}
    waiting = threading.Event()

    def get(namespace: str, name: str) -> dict[str, Any] | None:
        waiting.set()
        time.sleep(0.5)  # still running when the stop begins
        return claims.get(name)

    plugin = started(root, inventory, FunctionClaimSource(get))
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    got: list[Any] = []
    caller = threading.Thread(target=lambda: got.append(pbg.DRAPluginStub(channel).NodePrepareResources(
        pb.NodePrepareResourcesRequest(claims=[claim_msg(claims["single"])]), timeout=20)))
    try:
        caller.start()
        assert waiting.wait(10)
        plugin.stop(grace=5)  # as on SIGTERM: no new calls, the running one finishes
        caller.join(10)
        assert got and got[0].claims[claims["single"]["metadata"]["uid"]].devices
    finally:
        channel.close()


def test_a_client_deadline_ends_its_call_and_the_server_goes_on(root, inventory) -> None:
    claims = {c["metadata"]["name"]: c for c in sample_claims(inventory, GPU)}

    slow_done = threading.Event()

    def get(namespace: str, name: str) -> dict[str, Any] | None:
        if name == "concurrent-0":  # answers after the caller gave up: nothing is prepared
            time.sleep(1.0)
            slow_done.set()
            return None
        return claims.get(name)

    plugin = started(root, inventory, FunctionClaimSource(get))
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    stub = pbg.DRAPluginStub(channel)
    try:
        with pytest.raises(grpc.RpcError) as err:
            stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=[claim_msg(claims["concurrent-0"])]),
                                      timeout=0.2)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        got = stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=[claim_msg(claims["concurrent-1"])]),
                                        timeout=10)
        assert got.claims[claims["concurrent-1"]["metadata"]["uid"]].devices
        assert slow_done.wait(10)
    finally:
        channel.close()
        plugin.stop(grace=2)


def test_without_the_core_binding_it_serves_with_grpcio_and_says_so(root, inventory, monkeypatch, caplog) -> None:
    from drakit.fake_driver.plugin import rpcserver
    monkeypatch.setattr(rpcserver, "cygrpc", None)  # as with a grpcio build without the private binding
    assert "has no grpc._cython.cygrpc" in (rpcserver.unavailable() or "")
    claims = sample_claims(inventory, GPU)
    with caplog.at_level(logging.WARNING):
        plugin = started(root, inventory, MemoryClaimSource(claims))
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    try:
        single = next(c for c in claims if c["metadata"]["name"] == "single")
        got = pbg.DRAPluginStub(channel).NodePrepareResources(
            pb.NodePrepareResourcesRequest(claims=[claim_msg(single)]), timeout=10)
        assert got.claims[single["metadata"]["uid"]].devices and plugin.server.server_kind == "grpcio"
        assert [r for r in caplog.records if "serving with grpcio's thread-pool server instead" in r.getMessage()]
    finally:
        channel.close()
        plugin.stop(grace=0)


def test_the_installed_grpcio_has_what_the_server_needs() -> None:
    from drakit.fake_driver.plugin import rpcserver
    assert rpcserver.unavailable() is None  # else every plugin falls back to the slower server
