"""Profile v2: schema version, containerEnv templates and patterns, programs, configurations,
controller; a v1 profile keeps loading as before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drakit.conformance.cases.driverchecks import expected_env
from drakit.fake_driver.envtemplate import EnvPattern
from drakit.fake_driver.profile import ProfileError, load_vendor_profile

ROOT = Path(__file__).resolve().parents[1]
HEAD = "name: t\ndrivers: {gpu: gpu.t.example}\nclasses: {gpu: gpu.t.example}\n"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "p.yaml"
    p.write_text(text)
    return p


def test_v1_profiles_load_as_before() -> None:
    upstream = load_vendor_profile(ROOT / "examples" / "upstream-test-driver.yaml")
    assert upstream.version == 1
    assert upstream.under_test.container_env == (("claim_{claimId}_{requestId}", "true"),)
    assert upstream.under_test.plugin.binary is None and not upstream.under_test.plugin.builds
    assert load_vendor_profile().version == 1  # the bundled fake drivers' profile


@pytest.mark.parametrize("body, line, message", [
    ("driverUnderTest:\n  plugin:\n    command: [x]\n    binary: x\n", 7, "driverUnderTest.plugin.binary: needs version: 2"),
    ("driverUnderTest:\n  containerEnv:\n    A: {pattern: '.*'}\n", 6, "driverUnderTest.containerEnv.A: needs version: 2"),
    ("driverUnderTest:\n  controller: {command: [x]}\n", 5, "driverUnderTest.controller: needs version: 2"),
    ("driverUnderTest:\n  plugin:\n    command: [x]\n    needs: [nri]\n", 7, "driverUnderTest.plugin.needs: needs version: 2"),
    ("driverUnderTest:\n  plugin:\n    command: [x]\n    setup: [y]\n", 7, "driverUnderTest.plugin.setup: needs version: 2"),
    ("driverUnderTest:\n  plugin:\n    command: [x]\n    build: make\n", 7, "driverUnderTest.plugin.build: needs version: 2"),
])
def test_a_v2_field_in_a_v1_profile_is_one_line(tmp_path: Path, body: str, line: int, message: str) -> None:
    with pytest.raises(ProfileError) as err:
        load_vendor_profile(write(tmp_path, HEAD + body))
    assert str(err.value) == f"{tmp_path / 'p.yaml'}:{line}: {message} at the top of the profile (a profile v2 field)"


@pytest.mark.parametrize("env, message", [
    ("'X_{device|shout}': '1'", "unknown transform 'shout'"),
    ("'X': '{claimUid}'", "unknown placeholder {claimUid}"),
    ("'X': {pattern: '([0-9'}", "not a regular expression"),
    ("'X': 'a{b'", "a lone '{'"),
])
def test_bad_env_templates_are_one_line(tmp_path: Path, env: str, message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)) as err:
        load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + f"driverUnderTest:\n  containerEnv:\n    {env}\n"))
    assert f"{tmp_path / 'p.yaml'}:7: driverUnderTest.containerEnv." in str(err.value)


def test_env_templates_fill_uid_node_pool_and_transformed_device_names(tmp_path: Path) -> None:
    p = write(tmp_path, "version: 2\n" + HEAD + """driverUnderTest:
  containerEnv:
    "DRA_CPUSET_{claimUID}": {pattern: '[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*'}
    "GPU_{device|trimprefix:card-|upper}": "{node}/{pool}/{device}"
    "CLAIM_{claimId}": "{namespace}.{claim}"
    "LITERAL": "{{not a placeholder}}"
""")
    dut = load_vendor_profile(p).under_test
    assert isinstance(dut.container_env[0][1], EnvPattern)
    claim = {"metadata": {"name": "my-claim", "namespace": "ns", "uid": "4f1c"},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "dev", "driver": "gpu.t.example", "pool": "n1", "device": "card-0"},
                 {"request": "dev", "driver": "other.example", "pool": "n1", "device": "x"}]}}}}
    want = expected_env(dut, claim, None, "node-1")
    assert want["GPU_0"] == "node-1/n1/card-0" and want["CLAIM_my_claim"] == "ns.my-claim"
    assert want["LITERAL"] == "{not a placeholder}"
    cpuset = want["DRA_CPUSET_4f1c"]
    assert cpuset.fullmatch("0-3,8") and not cpuset.fullmatch("all")


def test_configurations_change_the_plugin_and_the_optional_behaviours(tmp_path: Path) -> None:
    p = write(tmp_path, "version: 2\n" + HEAD + """driverUnderTest:
  optional: [admin-access]
  plugin:
    binary: bin/plugin
    command: ["{binary}", "--node={node}"]
    env: {LOG: debug}
  configurations:
    - {name: default}
    - {name: shared, args: ["--shared"], env: {MODE: shared}, optional: [admin-access, consumable-capacity]}
""")
    profile = load_vendor_profile(p)
    assert [c.name for c in profile.under_test.configurations] == ["default", "shared"]
    assert profile.under_test.plugin.profile_dir == str(tmp_path)
    shared = profile.configured("shared").under_test
    assert shared.plugin.command == ("{binary}", "--node={node}", "--shared")
    assert dict(shared.plugin.env) == {"LOG": "debug", "MODE": "shared"}
    assert shared.optional == ("admin-access", "consumable-capacity")
    assert profile.configured("default").under_test.optional == ("admin-access",)
    with pytest.raises(ProfileError, match="no configuration 'other' \\(known: default, shared\\)"):
        profile.configured("other")


def test_plugin_needs_say_what_the_fake_runtime_lacks_in_one_line(tmp_path: Path) -> None:
    from drakit.clusters.local.vendorplugin import needs_problem
    p = load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + "driverUnderTest:\n  plugin:\n"
                                  "    command: ['{binary}']\n    binary: x\n    needs: [nri, stockPaths]\n"))
    needs = p.under_test.plugin.needs
    assert needs == ("nri", "stockPaths")
    assert needs_problem("dra.cpu", needs, "containerd") is None
    assert needs_problem("dra.cpu", (), "fake") is None
    line = needs_problem("dra.cpu", needs, "fake")
    assert line is not None and "\n" not in line
    assert line.startswith("the dra.cpu plugin needs NRI (the container runtime's socket /var/run/nri/nri.sock) and ")
    assert "the fake runtime has none: run it on containerd nodes (--runtime containerd)" in line
    assert "kwok nodes" in (needs_problem("dra.cpu", needs, None) or "")
    with pytest.raises(ProfileError, match=re.escape("p.yaml:8: driverUnderTest.plugin.needs[0]: 'gpu' is not one of ['nri', 'stockPaths']")):
        load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + "driverUnderTest:\n  plugin:\n"
                                  "    command: [x]\n    needs: [gpu]\n"))


def test_a_configuration_may_publish_fewer_capacities(tmp_path: Path) -> None:
    body = """capacities: {gpu: {memory: memory, cores: cores}}
driverUnderTest:
  plugin: {binary: x, command: ["{binary}"]}
  configurations:
    - {name: whole}
    - {name: bare, capacities: []}
    - {name: some, capacities: [cores]}
"""
    profile = load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body))
    names = {c: [r.key for r in profile.configured(c).capacities] for c in ("whole", "bare", "some")}
    assert names == {"whole": ["memory", "cores"], "bare": [], "some": ["cores"]}
    # what the cases' placeholders see: a capacity the configuration does not publish is no placeholder
    assert "cel.gpu.memory" in profile.configured("whole").placeholders()
    assert "cel.gpu.memory" not in profile.configured("some").placeholders()
    with pytest.raises(ProfileError, match=re.escape("p.yaml:11: driverUnderTest.configurations[2].capacities[0]: "
                                                     "'watts' is not a key of capacities of the role under test "
                                                     "(known: cores, memory)")):
        load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body.replace("[cores]", "[watts]")))


def test_run_says_in_one_line_before_any_cluster_why_the_plugin_cannot_start(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    p = write(tmp_path, "version: 2\n" + HEAD + "driverUnderTest:\n  plugin:\n"
              "    command: ['{binary}']\n    binary: $DK_TEST_PLUGIN\n    needs: [nri]\n")
    suite = ROOT / "conformance" / "suites" / "driver"

    def run(runtime: str | None, **env: str) -> subprocess.CompletedProcess[str]:
        base = {k: v for k, v in os.environ.items() if k not in ("DK_TEST_PLUGIN", "DRAKIT_RUNTIME")}
        asked = ["--runtime", runtime] if runtime else []
        return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", "--backend", "cluster", "--cluster",
                               "local", *asked, "--vendor", str(p), str(suite), "--out", str(tmp_path / "o")],
                              capture_output=True, text=True, timeout=120, env={**base, **env})
    fake = run("fake")
    assert fake.returncode == 2 and fake.stderr.count("\n") == 1, fake.stderr
    assert "needs NRI" in fake.stderr and "the fake runtime has none: run it on containerd nodes" in fake.stderr
    unset = run("containerd")
    assert unset.returncode == 2 and "the environment variable DK_TEST_PLUGIN is not set" in unset.stderr, unset.stderr
    default = run(None)  # the default runtime: containerd as root (then the program is what is missing)
    if os.geteuid() == 0:
        assert default.returncode == 2 and "DK_TEST_PLUGIN is not set" in default.stderr, default.stderr
    else:  # kwok nodes with drakit's node agent: no runtime at all
        assert default.returncode == 2 and "kwok nodes" in default.stderr, default.stderr
    missing = run("containerd", DK_TEST_PLUGIN=str(tmp_path / "nothing"))
    assert missing.returncode == 2 and f"no such program ({tmp_path / 'nothing'})" in missing.stderr, missing.stderr
    assert not (tmp_path / "o").exists()  # nothing started, nothing written


def test_cpuset_env_names_a_container_env_key_and_the_containers_cpus_must_be_that_set(tmp_path: Path) -> None:
    from drakit.conformance.backends.containers import CPUS_ALLOWED
    from drakit.conformance.cases.checks import ExpectationFailed
    from drakit.conformance.cases.driverchecks import _check_cpuset
    body = "driverUnderTest:\n  containerEnv: {'CPUS_{claimUID}': {pattern: '.*'}}\n  cpusetEnv: 'CPUS_{claimUID}'\n"
    dut = load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body)).under_test
    assert dut.cpuset_env == "CPUS_{claimUID}"
    with pytest.raises(ProfileError, match=r"cpusetEnv: 'X' is not a key of driverUnderTest.containerEnv"):
        load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body.replace("cpusetEnv: 'CPUS_{claimUID}'", "cpusetEnv: X")))
    claim = {"metadata": {"name": "c", "uid": "u1", "namespace": "ns"}, "status": {"allocation": {"devices": {"results": [
        {"driver": "gpu.t.example", "pool": "n1", "device": "cpu0", "request": "dev"}]}}}}
    _check_cpuset(dut, claim, {"pod": "p"}, {"CPUS_u1": "1-2,4", CPUS_ALLOWED: "1,2,4"}, "n1")
    with pytest.raises(ExpectationFailed, match=r"may run on CPUs 0-4, not exactly the cpuset its driver gave it \(CPUS_u1=1-2,4\)"):
        _check_cpuset(dut, claim, {"pod": "p"}, {"CPUS_u1": "1-2,4", CPUS_ALLOWED: "0-4"}, "n1")
    with pytest.raises(ExpectationFailed, match="printed no Cpus_allowed_list"):
        _check_cpuset(dut, claim, {"pod": "p"}, {"CPUS_u1": "1"}, "n1")


def test_a_setup_step_and_a_build_line_are_read_and_checked(tmp_path: Path) -> None:
    body = ("driverUnderTest:\n  plugin:\n    command: ['{binary}']\n    binary: $DK_TEST_PLUGIN\n"
            "    setup: [sh, '{profileDir}/root.sh', '{nodeDir}/root']\n    build: go build ./cmd/x in example.com/x\n")
    spec = load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body)).under_test.plugin
    assert spec.setup == ("sh", "{profileDir}/root.sh", "{nodeDir}/root")
    assert spec.build_hint == "go build ./cmd/x in example.com/x"
    with pytest.raises(ProfileError, match=re.escape("p.yaml:9: driverUnderTest.plugin.setup[1]: unknown placeholder {nodeRoot}")):
        load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body.replace("{profileDir}", "{nodeRoot}")))
    with pytest.raises(ProfileError, match=re.escape("p.yaml:10: driverUnderTest.plugin.build: expected one line")):
        load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body.replace("build: go build", 'build: "go\\nbuild')
                                  .replace("example.com/x\n", 'example.com/x"\n')))


def test_lint_names_in_one_line_what_to_build_when_the_program_is_missing(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    p = write(tmp_path, "version: 2\n" + HEAD + "driverUnderTest:\n  plugin:\n    command: ['{binary}']\n"
              "    binary: $DK_TEST_PLUGIN\n    build: go build ./cmd/x in example.com/x (DK_TEST_PLUGIN)\n")

    def lint(**env: str) -> subprocess.CompletedProcess[str]:
        base = {k: v for k, v in os.environ.items() if k != "DK_TEST_PLUGIN"}
        return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "lint", "--vendor", str(p),
                               str(ROOT / "conformance" / "suites" / "driver")], capture_output=True, text=True,
                              timeout=120, env={**base, **env})
    res = lint()
    assert res.returncode == 2, res.stdout + res.stderr  # a run would stop on it: not a valid profile here
    lines = [x for x in res.stdout.splitlines() if "program" in x]
    assert lines == [f"{p}: driverUnderTest.plugin: plugin.binary $DK_TEST_PLUGIN: the environment variable "
                     "DK_TEST_PLUGIN is not set (it names the program you built); build: go build ./cmd/x in "
                     "example.com/x (DK_TEST_PLUGIN)"], res.stdout
    missing = lint(DK_TEST_PLUGIN=str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "no such program; build: go build ./cmd/x" in missing.stdout, missing.stdout
    prog = tmp_path / "plugin"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    assert "program" not in lint(DK_TEST_PLUGIN=str(prog)).stdout


def test_container_devices_must_be_character_devices_in_the_container_and_absent_without_the_claim(tmp_path: Path) -> None:
    from drakit.conformance.backends.containers import CHARDEVS
    from drakit.conformance.cases.checks import ExpectationFailed
    from drakit.conformance.cases.driverchecks import _check_devices
    body = "driverUnderTest:\n  containerDevices: ['/dev/nvidia{device|trimprefix:gpu-}', /dev/nvidiactl]\n"
    dut = load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body)).under_test
    assert dut.container_devices == ("/dev/nvidia{device|trimprefix:gpu-}", "/dev/nvidiactl")
    with pytest.raises(ProfileError, match=re.escape("p.yaml:5: driverUnderTest.containerDevices: needs version: 2")):
        load_vendor_profile(write(tmp_path, HEAD + body))
    with pytest.raises(ProfileError, match=re.escape("driverUnderTest.containerDevices[0]: expected a device path below /dev")):
        load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body.replace("'/dev/nvidia", "'nvidia")))
    claim = {"metadata": {"name": "c", "uid": "u1", "namespace": "ns"}, "status": {"allocation": {"devices": {"results": [
        {"driver": "gpu.t.example", "pool": "n1", "device": "gpu-3", "request": "dev"}]}}}}
    both = {CHARDEVS: "/dev/null /dev/nvidia3 /dev/nvidiactl"}
    _check_devices(dut, claim, {"pod": "p"}, both, "n1")
    with pytest.raises(ExpectationFailed, match=re.escape("lacks the device nodes ['/dev/nvidia3'] the driver's CDI edits")):
        _check_devices(dut, claim, {"pod": "p"}, {CHARDEVS: "/dev/null /dev/nvidia0 /dev/nvidiactl"}, "n1")
    with pytest.raises(ExpectationFailed, match="has not listed its character devices"):
        _check_devices(dut, claim, {"pod": "p"}, {}, "n1")
    _check_devices(dut, claim, {"pod": "p", "absent": True}, {CHARDEVS: "/dev/null"}, "n1")
    with pytest.raises(ExpectationFailed, match=re.escape("has the driver's device nodes ['/dev/nvidia3']")):
        _check_devices(dut, claim, {"pod": "p", "container": "plain", "absent": True}, {CHARDEVS: "/dev/nvidia3"}, "n1")


def test_a_containers_listed_character_devices_are_read_from_its_log() -> None:
    from unittest import mock

    from drakit.conformance.backends.containers import CHARDEVS, CPUS_ALLOWED, env_from_log
    log = "A=1\nCpus_allowed_list:\t0-1\nChardev: /dev/null\nChardev: /dev/dri/card0\nChardevs: done\n"
    with mock.patch("kubernetes.client.CoreV1Api") as api:
        api.return_value.read_namespaced_pod_log.return_value = log
        got = env_from_log(mock.Mock(), "ns", "p", "main")
        assert got == {"A": "1", CPUS_ALLOWED: "0-1", CHARDEVS: "/dev/null /dev/dri/card0"}
        api.return_value.read_namespaced_pod_log.return_value = "A=1\nChardevs: done\n"
        assert env_from_log(mock.Mock(), "ns", "p", "main") == {"A": "1", CHARDEVS: ""}  # listed, none there
        api.return_value.read_namespaced_pod_log.return_value = "A=1\n"
        assert CHARDEVS not in (env_from_log(mock.Mock(), "ns", "p", "main") or {})  # a pod that lists nothing
        api.return_value.read_namespaced_pod_log.return_value = "A=1\nChardev: /dev/null\n"
        assert CHARDEVS not in (env_from_log(mock.Mock(), "ns", "p", "main") or {})  # not done listing yet


def test_only_an_expectation_that_asks_for_devices_checks_them_and_a_partial_list_is_no_list(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from drakit.conformance.backends.containers import CHARDEVS
    from drakit.conformance.cases.checks import ExpectationFailed
    from drakit.conformance.cases.driverchecks import check_container_env
    body = "driverUnderTest:\n  containerEnv: {V: void}\n  containerDevices: ['/dev/gpu{device|trimprefix:gpu-}']\n"
    vendor = load_vendor_profile(write(tmp_path, "version: 2\n" + HEAD + body))
    claim = {"metadata": {"name": "c", "uid": "u1", "namespace": "ns"}, "status": {"allocation": {"devices": {"results": [
        {"driver": "gpu.t.example", "pool": "n1", "device": "gpu-3", "request": "dev"}]}}}}
    printed: dict[str, str] = {"V": "void"}
    s = SimpleNamespace(vendor=vendor, get=lambda kind, name: claim if kind == "ResourceClaim" else {"spec": {"nodeName": "n1"}},
                        container_env=lambda pod, container: printed)
    check_container_env(s, {"pod": "p", "claim": "c"})  # a case whose pod lists no devices: env only
    with pytest.raises(ExpectationFailed, match="has not listed its character devices"):
        check_container_env(s, {"pod": "p", "claim": "c", "devices": True})
    printed[CHARDEVS] = "/dev/null"
    with pytest.raises(ExpectationFailed, match=re.escape("lacks the device nodes ['/dev/gpu3']")):
        check_container_env(s, {"pod": "p", "claim": "c", "devices": True})
    printed[CHARDEVS] = "/dev/null /dev/gpu3"
    check_container_env(s, {"pod": "p", "claim": "c", "devices": True})


def test_lint_of_the_nvidia_example_without_its_programs_names_the_three_builds_in_one_line() -> None:
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "NVIDIA_GPU_PLUGIN_BIN"}
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "lint", "--vendor", "examples/nvidia-gpu.yaml",
                          "conformance/suites/driver"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 2, res.stdout + res.stderr  # without its programs a run would stop: said by lint
    lines = [x for x in res.stdout.splitlines() if "build:" in x]
    assert len(lines) == 1 and lines[0].startswith("examples/nvidia-gpu.yaml: driverUnderTest.plugin: "), res.stdout
    for what in ("./cmd/gpu-kubelet-plugin", "pkg/gpu/mocknvml", "nvidia-cdi-hook@v1.19.1"):
        assert what in lines[0]
