"""node-check passes on the fake driver and fails on deliberately broken plugins."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from drakit.conformance.nodecheck import Options, run_node_check
from drakit.conformance.nodecheck.cli import add_parsers, run
from drakit.fake_driver.plugin import FakeDriver, MemoryClaimSource, PluginServer
from drakit.fake_driver.plugin.driver import ClaimOutcome
from drakit.fake_driver.sampleclaims import sample_claims

from .conftest import GPU, NIC, config_for


@pytest.fixture(autouse=True)
def crash_files_in_tmp(tmp_path, monkeypatch):
    """A servicer that raises on purpose is logged as a bug with a crash file: keep those here."""
    from drakit.conformance import crash
    monkeypatch.setenv(crash.CRASH_DIR_ENV, str(tmp_path))

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "reports" / "schema" / "results.v1.json").read_text())


def case_validator() -> jsonschema.Draft202012Validator:
    schema = {**SCHEMA["$defs"]["case"], "$defs": SCHEMA["$defs"]}
    return jsonschema.Draft202012Validator(schema)


def statuses(cases: list[dict[str, Any]]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in cases}


def options(root: Path, driver: str, claims: list[dict[str, Any]]) -> Options:
    return Options(registry_dir=root / "registry", driver=driver, claims=claims,
                   cdi_dirs=(root / "cdi",), timeout=5, health_timeout=3)


@pytest.mark.parametrize("driver, metadata", [(GPU, True), (NIC, False)])
def test_passes_on_the_fake_driver(start_plugin, short_tmp, inventory, driver, metadata):
    claims = sample_claims(inventory, driver)
    start_plugin(driver, claims, device_metadata=metadata)
    cases = run_node_check(options(short_tmp, driver, claims))
    validator = case_validator()
    for case in cases:
        validator.validate(case)
        assert case["backend"] == "node-plugin"
    expected = {c["id"]: "passed" for c in cases}
    if not metadata:
        expected["node/device-metadata"] = "skipped"
    assert statuses(cases) == expected, [c["failure"] for c in cases if c["failure"]]
    features = {c["id"]: c["features"] for c in cases}
    assert features["node/device-metadata"] == ["device-metadata"]
    assert features["node/health-stream"] == ["device-status"]


def test_without_claims_the_claim_free_cases_still_run(start_plugin, short_tmp):
    start_plugin(GPU, [])
    got = statuses(run_node_check(options(short_tmp, GPU, [])))
    for case in ("node/registration", "node/unprepare-unknown-claim", "node/prepare-missing-claim",
                 "node/health-stream"):
        assert got[case] == "passed"
    assert got["node/prepare-devices"] == "skipped"


def test_no_plugin_fails_registration_and_skips_the_rest(short_tmp):
    (short_tmp / "registry").mkdir()
    cases = run_node_check(options(short_tmp, GPU, []))
    assert cases[0]["status"] == "failed" and "no registration socket" in cases[0]["failure"]["summary"]
    assert {c["status"] for c in cases[1:]} == {"skipped"}
    assert {c["skip"]["category"] for c in cases[1:]} == {"backend"}


class WrongCdiIds(FakeDriver):
    """Names a device it was not allocated in its CDI ids."""

    def prepare(self, refs):  # type: ignore[override]
        return {uid: ClaimOutcome(tuple(dataclasses.replace(
            d, cdi_ids=tuple(i.replace(d.device, "gpu9") for i in d.cdi_ids)) for d in o.devices), o.error)
            for uid, o in super().prepare(refs).items()}


class ExtraDevice(FakeDriver):
    """Answers with one device more than allocated."""

    def prepare(self, refs):  # type: ignore[override]
        return {uid: ClaimOutcome(o.devices + o.devices[:1] if o.devices else o.devices, o.error)
                for uid, o in super().prepare(refs).items()}


class FailsTheCall(FakeDriver):
    """Fails the whole RPC when any claim fails (as upstream's kubelet-plugin helper does when a
    claim cannot be fetched)."""

    def prepare(self, refs):  # type: ignore[override]
        out = super().prepare(refs)
        if any(o.error for o in out.values()):
            raise RuntimeError("boom")
        return out


class ForgetsUnknown(FakeDriver):
    """Leaves claims it does not know out of the unprepare answer."""

    def unprepare(self, refs):  # type: ignore[override]
        known = self.prepared()
        return {uid: e for uid, e in super().unprepare(refs).items() if uid in known}


class PreparesMissing(FakeDriver):
    """Reports success, with no devices, for a claim that does not exist."""

    def prepare(self, refs):  # type: ignore[override]
        return {uid: ClaimOutcome((), None) if o.error and "not found" in o.error else o
                for uid, o in super().prepare(refs).items()}


def test_a_call_error_for_a_missing_claim_is_accepted(short_tmp, inventory):
    """The kubelet's contract: a failed call means the answer is ignored, and the kubelet never
    sends a claim it could not fetch; upstream's helper fails the whole call (issue 12)."""
    claims = sample_claims(inventory, GPU)
    driver = FailsTheCall(config_for(short_tmp), inventory, MemoryClaimSource(claims))
    server = PluginServer(driver)
    server.start()
    try:
        cases = {c["id"]: c for c in run_node_check(options(short_tmp, GPU, claims))}
    finally:
        server.stop(0)
    for case in ("node/prepare-missing-claim", "node/prepare-batch"):
        assert cases[case]["status"] == "passed", cases[case]["failure"]
        assert "fails" in cases[case]["description"]  # the note says which way the driver went
    assert cases["node/prepare-unknown-device"]["status"] == "passed"  # refused by failing the call


@pytest.mark.parametrize("broken, failing", [
    (WrongCdiIds, {"node/cdi-specs"}),
    (ExtraDevice, {"node/prepare-devices", "node/prepare-concurrent"}),
    (ForgetsUnknown, {"node/unprepare-unknown-claim"}),
    (PreparesMissing, {"node/prepare-missing-claim", "node/prepare-batch"}),
])
def test_fails_on_a_broken_plugin(short_tmp, inventory, broken, failing):
    claims = sample_claims(inventory, GPU)
    driver = broken(config_for(short_tmp), inventory, MemoryClaimSource(claims))
    server = PluginServer(driver)
    server.start()
    try:
        cases = run_node_check(options(short_tmp, GPU, claims))
    finally:
        server.stop(0)
    bad = {c["id"] for c in cases if c["status"] in ("failed", "error")}
    assert failing <= bad, statuses(cases)
    assert "node/registration" not in bad


def test_cli_writes_results_and_exit_codes(start_plugin, short_tmp, inventory, capsys):
    claims = sample_claims(inventory, GPU)
    claims_file = short_tmp / "claims.json"
    claims_file.write_text(json.dumps(claims))
    start_plugin(GPU, claims)
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    argv = ["node-check", "--registry-dir", str(short_tmp / "registry"), "--driver", GPU,
            "--claims", str(claims_file), "--cdi-dir", str(short_tmp / "cdi"), "--out", str(short_tmp / "out")]
    assert run(parser.parse_args(argv)) == 0
    out = capsys.readouterr().out
    assert "PASS    node/prepare-devices" in out
    assert out.rstrip().endswith("0 failed, 0 errors, 1 skipped, 0 findings")
    cases = json.loads((short_tmp / "out" / "node-check.json").read_text())
    assert cases[0]["rerun"].startswith("drakit node-check --registry-dir ")
    assert (short_tmp / "out" / "node-check.txt").read_text() == out
    wrong = argv[:4] + ["nic.other.example.com"] + argv[5:]
    assert run(parser.parse_args(wrong)) == 1
    missing = ["node-check", "--registry-dir", str(short_tmp / "nope"), "--driver", GPU]
    assert run(parser.parse_args(missing)) == 2


class RecordsUnprepare(FakeDriver):
    unprepared: list[str] = []

    def unprepare(self, refs):  # type: ignore[override]
        type(self).unprepared += [r.uid for r in refs]
        return super().unprepare(refs)


def test_a_claim_pods_use_is_prepared_but_never_unprepared(short_tmp, inventory):
    claims = sample_claims(inventory, GPU)
    used = next(c for c in claims if c["metadata"]["name"] == "single")
    used["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "0f0e6a32-0000-4000-8000-00000000000a"}]
    driver = RecordsUnprepare(config_for(short_tmp), inventory, MemoryClaimSource(claims))
    server = PluginServer(driver)
    server.start()
    try:
        cases = {c["id"]: c for c in run_node_check(options(short_tmp, GPU, claims))}
        assert used["metadata"]["uid"] in driver.prepared()  # still prepared for its pod
    finally:
        server.stop(0)
    assert used["metadata"]["uid"] not in RecordsUnprepare.unprepared
    steps = [s["name"] for s in cases["node/prepare-devices"]["steps"]]
    assert "prepare (in use by pods: not unprepared) single" in steps
    assert cases["node/prepare-devices"]["status"] == "passed", cases["node/prepare-devices"]["failure"]
    assert RecordsUnprepare.unprepared  # the claims node-check owns were unprepared


def test_an_answer_naming_another_device_than_the_allocated_one_fails(start_plugin, short_tmp, inventory,
                                                                      monkeypatch):
    """The planted fault prepare-other-device, over real gRPC: node/prepare-devices names the
    device answered and the one allocated."""
    monkeypatch.setenv("DRAKIT_FAKE_DRIVER_PLANT", "prepare-other-device")
    claims = sample_claims(inventory, GPU)
    start_plugin(GPU, claims)
    cases = {c["id"]: c for c in run_node_check(options(short_tmp, GPU, claims))}
    failed = cases["node/prepare-devices"]
    assert failed["status"] == "failed"
    assert "which the claim was not allocated" in failed["failure"]["summary"], failed["failure"]
    assert "the answer does not name the allocated device(s)" in failed["failure"]["detail"]
