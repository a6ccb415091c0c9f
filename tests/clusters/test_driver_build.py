"""Profile v2's plugin programs: on PATH, relative to the profile, or built with the go command
from a local checkout into drakit's driver cache (clusters.local.driverbuild)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drakit.clusters.local import driverbuild
from drakit.fake_driver.profile import load_vendor_profile

MAIN = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("%s") }\n'


def profile(tmp_path: Path, plugin: str) -> Path:
    p = tmp_path / "profile.yaml"
    p.write_text("version: 2\nname: t\ndrivers: {gpu: gpu.t.example}\nclasses: {gpu: gpu.t.example}\n"
                 f"driverUnderTest:\n  plugin:\n{plugin}    command: ['{{binary}}', '--node', '{{node}}']\n")
    return p


def test_a_binary_is_found_on_path_or_relative_to_the_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "bin" / "my-plugin"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    spec = load_vendor_profile(profile(tmp_path, "    binary: bin/my-plugin\n")).under_test.plugin
    assert driverbuild.resolve(spec, "p.yaml") == tool
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    spec = load_vendor_profile(profile(tmp_path, "    binary: my-plugin\n")).under_test.plugin
    assert driverbuild.resolve(spec, "p.yaml") == tool
    spec = load_vendor_profile(profile(tmp_path, "    binary: bin/nothing\n")).under_test.plugin
    with pytest.raises(driverbuild.DriverBuildError, match="no such program relative to the profile's folder"):
        driverbuild.resolve(spec, "p.yaml")
    # the program a user built, named by an environment variable (examples/dra-driver-cpu.yaml)
    spec = load_vendor_profile(profile(tmp_path, "    binary: $MY_PLUGIN_BIN\n")).under_test.plugin
    monkeypatch.delenv("MY_PLUGIN_BIN", raising=False)
    with pytest.raises(driverbuild.DriverBuildError,
                       match=r"^plugin.binary \$MY_PLUGIN_BIN: the environment variable MY_PLUGIN_BIN is not set"):
        driverbuild.resolve(spec, "p.yaml")
    monkeypatch.setenv("MY_PLUGIN_BIN", str(tool))
    assert driverbuild.resolve(spec, "p.yaml") == tool


def test_go_install_goes_to_a_folder_per_module_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAKIT_CACHE", str(tmp_path / "cache"))
    spec = load_vendor_profile(profile(tmp_path, "    goInstall: example.com/drv/cmd/drv-plugin@v1.2.3\n")).under_test.plugin
    assert driverbuild.target(spec) == tmp_path / "cache" / "drivers" / "go" / "example.com_drv_cmd_drv-plugin@v1.2.3" / "drv-plugin"
    with pytest.raises(driverbuild.DriverBuildError, match="run 'drakit cluster build-driver --vendor p.yaml'"):
        driverbuild.resolve(spec, "p.yaml")


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go command")
def test_source_is_built_once_and_again_after_an_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAKIT_CACHE", str(tmp_path / "cache"))
    checkout = tmp_path / "checkout"
    (checkout / "cmd" / "hello").mkdir(parents=True)
    (checkout / "go.mod").write_text("module example.com/hello\n\ngo 1.22\n")
    (checkout / "cmd" / "hello" / "main.go").write_text(MAIN % "one")
    p = profile(tmp_path, "    source: {dir: checkout, package: ./cmd/hello}\n")
    spec = load_vendor_profile(p).under_test.plugin
    path, took = driverbuild.build(spec)
    assert took > 0 and path.parent.parent == tmp_path / "cache" / "drivers" / "src"
    assert subprocess.run([path], capture_output=True, text=True).stdout == "one\n"
    assert driverbuild.build(spec) == (path, 0.0)  # unchanged checkout: the cached program
    (checkout / "cmd" / "hello" / "main.go").write_text(MAIN % "two")
    again, took = driverbuild.build(spec)
    assert again != path and took > 0
    assert subprocess.run([again], capture_output=True, text=True).stdout == "two\n"
    # the CLI builds (here: finds current) and prints the path
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "cluster", "build-driver", "--vendor", str(p)],
                         capture_output=True, text=True, env={**os.environ, "DRAKIT_CACHE": str(tmp_path / "cache")})
    assert res.returncode == 0 and f"plugin: {again} (current)" in res.stdout, res.stdout + res.stderr
    (checkout / "cmd" / "hello" / "main.go").write_text("package main\n\nfunc main() { undefined() }\n")
    with pytest.raises(driverbuild.DriverBuildError, match="failed \\(exit 1\\).*undefined"):
        driverbuild.build(spec)


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go command")
def test_the_docs_example_profile_loads_and_builds_its_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/guide/driver.md's complete example, as written: it loads, and its plugin is built
    from a checkout where the example says (a stand-in module at ../my-gpu-driver)."""
    import re
    page = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "driver.md").read_text()
    example = re.search(r"```yaml\n(version: 2\b.*?)```", page, re.S)
    assert example, "the page's complete example is gone"
    (tmp_path / "docs").mkdir()
    p = tmp_path / "docs" / "my-gpu.yaml"
    p.write_text(example.group(1))
    checkout = tmp_path / "my-gpu-driver"
    (checkout / "cmd" / "kubelet-plugin").mkdir(parents=True)
    (checkout / "go.mod").write_text("module example.com/my-gpu-driver\n\ngo 1.22\n")
    (checkout / "cmd" / "kubelet-plugin" / "main.go").write_text(MAIN % "plugin")
    monkeypatch.setenv("DRAKIT_CACHE", str(tmp_path / "cache"))
    profile = load_vendor_profile(p)
    dut = profile.under_test
    assert profile.version == 2 and [c.name for c in dut.configurations] == ["default", "shared"]
    path, took = driverbuild.build(dut.plugin)
    assert took > 0 and subprocess.run([path], capture_output=True, text=True).stdout == "plugin\n"
