"""The fake driver as real pods: its kubelet plugin DaemonSet and controller Deployment, from the
offline-built image (``drakit image build``), installed with ``drakit driver manifests`` onto the
local cluster's containerd nodes, then the driver suite through ``--kubeconfig`` with the fake
drivers' profile, as on any cluster: PASS, every case about what the driver's pods did and what
containers printed passed (read from the containers' logs), nothing skipped for want of a node
side but the restarts of a node's kubelet or driver process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from drakit.clusters.local import build
from drakit.clusters.local.pytest_fixture import skip_or_fail, skip_reason

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "conformance" / "suites" / "driver"
LABEL = "drakit.dev/fake-hardware"


@pytest.fixture(autouse=True)
def _needs() -> None:
    from drakit.clusters.local.kubeletnode import unavailable_reason
    reason = skip_reason() or unavailable_reason()
    if reason:
        skip_or_fail(reason)
    if not (build.bin_dir() / "containerd").is_file():
        skip_or_fail(f"containerd is not built in {build.bin_dir()}; run 'drakit cluster build'")
    missing = [t for t in ("apt-get", "dpkg-deb", "gcc") if shutil.which(t) is None]
    if missing:
        skip_or_fail(f"building drakit's image needs {', '.join(missing)}")


def test_driver_suite_on_the_fake_driver_daemonset(tmp_path: Path) -> None:
    from drakit.clusters.images import ensure_images
    from drakit.clusters.kind import install
    from drakit.clusters.local.launcher import LocalCluster
    from drakit.fake_driver.deploy import manifests
    from drakit.fake_driver.profile import load_vendor_profile

    under_test = load_vendor_profile().under_test
    assert under_test is not None
    shapes = under_test.node_shapes  # the driver suite's nodes, as drakit's own run makes them
    [archive] = ensure_images(print, which=("driver",))
    nodes = [(f"node-{i}", {LABEL: shape}) for i, shape in enumerate(shapes, 1)]
    with LocalCluster(runtime="containerd", progress=print) as cluster:
        for name, labels in nodes:  # one by one: a kubelet starved of inotify instances is started again
            cluster.add_kubelet_node(name, labels)
        assert cluster.real is not None
        for node in cluster.real.nodes.values():
            assert node.containerd is not None
            node.containerd.import_images([archive])
        server = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        objs = manifests(api_server=urlsplit(server).netloc)
        client = install.dynamic_client(cluster.kubeconfig)
        t0 = time.monotonic()
        install.apply(client, objs, print)
        install.wait_ready(client, objs, timeout=300)
        print(f"fake driver pods ready in {time.monotonic() - t0:.1f} s")
        out = tmp_path / "out"
        res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "--backend", "cluster",
                              "--kubeconfig", str(cluster.kubeconfig), str(SUITE), "--out", str(out), "--plain"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=900, env=dict(os.environ))
        print(res.stdout[-3000:], res.stderr[-3000:])
        results = json.loads((out / "results.json").read_text())
    assert res.returncode == 0 and results["verdict"]["result"] == "pass", res.stdout[-3000:]
    statuses = {c["id"]: c["status"] for c in results["cases"]}
    # what the driver's pods did and what containers printed (their logs, through the API server)
    for behaviour in ("slices", "allocation", "prepare", "pod-env", "reuse", "several-pods", "admin-access",
                      "prioritized-list", "partitionable-devices", "health"):
        assert statuses[f"driver/{behaviour}"] == "passed", (behaviour, statuses)
    # restarting a node's kubelet or driver process is out of reach through a kubeconfig
    no_node_side = {c["id"] for c in results["cases"] if (c.get("skip") or {}).get("category") == "no-node-side"}
    assert no_node_side <= {"driver/plugin-restart", "driver/kubelet-restart"}, no_node_side
