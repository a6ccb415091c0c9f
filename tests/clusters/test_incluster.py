"""Shards on one real cluster (the local control plane): the cross-shard Lease lock on the real
API server, and the kubeconfig corpus run as two shards side by side with the in-cluster run's
own ServiceAccount and RBAC (a token of it, from outside), merged, against the same corpus run
whole with the admin kubeconfig: the same statuses; the shards' objects under their prefixes
(s1-, s2-) side by side, the cluster-wide cases alone; nothing of the run left afterwards."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.clusters.test_shared_cluster_workers import CASE_FILES, _watch_nodes


def drakit(*args: str, cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def statuses(path: Path) -> dict[tuple[str, str], str]:
    return {(c["id"], c["backend"]): c["status"] for c in json.loads(path.read_text())["cases"]}


@pytest.fixture(scope="module")
def outside(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kubeconfig corpus run whole from outside, with the admin kubeconfig."""
    base = tmp_path_factory.mktemp("outside")
    started = time.monotonic()
    res = drakit("run", *map(str, CASE_FILES), "--backend", "cluster", "--kubeconfig", str(local_cluster.kubeconfig),
                 "--out", "out", "--plain", "-q", cwd=base)
    print(f"outside, unsharded: {time.monotonic() - started:.1f} s wall")
    assert (base / "out" / "results.json").exists(), res.stdout[-3000:] + res.stderr[-2000:]
    return base / "out" / "results.json"


def _api(kubeconfig: Path) -> Any:
    from drakit.conformance.backends.kubeapi import KubeApi
    return KubeApi(str(kubeconfig))


def test_the_lease_lock_on_a_real_api_server(local_cluster: Any) -> None:
    from drakit.conformance.backends.leaselock import EXPIRE, LeaseLock
    api = _api(local_cluster.kubeconfig)
    where = f"default/lock-{uuid.uuid4().hex[:6]}"
    a, b, c = (LeaseLock(api, where, holder=h) for h in ("s2-a", "s3-b", "s1-c"))
    a.acquire(False)
    b.acquire(False)  # two shared holders at once
    got = threading.Event()

    def exclusive() -> None:
        c.acquire(True)
        got.set()

    t = threading.Thread(target=exclusive, daemon=True)
    t.start()
    time.sleep(1.5)
    assert not got.is_set(), "the exclusive holder did not wait for the shared ones"
    a.release()
    time.sleep(1.0)
    assert not got.is_set()
    b.release()
    assert got.wait(10), "the exclusive holder did not get the lock once the shared ones were gone"
    late = LeaseLock(api, where, holder="s2-late")
    blocked = threading.Thread(target=late.acquire, args=(False,), daemon=True)
    blocked.start()
    time.sleep(1.0)
    assert late.held is None, "a shared holder overtook the exclusive one"
    c.release()
    blocked.join(10)
    assert late.held == "shared"
    late.release()
    # a holder that died (never renewed) is ignored once it expired
    dead = LeaseLock(api, where, holder="s9-dead", clock=lambda: time.time() - EXPIRE - 5)
    dead.acquire(False)
    dead._stop.set()
    alive = LeaseLock(api, where, holder="s1-alive")
    alive.acquire(True)
    assert alive.held == "exclusive"
    for lock in (a, b, c, late, dead, alive):
        lock.close()
    api.delete("Lease", where.split("/")[1], "default")


def _service_account_kubeconfig(admin: Path, namespace: str, account: str, dest: Path) -> Path:
    """A kubeconfig of the admin's cluster with a token of the ServiceAccount (TokenRequest)."""
    from kubernetes import client, config
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(admin)))
    token = core.create_namespaced_service_account_token(account, namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=7200))).status.token
    data = yaml.safe_load(admin.read_text())
    ctx = next(c for c in data["contexts"] if c["name"] == data["current-context"])
    data["users"] = [{"name": "shard", "user": {"token": token}}]
    ctx["context"]["user"] = "shard"
    data["contexts"] = [ctx]
    dest.write_text(yaml.safe_dump(data))
    dest.chmod(0o600)
    return dest


def test_two_shards_with_the_in_cluster_rbac_equal_the_whole_run(local_cluster: Any, outside: Path,
                                                                  tmp_path: Path) -> None:
    from drakit.conformance.incluster import manifests as m
    from drakit.conformance.incluster.orchestrate import InCluster
    admin = Path(local_cluster.kubeconfig)
    api = _api(admin)
    run_id = uuid.uuid4().hex[:8]
    run = InCluster(api, run_id, 2, "unused:0", [], None, say=print)
    for obj in m.rbac_objects(run_id):
        api.create(obj)
    seen: list[tuple[float, frozenset[str]]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_nodes, args=(admin, seen, stop), daemon=True)
    try:
        shard_kc = _service_account_kubeconfig(admin, run.namespace, m.ACCOUNT, tmp_path / "shard.kubeconfig")
        watcher.start()
        started = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-m", "drakit.conformance.cli", "run", *map(str, CASE_FILES),
                                   "--backend", "cluster", "--kubeconfig", str(shard_kc), "--shard", f"{i}/2",
                                   "--shard-lock", f"{run.namespace}/{m.LOCK}", "--out", f"s{i}", "--plain", "-q"],
                                  cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env={**__import__("os").environ, "DRAKIT_RUN_ID": f"{run_id}s{i}"})
                 for i in (1, 2)]
        outs = [p.communicate(timeout=1800)[0] for p in procs]
        wall = time.monotonic() - started
    finally:
        stop.set()
        watcher.join(10)
        problems = run.delete(wait=5)
    print(f"two shards side by side (shard RBAC, from outside): {wall:.1f} s wall")
    assert [p.returncode for p in procs] == [0, 0], "\n----\n".join(o[-3000:] for o in outs)
    res = drakit("report", "--merge", "s1/results.json", "s2/results.json", "--out", "merged", cwd=tmp_path)
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert statuses(tmp_path / "merged" / "results.json") == statuses(outside), res.stdout[-3000:]
    assert merged["verdict"]["result"] == json.loads(outside.read_text())["verdict"]["result"] == "pass"
    assert sum(1 for s in statuses(outside).values() if s == "passed") >= 20
    # no refusal of the shards' RBAC anywhere (a bare "403" may be part of a duration or a uid)
    text = json.dumps(merged)
    assert not re.search(r"\(403\)|HTTP 403|\bcode\W+403\b", text) and "forbidden" not in text.lower()
    for c in merged["cases"]:  # the case's own names in the results, never a shard's prefix
        assert "s1-" not in json.dumps(c["steps"]) and "s2-" not in json.dumps(c["steps"]), c["id"]
    names = set().union(*(s for _, s in seen))
    together = [s for _, s in seen if any(n.startswith("s1-") for n in s) and any(n.startswith("s2-") for n in s)]
    assert together, f"the two shards' cases never ran side by side: {sorted(names)[:20]}"
    plain = [s for _, s in seen if "n1" in s]  # core/pools' cluster-wide cases: plain names, alone
    assert plain and not any(n.startswith(("s1-", "s2-")) for s in plain for n in s), plain[:3]
    assert problems == [] and run.leftovers() == []


def test_shards_that_never_start_make_the_run_incomplete_and_leave_nothing(local_cluster: Any, tmp_path: Path) -> None:
    """On the local cluster without container nodes (kwok nodes only, which shard pods avoid) the
    real API server takes the run's objects (strict field validation), the shard pods stay
    Pending, both shards are lost after --start-timeout, and everything is deleted."""
    started = time.monotonic()
    res = drakit("run", "--in-cluster", "--shards", "2", str(CASE_FILES[0]), "--kubeconfig", str(local_cluster.kubeconfig),
                 "--start-timeout", "15", "--out", "out", cwd=tmp_path, timeout=600)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "created namespace drakit-" in out and "shards: 1/2 pending, 2/2 pending" in out
    for i in (1, 2):
        assert f"shard {i}/2 lost: its pod did not start within 15 s" in out
    assert "verdict INCOMPLETE: no shard brought results back" in out
    assert "deleted everything the run created" in out, out
    assert not (tmp_path / "out" / "results.json").exists()
    assert time.monotonic() - started < 300
    api = _api(local_cluster.kubeconfig)
    # the run's namespace is gone (other tests of this session's cluster have drakit-* ones of their own)
    created = re.findall(r"created namespace (drakit-[a-z0-9-]+)", out)
    assert created and not [n for n in api.list("Namespace", None) if n["metadata"]["name"] in created]


def test_results_in_several_parts_through_the_real_api_server(local_cluster: Any, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A shard's results too large for one ConfigMap: written with the shard's own ServiceAccount
    (the run's RBAC) in parts of the real size, each taken by the real API server, read back
    whole by the caller; a part changed or gone gives no results (the caller then reads the log);
    one part over a ConfigMap's 1 MiB is refused by the API server, said once, and the shard goes on."""
    import base64
    import os
    from drakit.conformance.incluster import manifests as m
    from drakit.conformance.incluster.channel import PART, Channel, read_results
    from drakit.conformance.incluster.orchestrate import InCluster
    admin = Path(local_cluster.kubeconfig)
    api = _api(admin)
    run_id = uuid.uuid4().hex[:8]
    run = InCluster(api, run_id, 1, "unused:0", [], None, say=print)
    for obj in m.rbac_objects(run_id):
        api.create(obj)
    try:
        shard = _api(_service_account_kubeconfig(admin, run.namespace, m.ACCOUNT, tmp_path / "shard.kubeconfig"))
        # incompressible: random bytes as base64 in the cases' messages, ~1.6 MB gzipped
        cases = [{"id": f"big/case-{i}", "message": base64.b64encode(os.urandom(200_000)).decode()} for i in range(8)]
        text = json.dumps({"schemaVersion": "drakit.results/v1", "cases": cases})
        channel = Channel(f"{run.namespace}/drakit-shard-1", api=shard)
        channel.progress(0, 8, force=True)
        channel.results(text, 8)
        assert not channel.broken, capsys.readouterr().err
        head = api.get("ConfigMap", "drakit-shard-1", run.namespace)
        assert head is not None and int(head["data"]["parts"]) == 3
        sizes = [len(base64.b64decode(api.get("ConfigMap", f"drakit-shard-1-part-{k}", run.namespace)
                                      ["binaryData"]["part"])) for k in range(3)]
        assert sizes[:2] == [PART, PART] and 0 < sizes[2] <= PART, sizes
        assert read_results(api, run.namespace, "drakit-shard-1") == json.loads(text)
        # a part changed: the checksum no longer holds
        part1 = api.get("ConfigMap", "drakit-shard-1-part-1", run.namespace)
        good = part1["binaryData"]["part"]
        part1["binaryData"]["part"] = base64.b64encode(b"x" + base64.b64decode(good)[1:]).decode()
        api.replace(part1)
        assert read_results(api, run.namespace, "drakit-shard-1") is None
        api.delete("ConfigMap", "drakit-shard-1-part-2", run.namespace)
        assert read_results(api, run.namespace, "drakit-shard-1") is None
        # one part over 1 MiB (what splitting avoids): the real API server refuses it
        whole = Channel(f"{run.namespace}/drakit-shard-2", api=shard, part=4 * 1024 * 1024)
        whole.results(text, 8)
        err = capsys.readouterr().err
        assert whole.broken and "cannot write the shard's results to ConfigMap" in err, err
        assert read_results(api, run.namespace, "drakit-shard-2") is None
    finally:
        problems = run.delete(wait=30)
    assert problems == [] and run.leftovers() == []
