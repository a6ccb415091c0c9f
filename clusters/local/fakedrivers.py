"""The fake drivers on a local cluster's real kubelet nodes, as processes (``drakit cluster up``).

For each node: one ``drakit driver serve`` process per driver of the node's fake hardware,
with the node's kubelet folders (it registers through the kubelet's ``plugins_registry`` and
writes CDI specs into the folder the node's fake CRI reads), acting as the drivers'
ServiceAccount (``fake_driver.identity``: narrow RBAC, token in a 0600 kubeconfig). Once per
cluster: the drivers' controller side (``drakit driver controller``, binding conditions) as its
own ServiceAccount, and the DeviceClasses. The processes become part of the cluster's teardown
(``LocalCluster.track``), so ``drakit cluster down`` stops them with the kubelets.

``deploy`` returns when every driver is registered with its kubelet and every node's
ResourceSlices are in the API.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from drakit.clusters.local import procs
from drakit.fake_driver.classes import device_classes
from drakit.fake_driver.identity import driver_api_client, write_kubeconfig
from drakit.fake_driver.kube import Kube, KubeError, controller_rules, load_api_client
from drakit.conformance.hwshapes import build_inventory

REGISTERED = "registered with the kubelet"
Progress = Callable[[str], None]


class DeployError(Exception):
    """A fake driver did not start, register or publish; the message names it and its log."""


def _serve_argv(driver: str, node: Any, shape: str, kubeconfig: Path, device_metadata: bool) -> list[str]:
    argv = [sys.executable, "-m", "drakit.fake_driver.cli", "driver", "serve", "--driver", driver,
            "--node", node.name, "--plugin-dir", str(node.paths.plugins_dir),
            "--registry-dir", str(node.paths.registry_dir), "--cdi-dir", str(node.paths.cdi_dir),
            "--hardware", shape, "--kubeconfig", str(kubeconfig),
            "--state-dir", str(node.paths.dir / "driver-state" / driver)]
    return argv + (["--device-metadata"] if device_metadata else [])


def deploy(cluster: Any, nodes: Sequence[tuple[str, str]], *, device_metadata: bool = True,
           timeout: float = 60.0, progress: Progress = lambda _m: None) -> dict[str, list[str]]:
    """Start the fake drivers for ``nodes`` (``(node name, fake_hw shape)``, kubelet nodes of
    ``cluster`` already running); returns the drivers started per node."""
    admin = Kube(load_api_client(cluster.kubeconfig))
    drivers_of = {name: build_inventory(shape, name).drivers for name, shape in nodes}
    every = sorted({d for ds in drivers_of.values() for d in ds})
    secrets = cluster.run_dir / "drivers"
    secrets.mkdir(mode=0o700, exist_ok=True)
    try:
        write_kubeconfig(driver_api_client(admin, every), secrets / "kubeconfig")
        write_kubeconfig(driver_api_client(admin, every, service_account="drakit-fake-driver-controller",
                                           role="drakit:fake-driver-controller", rules=controller_rules),
                         secrets / "controller-kubeconfig")
        for cls in device_classes():
            name = cls["metadata"]["name"]
            path = f"/apis/resource.k8s.io/v1/deviceclasses/{name}"
            if admin.get(path) is None:
                admin.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", cls)
    except KubeError as err:
        raise DeployError(f"setting up the fake drivers' identity and classes: {err}") from None

    logs: list[tuple[str, Path, procs.ProcInfo]] = []

    def spawn(name: str, argv: list[str], log: Path) -> procs.ProcInfo:
        popen, info = procs.spawn(name, argv, log, die_with_parent=not cluster.detached)
        cluster.track(info, popen)
        progress(f"started {name} (pid {popen.pid})")
        return info

    spawn("driver/controller", [sys.executable, "-m", "drakit.fake_driver.cli", "driver", "controller",
                                "--kubeconfig", str(secrets / "controller-kubeconfig")], cluster.logs_dir / "driver-controller.log")
    for name, shape in nodes:
        node = cluster.kubelet_node(name)
        if node is None:
            raise DeployError(f"no kubelet node {name} in this cluster")
        for driver in drivers_of[name]:
            log = node.paths.dir / f"driver-{driver}.log"
            info = spawn(f"driver/{name}/{driver}", _serve_argv(driver, node, shape, secrets / "kubeconfig", device_metadata), log)
            logs.append((f"{driver} on {name}", log, info))
    deadline = time.monotonic() + timeout
    for what, log, info in logs:
        while REGISTERED not in _read(log):
            if not procs.info_alive(info):
                raise DeployError(f"fake driver {what} exited; see {log}:\n{_read(log)[-1500:]}")
            if time.monotonic() > deadline:
                raise DeployError(f"fake driver {what} did not register with the kubelet in {timeout:.0f} s; see {log}")
            time.sleep(0.05)
    for name, _shape in nodes:
        for driver in drivers_of[name]:
            selector = f"spec.nodeName={name},spec.driver={driver}"
            while not admin.request("GET", "/apis/resource.k8s.io/v1/resourceslices",
                                    query={"fieldSelector": selector}).get("items"):
                if time.monotonic() > deadline:
                    raise DeployError(f"no ResourceSlices of {driver} on {name} after {timeout:.0f} s")
                time.sleep(0.1)
    return {name: list(ds) for name, ds in drivers_of.items()}


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
