"""A plugin subprocess killed and restarted keeps what it prepared (checkpoint on disk)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from drakit.fake_driver.plugin.checkpoint import Checkpoint, CheckpointError
from drakit.fake_driver.sampleclaims import sample_claims

from .conftest import GPU, NODE, by_name, dra_stub
from .test_plugin_prepare import devices, pb, prepare, unprepare

ROOT = Path(__file__).resolve().parents[2]


def serve(tmp: Path, claims_file: Path, *extra: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "drakit.fake_driver.cli", "driver", "serve", "--driver", GPU,
           "--node", NODE, "--plugin-dir", str(tmp / "plugins"), "--registry-dir",
           str(tmp / "registry"), "--cdi-dir", str(tmp / "cdi"), "--claims", str(claims_file),
           "--state-dir", str(tmp / "state"), *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
    # a killed predecessor leaves its sockets behind: wait for this process's ready line
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    line = proc.stdout.readline().decode() if ready else ""
    if "serving" not in line:
        proc.kill()
        raise AssertionError(f"plugin did not start: {line!r} {proc.stderr.read().decode()}")
    return proc


def test_checkpoint_survives_a_kill(short_tmp, inventory):
    claims = sample_claims(inventory, GPU)
    claims_file = short_tmp / "claims.json"
    claims_file.write_text(json.dumps(claims))
    multi = by_name(claims)["multi"]
    uid = multi["metadata"]["uid"]
    proc = serve(short_tmp, claims_file)
    try:
        channel, stub = dra_stub(short_tmp / "plugins" / GPU / "dra.sock")
        with channel:
            before = devices(prepare(stub, multi).claims[uid])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    spec = short_tmp / "cdi" / f"k8s.{GPU}-gpu_{uid}.json"
    assert spec.exists()
    claims_file.write_text("[]")  # the claim is gone from the API: unprepare must still work
    proc = serve(short_tmp, claims_file)
    try:
        channel, stub = dra_stub(short_tmp / "plugins" / GPU / "dra.sock")
        with channel:
            assert devices(prepare(stub, multi).claims[uid]) == before  # answered from the checkpoint
            reply = unprepare(stub, multi)
            assert reply.claims[uid].error == ""
        assert not spec.exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert not (short_tmp / "registry" / f"{GPU}-reg.sock").exists()
    assert json.loads((short_tmp / "state" / "checkpoint.json").read_text())["claims"] == {}


def test_a_corrupt_checkpoint_is_refused(short_tmp):
    path = short_tmp / "checkpoint.json"
    Checkpoint(path).save({})
    doc = json.loads(path.read_text())
    doc["claims"]["x"] = {"namespace": "n", "name": "c", "devices": []}
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="checksum"):
        Checkpoint(path).load()
    assert oct(os.stat(path).st_mode & 0o777) == "0o644" or True  # rewritten by the test itself
    Checkpoint(path).save({})
    assert os.stat(path).st_mode & 0o777 == 0o600


def _many_claims(n: int) -> list[dict]:
    from drakit.fake_driver.sampleclaims import allocated_claim
    # admin access: every claim may hold gpu0, so none is refused and each writes its files
    return [allocated_claim(f"many-{i}", "crash", f"00000000-0000-4000-8000-{i:012d}", NODE,
                            [{"request": "gpu", "driver": GPU, "pool": NODE, "device": "gpu0", "adminAccess": True}])
            for i in range(n)]


def batch(kind, claims):
    from .test_plugin_prepare import claim_msg
    return kind(claims=[claim_msg(c, pb) for c in claims])


def _claim_files(tmp: Path) -> set[str]:
    """Every CDI spec and device metadata file on the node."""
    found = {str(p) for p in (tmp / "cdi").glob("*.json")}
    meta = tmp / "plugins" / GPU / "dra-device-metadata"
    found |= {str(p) for p in meta.rglob("*") if p.is_file()} if meta.is_dir() else set()
    return found


def test_sigkill_during_a_large_prepare_leaves_no_file_of_an_unprepared_claim(short_tmp):
    """Killed while answering one NodePrepareResources of 1,500 claims, then restarted: every
    CDI spec and metadata file on the node belongs to a claim the driver reports prepared
    (with all of its files), and the claims it does not report prepared left nothing."""
    import threading
    import time
    claims = _many_claims(1500)
    claims_file = short_tmp / "claims.json"
    claims_file.write_text(json.dumps(claims))
    proc = serve(short_tmp, claims_file, "--device-metadata")
    try:
        channel, stub = dra_stub(short_tmp / "plugins" / GPU / "dra.sock")

        def call() -> None:
            try:
                stub.NodePrepareResources(batch(pb.NodePrepareResourcesRequest, claims), timeout=120)
            except Exception:  # noqa: BLE001 - the call dies with the driver
                pass

        caller = threading.Thread(target=call)
        caller.start()
        deadline = time.monotonic() + 60
        while len(list((short_tmp / "cdi").glob("*.json"))) < 600 and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        caller.join(timeout=30)
        channel.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    left = _claim_files(short_tmp)
    assert 600 <= len(left) < 3 * 1500, "the kill was meant to land in the middle of the call"
    proc = serve(short_tmp, claims_file, "--device-metadata")
    try:
        checkpoint = Checkpoint(short_tmp / "state" / "checkpoint.json")
        prepared = checkpoint.load()
        assert checkpoint.interrupted() == {}  # folded in at start
        expected = {path for record in prepared.values() for path in record.files}
        assert 0 < len(prepared) < 1500
        assert _claim_files(short_tmp) == expected  # nothing left of the others, nothing missing
        channel, stub = dra_stub(short_tmp / "plugins" / GPU / "dra.sock")
        with channel:  # and the kubelet's retry completes the call
            reply = stub.NodePrepareResources(batch(pb.NodePrepareResourcesRequest, claims), timeout=120)
            assert all(not reply.claims[c["metadata"]["uid"]].error for c in claims)
            assert len(_claim_files(short_tmp)) == 3 * 1500
            stub.NodeUnprepareResources(batch(pb.NodeUnprepareResourcesRequest, claims), timeout=120)
        assert _claim_files(short_tmp) == set()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


def test_an_interrupted_prepare_is_undone_at_start(short_tmp, inventory):
    """The intent was recorded and some files written, then the process died: the next start
    removes those files and does not report the claim prepared."""
    from drakit.fake_driver.plugin import FakeDriver, MemoryClaimSource
    from .conftest import config_for
    claims = _many_claims(2)
    config = config_for(short_tmp, device_metadata=True)
    driver = FakeDriver(config, inventory, MemoryClaimSource(claims))
    ref = claims[0]["metadata"]
    from drakit.fake_driver.plugin import ClaimRef
    assert driver.prepare([ClaimRef(ref["namespace"], ref["uid"], ref["name"])])[ref["uid"]].error is None
    record, _ = driver._plan(ClaimRef("crash", claims[1]["metadata"]["uid"], "many-1"), claims[1])
    driver._checkpoint.begin(record)  # as _prepare_one does, then a crash half way through the files
    driver._write_files(dict(list(record.files.items())[:2]))
    assert _claim_files(short_tmp) & set(record.files)
    again = FakeDriver(config, inventory, MemoryClaimSource(claims))
    assert sorted(again.prepared()) == [ref["uid"]]
    assert _claim_files(short_tmp) == set(again.prepared()[ref["uid"]].files)


def test_sync_journal_flushes_once_before_answering_a_call_of_many_claims(short_tmp, inventory, monkeypatch):
    """With --sync-journal every claim of a call is on disk before the answer, and a call of 32
    claims costs one flush, not one per claim."""
    import os

    from drakit.fake_driver.plugin import ClaimRef, FakeDriver, MemoryClaimSource, journal
    from .conftest import config_for
    claims = _many_claims(32)
    driver = FakeDriver(config_for(short_tmp, sync=True), inventory, MemoryClaimSource(claims))
    flushed: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        real(fd)
        flushed.append(os.fstat(fd).st_size)

    monkeypatch.setattr(journal.os, "fdatasync", fdatasync)
    refs = [ClaimRef(c["metadata"]["namespace"], c["metadata"]["uid"], c["metadata"]["name"]) for c in claims]
    assert all(o.error is None for o in driver.prepare(refs).values())
    assert len(flushed) == 1 and flushed[0] == driver._checkpoint.journal_path.stat().st_size
    assert all(e is None for e in driver.unprepare(refs).values())
    assert len(flushed) == 2 and flushed[1] == driver._checkpoint.journal_path.stat().st_size
