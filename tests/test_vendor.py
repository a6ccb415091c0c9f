"""Vendor profiles and the kubeconfig provider: the same suites against any cluster and any driver.

Unit tests cover profile validation (JSON Schema, ``file:line`` errors), the derivation of what
a case needs of the fake driver, and kubeconfig resolution. The rest runs against the real local
control plane (``local_cluster``): ``drakit run --backend cluster --kubeconfig`` with the fake
profile and with a vendor's own, gate inference by dry-run, ``--install-driver``'s wait and
clean-up, and a bad kubeconfig's one-line error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from drakit.conformance.backends.base import HarnessError
from drakit.conformance.backends.kubeconfig import KubeconfigError, resolve_kubeconfig
from drakit.conformance.cases.loader import load_file, load_text
from drakit.conformance.spec.needs import vendor_unmet
from drakit.fake_driver.profile import SCHEMA_PATH, ProfileError, load_profile, load_vendor_profile

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "vendor-example.yaml"
FAKE = ROOT / "fake_driver" / "profile.yaml"
SUITES = ROOT / "conformance" / "suites"
VOCABULARY = frozenset(load_profile())
CORE_FILES = [SUITES / "core" / "template-claims.case.yaml", SUITES / "core" / "api-validation.case.yaml"]


def drakit(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=env)


# ------------------------------------------------------------------------------ profiles

def test_profile_schema_is_valid_and_both_shipped_profiles_match_it() -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in (FAKE, EXAMPLE):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


def test_bundled_profile_is_the_fake_driver_and_the_example_is_a_vendor() -> None:
    fake, example = load_vendor_profile(), load_vendor_profile(EXAMPLE)
    assert fake.fake and fake.name == "drakit-fake"
    assert not example.fake and example.driver_names == ("gpu.example-vendor.com",)
    assert example.describe() == {"name": "example-vendor", "file": "vendor-example.yaml",
                                  "drivers": ["gpu.example-vendor.com"], "fakeDriver": False}


BAD = [
    ("name: x\ndrivers:\n  gpu: Bad_Name\n", 3, "drivers.gpu: driver name must be a DNS subdomain"),
    ("name: x\ndrivers: {gpu: a.b}\nclasses:\n  gpu: a.b\n  Any: c.d\n", 5, "classes.Any: keys must be identifiers"),
    ("name: x\ndrivers: {gpu: a.b}\n\nattributes:\n  nic:\n    m: model\n", 5,
     "attributes.nic: role 'nic' has no entry under drivers"),
    ("name: x\ndrivers: {gpu: a.b}\nvalues:\n  gpu:\n    ok: 1\n    list: [1]\n", 6, "values.gpu.list: expected a single"),
    ("drivers: {gpu: a.b}\nname: ''\n", 2, "name: required, a non-empty string"),
    ("name: x\ndrivers: {gpu: a.b}\nextra: 1\n", 3, "extra: unknown field"),
    ("name: x\n  drivers: [\n", 2, "invalid YAML"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD, ids=[m for _, _, m in BAD])
def test_bad_profile_is_one_line_with_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = tmp_path / "vendor.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_vendor_profile(path)
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_lint_checks_a_vendor_profile(tmp_path: Path) -> None:
    bad = tmp_path / "vendor.yaml"
    bad.write_text("name: x\ndrivers:\n  gpu: gpu.x.example\nattributes:\n  gpu:\n    numa: 'not valid'\n")
    res = drakit("lint", "--vendor", str(bad), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stdout.splitlines()[0].startswith(f"{bad}:6: attributes.gpu.numa: not a qualified name")
    res = drakit("lint", "--vendor", str(EXAMPLE), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "vendor profile 'example-vendor' is valid: gpu.example-vendor.com (a vendor's own driver)" in res.stdout
    assert "0 errors" in res.stdout and "cases need drakit's fake driver" in res.stdout


# ------------------------------------------------------------------------- what cases need

CASE = """\
id: t/needs
title: t
features: [core]
{extra}steps:
  - apply:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {{name: c}}
      spec: {{devices: {{requests: [{{name: r, exactly: {{deviceClassName: "${{class.gpu}}"}}}}]}}}}
{steps}"""
SLICE = """\
  - apply:
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata: {name: s}
      spec: {driver: "${driver.gpu}", pool: {name: p, generation: 1, resourceSliceCount: 1}, allNodes: true}
"""


def needs_of(extra: str = "", steps: str = "") -> list[tuple[str, int]]:
    res = load_text(CASE.format(extra=extra, steps=steps), "t.case.yaml", load_profile())
    assert not res.errors, res.errors
    return [(n.power, n.line) for n in res.cases[0].needs]


def test_needs_are_derived_from_the_case_content() -> None:
    assert needs_of() == []
    assert needs_of("hardware:\n  nodes: [{name: n, shape: small-1gpu}]\n") == [("fake-hardware", 5)]
    assert needs_of(steps=SLICE) == [("fake-hardware", 10)]
    assert needs_of(steps=SLICE.replace("  - apply:", "  - expectError: invalid\n    apply:")) == []
    assert needs_of(steps="  - fault: {node: n, device: gpu-0, kind: ecc}\n") == [("fault-injection", 10)]
    assert needs_of(steps="  - driverStatus: {claim: c, devices: [{request: r}]}\n") == [("driver-status", 10)]
    rule = ("  - apply: {apiVersion: resource.k8s.io/v1, kind: DeviceTaintRule, metadata: {name: r},"
            " spec: {taint: {key: k, effect: NoSchedule}}}\n")
    assert needs_of(steps=rule) == [("taint-devices", 10)]
    assert needs_of("needs: [binding-control]\n") == [("binding-control", 4)]


def test_an_unknown_need_is_a_load_error_with_its_line() -> None:
    res = load_text(CASE.format(extra="needs: [root-access]\n", steps=""), "t.case.yaml", load_profile())
    (err,) = res.errors
    assert str(err).startswith("t.case.yaml:4: needs[0]: ")


def test_vendor_skips_cases_needing_the_fake_driver_and_cases_it_cannot_name() -> None:
    example, fake = load_vendor_profile(EXAMPLE), load_vendor_profile()
    text = CASE.format(extra="hardware:\n  nodes: [{name: n, shape: small-1gpu}]\n", steps="")
    (case,) = load_text(text, "t.case.yaml", example.placeholders(), vocabulary=VOCABULARY).cases
    assert vendor_unmet(case, fake) is None
    category, message = vendor_unmet(case, example)  # type: ignore[misc]
    assert category == "needs-fake-driver"
    assert "installs fake nodes and devices (hardware.nodes, line 5)" in message
    assert "gpu.example-vendor.com (vendor profile 'example-vendor')" in message
    nic = CASE.format(extra="", steps="").replace("${class.gpu}", "${class.nic}")
    (case,) = load_text(nic, "t.case.yaml", example.placeholders(), vocabulary=VOCABULARY).cases
    assert vendor_unmet(case, example) == ("not-applicable", "the vendor profile 'example-vendor' does not define ${class.nic}")
    typo = load_text(nic.replace("${class.nic}", "${class.nick}"), "t.case.yaml", example.placeholders(),
                     vocabulary=VOCABULARY)
    assert not typo.cases and "unknown placeholder ${class.nick}" in str(typo.errors[0])


def test_every_bundled_case_with_fake_hardware_is_marked() -> None:
    example = load_vendor_profile(EXAMPLE)
    runnable, marked = [], 0
    for f in sorted(SUITES.rglob("*.case.yaml")):
        loaded = load_file(f, example.placeholders(), vocabulary=VOCABULARY)
        assert not loaded.errors, loaded.errors
        for case in loaded.cases:
            if case.nodes or any(s.kind in ("fault", "driverStatus") for s in case.steps):
                assert case.needs, case.id
            marked += bool(case.needs)
            if vendor_unmet(case, example) is None:
                runnable.append(case.id)
    assert marked >= 150
    assert "core/claim-spec-is-immutable" in runnable and len(runnable) >= 15


# ------------------------------------------------------------------------------ kubeconfig

def _kubeconfig(path: Path, contexts: dict[str, str], current: str | None = "a", **cluster: Any) -> Path:
    data = {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", **cluster}}],
            "users": [{"name": "u", "user": {"token": "SECRET-TOKEN-abc"}}],
            "contexts": [{"name": n, "context": {"cluster": c, "user": "u"}} for n, c in contexts.items()]}
    path.write_text(yaml.safe_dump(data))
    return path


def test_kubeconfig_resolution_and_its_one_line_errors(tmp_path: Path) -> None:
    good = _kubeconfig(tmp_path / "k", {"a": "c", "b": "c"})
    target = resolve_kubeconfig(str(good), None)
    assert (target.context, target.cluster, target.user) == ("a", "c", "u")
    assert resolve_kubeconfig(None, "b", environ={"KUBECONFIG": f"{tmp_path / 'gone'}{os.pathsep}{good}"}).context == "b"
    broken = tmp_path / "broken"
    broken.write_text("users:\n- name: u\n  user: {token: SECRET-TOKEN-abc\n")
    cases = [
        ((str(tmp_path / "gone"), None), f"kubeconfig {tmp_path / 'gone'}: no such file"),
        ((str(good), "zz"), f"kubeconfig {good}: context 'zz' not found (contexts: a, b)"),
        ((str(_kubeconfig(tmp_path / "k2", {"a": "c"}, current=None)), None), "no current-context set"),
        ((str(_kubeconfig(tmp_path / "k3", {"a": "nope"})), None), "context 'a' names cluster 'nope'"),
        ((str(_kubeconfig(tmp_path / "k4", {"a": "c"}, server="")), None), "cluster 'c' has no server"),
        ((str(broken), None), f"kubeconfig {broken}:4: not valid YAML"),
        ((str(tmp_path), None), "not a regular file (a folder)"),
    ]
    for args, message in cases:
        with pytest.raises(KubeconfigError) as caught:
            resolve_kubeconfig(*args)
        text = str(caught.value)
        assert message in text and "\n" not in text and "SECRET" not in text and "127.0.0.1" not in text


# -------------------------------------------------------------------- on the local cluster

def _no_credentials(text: str, kubeconfig: Path) -> None:
    cfg = yaml.safe_load(kubeconfig.read_text())
    secrets = [cfg["clusters"][0]["cluster"]["server"], cfg["clusters"][0]["cluster"]["certificate-authority-data"],
               *cfg["users"][0]["user"].values()]
    for secret in secrets:
        assert secret[:40] not in text


def test_core_cases_through_a_kubeconfig_with_the_fake_profile(local_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = drakit("run", *map(str, CORE_FILES), "--backend", "cluster", "--kubeconfig", str(local_cluster.kubeconfig),
                 "--vendor", str(FAKE), "--out", str(out), "--plain", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert len(results["cases"]) >= 14 and all(c["status"] == "passed" for c in results["cases"])
    env = results["environment"]
    cluster = env["backends"]["cluster"]
    assert cluster["kubernetesVersion"].startswith("v1.37.") and cluster["provider"] == "kubeconfig"
    assert cluster["context"] == "drakit-local" and "resource.k8s.io/v1" in cluster["servedApis"]
    assert cluster["featureGates"]["DRAPrioritizedList"] is True
    assert cluster["featureGateSources"]["DRAPrioritizedList"] == "kube-apiserver /metrics; dry-run: field kept: agrees"
    assert cluster["driver"]["underTest"] == "drakit fake driver" and not cluster["driver"]["installedByDrakit"]
    assert env["vendor"] == {"name": "drakit-fake", "file": "profile.yaml", "fakeDriver": True,
                             "drivers": ["gpu.acme.example.com", "gpu.nova.example.com", "nic.swift.example.com"]}
    html = (out / "report.html").read_text()
    assert "<code>drakit-local</code>" in html and "kube-apiserver /metrics; dry-run: field kept: agrees" in html
    for text in ((out / "results.json").read_text(), html, res.stdout):
        _no_credentials(text, local_cluster.kubeconfig)


def test_a_vendors_own_driver_uses_no_fake_hardware(local_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = drakit("run", *map(str, CORE_FILES), "--backend", "cluster", "--kubeconfig", str(local_cluster.kubeconfig),
                 "--vendor", str(EXAMPLE), "--out", str(out), "--plain", cwd=tmp_path)
    # nothing of the vendor's driver ran (it is not installed, and these cases exercise only the
    # API server): never PASS (issue 12), INCOMPLETE with the reason
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-2000:]
    assert "NOT EXERCISED" in res.stdout and "verdict: INCOMPLETE" in res.stdout
    results = json.loads((out / "results.json").read_text())
    assert results["driver"]["name"] == "gpu.example-vendor.com" and results["driver"]["exercised"] is False
    by_status: dict[str, list[dict[str, Any]]] = {}
    for c in results["cases"]:
        by_status.setdefault(c["status"], []).append(c)
    assert set(by_status) == {"passed", "skipped"}
    needs = [c for c in by_status["skipped"] if c["skip"]["category"] == "needs-fake-driver"]
    others = {c["skip"]["category"] for c in by_status["skipped"]} - {"needs-fake-driver"}
    assert len(needs) >= 5 and others <= {"not-applicable"}  # not-applicable: roles the example lacks
    assert all("installs fake nodes and devices" in c["skip"]["message"] for c in needs)
    assert any(c["id"] == "core/claim-spec-is-immutable" for c in by_status["passed"])
    assert results["verdict"]["result"] == "incomplete"
    assert results["environment"]["vendor"]["fakeDriver"] is False
    assert results["environment"]["backends"]["cluster"]["driver"]["underTest"] == "vendor"
    assert "needs-fake-driver" in (out / "report.html").read_text()


def test_a_bad_kubeconfig_is_one_line_and_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("users:\n- name: me\n  user: {token: SECRET-TOKEN-abc\n")
    for args, message in (((str(broken),), f"kubeconfig {broken}:4: not valid YAML"),
                          ((str(tmp_path / "missing"),), "no such file"),
                          ((str(_kubeconfig(tmp_path / "k", {"a": "c"})), "--context", "other"),
                           "context 'other' not found (contexts: a)")):
        res = drakit("run", str(CORE_FILES[0]), "--backend", "cluster", "--kubeconfig", *args,
                     "--out", str(tmp_path / "out"), cwd=tmp_path)
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.returncode == 2 and len(lines) == 1, res.stderr
        assert message in lines[0] and "Traceback" not in res.stdout + res.stderr
        assert "SECRET" not in res.stdout + res.stderr


def test_gates_are_inferred_by_dry_run(local_cluster_factory: Any) -> None:
    from drakit.conformance.backends.kubeapi import KubeApi
    from drakit.conformance.backends.discovery import PROBES, discover
    off = ("DRAListTypeAttributes", "DRAConsumableCapacity", "DRADeviceBindingConditions", "DRADerivedAttributes",
           "DRAFractionalCapacityRange")
    cluster = local_cluster_factory(gates={g: False for g in off})
    api = KubeApi(str(cluster.kubeconfig))
    found = discover(api.version(), api.get_json, api.dry_run)
    flags = cluster.gates["kube-apiserver"]
    for gate in PROBES:
        assert found.gates[gate] == flags.get(gate, True), (gate, found.sources[gate])
        assert found.sources[gate].startswith("dry-run"), found.sources[gate]
    assert all(found.gates[g] is False for g in off if g in PROBES)
    assert found.gates["DRAResourcePoolStatus"] is True and found.sources["DRAResourcePoolStatus"].startswith("served API")
    assert not api.list("ResourceSlice", None) and not api.list("ResourceClaim", "default")  # nothing was stored


def test_install_driver_waits_for_slices_and_removes_what_it_created(local_cluster: Any) -> None:
    from drakit.conformance.backends.kubeapi import KubeApi
    from drakit.conformance.backends.install import install_fake_driver
    api = KubeApi(str(local_cluster.kubeconfig))
    # kwok nodes run no containers, so the driver never publishes: the wait fails and cleans up
    with pytest.raises(HarnessError, match="no ResourceSlice from gpu.acme.example.com within 2 s"):
        install_fake_driver(api, drivers=["gpu.acme.example.com"], timeout=2)
    assert api.get("DeviceClass", "gpu.acme.example.com", None) is None
    # a slice published as the driver would ends the wait
    sl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "drakit-test-acme"},
          "spec": {"driver": "gpu.acme.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                   "allNodes": True, "devices": [{"name": "gpu-0"}]}}
    timer = threading.Timer(1.0, lambda: api.create(sl))
    timer.start()
    try:
        started = time.monotonic()
        inst = install_fake_driver(api, drivers=["gpu.acme.example.com"], timeout=60)
        assert time.monotonic() - started < 30
        kinds = {o["kind"] for o in inst.created}
        assert {"Namespace", "ClusterRole", "DeviceClass", "Deployment", "DaemonSet"} <= kinds
        assert api.get("DeviceClass", "gpu.acme.example.com", None) is not None
        inst.remove()
        assert api.get("DeviceClass", "gpu.acme.example.com", None) is None and not inst.created
    finally:
        timer.join()
        api.delete("ResourceSlice", "drakit-test-acme", None)


def test_report_shows_the_cluster_environment_escaped() -> None:
    from drakit.reports import load_results
    from drakit.reports.html import render_html
    results = load_results(ROOT / "tests" / "fixtures" / "results" / "all-passed.json")
    evil = "<script>alert(1)</script>"
    results["environment"]["vendor"] = {"name": f"v{evil}", "file": "v.yaml", "drivers": [f"d{evil}"],
                                        "fakeDriver": False}
    results["environment"]["backends"]["cluster"] = {
        "kind": "cluster", "kubernetesVersion": "v1.37.2", "provider": "kubeconfig", "context": f"ctx{evil}",
        "cluster": "c", "servedApis": ["resource.k8s.io/v1"], "featureGates": {"DRAPrioritizedList": True},
        "featureGateSources": {"DRAPrioritizedList": f"dry-run: field kept{evil}"}}
    html = render_html(results)
    assert evil not in html
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    for shown in (f"<code>ctx{escaped}</code>", f"v{escaped}", f"<code>d{escaped}</code>",
                  f"dry-run: field kept{escaped}", "<code>resource.k8s.io/v1</code>"):
        assert shown in html, shown


def test_discovery_knows_kinds_whose_plural_is_not_kind_plus_s() -> None:
    """DeviceClass is served as "deviceclasses": a served kind must never read as unserved."""
    from drakit.conformance.backends.discovery import served_resources, Discovery

    docs = {"/apis": {"groups": [{"name": "resource.k8s.io", "versions": [{"groupVersion": "resource.k8s.io/v1"}]}]},
            "/apis/resource.k8s.io/v1": {"resources": [
                {"name": "deviceclasses", "kind": "DeviceClass"}, {"name": "resourceclaims", "kind": "ResourceClaim"},
                {"name": "resourceclaims/status", "kind": "ResourceClaim"}]}}
    served, resources, kinds = served_resources(docs.__getitem__)
    found = Discovery("v1.37.2", served, resources, kinds)
    assert found.serves("resource.k8s.io/v1", "DeviceClass")
    assert found.serves("resource.k8s.io/v1", "ResourceClaim")
    assert not found.serves("resource.k8s.io/v1", "DeviceTaintRule")
    assert not found.serves("resource.k8s.io/v1beta1", "DeviceClass")
    assert found.serves("v1", "Pod")
