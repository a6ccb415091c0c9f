"""Root file systems from Debian packages: fetched with ``apt-get download`` (no root needed, the
host's apt sources), unpacked with ``dpkg-deb -x`` (no maintainer scripts run), then trimmed.

Nothing is installed on the host. The packages come from the host's Debian release, so the
images carry that release's busybox, C library and Python.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

Progress = Callable[[str], None]

#: Debian's multiarch triplets and the dynamic loader of each (dpkg architecture -> triplet, loader).
ARCHES = {"amd64": ("x86_64-linux-gnu", "ld-linux-x86-64.so.2"), "arm64": ("aarch64-linux-gnu", "ld-linux-aarch64.so.1")}
#: Python interpreter and standard library, and the C/C++ runtime libraries the wheels' native
#: modules link against (grpcio, cel-expr-python, pydantic-core: libstdc++, libgcc_s). Left out
#: on purpose: readline, ncurses, sqlite, gdbm/db, nis (no module drakit uses needs them).
PYTHON_PACKAGES = ("libc6", "libgcc-s1", "libstdc++6", "zlib1g", "libexpat1", "libssl3", "libffi8", "libbz2-1.0",
                   "liblzma5", "libuuid1", "libcrypt1")
BUSYBOX_PACKAGE = "busybox-static"
#: Dropped from every unpacked package: documentation, manuals, translations, iconv modules.
TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/locale",
        "usr/share/bug", "usr/share/gdb", "usr/lib/{triplet}/gconv", "usr/share/binfmts")
#: Dropped from the standard library: tools and modules with no use in a headless driver.
STDLIB_TRIM = ("ensurepip", "idlelib", "lib2to3", "pydoc_data", "tkinter", "turtledemo", "turtle.py", "test")


class DebError(Exception):
    """A package could not be fetched or unpacked; the message is one line saying what to do."""


def _run(argv: Sequence[str], cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise DebError(f"{argv[0]} is not installed: building images needs a Debian host with apt and dpkg") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("W:")]
        raise DebError(f"{' '.join(argv[:3])} failed: {lines[-1] if lines else f'exit {proc.returncode}'}")
    return proc.stdout


def architecture() -> str:
    """dpkg's name of this machine's architecture (amd64, arm64), which is also OCI's."""
    arch = _run(["dpkg", "--print-architecture"]).strip()
    if arch not in ARCHES:
        raise DebError(f"images can be built on {', '.join(ARCHES)} only, this host is {arch}")
    return arch


def python_version() -> str:
    """The default Python (e.g. ``3.11``) of the host's Debian release, from python3-minimal's dependencies."""
    out = _run(["apt-cache", "depends", "python3-minimal"])
    found = re.findall(r"Depends: python(3\.\d+)-minimal", out)
    if not found:
        raise DebError("apt-cache knows no python3-minimal: run apt-get update (building images needs "
                       "Debian's package lists)")
    return found[0]


def python_packages(version: str) -> tuple[str, ...]:
    return (f"python{version}-minimal", f"libpython{version}-minimal", f"libpython{version}-stdlib", *PYTHON_PACKAGES)


def fetch(packages: Iterable[str], cache: Path, progress: Progress, *, refresh: bool = False) -> list[Path]:
    """The .deb of each package in ``cache``, downloaded with ``apt-get download`` when missing."""
    cache.mkdir(parents=True, exist_ok=True)
    wanted = list(dict.fromkeys(packages))
    if refresh:
        for deb in cache.glob("*.deb"):
            deb.unlink()
    missing = [p for p in wanted if not _cached(cache, p)]
    if missing:
        progress(f"apt-get download {' '.join(missing)}")
        try:
            _run(["apt-get", "download", *missing], cwd=cache)
        except DebError as exc:
            raise DebError(f"{exc} (apt-get update first; building images needs Debian's package lists and a mirror)") from None
    out = []
    for p in wanted:
        deb = _cached(cache, p)
        if deb is None:
            raise DebError(f"apt-get download left no .deb for {p} in {cache}")
        out.append(deb)
    return out


def _cached(cache: Path, package: str) -> Path | None:
    found = sorted(cache.glob(f"{package}_*.deb"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def unpack(debs: Iterable[Path], root: Path, triplet: str) -> None:
    """Unpack each package's files into ``root`` (in order, later ones win) and trim them."""
    root.mkdir(parents=True, exist_ok=True)
    for deb in debs:
        _run(["dpkg-deb", "-x", str(deb), str(root)])
    for rel in TRIM:
        shutil.rmtree(root / rel.format(triplet=triplet), ignore_errors=True)


def trim_stdlib(root: Path, version: str) -> None:
    lib = root / "usr/lib" / f"python{version}"
    for name in STDLIB_TRIM:
        target = lib / name
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)


def loader(root: Path, triplet: str, name: str) -> Path:
    """The unpacked C library's own dynamic loader (the ``/lib64`` link points at the host's)."""
    for lib in (root / "lib" / triplet, root / "usr/lib" / triplet):
        if (lib / name).exists():
            return lib / name
    raise DebError(f"no {name} in the unpacked C library under {root}")


def run_python(root: Path, version: str, arch: str, argv: Sequence[str]) -> str:
    """Run the unpacked interpreter (not the host's) through the unpacked loader and libraries."""
    triplet, ld = ARCHES[arch]
    libs = f"{root / 'lib' / triplet}:{root / 'usr/lib' / triplet}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHOME": str(root / "usr"), "LC_ALL": "C.UTF-8"}
    cmd = [str(loader(root, triplet, ld)), "--library-path", libs, str(root / "usr/bin" / f"python{version}"), *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise DebError(f"the image's python{version} failed: {lines[-1] if lines else f'exit {proc.returncode}'}")
    return proc.stdout
