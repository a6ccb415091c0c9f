"""The benchmark's Go caller (``dracaller``, built by ``drakit cluster build``) against a real
plugin: it calls as the kubelet does and reports per-claim errors instead of hiding them."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from drakit.clusters.local import build
from drakit.clusters.local.pytest_fixture import skip_or_fail
from drakit.fake_driver.sampleclaims import allocated_claim

from .conftest import GPU, NODE


def bench_claim(i: int) -> dict:
    return allocated_claim(f"bench-{i}", "bench", f"00000000-0000-4000-8000-{i:012d}", NODE,
                           [{"request": "gpu", "driver": GPU, "pool": NODE, "device": "gpu0", "adminAccess": True}])


@pytest.fixture
def dracaller():
    binary = next(b for g in build.GROUPS for b in g.binaries if b.name == "dracaller")
    path = build.bin_dir() / binary.name
    if not build.binary_version_ok(path, binary):
        skip_or_fail(f"{path} not built; run 'drakit cluster build'")
    return path


def call(dracaller, socket, *args: str) -> dict:
    done = subprocess.run([str(dracaller), "--socket", str(socket), *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_dracaller_cycles_claims_through_the_plugin(dracaller, start_plugin):
    plugin, _ = start_plugin(claims=[bench_claim(i) for i in range(200)])
    out = call(dracaller, plugin.dra_socket, "--calls", "24", "--warmup", "3", "--callers", "1,3",
               "--batch", "4", "--prepared", "0,5", "--probe", "3", "--server-pid", str(os.getpid()))
    assert out["errors"] == 0 and "first_error" not in out
    assert [len(out[k]["samples"]) for k in ("cycle", "cycle x3", "4 claims a call")] == [24, 24, 6]
    assert all(s > 0 for k in ("cycle", "cycle x3") for s in out[k]["samples"])
    assert out["cycle"]["server_cpu"] > 0 and out["cycle x3"]["wall"] > 0
    assert len(out["new claim @5"]["samples"]) == 3
    assert plugin.driver.prepared() == {}  # it leaves nothing prepared
    prepares = [c for c in plugin.driver.calls if c["operation"] == "NodePrepareResources"]
    assert ["bench/bench-4"] in [c["claims"] for c in prepares]
    assert ["bench/bench-" + str(i) for i in range(52, 56)] in [c["claims"] for c in prepares]


def test_dracaller_counts_and_names_per_claim_errors(dracaller, start_plugin):
    plugin, _ = start_plugin(claims=[bench_claim(i) for i in range(3)])  # claims 3.. do not exist
    out = call(dracaller, plugin.dra_socket, "--calls", "4", "--warmup", "0", "--callers", "1", "--batch", "0")
    assert out["errors"] == 2  # claims 3 and 4: not found
    assert "ResourceClaim bench/bench-3 not found" in out["first_error"]


def test_dracaller_says_when_nothing_answers(dracaller, short_tmp):
    done = subprocess.run([str(dracaller), "--socket", str(short_tmp / "none.sock"), "--timeout", "1s"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "does not answer" in done.stderr and done.stdout == ""
