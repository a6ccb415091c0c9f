"""``drakit run --in-cluster`` without a cluster: what it creates (RBAC explained, Jobs), how a
shard's results travel in its log, what a shard's pod says about it, and the sonobuoy plugin
definition with the fields sonobuoy's own plugin definitions use. Against a real API server
(and real containers): tests/clusters/test_incluster.py."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from drakit.conformance.incluster import manifests as m
from drakit.conformance.incluster.frames import emit_results, find_results, last_progress
from drakit.conformance.incluster.outcome import ENDED, LOST, PENDING, RUNNING, classify
from drakit.conformance.incluster.sonobuoy import plugin_definition

# The plugin definition's fields as sonobuoy (v0.57.5) reads them: its manifest.Manifest and
# manifest.SonobuoyConfig types (pkg/plugin/manifest/manifest.go), the result formats its
# post-processing knows (pkg/client/results/processing.go), and its two drivers (Job, DaemonSet).
SONOBUOY_TOP = {"sonobuoy-config", "spec", "extra-volumes", "podSpec", "config-map"}
SONOBUOY_CONFIG = {"driver", "plugin-name", "skip-cleanup", "result-format", "result-files", "description",
                   "source-url", "order"}
SONOBUOY_FORMATS = {"junit", "raw", "gojson", "manual"}


def test_rbac_is_explained_and_holds_no_secrets_or_rbac() -> None:
    objs = m.rbac_objects("abc12345")
    kinds = [o["kind"] for o in objs]
    assert kinds == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    assert all(o["metadata"]["labels"][m.RUN_LABEL] == "abc12345" for o in objs)
    rules = objs[2]["rules"] + objs[4]["rules"]
    resources = {r for rule in rules for r in rule.get("resources", [])}
    # cluster-wide: no ConfigMaps; in the run's namespace only its lock and the shards' results
    assert {r for rule in objs[4]["rules"] for r in rule["resources"]} == {"leases", "configmaps"}
    assert "configmaps" not in {r for rule in objs[2]["rules"] for r in rule.get("resources", [])}
    assert not resources & {"secrets", "clusterroles", "roles", "rolebindings", "clusterrolebindings",
                            "serviceaccounts", "deployments", "daemonsets", "mutatingwebhookconfigurations"}
    assert all(rule.get("verbs") != ["*"] and "*" not in rule.get("resources", []) for rule in rules)
    table = m.rbac_table().splitlines()
    assert len(table) == len(m.CLUSTER_RULES) + len(m.NAMESPACE_RULES) and all(" -- " in line for line in table)
    assert objs[4]["metadata"]["namespace"] == "drakit-abc12345"  # the Lease rights: the run's namespace only


def test_shard_jobs_run_one_shard_each_with_the_case_files_mounted() -> None:
    files = [("core/a.case.yaml", "id: a\n"), ("b.case.yaml", "id: b\n")]
    cm, paths = m.case_files(files, "abc12345")
    items = cm.pop("items")
    assert paths == ["/cases/core/a.case.yaml", "/cases/b.case.yaml"] and set(cm["data"]) == {"f0", "f1"}
    job = m.shard_job("abc12345", 2, 3, "img:1", ["-m", "feature_core", *paths], items)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][:7] == ["drakit", "run", "--backend", "cluster", "--shard", "2/3", "--out"]
    assert "--emit-results" in container["command"] and container["command"][-2:] == paths
    assert {"name": "DRAKIT_RUN_ID", "value": "abc12345s2"} in container["env"]
    assert job["spec"]["backoffLimit"] == 0 and pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "drakit"
    assert pod["volumes"][1]["configMap"]["items"] == items
    assert pod["automountServiceAccountToken"] is False and pod["volumes"][-1]["name"] == "token"
    assert {"name": "DRAKIT_RESULTS_CONFIGMAP", "value": "drakit-abc12345/drakit-shard-2"} in container["env"]
    big = [("x.case.yaml", "a" * (m.MAX_CASE_BYTES + 1))]
    try:
        m.case_files(big, "r")
        raise AssertionError("too large a ConfigMap accepted")
    except ValueError as exc:
        assert "at most" in str(exc)


def test_results_travel_in_a_log_and_a_damaged_frame_is_no_results() -> None:
    results = {"schemaVersion": "drakit.results/v1", "cases": [{"id": "x" * 5000}]}
    stream = io.StringIO()
    stream.write("drakit: running\n::drakit-progress 3 7\n")
    emit_results(json.dumps(results), stream)
    log = stream.getvalue() + "drakit: wrote out/results.json\n"
    assert find_results(log) == results
    assert last_progress(log.splitlines()) == (3, 7)
    lines = log.splitlines()
    cut = "\n".join(line for line in lines if not line.startswith("::drakit-results-end"))
    assert find_results(cut) is None
    body = [i for i, line in enumerate(lines) if line.startswith("::drakit-results-begin")][0] + 1
    lines[body] = lines[body][:-4] + "AAAA"
    assert find_results("\n".join(lines)) is None
    assert find_results("no frame at all") is None


def _pod(phase: str, node: str = "n1", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p-1"}, "spec": {"nodeName": node, "containers": [{"image": "img:1"}]},
            "status": {"phase": phase, **status}}


def test_a_shards_state_from_its_job_pod_and_node() -> None:
    job: dict[str, Any] = {"status": {}}
    assert classify(job, [], {"n1"}, None).state == PENDING
    assert classify(job, [_pod("Running")], {"n1"}, None).state == RUNNING
    ended = classify(job, [_pod("Failed", containerStatuses=[{"state": {"terminated": {"exitCode": 137, "reason": "Error"}}}])],
                     {"n1"}, "p-1")
    assert (ended.state, ended.why) == (ENDED, "exit code 137 (Error)")
    gone = classify(job, [_pod("Running", node="n2")], {"n1"}, "p-1")
    assert gone.state == LOST and "node n2 went away" in gone.why
    deleted = classify(job, [], {"n1"}, "p-1")
    assert deleted.state == LOST and "p-1 was deleted" in deleted.why
    pull = classify(job, [_pod("Pending", containerStatuses=[{"state": {"waiting": {"reason": "ErrImageNeverPull"}}}])],
                    {"n1"}, None)
    assert pull.state == LOST and "image img:1 cannot be pulled" in pull.why
    assert classify(None, [], None, None).state == LOST
    assert classify(job, [_pod("Unknown")], {"n1"}, "p-1").state == LOST


def test_the_sonobuoy_plugin_has_the_fields_sonobuoy_reads() -> None:
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "sonobuoy-plugin", "--image", "img:1", "--",
                          "-m", "feature_core"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    doc = yaml.safe_load(res.stdout)
    assert doc == plugin_definition("img:1", doc["sonobuoy-config"]["description"].split()[1].rstrip(":"),
                                    ["-m", "feature_core"])
    assert set(doc) <= SONOBUOY_TOP and set(doc["sonobuoy-config"]) <= SONOBUOY_CONFIG
    config = doc["sonobuoy-config"]
    assert (config["driver"], config["result-format"], config["result-files"]) == ("Job", "junit", ["junit.xml"])
    assert config["result-format"] in SONOBUOY_FORMATS and config["plugin-name"] == "drakit"
    spec = doc["spec"]
    assert spec["name"] == "plugin" and spec["command"][:2] == ["drakit", "run"] and "--sonobuoy" in spec["command"]
    assert {"name": "results", "mountPath": "/tmp/sonobuoy/results"} in spec["volumeMounts"]
    assert spec["command"][-2:] == ["-m", "feature_core"]


def test_drakit_run_sonobuoy_writes_the_tarball_and_the_done_file(tmp_path: Path) -> None:
    results = tmp_path / "sonobuoy-results"
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "--out", str(tmp_path / "out"), "-q",
                          "-k", "core/", "--sonobuoy"], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "SONOBUOY_RESULTS_DIR": str(results)})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    done = (results / "done").read_text()
    assert done == str(results / "drakit-results.tar.gz")
    with tarfile.open(done) as tar:
        assert sorted(tar.getnames()) == ["junit.xml", "report.html", "results.json"]
        junit = tar.extractfile("junit.xml").read().decode()  # type: ignore[union-attr]
    assert "<testcase " in junit


def test_a_vendor_profile_travels_to_the_shards_in_a_configmap() -> None:
    text = "name: acme\ndrivers:\n  gpu: gpu.acme.example.com\n"
    cm, in_pod = m.profile_configmap("acme-profile.yaml", text, "abc12345")
    assert in_pod == "/profile/acme-profile.yaml"  # the file keeps its name: results.json records it
    assert cm["metadata"]["name"] == "drakit-profile" and cm["metadata"]["namespace"] == "drakit-abc12345"
    assert cm["data"] == {"profile": text} and cm["metadata"]["labels"][m.RUN_LABEL] == "abc12345"
    job = m.shard_job("abc12345", 1, 2, "img:1", ["-m", "feature_core"], None, profile=in_pod)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = container["command"]
    assert command[command.index("--vendor") + 1] == in_pod and command[-2:] == ["-m", "feature_core"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "profile"]
    assert volume["configMap"] == {"name": "drakit-profile", "items": [{"key": "profile", "path": "acme-profile.yaml"}]}
    assert {"name": "profile", "mountPath": "/profile", "readOnly": True} in container["volumeMounts"]
    plain = m.shard_job("abc12345", 1, 2, "img:1", [], None)["spec"]["template"]["spec"]
    assert "--vendor" not in plain["containers"][0]["command"] and "profile" not in [v["name"] for v in plain["volumes"]]
    with pytest.raises(ValueError, match="vendor profile holds"):
        m.profile_configmap("big.yaml", "#" * (m.MAX_CASE_BYTES + 1), "r")


def test_a_bad_vendor_profile_is_one_line_before_anything_is_created(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: acme\ndrivers:\n  gpu: 12\n")
    for profile, says in ((bad, f"drakit run: vendor profile: {bad}:3: "), (tmp_path / "none.yaml", "cannot read")):
        # no cluster at that kubeconfig: the profile is checked before the API server is asked anything
        res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "--in-cluster", "--vendor",
                              str(profile), "--kubeconfig", str(tmp_path / "no-kubeconfig")], capture_output=True,
                             text=True, timeout=60, cwd=tmp_path)
        assert res.returncode == 2, res.stdout + res.stderr
        assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "Traceback" not in res.stderr and not (tmp_path / "drakit-out").exists()


def test_the_results_part_size_comes_from_the_environment_within_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    from drakit.conformance.incluster.channel import PART, PART_ENV, part_bytes
    assert part_bytes({}) == PART and part_bytes({PART_ENV: "4096"}) == 4096
    for bad in ("12", "lots", str(PART + 1), "-5"):
        assert part_bytes({PART_ENV: bad}) == PART
        assert f"${PART_ENV}={bad!r} is not a number of bytes" in capsys.readouterr().err
    job = m.shard_job("abc12345", 1, 2, "img:1", [], None, part=4096)
    assert {"name": PART_ENV, "value": "4096"} in job["spec"]["template"]["spec"]["containers"][0]["env"]


def test_the_schedulers_gates_the_caller_read_reach_the_shards_and_only_those(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shards cannot reach a local cluster's scheduler; its gates, read by the caller, come
    in their environment and count as that component's, never as the API server's."""
    import json
    from types import SimpleNamespace
    from drakit.conformance.backends import gatemetrics
    seen = {"kube-scheduler": {"DRAFractionalCapacityRange": True}}
    job = m.shard_job("abc12345", 1, 2, "img:1", [], None, component_gates=seen)
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env[gatemetrics.CALLER_ENV]) == seen
    assert gatemetrics.CALLER_ENV not in {e["name"] for e in m.shard_job("abc12345", 1, 2, "img:1", [], None)[
        "spec"]["template"]["spec"]["containers"][0]["env"]}
    assert gatemetrics.caller_gates({gatemetrics.CALLER_ENV: env[gatemetrics.CALLER_ENV]}) == seen
    for bad in ("not json", "[1]", '{"kube-scheduler": 3}', '{"kube-apiserver": {"X": true}}'):
        assert gatemetrics.caller_gates({gatemetrics.CALLER_ENV: bad}) == {}
    assert gatemetrics.caller_gates({gatemetrics.CALLER_ENV: '{"kube-scheduler": {"A": true, "B": "yes"}}'}) == {
        "kube-scheduler": {"A": True}}
    api = SimpleNamespace(api_client=None, target=SimpleNamespace(config_file=None))  # in a pod: no run dir
    monkeypatch.setattr(gatemetrics, "apiserver_gates", lambda client: ({"DRAFractionalCapacityRange": False}, ""))
    monkeypatch.setenv(gatemetrics.CALLER_ENV, env[gatemetrics.CALLER_ENV])
    assert gatemetrics.observed_gates(api) == {"kube-apiserver": {"DRAFractionalCapacityRange": False}, **seen}


def test_the_sonobuoy_plugin_carries_a_vendor_profile_in_its_config_map() -> None:
    from drakit.fake_driver.profile import bundled_profile_path
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "sonobuoy-plugin", "--image", "img:1",
                          "--vendor", str(bundled_profile_path()), "--", "-k", "core/"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    doc = yaml.safe_load(res.stdout)
    assert set(doc) <= SONOBUOY_TOP and doc["config-map"] == {"profile.yaml": bundled_profile_path().read_text()}
    command = doc["spec"]["command"]
    assert command[command.index("--vendor") + 1] == "/tmp/sonobuoy/config/profile.yaml"  # where sonobuoy mounts it
    assert command[-2:] == ["-k", "core/"]
    assert "config-map" not in plugin_definition("img:1", "0", [])
    bad = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "sonobuoy-plugin", "--vendor", "/no/such.yaml"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and not bad.stdout and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert bad.stderr.startswith("drakit sonobuoy-plugin: vendor profile: /no/such.yaml")


def test_run_options_reach_the_shards_or_are_refused_in_one_line(tmp_path: Path) -> None:
    from drakit.conformance.cli import _parser
    from drakit.conformance.incluster.run import shard_args
    args = _parser().parse_args(["run", "--in-cluster", "-k", "core/", "-m", "feature_core", "--case-timeout", "90s",
                                 "--max-case-size", "2MiB", "--feature-gates", "DRAPartitionableDevices=false"])
    assert shard_args(args) == ["-k", "core/", "-m", "feature_core", "--feature-gates", "DRAPartitionableDevices=false",
                                "--max-case-size", "2MiB", "--case-timeout", "90s"]
    # no cluster at that kubeconfig: each is said before the API server is asked anything
    for given, says in ((["-n", "2"], "-n/--workers does not apply to --in-cluster"),
                        (["--runtime", "fake"], "--runtime does not apply to --in-cluster"),
                        (["--shard-lock", "a/b"], "--shard-lock does not apply to --in-cluster"),
                        (["--case-timeout", "5x"], "--case-timeout: '5x' is not a time budget")):
        res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "--in-cluster", *given,
                              "--kubeconfig", str(tmp_path / "none")], capture_output=True, text=True, timeout=60)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("drakit run: "), res.stderr
        assert says in lines[0], res.stderr
