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
