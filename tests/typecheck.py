"""``mypy --strict`` on the pure core, as the design asks: ``python -m tests.typecheck``.

mypy cannot follow setuptools' editable-install finder, so this lays the five folders out as
the ``drakit`` package (symlinks in a temporary directory) and checks the core's packages by
their import names. The settings are ``[tool.mypy]`` in pyproject.toml."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("conformance", "fake_hw", "fake_driver", "clusters", "reports")
PURE_CORE = ("drakit.conformance.model", "drakit.conformance.cel", "drakit.conformance.allocator", "drakit.conformance.validation",
             "drakit.conformance.spec", "drakit.conformance.goregex", "drakit.fake_hw")
PURE_CORE_MODULES = ("drakit.conformance.attributes", "drakit.conformance.quantity", "drakit.conformance.semver",
                     "drakit.conformance.profileinit.infer", "drakit.conformance.profileinit.envgen",
                     "drakit.conformance.profileinit.render")


def run_mypy() -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="drakit-mypy-") as tmp:
        (Path(tmp) / "drakit").mkdir()
        for folder in FOLDERS:
            (Path(tmp) / "drakit" / folder).symlink_to(ROOT / folder, target_is_directory=True)
        args = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                "--cache-dir", str(Path(tmp) / ".mypy_cache")]
        for p in PURE_CORE:
            args += ["-p", p]
        for m in PURE_CORE_MODULES:
            args += ["-m", m]
        return subprocess.run(args, cwd=tmp, env={**os.environ, "MYPYPATH": tmp}, capture_output=True, text=True)


if __name__ == "__main__":
    res = run_mypy()
    sys.stdout.write(res.stdout.replace("drakit/", ""))
    sys.stderr.write(res.stderr)
    sys.exit(res.returncode)
