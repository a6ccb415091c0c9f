"""The wheel as a user gets it: one top-level import package, its data files, and a `drakit run`
that passes from a folder outside the repository (a fresh virtual environment, no editable
install, no repository on sys.path)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_has_one_import_root_and_runs_outside_the_repository(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(dist)],
                   check=True, capture_output=True, text=True)
    (wheel,) = dist.glob("drakit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"drakit"}, f"the wheel installs other top-level packages: {sorted(tops)}"
    for data in ("drakit/conformance/suites/core/", "drakit/reports/schema/results.v1.json",
                 "drakit/reports/templates/", "drakit/fake_driver/profile.yaml", "drakit/clusters/local/k8sbins/go.mod",
                 "drakit/conformance/oracle/go.mod", "drakit/fake_hw/profiles/"):
        assert any(n.startswith(data) for n in names), f"{data} is missing from the wheel"
    suites = len(list((ROOT / "conformance" / "suites").rglob("*.case.yaml")))
    assert len([n for n in names if n.endswith(".case.yaml")]) == suites

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-3000:]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    case = ROOT / "conformance" / "suites" / "core" / "template-claims.case.yaml"
    res = subprocess.run([str(venv / "bin" / "drakit"), "run", str(case), "--out", "out"], cwd=outside,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    results = json.loads((outside / "out" / "results.json").read_text())
    assert results["verdict"]["result"] == "pass" and results["summary"]["passed"] >= 1
    probe = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import importlib.util as u, drakit.conformance as c; "
                            "print(c.__file__); print(u.find_spec('conformance'), u.find_spec('reports'))"],
                           cwd=outside, capture_output=True, text=True, check=True)
    where, missing = probe.stdout.splitlines()
    assert str(ROOT) not in where and "site-packages" in where
    assert missing == "None None", "generic top-level names must not be importable"
