"""Per-worker names on a cluster shared by parallel workers (conformance/backends/names.py) and
the lock that lets a cluster-wide case run alone (clusterlock.py)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

from drakit.conformance.backends.clusterlock import ClusterLock
from drakit.conformance.backends.names import NameMap, cluster_wide, owned_names, worker_prefix
from drakit.conformance.backends.reference import hardware_objects
from drakit.conformance.cases.loader import load_file
from drakit.fake_driver.profile import load_profile

SUITES = Path(__file__).resolve().parents[1] / "conformance" / "suites"
GPU = "gpu.acme.example.com"


def _corpus() -> list[Any]:
    profile = load_profile()
    cases = []
    for f in sorted(SUITES.rglob("*.case.yaml")):
        loaded = load_file(f, profile, vocabulary=frozenset(profile))
        assert not loaded.errors, loaded.errors
        cases.extend(c for c in loaded.cases if "cluster" in c.backends)
    return cases


def _walk(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*(_walk(k)), *_walk(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _walk(v)]
    return []


def test_worker_prefix() -> None:
    assert worker_prefix("gw1") == "gw1-" and worker_prefix(None) == "" and worker_prefix("master") == ""


def test_a_case_s_own_names_go_out_prefixed_and_come_back_plain() -> None:
    names = NameMap("gw1-", {"node-a", "node-b", GPU})
    slice_ = {"kind": "ResourceSlice", "metadata": {"name": "node-a-gpu"},
              "spec": {"driver": GPU, "nodeName": "node-a", "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                       "devices": [{"name": "gpu-0"}]}}
    out = NameMap("gw1-", owned_names(["node-a"], [slice_])).outgoing(slice_)
    assert out["metadata"]["name"] == "gw1-node-a-gpu" and out["spec"]["nodeName"] == "gw1-node-a"
    assert out["spec"]["pool"]["name"] == "gw1-node-a" and out["spec"]["driver"] == GPU  # a driver is no name of the case
    assert out["spec"]["devices"] == [{"name": "gpu-0"}] and slice_["spec"]["nodeName"] == "node-a"  # a copy
    claim = {"kind": "ResourceClaim", "metadata": {"name": "node-a"},  # namespaced: never prefixed
             "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": GPU}},
                                               {"name": "h", "firstAvailable": [{"name": "x", "deviceClassName": "missing.example"}]}]}}}
    out = names.outgoing(claim)
    assert out["metadata"]["name"] == "node-a"
    assert out["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == f"gw1-{GPU}"
    assert out["spec"]["devices"]["requests"][1]["firstAvailable"][0]["deviceClassName"] == "missing.example"  # not the case's
    pod = {"kind": "Pod", "metadata": {"name": "p"},
           "spec": {"nodeName": "node-b", "nodeSelector": {"kubernetes.io/hostname": "node-a", "rack": "node-a"},
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a", "cluster-node"]}]}]}}},
                    "containers": [{"name": "c", "resources": {"requests": {f"deviceclass.resource.kubernetes.io/{GPU}": "1",
                                                                            "cpu": "1"}}}]}}
    out = names.outgoing(pod)
    assert out["spec"]["nodeName"] == "gw1-node-b"
    assert out["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "gw1-node-a", "rack": "node-a"}
    terms = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == ["gw1-node-a", "cluster-node"]
    assert out["spec"]["containers"][0]["resources"]["requests"] == {f"deviceclass.resource.kubernetes.io/gw1-{GPU}": "1", "cpu": "1"}
    status = names.claim_status({"allocation": {"devices": {"results": [{"driver": GPU, "pool": "node-a", "device": "gpu-0"}]},
                                                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                                    {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}},
                                 "devices": [{"driver": GPU, "pool": "node-a", "device": "gpu-0"}]})
    assert status["allocation"]["devices"]["results"][0]["pool"] == "gw1-node-a" and status["devices"][0]["pool"] == "gw1-node-a"
    assert names.incoming(status) == {"allocation": {"devices": {"results": [{"driver": GPU, "pool": "node-a", "device": "gpu-0"}]},
                                                     "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                                         {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}},
                                      "devices": [{"driver": GPU, "pool": "node-a", "device": "gpu-0"}]}
    assert names.text(f'0/3 nodes: node "gw1-node-a" lacks {GPU}/gw1-node-a/gpu-0; claim-gw1-x') == \
        f'0/3 nodes: node "node-a" lacks {GPU}/node-a/gpu-0; claim-gw1-x'


def test_invalid_or_long_names_are_sent_as_written() -> None:
    long = "n" * 60
    names = NameMap("gw1-", {"-bad", "Node-A", long, "ok"})
    assert names.name("-bad") == "-bad" and names.name("Node-A") == "Node-A" and names.name(long) == long
    assert names.name("ok") == "gw1-ok" and NameMap("", {"ok"}).name("ok") == "ok"


def test_other_workers_objects_are_hidden() -> None:
    names = NameMap("gw1-")
    assert names.foreign("gw0-node-a") and not names.foreign("gw1-node-a") and not names.foreign("node-1")
    assert not NameMap("").foreign("gw0-node-a")


def test_every_cluster_case_s_manifests_and_hardware_round_trip() -> None:
    """Each case's manifests and fake hardware, sent with a prefix and read back, are what the
    case wrote; and only names the case owns carry the prefix."""
    mapped = 0
    for case in _corpus():
        hardware = hardware_objects(case)
        manifests = [m for step in case.steps for m in step.manifests]
        names = NameMap("gw3-", owned_names([n.name for n in case.nodes], [*hardware, *manifests]))
        for obj in [*hardware, *manifests]:
            out = names.outgoing(obj)
            assert names.incoming(out) == obj, (case.id, obj.get("kind"))
            prefixed = {s[len("gw3-"):] for s in _walk(out) if s.startswith("gw3-")}
            assert prefixed <= names.owned, (case.id, prefixed - names.owned)
            mapped += out != obj
    assert mapped > 300


def test_cluster_wide_cases_are_the_few_the_prefix_cannot_keep_apart() -> None:
    cases = _corpus()
    wide = {c.id: cluster_wide(c) for c in cases if cluster_wide(c)}
    assert any("ResourcePoolStatusRequest" in why for why in wide.values()), wide
    assert any("DeviceTaintRule" in why for why in wide.values()), wide
    assert all(cluster_wide(c) for c in cases if "driver" in c.features)
    assert 0 < len(wide) < len(cases) // 3, (len(wide), len(cases), sorted(wide))


def _hold(folder: str, exclusive: bool, log: Any, name: str, seconds: float, release: Any = None) -> None:
    lock = ClusterLock(Path(folder))
    lock.acquire(exclusive)
    log.put((name, "in", time.monotonic()))
    if release is not None:
        release.wait(60)
    else:
        time.sleep(seconds)
    log.put((name, "out", time.monotonic()))
    lock.close()


def test_a_cluster_wide_case_runs_alone_and_shared_ones_side_by_side(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    log = ctx.Queue()
    release = ctx.Event()
    procs = [ctx.Process(target=_hold, args=(str(tmp_path), False, log, n, 0, release)) for n in ("a", "b")]
    for p in procs:
        p.start()
    # both shared holders get in together (neither lets go before the other is in), however
    # slowly a loaded machine starts them
    first = [log.get(timeout=60) for _ in range(2)]
    assert sorted((n, what) for n, what, _ in first) == [("a", "in"), ("b", "in")]
    wide = ctx.Process(target=_hold, args=(str(tmp_path), True, log, "w", 0.2))
    wide.start()
    time.sleep(0.5)  # the cluster-wide holder waits (or has not asked yet)
    release.set()
    for p in [*procs, wide]:
        p.join(60)
    events = first + [log.get(timeout=30) for _ in range(4)]
    at = {(n, what): t for n, what, t in events}
    assert at[("w", "in")] >= max(at[("a", "out")], at[("b", "out")])  # alone
