"""The driver suite on drakit's local cluster, cluster start included: upstream's e2e test driver
(a driver nobody here wrote), drakit's fake driver, the fake driver with each planted fault, and
a vendor profile whose driver is absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from drakit.clusters.local import build
from drakit.clusters.local.pytest_fixture import skip_or_fail, skip_reason

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "conformance" / "suites" / "driver"
UPSTREAM = ROOT / "examples" / "upstream-test-driver.yaml"  # a v1 profile: v1 keeps working
UPSTREAM_V2 = ROOT / "examples" / "upstream-test-driver-v2.yaml"  # profile v2, two configurations
EXAMPLE = ROOT / "examples" / "vendor-example.yaml"
SEVEN = ("registration", "slices", "allocation", "prepare", "pod-env", "unprepare", "reuse")


@pytest.fixture(autouse=True)
def _binaries() -> None:
    reason = skip_reason()
    if reason:
        skip_or_fail(reason)


def run_suite(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str, float]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "out"
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "--backend", "cluster",
                          "--cluster", "local", str(SUITE), "--out", str(out), "--plain", *args],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    wall = time.monotonic() - t0
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    return res.returncode, results, res.stdout + res.stderr, wall


def statuses(results: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in results["cases"]}


def behaviours(results: dict[str, Any]) -> dict[str, str]:
    return {b["id"]: b["status"] for b in results["driver"]["behaviours"]}


def test_upstream_test_driver_passes_with_its_leak_as_a_finding(tmp_path: Path) -> None:
    if not (build.bin_dir() / "dra-test-driver").is_file():
        skip_or_fail("dra-test-driver not built; run 'drakit cluster build'")
    code, results, text, wall = run_suite(tmp_path, "--vendor", str(UPSTREAM))
    print(f"driver suite vs upstream's test driver, cluster start included: {wall:.1f} s")
    assert code == 0, text[-4000:]
    assert results["verdict"]["result"] == "pass"
    got = behaviours(results)
    assert all(got[b] == "proven" for b in (*SEVEN, "several-pods", "kubelet-restart")), got
    assert results["driver"]["name"] == "test-driver.cdi.k8s.io" and results["driver"]["exercised"]
    # its version as it publishes it: kubernetes_build_info on its metrics endpoint (build ldflags)
    assert results["driver"]["version"].startswith("v1.37.2 (kubernetes_build_info"), results["driver"]
    assert "v1.DRAPlugin" in results["driver"]["registration"]
    # it keeps prepared claims in memory only: after a plugin restart the claim's CDI spec leaks
    assert got["plugin-restart"] == "finding"
    # the optional behaviours its profile declares (read from its source), each proven; the
    # others skipped as not declared
    assert all(got[b] == "proven" for b in ("admin-access", "prioritized-list", "device-metadata")), got
    assert all(got[b] == "skipped" for b in ("health", "device-status", "partitionable-devices", "consumable-capacity",
                                            "device-taints", "binding-conditions")), got
    leak = next(c for c in results["cases"] if c["id"] == "driver/plugin-restart")
    assert "are left on the node" in leak["failure"]["summary"] and leak["profile"] == "optional"
    env = results["environment"]["backends"]["cluster"]["driverUnderTest"]
    assert env["nodes"]["plugin"].startswith("vendor plugin")
    print(f"node side: {env['nodes']['nodeSide']}")


def test_upstream_test_driver_in_two_configurations_side_by_side(tmp_path: Path) -> None:
    if not (build.bin_dir() / "dra-test-driver").is_file():
        skip_or_fail("dra-test-driver not built; run 'drakit cluster build'")
    code, results, text, wall = run_suite(tmp_path, "--vendor", str(UPSTREAM_V2))
    print(f"driver suite vs upstream's test driver in two configurations, cluster start included: {wall:.1f} s")
    assert code == 0 and results["verdict"]["result"] == "pass", text[-4000:]
    confs = results["driver"]["configurations"]
    assert [k["name"] for k in confs] == ["four-devices", "two-devices"] and all(k["exercised"] for k in confs)
    for k in confs:
        assert all(k["statuses"][b] == "proven" for b in (*SEVEN, "several-pods", "admin-access")), k
    ids = {c["id"] for c in results["cases"]}
    assert {"driver/prepare@four-devices", "driver/prepare@two-devices"} <= ids
    assert all(c.get("configuration") for c in results["cases"])
    # each configuration's plugin ran as it says (its log kept in the out folder), and the v2
    # containerEnv template ({claim|ident}) matched the driver's CDI edits (pod-env proven)
    logs = tmp_path / "out" / "driver-logs"
    assert "--num-devices 2" in (logs / "two-devices-drakit-driver-1-plugin.log").read_text()
    assert "--num-devices" not in (logs / "four-devices-drakit-driver-1-plugin.log").read_text()


# fault -> exactly the cases it fails (fake_driver/planted.py says why). Pods are deleted
# gracefully and a case ends only once the kubelet let its pods go (their claims unprepared), so
# no fault reaches a later case. A runtime refuses a container whose CDI device has no spec, so
# without CDI specs no pod runs: every case that needs a running container fails, the API-side
# ones (slices, allocation) do not. Both unprepare faults also fail driver/kubelet-restart, which
# checks that a claim prepared after the restart is unprepared cleanly.
RUNNING = {"driver/registration", "driver/prepare", "driver/pod-env", "driver/unprepare", "driver/reuse",
           "driver/several-pods", "driver/kubelet-restart", "driver/admin-access", "driver/prioritized-list",
           "driver/partitionable-devices", "driver/device-metadata", "driver/health"}
FAKE_OPTIONAL = ("admin-access", "prioritized-list", "partitionable-devices", "device-metadata", "health")
PLANTED = {"no-cdi-spec": RUNNING, "leak-on-unprepare": {"driver/unprepare", "driver/kubelet-restart"},
           "unprepare-fails": {"driver/unprepare", "driver/kubelet-restart"}, "wrong-attribute-type": {"driver/slices"}}


def test_fake_driver_passes_and_each_planted_fault_fails_its_behaviour_only(tmp_path: Path) -> None:
    code, clean, text, wall = run_suite(tmp_path / "clean")
    print(f"fake driver, clean: {wall:.1f} s")
    assert code == 0, text[-4000:]
    baseline = statuses(clean)
    assert all(s in ("passed", "skipped") for s in baseline.values()), baseline
    assert all(behaviours(clean)[b] == "proven" for b in (*SEVEN, *FAKE_OPTIONAL)), behaviours(clean)
    seen = {}
    for fault in PLANTED:
        code, results, text, wall = run_suite(tmp_path / fault, env={"DRAKIT_FAKE_DRIVER_PLANT": fault})
        got = statuses(results)
        seen[fault] = ({cid for cid, s in got.items() if s != baseline[cid]}, code, results["verdict"]["result"])
        print(f"planted {fault} ({wall:.1f} s): fails {sorted(seen[fault][0])}")
    assert {fault: changed for fault, (changed, _, _) in seen.items()} == PLANTED
    assert all(code == 1 and verdict == "fail" for _, code, verdict in seen.values()), seen


def test_a_vendor_profile_whose_driver_is_absent_is_incomplete(tmp_path: Path) -> None:
    code, results, text, _ = run_suite(tmp_path, "--vendor", str(EXAMPLE))
    assert code == 1 and results["verdict"]["result"] == "incomplete", text[-3000:]
    assert results["driver"]["exercised"] is False and "NOT EXERCISED" in text
    # its profile declares no optional behaviour: those are not-applicable, all others inventory
    declared = [c for c in results["cases"] if c["skip"]["category"] != "not-applicable"]
    assert {c["skip"]["category"] for c in declared} == {"inventory"} and len(declared) == 10
    assert all("gpu.example-vendor.com publishes no devices" in c["skip"]["message"] for c in declared)


def test_agent_nodes_skip_what_only_a_kubelet_gives_never_fail_the_fake_driver(tmp_path: Path) -> None:
    """With DRAKIT_NODE_SIDE=agent the driver's nodes are kwok nodes with drakit's node agent: no
    container runs (no mounted metadata files to read) and kwok writes the pods' status (no device
    health). The fake driver, which passes both on real kubelet nodes, must not error or fail
    there: both cases are skipped as no-node-side, saying why (they errored and failed before)."""
    code, results, text, wall = run_suite(tmp_path, "-k", "device-metadata or health", env={"DRAKIT_NODE_SIDE": "agent"})
    print(f"device-metadata and health on agent nodes: {wall:.1f} s")
    side = results["environment"]["backends"]["cluster"]["driverUnderTest"]["nodes"]["nodeSide"]
    assert side.startswith("drakit node agent"), side
    got = {c["id"]: c for c in results["cases"]}
    assert set(got) == {"driver/device-metadata", "driver/health"}, sorted(got)
    for cid, what in (("driver/device-metadata", "device metadata files mounted into a container"),
                      ("driver/health", "device health in pod status")):
        case = got[cid]
        assert case["status"] == "skipped" and case["skip"]["category"] == "no-node-side", (case.get("failure"), text[-3000:])
        assert what in case["skip"]["message"] and "kwok nodes with drakit's node agent" in case["skip"]["message"], case["skip"]
    assert results["verdict"]["result"] != "fail", results["verdict"]
