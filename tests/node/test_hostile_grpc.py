"""Hostile NodePrepareResources / NodeUnprepareResources requests to the fake driver (issue 15):
each is answered (every claim with its own error, or the call with a status), the driver never
crashes, logs no traceback, leaves no file behind for a claim it did not prepare, and still
prepares a good claim afterwards. One plugin serves the whole table."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import grpc
import pytest

from drakit.fake_driver._gen import dra_v1_pb2 as pb, dra_v1_pb2_grpc as pbg
from drakit.fake_driver._gen import dra_v1beta1_pb2 as pbb, dra_v1beta1_pb2_grpc as pbbg
from drakit.fake_driver.plugin import FakePlugin, MemoryClaimSource
from drakit.fake_driver.sampleclaims import allocated_claim, sample_claims

from .conftest import GPU, NIC, NODE, config_for

NS = "node-check"


@dataclass(frozen=True)
class Request:
    name: str
    claims: Callable[[dict[str, Any]], list[tuple[str, str, str]]]  # sample claims -> (namespace, name, uid)
    error: str  # in every claim's answer; or, with call_fails, in the call's status details
    call_fails: grpc.StatusCode | None = None
    beta: bool = False  # through the v1beta1 service
    unprepare: bool = False


def ref(claim: dict[str, Any]) -> tuple[str, str, str]:
    m = claim["metadata"]
    return m["namespace"], m["name"], m["uid"]


HUGE = "x" * (1 << 20)

REQUESTS = (
    Request("empty-uid", lambda c: [(NS, "single", "")], "namespace, name and uid are required"),
    Request("empty-name", lambda c: [(NS, "", "uid-1")], "namespace, name and uid are required"),
    Request("empty-namespace", lambda c: [("", "single", c["single"]["metadata"]["uid"])], "not found"),
    Request("empty-uid-v1beta1", lambda c: [(NS, "single", "")], "namespace, name and uid are required", beta=True),
    Request("huge-name", lambda c: [(NS, HUGE, "uid-huge")], "claim name of 1,048,576 characters: longer than"),
    Request("huge-uid", lambda c: [(NS, "single", HUGE)], "claim uid of 1,048,576 characters: longer than"),
    Request("huge-namespace", lambda c: [(HUGE, "single", "uid-huge-ns")], "claim namespace of 1,048,576 characters"),
    Request("over-the-message-limit", lambda c: [(NS, HUGE, f"uid-{i}") for i in range(5)], "",
            call_fails=grpc.StatusCode.RESOURCE_EXHAUSTED),
    Request("thousands-of-claims", lambda c: [(NS, f"ghost-{i}", f"uid-ghost-{i}") for i in range(3000)], "not found"),
    Request("claim-of-another-driver", lambda c: [ref(c["nic-claim"])], f"has no device of driver {GPU}"),
    Request("claim-twice-in-one-call", lambda c: [ref(c["unknown-device"])] * 2, "is not a device of driver"),
    Request("same-uid-two-names", lambda c: [(NS, "single", "uid-same"), (NS, "multi", "uid-same")], ""),
    Request("stale-uid", lambda c: [(NS, "single", "uid-stale")], "has UID"),
    Request("unallocated", lambda c: [ref(c["pending"])], "is not allocated"),
    Request("device-not-on-this-node", lambda c: [ref(c["unknown-device"])], "is not a device of driver"),
    Request("unprepare-empty-uid", lambda c: [(NS, "single", "")], "namespace, name and uid are required",
            unprepare=True),
    Request("unprepare-huge-uid", lambda c: [(NS, "single", HUGE)], "claim uid of 1,048,576 characters",
            unprepare=True),
    Request("unprepare-never-prepared", lambda c: [(NS, "ghost", "uid-ghost")], "", unprepare=True),
)


@pytest.fixture(scope="module")
def gpu(inventory, tmp_path_factory) -> Iterator[tuple[FakePlugin, Any, Any, dict[str, Any], Path]]:
    import shutil
    import tempfile
    root = Path(tempfile.mkdtemp(prefix="dkh", dir="/tmp"))  # short: a socket path
    claims = {c["metadata"]["name"]: c for c in sample_claims(inventory, GPU)}
    nic = allocated_claim("nic-claim", NS, "uid-nic-claim", NODE,
                          [{"request": "nic", "driver": NIC, "pool": NODE, "device": "nic0"}])
    pending = allocated_claim("pending", NS, "uid-pending", NODE, [])
    del pending["status"]
    claims.update({"nic-claim": nic, "pending": pending})
    plugin = FakePlugin(config_for(root, GPU), inventory, MemoryClaimSource(claims.values()))
    plugin.start()
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    try:
        yield plugin, pbg.DRAPluginStub(channel), pbbg.DRAPluginStub(channel), claims, root
    finally:
        channel.close()
        plugin.stop(grace=0)
        shutil.rmtree(root, ignore_errors=True)


def _call(stubs: tuple[Any, Any], request: Request, refs: list[tuple[str, str, str]]) -> Any:
    v1, beta = stubs
    mod, stub = (pbb, beta) if request.beta else (pb, v1)
    claims = [mod.Claim(namespace=n, name=m, uid=u) for n, m, u in refs]
    if request.unprepare:
        return stub.NodeUnprepareResources(mod.NodeUnprepareResourcesRequest(claims=claims), timeout=60)
    return stub.NodePrepareResources(mod.NodePrepareResourcesRequest(claims=claims), timeout=60)


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: r.name)
def test_hostile_request(request_: Request, gpu, caplog: pytest.LogCaptureFixture) -> None:
    plugin, v1, beta, claims, root = gpu
    refs = request_.claims(claims)
    before = sorted(p.name for p in plugin.config.cdi_dir.glob("*")) if plugin.config.cdi_dir.exists() else []
    with caplog.at_level(logging.DEBUG):
        if request_.call_fails is not None:
            with pytest.raises(grpc.RpcError) as failed:
                _call((v1, beta), request_, refs)
            assert failed.value.code() == request_.call_fails
        else:
            reply = _call((v1, beta), request_, refs)
            uids = list(dict.fromkeys(u for _, _, u in refs))
            assert sorted(reply.claims) == sorted(uids)  # every claim answered, once
            for uid in uids:
                error = reply.claims[uid].error
                if request_.unprepare and request_.error == "":
                    assert error == ""  # nothing prepared under that uid: nothing to undo
                    continue
                assert error, f"{request_.name}: claim {uid[:40]} answered without an error"
                assert request_.error in error, error[:300]
                assert len(error) < 2000, "an error quoting a huge input is cut"
                if not request_.unprepare:
                    assert not reply.claims[uid].devices
    assert not [r for r in caplog.records if r.exc_info], "the driver logged a traceback"
    after = sorted(p.name for p in plugin.config.cdi_dir.glob("*")) if plugin.config.cdi_dir.exists() else []
    assert after == before, "files left behind for claims that were not prepared"
    # the driver is alive and still prepares (and releases) a good claim
    good = claims["single"]
    answer = v1.NodePrepareResources(pb.NodePrepareResourcesRequest(
        claims=[pb.Claim(namespace=NS, name="single", uid=good["metadata"]["uid"])]), timeout=10)
    assert answer.claims[good["metadata"]["uid"]].error == "" and answer.claims[good["metadata"]["uid"]].devices
    released = v1.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(
        claims=[pb.Claim(namespace=NS, name="single", uid=good["metadata"]["uid"])]), timeout=10)
    assert released.claims[good["metadata"]["uid"]].error == ""


def test_a_bug_while_preparing_fails_that_claim_and_logs_one_line(inventory, monkeypatch, tmp_path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    import shutil
    import tempfile

    from drakit.conformance import crash
    from drakit.fake_driver.plugin import FunctionClaimSource
    monkeypatch.setenv(crash.CRASH_DIR_ENV, str(tmp_path))
    claims = {c["metadata"]["name"]: c for c in sample_claims(inventory, GPU)}

    def get(namespace: str, name: str) -> dict[str, Any] | None:
        if name == "explode":
            raise ZeroDivisionError("a bug in the claim source")
        return claims.get(name)

    root = Path(tempfile.mkdtemp(prefix="dkb", dir="/tmp"))
    plugin = FakePlugin(config_for(root, GPU), inventory, FunctionClaimSource(get))
    plugin.start()
    channel = grpc.insecure_channel(f"unix://{plugin.dra_socket}")
    try:
        with caplog.at_level(logging.INFO):
            reply = pbg.DRAPluginStub(channel).NodePrepareResources(pb.NodePrepareResourcesRequest(claims=[
                pb.Claim(namespace=NS, name="explode", uid="uid-explode"),
                pb.Claim(namespace=NS, name="single", uid=claims["single"]["metadata"]["uid"])]), timeout=10)
        assert "internal error preparing" in reply.claims["uid-explode"].error
        assert reply.claims[claims["single"]["metadata"]["uid"]].error == ""  # the other claim is served
        (record,) = [r for r in caplog.records if "uid-explode" in r.getMessage()]
        assert record.exc_info is None and "this is a drakit bug, the traceback is in" in record.getMessage()
        assert "ZeroDivisionError" in next(tmp_path.glob("drakit-crash-*.txt")).read_text()
    finally:
        channel.close()
        plugin.stop(grace=0)
        shutil.rmtree(root, ignore_errors=True)
