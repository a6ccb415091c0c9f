"""A prepare reads the claim its source parsed (no copy per call): a claim handed out is never
changed afterwards, also when its device status is written or its file is re-read."""

from __future__ import annotations

import json
from pathlib import Path

from drakit.fake_driver.plugin.claims import FileClaimSource, MemoryClaimSource

CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
         "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "d", "pool": "p", "device": "x"}]}}}}
ENTRY = {"driver": "d", "pool": "p", "device": "x", "conditions": []}


def test_memory_source_replaces_a_claim_on_a_status_write() -> None:
    source = MemoryClaimSource([CLAIM])
    before = source.get_claim("ns", "c")
    assert before is not None and "devices" not in before["status"]
    source.write_device_status("ns", "c", "u1", "d", [ENTRY])
    after = source.get_claim("ns", "c")
    assert after is not None and after["status"]["devices"] == [ENTRY]
    assert "devices" not in before["status"], "a claim handed out changed under its reader"
    assert after["status"]["allocation"] == CLAIM["status"]["allocation"]


def test_file_source_hands_out_the_parsed_claim_until_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "claims.json"
    path.write_text(json.dumps([CLAIM]))
    source = FileClaimSource(path)
    first = source.get_claim("ns", "c")
    assert first is not None and source.get_claim("ns", "c") is first  # no copy per call
    changed = json.loads(json.dumps(CLAIM))
    changed["metadata"]["uid"] = "u2"
    path.write_text(json.dumps([changed]) + "\n")
    again = source.get_claim("ns", "c")
    assert again is not None and again["metadata"]["uid"] == "u2" and first["metadata"]["uid"] == "u1"
