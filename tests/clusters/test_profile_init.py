"""``drakit profile init --cluster local`` on drivers that run: drakit's fake driver and upstream's
e2e test driver (nobody here wrote it), given only the driver's name and, for the test driver,
its command. The draft lints clean, holds what the hand-written profile holds (pools, the
per-device environment its CDI edits give, the optional behaviours its devices and pods show),
and the driver suite's cases that read those facts pass with it. The full verdict against the
hand-written profile (examples/*.yaml) is compared by test_same_verdict_as_hand_written, which
runs the whole suite twice per driver (minutes): set DRAKIT_PROFILE_INIT_VERDICT=1; it covers the
public example driver too where its program was built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from drakit.clusters.local import build
from drakit.clusters.local.driverbuild import cache_dir
from drakit.clusters.local.pytest_fixture import kubelet_skip_reason, skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "conformance" / "suites" / "driver"
TEST_DRIVER_COMMAND = ("{drakitBin}/dra-test-driver --kubeconfig {kubeconfig} --http-endpoint 127.0.0.1:{metricsPort} "
                       "kubelet-plugin --node-name {node} --datadir {pluginsDir} --plugin-registration-path {registryDir} "
                       "--cdi-dir {cdiDir}")
# kubernetes-sigs/dra-example-driver, built by the user from its repository (see examples/dra-example-driver.yaml)
EXAMPLE_BIN = os.environ.get("DRA_EXAMPLE_DRIVER_BIN") or str(cache_dir() / "bin" / "dra-example-kubeletplugin")
EXAMPLE_CONTROLLER = os.environ.get("DRA_EXAMPLE_CONTROLLER_BIN") or str(cache_dir() / "bin" / "dra-example-controller")
EXAMPLE_COMMAND = (f"{EXAMPLE_BIN} --node-name {{node}} --kubeconfig {{kubeconfig}} --cdi-root {{cdiDir}} "
                   "--kubelet-registrar-directory-path {registryDir} --kubelet-plugins-directory-path {pluginsDir}")
DRIVERS = {
    "fake": ("gpu.acme.example.com", [], ROOT / "fake_driver" / "profile.yaml"),
    "test-driver": ("test-driver.cdi.k8s.io", ["--plugin", TEST_DRIVER_COMMAND], ROOT / "examples" / "upstream-test-driver.yaml"),
    "example-driver": ("gpu.example.com", ["--plugin", EXAMPLE_COMMAND], ROOT / "examples" / "dra-example-driver.yaml"),
}


@pytest.fixture(autouse=True)
def _cluster() -> None:
    reason = kubelet_skip_reason()
    if reason:
        skip_or_fail(reason)
    if not (build.bin_dir() / "dra-test-driver").is_file():
        skip_or_fail("dra-test-driver is not built; run 'drakit cluster build'")


def _drakit(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "DRA_EXAMPLE_DRIVER_BIN": EXAMPLE_BIN,
                                                          "DRA_EXAMPLE_CONTROLLER_BIN": EXAMPLE_CONTROLLER})


def _init(tmp_path: Path, which: str, more: str = "") -> dict[str, Any]:
    driver, extra, _ = DRIVERS[which]
    extra = [*extra[:-1], extra[-1] + more] if more else extra
    out = tmp_path / f"{which}.yaml"
    res = _drakit("profile", "init", "--driver", driver, "--cluster", "local", *extra, "-o", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    lint = _drakit("lint", "--vendor", str(out), str(SUITE), cwd=tmp_path)
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-2000:]
    return yaml.safe_load(out.read_text())


def _run(tmp_path: Path, profile: Path, name: str, *select: str) -> dict[str, Any]:
    out = tmp_path / name
    res = _drakit("run", "--backend", "cluster", "--cluster", "local", "--vendor", str(profile), str(SUITE), *select,
                  "--out", str(out), "--plain", cwd=tmp_path, timeout=1800)
    assert (out / "results.json").exists(), res.stdout[-3000:] + res.stderr[-3000:]
    return json.loads((out / "results.json").read_text())


def test_test_driver_draft_holds_what_the_hand_written_profile_says(tmp_path: Path) -> None:
    """Given only its name and command: its pools, the env its CDI edits give per claim and
    request (examples/upstream-test-driver.yaml, written by hand from its source), prioritized
    lists from a probe pod, and device metadata when started with --enable-device-metadata."""
    data = _init(tmp_path, "test-driver", " --enable-device-metadata")
    dut = data["driverUnderTest"]
    assert data["drivers"] == {"dev": "test-driver.cdi.k8s.io"} and dut["pools"] == "per-node"
    assert dut["containerEnv"] == {"claim_{claim|ident}_{request}": "true"}, dut.get("containerEnv")
    assert sorted(dut["optional"]) == ["device-metadata", "prioritized-list"], dut["optional"]
    assert dut["plugin"]["command"][0] == "{drakitBin}/dra-test-driver"
    assert dut["plugin"]["folders"] == ["{pluginsDir}/test-driver.cdi.k8s.io"]


@pytest.mark.skipif(os.environ.get("DRAKIT_PROFILE_INIT_VERDICT") != "1",
                    reason="the whole driver suite twice per driver (minutes): set DRAKIT_PROFILE_INIT_VERDICT=1")
@pytest.mark.parametrize("which", sorted(DRIVERS))
def test_same_verdict_as_hand_written(tmp_path: Path, which: str) -> None:
    if which == "example-driver" and not os.access(EXAMPLE_BIN, os.X_OK):
        pytest.skip(f"dra-example-kubeletplugin is not built: build ./cmd/dra-example-kubeletplugin of "
                    f"github.com/kubernetes-sigs/dra-example-driver with the go command and put it at {EXAMPLE_BIN} "
                    f"(or name it in $DRA_EXAMPLE_DRIVER_BIN)")
    _init(tmp_path, which)
    drafted = _run(tmp_path, tmp_path / f"{which}.yaml", "drafted")
    written = _run(tmp_path, DRIVERS[which][2], "written")
    print(f"{which}: drafted {drafted['verdict']['result']} {drafted['summary']}, "
          f"hand-written {written['verdict']['result']} {written['summary']}")
    assert drafted["verdict"]["result"] == written["verdict"]["result"]
