"""The ``drakit`` command as a user runs it: exit codes, the three files, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


GOOD = """\
id: cli/good
title: one GPU
features: [core]
hardware:
  nodes: [{name: node-a, shape: small-1gpu}]
steps:
  - apply:
      - apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: c}
        spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: "${class.gpu}"}}]}}
      - apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          resourceClaims: [{name: gpu, resourceClaimName: c}]
          containers: [{name: main, image: pause}]
  - expect:
      - allocated: {claim: c, count: 1, driver: "${driver.gpu}"}
"""

BAD = {
    "syntax.case.yaml": (GOOD.replace("cli/good", "cli/syntax").replace("title: one GPU", "title: [one GPU"), 3),
    "unknown-key.case.yaml": (GOOD.replace("cli/good", "cli/unknown").replace("title: one GPU", "title: one GPU\ntitel: x"), 3),
    "bad-cel.case.yaml": (GOOD.replace("cli/good", "cli/cel").replace(
        'exactly: {deviceClassName: "${class.gpu}"}',
        'exactly: {deviceClassName: "${class.gpu}", selectors: [{cel: {expression: "device.attributes["}}]}'), 11),
    "limit.case.yaml": (GOOD.replace("cli/good", "cli/limit").replace("name: gpu,", "name: Gpu_0,"), 11),
}


def drakit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_bundled_suites_pass_and_write_three_files(tmp_path: Path) -> None:
    res = drakit("run", "--out", str(tmp_path / "out"), "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["schemaVersion"] == "drakit.results/v1"
    assert results["cases"] and all(c["status"] == "passed" for c in results["cases"])
    assert all(c["features"] for c in results["cases"])
    assert (tmp_path / "out" / "junit.xml").stat().st_size > 0
    assert "<html" in (tmp_path / "out" / "report.html").read_text()


def test_bad_files_each_give_one_line_and_the_good_case_still_runs(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "good.case.yaml").write_text(GOOD)
    for name, (text, _) in BAD.items():
        (suite / name).write_text(text)
    res = drakit("run", str(suite), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    for name, (_, line) in BAD.items():
        assert f"{name}:{line}: " in res.stdout, (name, res.stdout)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    statuses = {c["id"]: c["status"] for c in results["cases"]}
    assert statuses["cli/good"] == "passed"
    assert sorted(k for k, v in statuses.items() if v == "error") == sorted(BAD)


def test_failed_case_exit_1_and_usage_errors_exit_2(tmp_path: Path) -> None:
    (tmp_path / "f.case.yaml").write_text(GOOD.replace("count: 1", "count: 2"))
    res = drakit("run", str(tmp_path / "f.case.yaml"), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "expected 2 allocated devices, got 1" in res.stdout
    assert drakit("run", str(tmp_path / "missing"), cwd=tmp_path).returncode == 2
    assert drakit("run", "--backend", "nope", str(tmp_path), cwd=tmp_path).returncode == 2
    assert drakit("run", "--feature-gates", "DRAPrioritizedList=false", str(tmp_path), cwd=tmp_path).returncode == 2


def test_report_rerenders_and_lint_reports_errors(tmp_path: Path) -> None:
    (tmp_path / "good.case.yaml").write_text(GOOD)
    assert drakit("run", str(tmp_path / "good.case.yaml"), "--out", str(tmp_path / "out"), "-q", cwd=tmp_path).returncode == 0
    (tmp_path / "out" / "report.html").unlink()
    res = drakit("report", str(tmp_path / "out" / "results.json"), cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "out" / "report.html").exists()
    (tmp_path / "bad.case.yaml").write_text(BAD["unknown-key.case.yaml"][0])
    lint = drakit("lint", str(tmp_path), cwd=tmp_path)
    assert lint.returncode == 2 and "bad.case.yaml:3: titel: unknown field" in lint.stdout


def test_version_option_errors_and_an_empty_selection(tmp_path: Path) -> None:
    """``--version``; option errors name the option the user typed (not pytest's); ``-k``
    matching nothing writes the three files, verdict incomplete, exit 1."""
    from drakit.conformance.results import _kit_version
    version = drakit("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"drakit {_kit_version()}"
    (tmp_path / "good.case.yaml").write_text(GOOD)
    for args, named in ((["-n", "abc"], "-n/--workers: 'abc'"), (["--workers", "-3"], "-n/--workers: '-3'"),
                        (["--backend", "nope"], "--backend: unknown backend 'nope'"),
                        (["--feature-gates", "NotAGate"], "--feature-gates:")):
        res = drakit("run", str(tmp_path), *args, cwd=tmp_path)
        assert res.returncode == 2 and named in res.stderr, res.stderr
        assert "--drakit-" not in res.stderr and "numprocesses" not in res.stderr, res.stderr
    out = tmp_path / "out"
    res = drakit("run", str(tmp_path), "-k", "nothing-has-this-name", "--out", str(out), cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "no cases matched -k 'nothing-has-this-name'" in res.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["cases"] == [] and results["verdict"]["result"] == "incomplete"
    assert [r["code"] for r in results["verdict"]["reasons"]] == ["nothing-ran"]
    assert (out / "junit.xml").exists() and (out / "report.html").exists()


def test_every_command_says_what_it_does_and_every_option_has_a_help(tmp_path: Path) -> None:
    import argparse

    from drakit.conformance.cli import _parser

    def walk(parser: argparse.ArgumentParser, path: str) -> list[str]:
        problems = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if not (sub.description or "").strip(". "):
                        problems.append(f"{path} {name}: no description")
                    problems += [f"{path} {name} {'/'.join(a.option_strings) or a.dest}: no help"
                                 for a in sub._actions
                                 if not a.help and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
                    problems += walk(sub, f"{path} {name}")
        return problems

    assert walk(_parser(), "drakit") == []
    features = drakit("features", "--help", cwd=tmp_path)
    assert features.returncode == 0 and "List the DRA features of Kubernetes 1.37 that drakit knows." in features.stdout
    claims = drakit("driver", "sample-claims", "--help", cwd=tmp_path)
    assert "for 'drakit node-check --claims'" in claims.stdout and "namespace of the claims" in claims.stdout


def test_cluster_up_default_hardware_is_the_driver_suites_nodes() -> None:
    """`drakit cluster up`'s default nodes are the ones the driver suite runs the fake driver on,
    so a run through its kubeconfig finds every behaviour the fake driver under test declares."""
    from drakit.clusters.cli import DRIVER_SUITE_SHAPES
    from drakit.fake_driver.profile import load_vendor_profile

    dut = load_vendor_profile().under_test
    assert dut is not None and tuple(dut.node_shapes) == DRIVER_SUITE_SHAPES


def test_cluster_up_hardware_list_is_checked_before_anything_starts(tmp_path: Path) -> None:
    for bad, says in ((",server-8gpu", "an empty shape name"), ("server-8gpu,nope", "unknown shape 'nope'")):
        res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "cluster", "up", "--run-dir",
                              str(tmp_path / "rd"), "--hardware", bad], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert not (tmp_path / "rd").exists()
