"""Planted driver faults on real kubelets each fail the behaviour they break, and the failure
says why (issue 33): one run of the cases they touch, every fault planted at once. Each of these
fails at once (a wrong answer or value is final); admin-prepare-fails is left out here because a
refused prepare is retried by the kubelet and its case waits out its minute (tests/test_verdicts.py
holds the summary it gives)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drakit.clusters.local.pytest_fixture import skip_or_fail, skip_reason

from .test_driver_suite import run_suite

FAULTS = "prepare-other-device,env-wrong-value,partition-overcommit"
CASES = "(prepare and not unprepare) or pod-env or partitionable"


@pytest.fixture(autouse=True)
def _binaries() -> None:
    reason = skip_reason()
    if reason:
        skip_or_fail(reason)


def test_planted_faults_fail_their_behaviour_and_say_why(tmp_path: Path) -> None:
    code, results, text, wall = run_suite(tmp_path, "-k", CASES, env={"DRAKIT_FAKE_DRIVER_PLANT": FAULTS})
    print(f"planted {FAULTS}: {wall:.1f} s, cluster start included")
    cases = {c["id"]: c for c in results["cases"]}
    assert code == 1 and results["verdict"]["result"] == "fail", text[-4000:]
    said = {cid: (c["status"], (c.get("failure") or {}).get("summary", "")) for cid, c in cases.items()}
    for cid, words in {
        # the kubelet recorded an answer naming another device than the allocated one
        "driver/prepare": ("NodePrepareResources answer for claim c", "which the claim was not allocated"),
        # the variable is there, with another value: both values are shown
        "driver/pod-env": ("has DRAKIT_", "='wrong-", "expected '"),
        # partitions consuming none of the counters they share: a failure, not an inventory skip
        "driver/partitionable-devices": ("contradict it", "consume none of it", "overcommit"),
    }.items():
        status, summary = said[cid]
        assert status == "failed" and all(w in summary for w in words), (cid, said[cid])
