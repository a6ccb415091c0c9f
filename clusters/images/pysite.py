"""The Python side of drakit's image: drakit's runtime dependencies as wheels for the image's
Python (``pip install --target``, binary wheels only, whatever Python runs the build), trimmed
of what drakit never imports, and drakit's own packages copied from where they are imported.

Third-party modules are shipped compiled and without their sources (smaller, and nothing to
compile at start on a read-only root file system); drakit's own modules, the standard library
and :data:`KEEP_SOURCE` keep their sources next to the compiled files.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

Progress = Callable[[str], None]

#: drakit's import roots below the ``drakit`` namespace package.
DRAKIT_ROOTS = ("conformance", "fake_hw", "fake_driver", "clusters", "reports")
#: What drakit's packages hold besides Python: suites, profiles, schemas, templates, protos, Go sources.
DRAKIT_SUFFIXES = (".py", ".pyi", ".yaml", ".json", ".proto", ".go", ".mod", ".sum", ".tmpl", ".j2", ".css", ".c", ".md")
#: Removed from the installed dependencies, with why. tests/images checks that drakit imports none.
SITE_TRIM: dict[str, str] = {
    "kubernetes/aio": "the asyncio client; drakit uses the synchronous one",
    **{name: "needed by kubernetes.aio only" for name in (
        "aiohttp", "aiohappyeyeballs", "aiohttp_retry", "aiosignal", "frozenlist", "multidict", "propcache", "yarl")},
    **{f"cel_expr_python/ext/{name}": "a CEL extension library drakit does not load"
       for name in ("ext_encoders", "ext_math", "ext_proto", "ext_strings")},
    "bin": "console scripts naming the build host's interpreter",
}
#: Packages that keep their sources: execnet and xdist send their own modules' source to the
#: workers they start (``inspect.getsource``); pytest's and pluggy's for readable tracebacks of a
#: run's machinery.
KEEP_SOURCE = ("execnet", "xdist", "_pytest", "pytest", "pluggy")
TRIM_VERSION = "2"  # bump when SITE_TRIM or the compile rules change: the cached layer is rebuilt


class SiteError(Exception):
    """The dependencies could not be installed; one line."""


def requirements() -> list[str]:
    """drakit's runtime requirements (no extras), as its installed metadata declares them."""
    try:
        reqs = metadata.requires("drakit") or []
    except metadata.PackageNotFoundError:
        raise SiteError("drakit's metadata is not installed (pip install drakit, or pip install -e . in a checkout)") from None
    return sorted(r for r in reqs if "extra ==" not in r)


def drakit_version() -> str:
    try:
        return metadata.version("drakit")
    except metadata.PackageNotFoundError:
        raise SiteError("drakit's metadata is not installed (pip install drakit, or pip install -e . in a checkout)") from None


def _platforms(arch: str, glibc_minor: int) -> list[str]:
    machine = {"amd64": "x86_64", "arm64": "aarch64"}[arch]
    return [f"manylinux_2_{m}_{machine}" for m in range(17, glibc_minor + 1)] + [f"manylinux2014_{machine}"]


def install_deps(target: Path, reqs: Sequence[str], python: str, arch: str, glibc_minor: int, progress: Progress) -> list[str]:
    """``pip install --target`` the wheels of ``reqs`` for CPython ``python`` on ``arch``; returns
    ``name==version`` of each distribution installed."""
    abi = "cp" + python.replace(".", "")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
           "--target", str(target), "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
           "--abi", abi]
    for plat in _platforms(arch, glibc_minor):
        cmd += ["--platform", plat]
    progress(f"pip install --target (CPython {python}, {arch}): {len(reqs)} requirements")
    proc = subprocess.run([*cmd, *reqs], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        err = next((ln for ln in lines if ln.startswith("ERROR")), lines[-1] if lines else f"exit {proc.returncode}")
        raise SiteError(f"pip could not install drakit's dependencies for the image: {err}")
    return sorted(f"{d.name}=={d.version}" for d in metadata.distributions(path=[str(target)]))


def trim(site: Path) -> None:
    """Remove :data:`SITE_TRIM` (and the metadata of removed distributions); strip native modules."""
    for rel in SITE_TRIM:
        parent, name = (site / rel).parent, (site / rel).name
        for path in [site / rel, *parent.glob(f"{name}.*"), *parent.glob(f"{name}-*.dist-info")]:
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    strip = shutil.which("strip")
    if strip:
        for so in sorted(site.rglob("*.so")):
            subprocess.run([strip, "--strip-unneeded", str(so)], capture_output=True, check=False)


# Run by the image's own interpreter: compile every module of a tree. argv: tree, the tree's path
# inside the image, comma-separated top-level names that keep their sources (or "*": all do).
COMPILE_SCRIPT = r"""
import importlib.util, pathlib, py_compile, sys
tree, inside, keep = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
for path in sorted(tree.rglob("*.py")):
    rel = path.relative_to(tree)
    sourceless = "*" not in keep and rel.parts[0] not in keep
    cfile = str(path) + "c" if sourceless else importlib.util.cache_from_source(str(path))
    try:
        py_compile.compile(str(path), cfile=cfile, dfile=f"{inside}/{rel}", doraise=True, invalidation_mode=mode)
    except py_compile.PyCompileError:
        continue
    if sourceless:
        path.unlink()
"""


def copy_drakit(site: Path) -> list[Path]:
    """Copy drakit's packages (from wherever they are imported: a checkout or an install) and a
    dist-info carrying its version and entry points into ``site``; returns the files copied."""
    copied = []
    for root in DRAKIT_ROOTS:
        src = Path(importlib.import_module(f"drakit.{root}").__file__ or "").parent
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(DRAKIT_SUFFIXES):
                    rel = Path(dirpath, name).relative_to(src)
                    dest = site / "drakit" / root / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(Path(dirpath, name), dest)
                    copied.append(dest)
    version = drakit_version()
    info = site / f"drakit-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    meta = ["Metadata-Version: 2.1", "Name: drakit", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requirements()]
    (info / "METADATA").write_text("\n".join(meta) + "\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(metadata.distribution("drakit").read_text("entry_points.txt") or "",
                                           encoding="utf-8")
    (info / "INSTALLER").write_text("drakit image build\n", encoding="utf-8")
    return copied


def drakit_fingerprint() -> str:
    """A hash of drakit's files as :func:`copy_drakit` would copy them, and its version."""
    sha = hashlib.sha256(drakit_version().encode())
    for root in DRAKIT_ROOTS:
        src = Path(importlib.import_module(f"drakit.{root}").__file__ or "").parent
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(DRAKIT_SUFFIXES):
                    path = Path(dirpath, name)
                    sha.update(f"{root}/{path.relative_to(src)}\0".encode())
                    sha.update(path.read_bytes())
    return sha.hexdigest()


def launcher(python: str) -> str:
    return (f"#!/usr/bin/python{python}\n"
            "import sys\n"
            "from drakit.conformance.cli import main\n"
            "sys.exit(main())\n")


def glibc_minor(libc_deb: Path) -> int:
    """2.36 -> 36, from the C library package's file name (libc6_2.36-9+deb12u14_amd64.deb)."""
    m = re.match(r"libc6_2\.(\d+)", libc_deb.name)
    if not m:
        raise SiteError(f"cannot read the C library's version from {libc_deb.name}")
    return int(m.group(1))
