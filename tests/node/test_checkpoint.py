"""The plugin checkpoint: snapshot plus journal, read back as a restarted driver reads it."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from drakit.fake_driver.plugin.checkpoint import Checkpoint, CheckpointError, PreparedClaim, PreparedDevice


def record(i: int, tmp: Path) -> PreparedClaim:
    return PreparedClaim(f"uid-{i}", "ns", f"c{i}", (PreparedDevice(("gpu",), "node-a", "gpu0", (f"k/gpu=u{i}",)),),
                         {str(tmp / f"spec-{i}.json"): "{}"})


def started(path: Path, **kw) -> Checkpoint:
    cp = Checkpoint(path, durable=False, **kw)
    cp.load()
    cp.start()
    return cp


def test_prepared_interrupted_and_removed_claims_read_back(tmp_path):
    path = tmp_path / "checkpoint.json"
    cp = started(path)
    for i in range(3):
        cp.begin(record(i, tmp_path))
    cp.commit("uid-0")
    cp.commit("uid-1")
    cp.remove("uid-1")
    again = Checkpoint(path)
    assert again.load() == {"uid-0": record(0, tmp_path)}
    assert again.interrupted() == {"uid-2": record(2, tmp_path)}


def test_a_new_claim_appends_and_rewrites_nothing(tmp_path):
    """A claim's cost does not grow with the claims already prepared: two appended lines."""
    path = tmp_path / "checkpoint.json"
    cp = started(path, compact_min=10_000)
    for i in range(500):
        cp.begin(record(i, tmp_path))
        cp.commit(f"uid-{i}")
    snapshot = path.read_bytes()
    size = cp.journal_path.stat().st_size
    cp.begin(record(500, tmp_path))
    cp.commit("uid-500")
    assert path.read_bytes() == snapshot
    assert cp.journal_path.stat().st_size - size < 600
    assert len(Checkpoint(path).load()) == 501


def test_compaction_folds_the_journal_and_keeps_every_claim(tmp_path):
    path = tmp_path / "checkpoint.json"
    cp = started(path, compact_min=8, background=False)
    for i in range(20):
        cp.begin(record(i, tmp_path))
        cp.commit(f"uid-{i}")
        if i % 2:
            cp.remove(f"uid-{i}")
    cp.begin(record(99, tmp_path))
    assert len(cp.journal_path.read_bytes().splitlines()) < 30
    again = Checkpoint(path)
    assert sorted(again.load()) == sorted(f"uid-{i}" for i in range(0, 20, 2))
    assert list(again.interrupted()) == ["uid-99"]


def test_an_append_cut_short_is_dropped(tmp_path):
    path = tmp_path / "checkpoint.json"
    cp = started(path)
    cp.begin(record(0, tmp_path))
    cp.commit("uid-0")
    cp.begin(record(1, tmp_path))
    data = cp.journal_path.read_bytes()
    cp.journal_path.write_bytes(data[:-20])  # the last begin, half written (no newline)
    again = Checkpoint(path)
    assert list(again.load()) == ["uid-0"]
    assert again.interrupted() == {}


def test_a_corrupt_journal_line_is_refused_with_its_place(tmp_path):
    path = tmp_path / "checkpoint.json"
    cp = started(path)
    cp.begin(record(0, tmp_path))
    cp.commit("uid-0")
    lines = cp.journal_path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"uid-0", b"uid-9", 1)
    cp.journal_path.write_bytes(b"\n".join(lines))
    with pytest.raises(CheckpointError) as err:
        Checkpoint(path).load()
    assert err.value.path == cp.journal_path
    assert str(err.value) == f"{cp.journal_path}: line 2: checksum mismatch (file corrupted)"


def test_a_corrupt_or_truncated_snapshot_is_refused(tmp_path):
    path = tmp_path / "checkpoint.json"
    cp = started(path)
    cp.begin(record(0, tmp_path))
    cp.commit("uid-0")
    cp.close()
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match="unreadable checkpoint") as err:
        Checkpoint(path).load()
    assert err.value.path == path
    path.write_bytes(good.replace(b'"c0"', b'"cX"'))
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        Checkpoint(path).load()


def test_a_compaction_cut_short_leaves_a_readable_state(tmp_path):
    """The new snapshot was written, the journal not yet replaced: its records are in the
    snapshot already and are not applied twice."""
    path = tmp_path / "checkpoint.json"
    cp = started(path)
    cp.begin(record(0, tmp_path))
    cp.commit("uid-0")
    old_journal = cp.journal_path.read_bytes()
    cp.remove("uid-0")
    cp.begin(record(1, tmp_path))
    cp.commit("uid-1")
    cp.close()  # snapshot generation 2 holds uid-1 only
    cp.journal_path.write_bytes(old_journal)  # as if the crash came before the journal's switch
    assert list(Checkpoint(path).load()) == ["uid-1"]


def test_a_version_1_checkpoint_is_read(tmp_path):
    path = tmp_path / "checkpoint.json"
    body = {"uid-0": record(0, tmp_path).to_json()}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    path.write_text(json.dumps({"kind": "DrakitPluginCheckpoint", "version": 1, "checksum": zlib.crc32(canonical),
                                "claims": body}))
    assert Checkpoint(path).load() == {"uid-0": record(0, tmp_path)}


def test_background_compaction_keeps_the_records_appended_meanwhile(tmp_path):
    """Calls go on while a background compaction writes the snapshot: every record counts."""
    path = tmp_path / "checkpoint.json"
    cp = started(path, compact_min=8)
    for i in range(400):
        cp.begin(record(i, tmp_path))
        cp.commit(f"uid-{i}")
        if i % 3:
            cp.remove(f"uid-{i}")
    cp.settle()
    assert cp.compactions >= 2  # start() wrote one; at least one more ran in the background
    lines = len(cp.journal_path.read_bytes().splitlines())
    assert lines < 400 + 400 + 266  # folded: not every record appended (how many are left
    # depends on how many came while the last compaction ran, which a loaded machine stretches)
    again = Checkpoint(path)
    assert sorted(again.load()) == sorted(f"uid-{i}" for i in range(0, 400, 3))


def test_a_background_compaction_cut_short_applies_the_journal_after_the_fold(tmp_path):
    """The snapshot of journal G's first K records was written, journal G+1 not yet: load
    applies journal G's records after the K-th, and only those."""
    path = tmp_path / "checkpoint.json"
    cp = started(path, compact_min=10**6)
    for i in range(5):
        cp.begin(record(i, tmp_path))
        cp.commit(f"uid-{i}")
    fold, parts = (cp._generation, cp._writer.records), cp._snapshot_parts()
    cp.begin(record(5, tmp_path))  # after the fold point: in journal G only
    cp.commit("uid-5")
    cp.remove("uid-0")
    cp.begin(record(6, tmp_path))
    path.write_bytes(cp._snapshot(fold[0] + 1, fold, parts))  # then the crash
    again = Checkpoint(path)
    assert sorted(again.load()) == ["uid-1", "uid-2", "uid-3", "uid-4", "uid-5"]
    assert list(again.interrupted()) == ["uid-6"]


def test_sync_commits_are_on_disk_before_they_return_and_share_flushes(tmp_path, monkeypatch):
    """With ``sync``, a commit or remove returns only once an fdatasync covered its line; calls
    that wait at the same time share one fdatasync (group commit)."""
    import os
    import threading
    import time

    from drakit.fake_driver.plugin import journal
    path = tmp_path / "checkpoint.json"
    cp = started(path, sync=True)
    synced = {"size": 0, "calls": 0}
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        size = os.fstat(fd).st_size
        time.sleep(0.002)  # a disk flush takes a while: later callers queue behind it
        real(fd)
        synced["size"] = max(synced["size"], size)
        synced["calls"] += 1

    monkeypatch.setattr(journal.os, "fdatasync", fdatasync)
    late: list[str] = []

    def work(k: int) -> None:
        for i in range(k * 100, k * 100 + 25):
            cp.begin(record(i, tmp_path))
            before = cp.journal_path.stat().st_size  # our commit line ends after this
            cp.commit(f"uid-{i}")
            if synced["size"] < before + len(journal.line_of(f'{{"op":"commit","uid":"uid-{i}"}}')):
                late.append(f"uid-{i}")  # returned before a flush covered its line
            cp.remove(f"uid-{i}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not late
    assert synced["calls"] < 8 * 25 * 2  # fewer flushes than commits and removes
    assert Checkpoint(path).load() == {}
