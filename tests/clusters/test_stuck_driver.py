"""A driver that refuses every NodeUnprepareResources (planted fault unprepare-always-fails) on
drakit's local cluster, real kubelets: the failure is driver/unprepare's alone, it names the
call, the claim and the driver's error within seconds of the refusal, and later cases are not
failed for the devices its stuck pod holds (they are set aside as ``held``, naming
driver/unprepare): the verdict lists the failure once. One cluster session, three cases of the
driver suite."""

from __future__ import annotations

import pytest

from drakit.clusters.local.pytest_fixture import skip_or_fail, skip_reason

from .test_driver_suite import run_suite

SELECT = "unprepare or reuse or several-pods"


@pytest.fixture(autouse=True)
def _binaries() -> None:
    reason = skip_reason()
    if reason:
        skip_or_fail(reason)


def test_a_driver_refusing_every_unprepare_fails_one_case_in_seconds_and_blames_no_other(tmp_path) -> None:
    code, results, text, wall = run_suite(tmp_path, "-k", SELECT, env={"DRAKIT_FAKE_DRIVER_PLANT": "unprepare-always-fails"})
    cases = {c["id"]: c for c in results["cases"]}
    print(f"driver suite ({SELECT}) with unprepare-always-fails: {wall:.1f} s; "
          + ", ".join(f"{cid} {c['status']} {c['durationSeconds']:.1f} s" for cid, c in cases.items()))
    assert code == 1 and results["verdict"]["result"] == "fail", text[-3000:]
    unprepare = cases["driver/unprepare"]
    summary = unprepare["failure"]["summary"]
    assert unprepare["status"] == "failed", unprepare
    assert "NodeUnprepareResources failed for ResourceClaim c" in summary, summary
    assert "planted fault unprepare-always-fails" in summary, summary
    # failed at the first refusal, then 20 s for the kubelet's retry before its pod counts as stuck
    assert unprepare["durationSeconds"] < 35, unprepare["durationSeconds"]
    for cid in ("driver/reuse", "driver/several-pods"):  # they run after it: set aside, not failed
        skip = cases[cid].get("skip") or {}
        assert cases[cid]["status"] == "skipped" and skip.get("category") == "held", (cid, cases[cid].get("failure"), skip)
        assert "held by pods of driver/unprepare" in skip["message"] and "NodeUnprepareResources failed" in skip["message"]
    reasons = {r["code"]: r for r in results["verdict"]["reasons"]}  # the failure listed once
    assert reasons["case-failed"]["cases"] == [{"id": "driver/unprepare", "backend": "cluster"}], reasons
    assert {c["id"] for c in reasons["required-skipped"]["cases"]} == {"driver/reuse", "driver/several-pods"}, reasons
