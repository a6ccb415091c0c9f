"""``KindCluster``: a kind cluster with the DRA gates on and the fake drivers installed.

``up()`` checks that a Docker engine answers and ``kind`` is on PATH (one line saying what is
missing otherwise). Unless told not to install the drivers, it builds drakit's images first,
offline and without Docker (:mod:`clusters.images`: the same OCI archives the local cluster's
nodes import). Then it writes the config (:mod:`clusters.kind.config`), runs ``kind create
cluster`` with its own kubeconfig file (the user's ``~/.kube/config`` is left alone), loads the
driver and busybox archives into the nodes with ``kind load image-archive`` (an image of the
user's own, ``build_image=False``: ``kind load docker-image``), applies
:func:`fake_driver.deploy.manifests` and waits for the drivers to roll out. ``down()`` runs
``kind delete cluster`` and removes the run dir.

    with KindCluster("drakit") as cluster:
        print(cluster.kubeconfig)
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from drakit.clusters.images import ImageBuildError, driver_ref, ensure_images
from drakit.clusters.kind import config as kindconfig
from drakit.clusters.kind import docker, install
from drakit.clusters.local.launcher import ClusterError, default_run_dir
from drakit.fake_hw.shapes import DEFAULT_SHAPE
from drakit.fake_driver.deploy import DEFAULT_IMAGE, manifests

__all__ = ["ClusterError", "KindCluster", "preflight_problems"]

Progress = Callable[[str], None]
NEEDS = "the kind provider needs a running Docker engine and kind on PATH"


def preflight_problems() -> list[str]:
    """What stops the kind provider on this machine (empty when nothing does)."""
    problems = []
    if shutil.which("kind") is None:
        problems.append("kind is not on PATH (https://kind.sigs.k8s.io)")
    engine = docker.engine_problem()
    if engine:
        problems.append(engine)
    elif shutil.which("docker") is None:
        problems.append("the docker CLI is not on PATH (kind drives the engine through it)")
    return problems


def _quiet(_: str) -> None:
    pass


class KindCluster:
    """A kind cluster named ``name``; see the module docstring.

    ``gates`` / ``dra_gates``: as :func:`clusters.kind.config.cluster_gates`. ``install_driver``:
    build drakit's image offline (``build_image``; else ``driver_image`` must be in the local
    Docker engine), load it and apply the fake drivers' manifests (``shape``, ``drivers``); when
    that fails the cluster is deleted unless ``keep_on_failure``.
    ``run_dir`` holds the kind config and the kubeconfig.
    """

    def __init__(
        self,
        name: str = kindconfig.DEFAULT_NAME,
        *,
        node_image: str = kindconfig.DEFAULT_NODE_IMAGE,
        gates: Mapping[str, bool] | str | None = None,
        dra_gates: bool = True,
        workers: int = 1,
        run_dir: Path | str | None = None,
        install_driver: bool = True,
        driver_image: str = DEFAULT_IMAGE,
        build_image: bool = True,
        shape: str = DEFAULT_SHAPE,
        drivers: Sequence[str] | None = None,
        timeout: float = 600.0,
        keep_on_failure: bool = False,
        progress: Progress | None = None,
    ) -> None:
        self.name = name
        self.run_dir = Path(run_dir) if run_dir is not None else default_run_dir().parent / f"kind-{name}"
        # bad gates, images, shapes or drivers fail here, before anything is started
        try:
            self.config = kindconfig.cluster_config(name=name, node_image=node_image, gates=gates,
                                                    dra_gates=dra_gates, workers=workers)
            self.manifests = manifests(image=driver_image, shape=shape, drivers=drivers) if install_driver else []
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        if install_driver and build_image and driver_image != driver_ref():
            raise ClusterError(f"the offline image build makes {driver_ref()}, not {driver_image}: pass an image of "
                               f"your own with --no-build (it must be in the local Docker engine)")
        self.archives: list[Path] = []
        self.install_driver = install_driver
        self.driver_image = driver_image
        self.build_image = build_image
        self.timeout = timeout
        self.keep_on_failure = keep_on_failure
        self.progress: Progress = progress or _quiet

    @property
    def kubeconfig(self) -> Path:
        return self.run_dir / "kubeconfig"

    @property
    def config_path(self) -> Path:
        return self.run_dir / "kind-config.yaml"

    @property
    def gates(self) -> dict[str, bool]:
        return dict(self.config["featureGates"])

    # ------------------------------------------------------------------ lifecycle
    def up(self) -> KindCluster:
        problems = preflight_problems()
        if problems:
            raise ClusterError(f"{NEEDS}: {'; '.join(problems)}")
        if self.name in self._clusters():
            raise ClusterError(f"a kind cluster named {self.name!r} already exists; stop it with "
                               f"'drakit cluster down --provider kind --name {self.name}' or pick another --name")
        if self.install_driver and self.build_image:  # before the cluster: a broken build costs no cluster
            try:
                self.archives = ensure_images(self.progress, which=("busybox", "driver"))
            except ImageBuildError as exc:
                raise ClusterError(f"building drakit's images: {exc}") from None
        self.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.config_path.write_text(kindconfig.to_yaml(self.config), encoding="utf-8")
        self.progress(f"creating kind cluster {self.name} ({len(self.config['nodes'])} nodes)")
        try:
            # on failure kind removes the nodes it made (no --retain); the files are ours
            self._kind("create", "cluster", "--name", self.name, "--config", str(self.config_path),
                       "--kubeconfig", str(self.kubeconfig), "--wait", f"{int(self.timeout)}s")
        except BaseException:
            self._remove_files()
            raise
        try:
            if self.install_driver:
                self._install()
        except BaseException:
            if not self.keep_on_failure:
                try:
                    self.down()
                except ClusterError as exc:  # the install error is the one to report
                    self.progress(f"could not delete the cluster after the failure: {exc}")
            raise
        return self

    def down(self) -> None:
        """Delete the cluster (when kind knows it) and the run dir; safe to call twice."""
        problems = preflight_problems()
        if problems:
            raise ClusterError(f"{NEEDS}: {'; '.join(problems)}")
        self.progress(f"deleting kind cluster {self.name}")
        self._kind("delete", "cluster", "--name", self.name, "--kubeconfig", str(self.kubeconfig))
        self._remove_files()

    def _remove_files(self) -> None:
        for path in (self.kubeconfig, self.config_path):
            path.unlink(missing_ok=True)
        try:
            self.run_dir.rmdir()
        except OSError:
            pass  # absent, or holds files that are not ours

    def __enter__(self) -> KindCluster:
        return self.up()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.down()

    # ------------------------------------------------------------------ steps
    def load_images(self) -> None:
        """Load the built archives (or, without a build, ``driver_image`` from Docker) into the nodes."""
        if not self.archives:
            self._kind("load", "docker-image", self.driver_image, "--name", self.name)
            self.progress(f"loaded {self.driver_image} into the nodes")
        for archive in self.archives:
            self._kind("load", "image-archive", str(archive), "--name", self.name)
            self.progress(f"loaded {archive.name} into the nodes")

    def _install(self) -> None:
        self.load_images()
        try:
            client = install.dynamic_client(self.kubeconfig)
            install.apply(client, self.manifests, self.progress)
            install.wait_ready(client, self.manifests, self.timeout)
        except install.InstallError as exc:
            raise ClusterError(f"installing the fake drivers: {exc}") from None
        self.progress("fake drivers running")

    def _clusters(self) -> list[str]:
        return self._kind("get", "clusters").split()

    def _kind(self, *args: str) -> str:
        """Run kind; its stderr (progress) goes to ``progress`` line by line, stdout is returned."""
        kind = shutil.which("kind")
        if kind is None:
            raise ClusterError(f"{NEEDS}: kind is not on PATH")
        lines: list[str] = []
        with tempfile.TemporaryFile("w+") as stdout:  # a file, so a full stdout pipe never blocks kind
            with subprocess.Popen([kind, *args], stdout=stdout, stderr=subprocess.PIPE, text=True) as proc:
                assert proc.stderr is not None
                for raw in proc.stderr:
                    if raw.strip():
                        lines.append(raw.strip())
                        self.progress(f"kind: {raw.strip()}")
            stdout.seek(0)
            out = stdout.read()
        if proc.returncode != 0:
            err = next((ln for ln in reversed(lines) if ln.startswith("ERROR")), lines[-1] if lines else "")
            raise ClusterError(f"kind {' '.join(args[:2])} failed (exit {proc.returncode}): {docker.one_line(err)}")
        return out

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "kubeconfig": str(self.kubeconfig), "running": self.name in self._clusters()}
