"""A vendor plugin started from a profile's command template, as real processes (no cluster)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from drakit.clusters.local.vendorplugin import NodeFolders, PluginStartError, VendorPlugin

SERVE = ("import socket, sys, time; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); "
         "print('serving', sys.argv[1], flush=True); time.sleep(60)")


def folders(tmp_path: Path) -> NodeFolders:
    return NodeFolders(tmp_path / "registry", tmp_path / "plugins", tmp_path / "cdi")


@pytest.fixture(autouse=True)
def _unshare() -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("starting a vendor plugin needs root and unshare (a private mount namespace)")


def test_a_rolling_update_registration_socket_counts_as_registered(tmp_path: Path) -> None:
    f = folders(tmp_path)
    stale = f.registry_dir / "d.example.com-old-reg.sock"
    f.registry_dir.mkdir(parents=True)
    stale.write_text("")  # not a socket: never taken for a registration
    plugin = VendorPlugin("d.example.com", [sys.executable, "-c", SERVE, "{registryDir}/d.example.com-0f3c-reg.sock"],
                          [], "n1", f, tmp_path / "kubeconfig", tmp_path, tmp_path / "plugin.log")
    try:
        plugin.start(timeout=20)
        assert plugin.registration_socket.name == "d.example.com-0f3c-reg.sock"
        assert plugin.alive()
    finally:
        plugin.stop()
    assert "serving" in (tmp_path / "plugin.log").read_text()


def test_a_socket_of_another_driver_is_not_a_registration(tmp_path: Path) -> None:
    f = folders(tmp_path)
    plugin = VendorPlugin("d.example.com", [sys.executable, "-c", SERVE, "{registryDir}/e.example.com-reg.sock"],
                          [], "n1", f, tmp_path / "kubeconfig", tmp_path, tmp_path / "plugin.log")
    with pytest.raises(PluginStartError, match="did not register within 2 s"):
        plugin.start(timeout=2)
