"""Where a vendor driver's program comes from (profile v2): PATH, a file, or a build with Go.

A profile's ``plugin`` (and ``controller``) names its program as ``{binary}`` in the command:

- ``binary: name`` is looked up on PATH; ``binary: some/path`` is taken relative to the
  profile's folder (``~`` and ``$VAR`` expanded);
- ``goInstall: <module>/cmd/<x>@<version>`` is built with ``go install`` into
  ``<driver cache>/go/<module path with / as _>@<version>/<x>``, where the Go module proxy
  serves the module;
- ``source: {dir, package, tags}`` is built with ``go build`` from a local checkout into
  ``<driver cache>/src/<checkout>-<package>-<fingerprint>/<package>``; the fingerprint covers
  the package, the tags and every file of the checkout (path, size, time), so an edit
  rebuilds and an unchanged checkout reuses the binary.

The driver cache is ``$DRAKIT_CACHE/drivers`` or ``${XDG_CACHE_HOME:-~/.cache}/drakit/drivers``,
beside the cluster binaries (``build.bin_dir``). ``drakit cluster build-driver --vendor P``
builds; a run uses what is there and, when nothing is, says how to build it (a driver build can
take minutes, so a run never starts one unasked). Each build's output is kept in ``build.log``
next to the binary.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from .build import bin_dir


class DriverBuildError(Exception):
    """The program cannot be found or built; one line saying what and how to fix it."""


def cache_dir() -> Path:
    return bin_dir().parent.parent / "drivers"


def _expand(path: str, profile_dir: str) -> Path:
    p = Path(os.path.expandvars(os.path.expanduser(path)))
    return p if p.is_absolute() else Path(profile_dir or ".") / p


def _fingerprint(root: Path, package: str, tags: tuple[str, ...]) -> str:
    h = hashlib.sha256(f"{package}\0{','.join(tags)}\0".encode())
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            p = Path(dirpath) / name
            try:
                st = p.stat()
            except OSError:
                continue
            h.update(f"{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:12]


def target(spec: Any) -> Path:
    """Where the program of ``spec`` (a ``PluginSpec``) is, built or not."""
    if spec.binary is not None:
        unset = sorted(set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", spec.binary)) - set(os.environ))
        if unset:
            raise DriverBuildError(f"plugin.binary {spec.binary}: the environment variable {unset[0]} is not set "
                                   "(it names the program you built)")
        binary = os.path.expandvars(os.path.expanduser(spec.binary))
        if "/" not in binary:
            found = shutil.which(binary)
            return Path(found) if found else Path(binary)
        return _expand(binary, spec.profile_dir)
    if spec.go_install is not None:
        module, _, version = spec.go_install.rpartition("@")
        return cache_dir() / "go" / f"{module.replace('/', '_')}@{version}" / module.rsplit("/", 1)[-1]
    if spec.source is not None:
        root = _expand(spec.source.dir, spec.profile_dir)
        name = spec.source.package.rstrip("/").rsplit("/", 1)[-1] or "main"
        if not root.is_dir():
            raise DriverBuildError(f"plugin.source.dir {spec.source.dir}: no such folder ({root})")
        key = _fingerprint(root, spec.source.package, spec.source.tags)
        return cache_dir() / "src" / f"{root.name}-{name}-{key}" / name
    raise DriverBuildError("the profile names no program (binary, goInstall or source)")


def how_to_build(profile_path: str) -> str:
    return f"drakit cluster build-driver --vendor {profile_path}"


def resolve(spec: Any, profile_path: str) -> Path:
    """The program to run, which must exist: ``DriverBuildError`` says how to get it."""
    path = target(spec)
    if path.is_file() and os.access(path, os.X_OK):
        return path
    if spec.binary is not None:
        shown = os.path.expandvars(os.path.expanduser(spec.binary))
        where = ("on PATH" if "/" not in shown else f"({path})" if os.path.isabs(shown)
                 else f"relative to the profile's folder {spec.profile_dir}")
        raise DriverBuildError(f"plugin.binary {spec.binary}: no such program {where}")
    raise DriverBuildError(f"the driver is not built yet ({path} is missing): run '{how_to_build(profile_path)}'")


def build(spec: Any, force: bool = False, timeout: float = 3600) -> tuple[Path, float]:
    """Build the program of ``spec`` when it is missing (or ``force``): its path and the seconds
    the build took (0 when it was there)."""
    path = target(spec)
    if spec.binary is not None or (path.is_file() and not force):
        return resolve(spec, "<profile>") if spec.binary is not None else path, 0.0
    go = shutil.which("go")
    if go is None:
        raise DriverBuildError("building the driver needs the go command on PATH (https://go.dev/dl)")
    path.parent.mkdir(parents=True, exist_ok=True)
    log = path.parent / "build.log"
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "local")
    if spec.go_install is not None:
        env["GOBIN"] = str(path.parent)
        argv, cwd = [go, "install", spec.go_install], path.parent
    else:
        root = _expand(spec.source.dir, spec.profile_dir)
        tags = ["-tags", ",".join(spec.source.tags)] if spec.source.tags else []
        argv, cwd = [go, "build", *tags, "-o", str(path) + ".tmp", spec.source.package], root
    t0 = time.monotonic()
    with log.open("w") as out:
        out.write(f"# {' '.join(argv)} (in {cwd})\n")
        out.flush()
        try:
            res = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise DriverBuildError(f"'{' '.join(argv)}' did not finish within {timeout:.0f} s (log {log})") from None
    if res.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise DriverBuildError(f"'{' '.join(argv[1:])}' failed (exit {res.returncode}): {' | '.join(tail)} (log {log})")
    if spec.source is not None:
        os.replace(str(path) + ".tmp", path)
    return path, time.monotonic() - t0
