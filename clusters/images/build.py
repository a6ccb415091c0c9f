"""Build drakit's three container images offline, without Docker, into drakit's cache.

- ``registry.k8s.io/pause:3.10``: a static pause program (``pause.c``, compiled here with
  ``gcc -static``), the sandbox image of every pod;
- ``registry.k8s.io/e2e-test-images/busybox:1.37.0-1``: Debian's ``busybox-static`` with its
  applet links, the image the cases' pods print their environment and files with (the tag is
  the one the cases name, so they run unchanged on clusters that pull upstream's image);
- ``drakit/fake-driver:<version>`` (:data:`drakit.fake_driver.deploy.DEFAULT_IMAGE`): the same
  busybox layer, Debian's Python with the C libraries it needs, drakit's runtime dependencies
  and drakit itself with its suites; the fake drivers' plugin and controller run from it, and
  ``drakit run`` works inside it.

Each is an OCI archive (:mod:`clusters.images.oci`) under ``<cache>/images``. Layers are cached
by what they are made of (Debian package files, requirements, drakit's files), so a warm build
only rewrites what changed; an archive whose manifest is unchanged is not rewritten.

    from drakit.clusters.images import ensure_images
    archives = ensure_images(print)      # [pause, busybox, driver] archives, built if needed
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from drakit.clusters.images import debs, oci, pysite
from drakit.clusters.cache import cache_root

Progress = Callable[[str], None]

PAUSE_REF = "registry.k8s.io/pause:3.10"
BUSYBOX_REF = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
IMAGES = ("pause", "busybox", "driver")
LAYOUT_VERSION = "2"  # bump to rebuild every cached layer
HERE = Path(__file__).resolve().parent
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSWD = "root:x:0:0:root:/root:/bin/sh\ndrakit:x:65532:65532:drakit:/tmp:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = "root:x:0:\ndrakit:x:65532:\nnogroup:x:65534:\n"


class ImageBuildError(Exception):
    """An image could not be built; the message is one line saying what is missing or failed."""


@dataclass(frozen=True, slots=True)
class Built:
    ref: str
    path: Path
    digest: str
    compressed: int  # bytes of its layers as stored (gzip)
    unpacked: int  # bytes of its files
    rebuilt: bool  # the archive was written by this call


def images_dir() -> Path:
    """``<drakit cache>/images``: ``$DRAKIT_CACHE`` or ``${XDG_CACHE_HOME:-~/.cache}/drakit``."""
    return cache_root() / "images"


def driver_ref() -> str:
    from drakit.fake_driver.deploy import DEFAULT_IMAGE
    return DEFAULT_IMAGE


def archive_name(ref: str) -> str:
    """``registry.k8s.io/pause:3.10`` -> ``pause-3.10.oci.tar``."""
    name, _, tag = ref.rpartition(":")
    return f"{name.rsplit('/', 1)[-1]}-{tag}.oci.tar"


class _Layers:
    """Cached layers: ``layers/<key hash>.json`` describes a blob in ``blobs/``."""

    def __init__(self, base: Path, progress: Progress, force: bool) -> None:
        self.base, self.progress, self.force = base, progress, force
        self.blobs, self.index = base / "blobs", base / "layers"
        self.index.mkdir(parents=True, exist_ok=True)

    def get(self, key: str, what: str, make: Callable[[Path], str]) -> oci.Layer:
        meta = self.index / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")
        if not self.force and meta.is_file():
            layer = oci.Layer.from_json(json.loads(meta.read_text(encoding="utf-8")))
            if (self.blobs / layer.digest.split(":")[1]).is_file():
                return layer
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=self.base, prefix=".build-") as tmp:
            root = Path(tmp) / "root"
            root.mkdir()
            comment = make(root)
            layer = oci.write_layer(root, self.blobs, comment)
        meta.write_text(json.dumps(layer.to_json(), indent=1), encoding="utf-8")
        self.progress(f"layer {what}: {_mb(layer.unpacked)} unpacked, {_mb(layer.size)} compressed "
                      f"({time.monotonic() - started:.1f}s)")
        return layer


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


@contextmanager
def _locked(base: Path) -> Iterator[None]:
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time per cache; others wait, then reuse it
        yield


def ensure_images(progress: Progress | None = None, *, force: bool = False,
                  which: Sequence[str] = IMAGES) -> list[Path]:
    """The OCI archives of ``which`` images (built or brought up to date), in that order."""
    return [b.path for b in build_images(progress, force=force, which=which)]


def build_images(progress: Progress | None = None, *, force: bool = False, which: Sequence[str] = IMAGES) -> list[Built]:
    """As :func:`ensure_images`, with each image's reference, digest and sizes.
    ``force``: download the packages again and rebuild every layer."""
    say: Progress = progress or (lambda _m: None)
    unknown = [w for w in which if w not in IMAGES]
    if unknown:
        raise ImageBuildError(f"unknown image(s) {', '.join(unknown)}: known are {', '.join(IMAGES)}")
    base = images_dir()
    try:
        with _locked(base):
            builder = _Builder(base, say, force)
            built = [builder.image(name) for name in which]
            if set(which) == set(IMAGES):
                builder.collect(built)
            return built
    except (debs.DebError, pysite.SiteError, OSError, ValueError) as exc:
        raise ImageBuildError(str(exc)) from None


class _Builder:
    def __init__(self, base: Path, progress: Progress, force: bool) -> None:
        self.base, self.progress, self.force = base, progress, force
        self.layers = _Layers(base, progress, force)
        self.arch = debs.architecture()
        self.debcache = base / "debs" / self.arch
        self._refreshed = False
        self._runtimes: set[str] = set()

    def _debs(self, packages: Sequence[str]) -> list[Path]:
        refresh = self.force and not self._refreshed
        self._refreshed = True
        return debs.fetch(packages, self.debcache, self.progress, refresh=refresh)

    def image(self, name: str) -> Built:
        if name == "pause":
            img = oci.Image(PAUSE_REF, self.arch, (self._pause(),),
                            {"Entrypoint": ["/pause"], "User": "65535:65535", "WorkingDir": "/"},
                            {"org.opencontainers.image.description": "drakit's static pause program"})
        elif name == "busybox":
            base, deb = self._base()
            img = oci.Image(BUSYBOX_REF, self.arch, (base,), {"Cmd": ["sh"], "Env": [PATH_ENV], "WorkingDir": "/"},
                            {"org.opencontainers.image.description": f"Debian's busybox-static ({deb})"})
        else:
            img = self._driver_image()
        return self._archive(img)

    def _archive(self, img: oci.Image) -> Built:
        dest = self.base / archive_name(img.ref)
        stamp = dest.with_name(dest.name + ".json")
        current = (not self.force and dest.is_file() and stamp.is_file()
                   and json.loads(stamp.read_text(encoding="utf-8")).get("digest") == img.digest)
        if not current:
            oci.write_archive(img, self.layers.blobs, dest)
            stamp.write_text(json.dumps({"ref": img.ref, "digest": img.digest}), encoding="utf-8")
        return Built(img.ref, dest, img.digest, img.compressed, img.unpacked, not current)

    def collect(self, built: Sequence[Built]) -> None:
        """Remove the cache's layers, blobs and unpacked runtimes no archive of ``built`` uses
        (each change to drakit's files leaves an older drakit layer behind)."""
        keep = {self.base / archive_name(b.ref) for b in built}
        used: set[str] = set()
        for path in keep:
            used |= {layer["digest"].split(":")[1] for layer in oci.read_archive(path)["manifest"]["layers"]}
        for meta in self.layers.index.glob("*.json"):
            if json.loads(meta.read_text(encoding="utf-8"))["digest"].split(":")[1] not in used:
                meta.unlink()
        for blob in self.layers.blobs.iterdir():
            if blob.name not in used:
                blob.unlink()
        for runtime in (self.base / "runtime").glob("*"):
            if runtime.name not in self._runtimes:
                shutil.rmtree(runtime, ignore_errors=True)

    # ------------------------------------------------------------------ layers
    def _pause(self) -> oci.Layer:
        src = HERE / "pause.c"
        key = f"pause/{LAYOUT_VERSION}/{self.arch}/{hashlib.sha256(src.read_bytes()).hexdigest()}"

        def make(root: Path) -> str:
            out = root / "pause"
            _tool(["gcc", "-static", "-Os", "-s", "-o", str(out), str(src)],
                  "compiling the pause program needs gcc and the static C library (Debian: gcc libc6-dev)")
            if _tool([str(out), "-v"], "the pause program does not run").strip() != "drakit pause":
                raise ImageBuildError(f"{out} -v did not print 'drakit pause'")
            return "pause, from clusters/images/pause.c"
        return self.layers.get(key, "pause", make)

    def _base(self) -> tuple[oci.Layer, str]:
        (deb,) = self._debs([debs.BUSYBOX_PACKAGE])
        key = f"base/{LAYOUT_VERSION}/{self.arch}/{deb.name}"

        def make(root: Path) -> str:
            with tempfile.TemporaryDirectory(dir=self.base) as tmp:
                debs.unpack([deb], Path(tmp), debs.ARCHES[self.arch][0])
                (root / "bin").mkdir()
                shutil.copy2(Path(tmp) / "bin/busybox", root / "bin/busybox")
            applets = _tool([str(root / "bin/busybox"), "--list-full"], "busybox --list-full failed").split()
            for rel in applets:
                link = root / rel
                if not link.exists() and not link.is_symlink():
                    link.parent.mkdir(parents=True, exist_ok=True)
                    link.symlink_to("/bin/busybox")
            (root / "etc").mkdir(exist_ok=True)
            (root / "etc/passwd").write_text(PASSWD, encoding="utf-8")
            (root / "etc/group").write_text(GROUP, encoding="utf-8")
            for d in ("tmp", "root", "var/tmp", "proc", "sys", "dev"):
                (root / d).mkdir(parents=True, exist_ok=True)
            os.chmod(root / "tmp", 0o1777)
            os.chmod(root / "var/tmp", 0o1777)
            return f"busybox and its applet links, from {deb.name}"
        return self.layers.get(key, "busybox", make), deb.name.removesuffix(".deb")

    def _python_version(self) -> str:
        """The Python of the packages already fetched (no apt-cache call on a warm build), else Debian's default."""
        found = {p.name.split("_")[0] for p in self.debcache.glob("python3.*-minimal_*.deb")}
        if len(found) == 1 and not self.force:
            return found.pop().removeprefix("python").removesuffix("-minimal")
        return debs.python_version()

    def _driver_image(self) -> oci.Image:
        py = self._python_version()
        pkgs = self._debs(debs.python_packages(py))
        runtime = self._runtime(pkgs)
        base, _ = self._base()
        python = self._python(pkgs, runtime, py)
        deps = self._deps(runtime, py, pysite.glibc_minor(next(p for p in pkgs if p.name.startswith("libc6_"))))
        own = self._drakit(runtime, py)
        version = pysite.drakit_version()
        config = {"Entrypoint": ["drakit"], "Cmd": ["--help"], "User": "65532:65532", "WorkingDir": "/",
                  "Env": [PATH_ENV, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1",
                          "GRPC_VERBOSITY=ERROR"]}
        notes = {"org.opencontainers.image.title": "drakit", "org.opencontainers.image.version": version,
                 "org.opencontainers.image.description": "drakit: the fake DRA drivers (plugin, controller) and the "
                                                         "conformance suites (drakit run)",
                 "dev.drakit.debian-packages": " ".join(p.name.removesuffix(".deb") for p in pkgs)}
        return oci.Image(driver_ref(), self.arch, (base, python, deps, own), config, notes)

    def _runtime(self, pkgs: Sequence[Path]) -> Path:
        """The trimmed Python runtime unpacked once under the cache (the later layers' compiler)."""
        key = hashlib.sha256(f"{LAYOUT_VERSION}/{[p.name for p in pkgs]}".encode()).hexdigest()[:16]
        root = self.base / "runtime" / key
        self._runtimes.add(key)
        if self.force or not (root / ".complete").is_file():
            shutil.rmtree(root, ignore_errors=True)
            debs.unpack(pkgs, root, debs.ARCHES[self.arch][0])
            (root / ".complete").touch()
        return root

    def _python(self, pkgs: Sequence[Path], runtime: Path, py: str) -> oci.Layer:
        key = f"python/{LAYOUT_VERSION}/{self.arch}/{','.join(p.name for p in pkgs)}"

        def make(root: Path) -> str:
            shutil.copytree(runtime, root, symlinks=True, dirs_exist_ok=True)
            (root / ".complete").unlink()
            debs.trim_stdlib(root, py)
            (root / "usr/bin/python3").symlink_to(f"python{py}")
            lib = f"usr/lib/python{py}"
            debs.run_python(root, py, self.arch, ["-c", pysite.COMPILE_SCRIPT, str(root / lib), f"/{lib}", "*"])
            return f"Python {py} and the C libraries it needs, from Debian packages"
        return self.layers.get(key, f"python{py}", make)

    def _deps(self, runtime: Path, py: str, glibc: int) -> oci.Layer:
        reqs = pysite.requirements()
        key = f"deps/{LAYOUT_VERSION}/{pysite.TRIM_VERSION}/{self.arch}/{py}/{glibc}/{';'.join(reqs)}"

        def make(root: Path) -> str:
            site_rel = f"usr/local/lib/python{py}/dist-packages"
            site = root / site_rel
            dists = pysite.install_deps(site, reqs, py, self.arch, glibc, self.progress)
            pysite.trim(site)
            debs.run_python(runtime, py, self.arch,
                            ["-c", pysite.COMPILE_SCRIPT, str(site), f"/{site_rel}", ",".join(pysite.KEEP_SOURCE)])
            return "drakit's dependencies: " + " ".join(dists)
        return self.layers.get(key, "dependencies", make)

    def _drakit(self, runtime: Path, py: str) -> oci.Layer:
        key = f"drakit/{LAYOUT_VERSION}/{py}/{pysite.drakit_fingerprint()}"

        def make(root: Path) -> str:
            site_rel = f"usr/local/lib/python{py}/dist-packages"
            pysite.copy_drakit(root / site_rel)
            debs.run_python(runtime, py, self.arch, ["-c", pysite.COMPILE_SCRIPT, str(root / site_rel), f"/{site_rel}", "*"])
            script = root / "usr/local/bin/drakit"
            script.parent.mkdir(parents=True)
            script.write_text(pysite.launcher(py), encoding="utf-8")
            script.chmod(0o755)
            return f"drakit {pysite.drakit_version()}"
        return self.layers.get(key, "drakit", make)


def _tool(argv: Sequence[str], need: str) -> str:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ImageBuildError(f"{need}: {argv[0]} not found") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        raise ImageBuildError(f"{need}: {lines[-1] if lines else f'exit {proc.returncode}'}")
    return proc.stdout
