"""Upstream's e2e DRA test driver (built by 'drakit cluster build') under drakit node-check:
a driver nobody here wrote, started from its vendor profile's command template."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from drakit.clusters.local import build
from drakit.clusters.local.pytest_fixture import skip_or_fail
from drakit.clusters.local.vendorplugin import NodeFolders, VendorPlugin, render
from drakit.conformance.backends.kubeapi import KubeApi
from drakit.conformance.nodecheck.cli import add_parsers, run
from drakit.fake_driver.profile import load_vendor_profile

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "examples" / "upstream-test-driver.yaml"
DRIVER = "test-driver.cdi.k8s.io"


def test_command_template_renders_and_names_unknown_placeholders():
    spec = load_vendor_profile(PROFILE).under_test.plugin
    argv = render(spec.command, {"node": "n1", "kubeconfig": "/k", "registryDir": "/r", "pluginsDir": "/p",
                                 "cdiDir": "/c", "drakitBin": "/b", "metricsPort": "9100"})
    assert argv[0] == "/b/dra-test-driver" and "--node-name" in argv and argv[argv.index("--node-name") + 1] == "n1"
    assert any(a.endswith("127.0.0.1:9100") for a in argv), argv  # where it publishes its version
    with pytest.raises(KeyError, match="unknown placeholder {nodeName}"):
        render(["--x={nodeName}"], {"node": "n1"})


@pytest.fixture
def test_driver(local_cluster, tmp_path_factory):
    binary = build.bin_dir() / "dra-test-driver"
    if not binary.is_file():
        skip_or_fail(f"{binary} not built; run 'drakit cluster build'")
    api = KubeApi(str(local_cluster.kubeconfig))
    node = "td-node"
    if api.get("Node", node, None) is None:
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    root = Path(tmp_path_factory.mktemp("td", numbered=True))
    folders = NodeFolders(root / "reg", root / "plugins", root / "cdi")
    spec = load_vendor_profile(PROFILE).under_test.plugin
    plugin = VendorPlugin(DRIVER, spec.command, spec.folders, node, folders, local_cluster.kubeconfig,
                          build.bin_dir(), root / "plugin.log")
    plugin.start()
    try:
        yield plugin, folders
    finally:
        plugin.stop()
        api.delete("Node", node, None)


def _node_check(argv):
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    return run(parser.parse_args(["node-check", *argv]))


def test_node_check_passes_upstream_test_driver_with_its_finding(test_driver, local_cluster, capsys):
    plugin, folders = test_driver
    code = _node_check(["--registry-dir", str(folders.registry_dir), "--driver", DRIVER,
                        "--cdi-dir", str(folders.cdi_dir), "--kubeconfig", str(local_cluster.kubeconfig)])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out + captured.err
    lines = {line.split()[1]: line.split()[0] for line in out.splitlines() if line.startswith("  ") and "node/" in line}
    # upstream's helper fails the whole call for a missing claim: allowed by the kubelet contract
    assert lines["node/prepare-missing-claim"] == "PASS" and lines["node/prepare-batch"] == "PASS"
    assert lines["node/prepare-devices"] == "PASS" and lines["node/cdi-specs"] == "PASS"
    assert lines["node/device-metadata"] == "PASS"  # its metadata specs land in /var/run/cdi, bound to cdi/
    # it prepares a device it never published: a finding, listed, not a failure
    assert lines["node/prepare-unknown-device"] == "FINDING"
    assert "it trusts the allocation without checking it" in out
    api = KubeApi(str(local_cluster.kubeconfig))
    assert not [n for n in api.list("Namespace", None) if n["metadata"]["name"].startswith("drakit-node-check-")
                and not n["metadata"].get("deletionTimestamp")]
    assert not list(folders.cdi_dir.iterdir()), "node-check unprepared what it prepared: no CDI spec left"


def test_node_check_usage_errors(test_driver, local_cluster, tmp_path, capsys):
    plugin, folders = test_driver
    base = ["--registry-dir", str(folders.registry_dir), "--driver", DRIVER]
    dead = tmp_path / "dead.kubeconfig"
    text = Path(local_cluster.kubeconfig).read_text()
    import re
    dead.write_text(re.sub(r"https://127\.0\.0\.1:\d+", "https://127.0.0.1:1", text))
    assert _node_check(base + ["--kubeconfig", str(dead)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--kubeconfig" in err[0] and "cannot reach" in err[0], err
    claims = tmp_path / "claims.yaml"
    claims.write_text("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
                      "metadata: {name: c, namespace: default, uid: 0f0e6a32-0000-4000-8000-000000000001}\n"
                      "spec: {devices: {requests: [{name: r, exactly: {deviceClassName: x}}]}}\n")
    assert _node_check(base + ["--claims", str(claims)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not allocated" in err[0], err
