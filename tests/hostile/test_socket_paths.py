"""Where the local cluster's kubelet nodes keep their Unix sockets does not depend on how long
TMPDIR is (issue 25: with a 23-character TMPDIR, as short as a CI runner's
``/home/runner/work/_temp``, every driver-suite node failed: 'node folder ... is too long for
its Unix sockets'), nor where the fake drivers and the driver suite's kwok nodes keep theirs
(``clusters.sockdir``; with a 136-character TMPDIR the driver suite without root errored every
case: 'bind: invalid argument'). The folder choices are checked here; the driver suite with a
long TMPDIR runs end to end in tests/clusters/test_long_tmpdir.py."""

from __future__ import annotations

import shutil
import tempfile
import types
from pathlib import Path

import pytest

from drakit.clusters import sockdir
from drakit.clusters.local.kubeletnode import MAX_NODE_DIR
from drakit.clusters.local.realnodes import RealNodes, short_temp_dir

NODE = "x" * 15  # the longest node name the folders leave room for


@pytest.mark.parametrize("tmpdir_length", [5, 23, 60, 200])
def test_the_nodes_folder_fits_its_sockets_whatever_tmpdir_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              tmpdir_length: int) -> None:
    long = tmp_path / ("t" * max(1, tmpdir_length - len(str(tmp_path)) - 1))
    long.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    said: list[str] = []
    monkeypatch.setattr(sockdir, "notice", said.append)
    fake = types.SimpleNamespace(run_dir=long / "drakit-local-abcdefgh", progress=None)
    folder = RealNodes._pick_nodes_dir(fake)  # type: ignore[arg-type]
    try:
        assert len(str(folder / NODE)) <= MAX_NODE_DIR, folder
        fits = len(str(long)) + len("/drakit-n-XXXXXXXX/") + len(NODE) <= MAX_NODE_DIR
        assert (said == []) == (fits or str(folder).startswith(str(fake.run_dir))), said
        if said:
            assert said == [f"kubelet nodes' folders in {folder}: the temp folder {long} is too long for their Unix "
                            f"sockets"]
    finally:
        if not str(folder).startswith(str(fake.run_dir)):
            shutil.rmtree(folder, ignore_errors=True)


def test_a_short_temp_folder_is_kept() -> None:
    assert len(short_temp_dir()) + len("/drakit-n-XXXXXXXX/") + len(NODE) <= MAX_NODE_DIR


@pytest.mark.parametrize("tmpdir_length", [5, 60, 200])
def test_the_fake_drivers_sockets_fit_whatever_tmpdir_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         tmpdir_length: int) -> None:
    """A LocalNode's own folder (kwok nodes, the driver suite's agent nodes): its plugins really
    bind their sockets there, and the fallback is said once in one line."""
    from drakit.clusters.nodeagent import LocalNode
    from drakit.fake_hw.inventory import build_inventory
    long = tmp_path / ("t" * max(1, tmpdir_length - len(str(tmp_path)) - 1))
    long.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    said: list[str] = []
    monkeypatch.setattr(sockdir, "notice", said.append)
    monkeypatch.setattr(sockdir, "_said", set())
    nodes = [LocalNode(build_inventory("server-8gpu", f"n{i}"), lambda ns, name: None) for i in range(2)]
    try:
        for node in nodes:
            node.start(timeout=15.0)
            assert node.root is not None
            socks = [p for p in node.root.rglob("*.sock")]
            assert socks and all(len(str(p)) <= sockdir.MAX_SOCKET_PATH for p in socks), socks
        fits = len(str(long)) + len("/drakit-XXXXXXXX/registry/gpu.acme.example.com-reg.sock") <= sockdir.MAX_SOCKET_PATH
        if fits:
            assert said == [] and all(str(n.root).startswith(str(long)) for n in nodes)
        else:
            assert len(said) == 1 and said[0].startswith("the fake drivers' sockets in /tmp: the temp folder "
                                                         f"{long} is too long for their Unix sockets"), said
    finally:
        for node in nodes:
            node.stop()


def test_the_fake_nodes_start_whatever_the_length_of_tmpdir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: with a TMPDIR of 45 to 51 characters every case with fake nodes errored
    ('socket path .../plugins/<driver>/.reg-<pid>.sock is 109 bytes long'): the folder's room was
    reckoned from the registration socket alone, not from the staging name the plugin binds it
    under first. Every TMPDIR length from 1 to 120: the folder a LocalNode picks leaves room for
    every socket its plugins bind, and, for each length a folder can be made with here (all but
    the shortest few), the node's plugins really start there and register."""
    from drakit.clusters.nodeagent import LocalNode
    from drakit.fake_driver.plugin.files import longest_socket_tail
    from drakit.fake_hw.inventory import build_inventory
    monkeypatch.setattr(sockdir, "notice", lambda line: None)
    inventory = build_inventory("server-8gpu", "n0")

    base = tempfile.mkdtemp(dir="/tmp")  # short: /tmp/tmpXXXXXXXX
    real_access = sockdir.os.access
    try:
        for length in range(1, 121):
            fake = "/" + "t" * (length - 1)
            monkeypatch.setattr(tempfile, "tempdir", fake)
            monkeypatch.setattr(sockdir.os, "access", lambda p, mode, fake=fake: p == fake or real_access(p, mode))
            probe = LocalNode(inventory, lambda ns, name: None)
            room = len("/drakit-XXXXXXXX") + longest_socket_tail(list(probe.driver_names))
            assert len(sockdir.short_temp_dir(room).encode()) + room <= sockdir.MAX_SOCKET_PATH, length
        monkeypatch.setattr(sockdir.os, "access", real_access)
        for length in range(len(base) + 2, 121):
            long = Path(base) / ("t" * (length - len(base) - 1))
            long.mkdir()
            monkeypatch.setattr(tempfile, "tempdir", str(long))
            node = LocalNode(inventory, lambda ns, name: None)
            try:
                node.start(timeout=15.0)
                assert node.root is not None and set(node.plugins) == set(node.driver_names), length
            finally:
                node.stop()
            long.rmdir()
    finally:
        shutil.rmtree(base, ignore_errors=True)

