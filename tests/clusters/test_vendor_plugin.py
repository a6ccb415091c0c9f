"""A vendor plugin started from a profile's command template, as real processes (no cluster)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
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


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="dk-vp-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_rolling_update_registration_socket_counts_as_registered(tmp_path: Path, short_dir: Path) -> None:
    f = folders(short_dir)  # a Unix socket's path is at most 107 bytes: pytest's tmp_path can be longer
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


def test_a_socket_of_another_driver_is_not_a_registration(tmp_path: Path, short_dir: Path) -> None:
    f = folders(short_dir)
    plugin = VendorPlugin("d.example.com", [sys.executable, "-c", SERVE, "{registryDir}/e.example.com-reg.sock"],
                          [], "n1", f, tmp_path / "kubeconfig", tmp_path, tmp_path / "plugin.log")
    with pytest.raises(PluginStartError, match="did not register within 2 s"):
        plugin.start(timeout=2)


def test_a_controller_runs_once_with_the_kubeconfig_and_an_early_exit_is_one_line(tmp_path: Path) -> None:
    from drakit.clusters.local.vendorplugin import Controller
    log = tmp_path / "logs" / "controller.log"
    ctl = Controller([sys.executable, "-c", "import sys, time; print('kubeconfig', sys.argv[1], flush=True); time.sleep(60)",
                      "{kubeconfig}"], tmp_path / "kubeconfig", tmp_path, log, env=[("MODE", "{nodeDir}")])
    want = f"kubeconfig {tmp_path / 'kubeconfig'}"
    try:
        ctl.start(settle=0.5)
        assert ctl.info is not None
        deadline = time.monotonic() + 30  # python starts slowly on a loaded machine
        while want not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        ctl.stop()
    assert want in log.read_text()
    assert ctl.env == {"MODE": str(log.parent)}
    dead = Controller([sys.executable, "-c", "import sys; print('no cluster'); sys.exit(3)"], tmp_path / "k", tmp_path,
                      tmp_path / "dead.log")
    with pytest.raises(PluginStartError, match=r"the driver's controller exited \(code 3\): .*no cluster"):
        dead.start(settle=10.0)


def test_the_setup_step_runs_before_each_start_and_a_failed_one_stops_it_in_one_line(tmp_path: Path, short_dir: Path) -> None:
    f = folders(short_dir)
    serve = [sys.executable, "-c", SERVE + "; print(open(sys.argv[2]).read(), flush=True)",
             "{registryDir}/d.example.com-reg.sock", "{nodeDir}/root/made"]
    setup = ["/bin/sh", "-c", 'mkdir -p "$0" && echo "made by setup $GPUS" >> "$0/made"', "{nodeDir}/root"]
    plugin = VendorPlugin("d.example.com", serve, [], "n1", f, tmp_path / "kubeconfig", tmp_path, tmp_path / "plugin.log",
                          env=[("GPUS", "4")], setup=setup)
    try:
        plugin.start(timeout=20)
        plugin.restart(timeout=20)
    finally:
        plugin.stop()
    assert (tmp_path / "root" / "made").read_text() == "made by setup 4\nmade by setup 4\n"  # before each start
    assert "# setup: /bin/sh -c" in (tmp_path / "plugin.log").read_text()
    bad = VendorPlugin("d.example.com", serve, [], "n1", f, tmp_path / "kubeconfig", tmp_path, tmp_path / "bad" / "plugin.log",
                       setup=["/bin/sh", "-c", "echo no mock library here >&2; exit 3"])
    with pytest.raises(PluginStartError) as err:
        bad.start(timeout=20)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("the d.example.com plugin's setup on node n1 exited with 3: ")
    assert "no mock library here" in str(err.value)
    assert bad.info is None  # the plugin itself never started
