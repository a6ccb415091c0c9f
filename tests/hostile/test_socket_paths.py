"""Where the local cluster's kubelet nodes keep their Unix sockets does not depend on how long
TMPDIR is (issue 25: with a 23-character TMPDIR, as short as a CI runner's
``/home/runner/work/_temp``, every driver-suite node failed: 'node folder ... is too long for
its Unix sockets'). The folder choice is checked here; the driver suite itself runs on the local
cluster (tests/test_driver_suite.py)."""

from __future__ import annotations

import shutil
import tempfile
import types
from pathlib import Path

import pytest

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
    fake = types.SimpleNamespace(run_dir=long / "drakit-local-abcdefgh", progress=said.append)
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
