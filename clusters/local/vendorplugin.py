"""A vendor's DRA kubelet plugin started on a local node, from its profile's command template.

A vendor profile may say how to start its driver's kubelet plugin (``plugin.command``, a list of
arguments with ``{placeholders}``; schema ``fake_driver/profile.schema.json``). drakit starts one
per node of the local cluster, in a private mount namespace that dies with the plugin:

- ``/run`` is a private tmpfs there, with ``/run/cdi`` (so ``/var/run/cdi``) bound to the node's
  CDI folder: drivers write CDI specs to ``/var/run/cdi`` whatever flag they take (upstream's
  test driver writes its device-metadata specs there whatever ``--cdi-dir`` says), and the
  host's own ``/run`` is never written;
- the folders the plugin expects (``plugin.folders``) are made first (upstream's test driver
  refuses to start without ``<datadir>/<driver>``).

On a containerd node (``--runtime containerd``) the plugin runs inside the node's own mount and
PID namespaces instead (``enter``: ``KubeletNode.enter``), as a DaemonSet pod with hostPath
volumes would: ``/var/lib/kubelet`` is the node's kubelet folder, ``/var/run/cdi`` its CDI folder
and ``/var/run/nri/nri.sock`` its runtime's NRI socket; it dies with the node. A profile whose
plugin ``needs`` NRI or those stock paths cannot run on the fake runtime: :func:`needs_problem`.

Placeholders: ``{node}`` (the node name), ``{kubeconfig}`` (an admin kubeconfig of the cluster),
``{registryDir}`` (the kubelet's plugin registry folder), ``{pluginsDir}`` (the kubelet's plugins
folder, the parent of ``<pluginsDir>/<driver>``), ``{cdiDir}`` (the node's CDI folder) and
``{drakitBin}`` (drakit's binary cache, where ``drakit cluster build`` puts upstream's test
driver), ``{binary}`` (the program profile v2's ``binary``, ``goInstall`` or ``source`` names:
``driverbuild``), ``{profileDir}`` (the profile's folder), ``{nodeDir}`` (a folder for the
plugin's own files), ``{kubeletDir}`` (the kubelet's root dir, the parent of ``{registryDir}``,
for drivers that take ``--kubelet-root-dir``) and ``{metricsPort}`` (a free TCP port on 127.0.0.1, for the plugin's metrics). A plugin
is ready when a registration socket naming its driver is in the registry: ``<driver>-reg.sock``,
or ``<driver>-<uid>-reg.sock`` as plugins name it for rolling updates.

A per-node setup step (profile v2 ``plugin.setup``, same placeholders) runs before every start,
where the plugin runs and with its environment (a mock driver root below ``{nodeDir}``): it must
exit 0 within :data:`SETUP_TIMEOUT` seconds; its output goes to the plugin's log.
"""

from __future__ import annotations

import os
import shutil
import signal
import string
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from drakit.fake_driver.profile import NODE_NEEDS, PLUGIN_PLACEHOLDERS

from . import procs

# sh runs in the new mount namespace: $0 is the CDI folder, "$@" the plugin's command
_NAMESPACE_SCRIPT = ('mount -n -t tmpfs -o mode=0755 drakit-run /run && mkdir -p /run/cdi && '
                     'mount -n --bind "$0" /run/cdi && exec "$@"')  # -n: no utab on the host
PLACEHOLDERS = PLUGIN_PLACEHOLDERS  # checked when the profile is loaded (drakit lint --vendor)
#: hidden inside a containerd node's namespaces (private tmpfs there), unless the node's own
NODE_PRIVATE = ("/run", "/var/run", "/var/lib", "/var/log")
SETUP_TIMEOUT = 60.0


class PluginStartError(Exception):
    """The plugin could not be started or did not register; one line with the log's tail."""


@dataclass(frozen=True, slots=True)
class NodeFolders:
    """The folders of one node a plugin works in."""

    registry_dir: Path
    plugins_dir: Path
    cdi_dir: Path


def needs_problem(driver: str, needs: Sequence[str], runtime: str | None) -> str | None:
    """One line when the plugin ``needs`` what nodes of ``runtime`` lack (None: they have it)."""
    if not needs or runtime == "containerd":
        return None
    what = " and ".join(NODE_NEEDS.get(n, n) for n in needs)
    node = f"the {runtime} runtime" if runtime else "kwok nodes (no real kubelet here)"
    return (f"the {driver} plugin needs {what} (plugin.needs: {', '.join(needs)}); {node} has none: "
            "run it on containerd nodes (--runtime containerd)")


def render(template: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """The command with every ``{name}`` filled in; an unknown name is a ``KeyError``."""
    out = []
    for arg in template:
        names = {f for _, f, _, _ in string.Formatter().parse(arg) if f}
        unknown = names - set(values)
        if unknown:
            raise KeyError(f"unknown placeholder {{{sorted(unknown)[0]}}} in {arg!r} "
                           f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})")
        out.append(arg.format_map(values))
    return out


class VendorPlugin:
    """One plugin process on one node; ``start`` waits until it registered."""

    def __init__(self, driver: str, command: Sequence[str], folders: Sequence[str], node: str,
                 node_folders: NodeFolders, kubeconfig: Path, bin_dir: Path, log: Path,
                 extra: Mapping[str, str] | None = None, env: Sequence[tuple[str, str]] = (),
                 enter: Callable[[list[str]], list[str]] | None = None, setup: Sequence[str] = ()) -> None:
        self.driver = driver
        self.enter = enter  # a containerd node's: the argv that runs a command inside it
        self.node = node
        self.folders = node_folders
        self.values = {"node": node, "kubeconfig": str(kubeconfig), "registryDir": str(node_folders.registry_dir),
                       "pluginsDir": str(node_folders.plugins_dir), "cdiDir": str(node_folders.cdi_dir),
                       "drakitBin": str(bin_dir), "nodeDir": str(log.parent),
                       "kubeletDir": str(node_folders.registry_dir.parent), **(extra or {})}
        if any("{metricsPort}" in arg for arg in (*command, *(v for _, v in env))):
            self.values["metricsPort"] = str(procs.free_ports(1)[0])
        self.argv = render(command, self.values)
        self.setup = render(setup, self.values)
        self.env = dict(zip((k for k, _ in env), render([v for _, v in env], self.values)))
        self.make = [Path(p) for p in render(folders, self.values)]
        self.log = log
        self.info: procs.ProcInfo | None = None
        self._popen: dict[int, object] = {}

    @property
    def registration_socket(self) -> Path:
        """The plugin's registration socket: ``<driver>-reg.sock``, or the rolling-update name
        ``<driver>-<uid>-reg.sock`` a plugin that knows its pod UID uses (the newest one)."""
        conventional = self.folders.registry_dir / f"{self.driver}-reg.sock"
        if conventional.is_socket():
            return conventional
        rolling = sorted(self._rolling(), key=lambda p: p.stat().st_mtime if p.exists() else 0)
        return rolling[-1] if rolling else conventional

    def _rolling(self) -> list[Path]:
        return [p for p in self.folders.registry_dir.glob(f"{self.driver}-*-reg.sock") if p.is_socket()]

    def hidden_in_node(self) -> list[str]:
        """The plugin's own paths a containerd node's private tmpfs would hide from it."""
        own = [self.values[k] for k in ("kubeconfig", "nodeDir", "binary", "profileDir") if self.values.get(k)]
        node = self.folders.registry_dir.parent
        return [p for p in own if any(Path(p).is_relative_to(t) for t in NODE_PRIVATE)
                and not Path(p).is_relative_to(node)]

    def _argv(self, argv: list[str] | None = None) -> list[str]:
        argv = self.argv if argv is None else argv
        if self.enter is not None:
            if not shutil.which("nsenter"):
                raise PluginStartError("starting a plugin inside a containerd node needs nsenter (util-linux) on PATH")
            hidden = self.hidden_in_node()
            if hidden:
                raise PluginStartError(f"the {self.driver} plugin on node {self.node} would not see {hidden[0]}: "
                                       f"inside the node {', '.join(NODE_PRIVATE)} are the node's own")
            return self.enter(argv)
        if not shutil.which("unshare"):
            raise PluginStartError("starting a vendor plugin needs unshare (util-linux) on PATH")
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _NAMESPACE_SCRIPT,
                str(self.folders.cdi_dir), *argv]

    def _run_setup(self, env: dict[str, str] | None) -> None:
        """The profile's per-node setup step, where the plugin will run; output to its log."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as out:
            out.write(f"# setup: {' '.join(self.setup)}\n")
            out.flush()
            try:
                res = subprocess.run(self._argv(self.setup), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     env=env, timeout=SETUP_TIMEOUT, start_new_session=True)
                code: int | None = res.returncode
            except subprocess.TimeoutExpired:
                code = None
            except OSError as exc:
                raise PluginStartError(f"the {self.driver} plugin's setup on node {self.node} could not start: "
                                       f"{exc.strerror or exc}") from None
        if code != 0:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-3:]
            what = f"exited with {code}" if code is not None else f"did not finish within {SETUP_TIMEOUT:.0f} s"
            raise PluginStartError(f"the {self.driver} plugin's setup on node {self.node} {what}: "
                                   f"{' | '.join(tail)} (log {self.log})")

    def start(self, timeout: float = 30.0) -> None:
        argv = self._argv()
        for d in (self.folders.registry_dir, self.folders.plugins_dir, self.folders.cdi_dir, Path(self.values["nodeDir"]),
                  *self.make):
            d.mkdir(parents=True, exist_ok=True)
        for stale in (self.folders.registry_dir / f"{self.driver}-reg.sock", *self._rolling()):
            stale.unlink(missing_ok=True)  # a stale one would look like a registration
        env = {**os.environ, **self.env} if self.env else None
        if self.setup:
            self._run_setup(env)
        popen, self.info = procs.spawn(f"plugin-{self.driver}-{self.node}", argv, self.log, env=env, die_with_parent=True)
        self._popen = {popen.pid: popen}
        deadline = time.monotonic() + timeout
        while not self.registration_socket.is_socket():
            if popen.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-3:] if self.log.exists() else []
                what = "exited" if popen.poll() is not None else f"did not register within {timeout:.0f} s"
                self.stop()
                raise PluginStartError(f"the {self.driver} plugin on node {self.node} {what}: "
                                       f"{' | '.join(tail) or '(no output)'} (log {self.log})")
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the plugin's process group and its grace to exit (inside a node, ``nsenter``
        ends at once while the plugin it forked shuts down), then SIGKILL to what is left; returns
        once no process of the group is alive, so a restarted plugin never meets the old one."""
        if self.info is None:
            return
        pgid = self.info.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        deadline = time.monotonic() + timeout
        while procs.group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        procs.stop([self.info], timeout=timeout, popen=self._popen)  # type: ignore[arg-type]
        deadline = time.monotonic() + 5
        while procs.group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.info = None

    def restart(self, timeout: float = 30.0) -> None:
        self.stop()
        self.start(timeout)

    def alive(self) -> bool:
        return self.info is not None and procs.info_alive(self.info)


class Controller:
    """A driver's cluster-wide process (profile v2 ``controller``), started once per cluster:
    placeholders ``{kubeconfig}``, ``{drakitBin}``, ``{binary}``, ``{profileDir}``, ``{nodeDir}``
    (its log's folder), ``{metricsPort}``. ``start`` returns once it runs for a second."""

    def __init__(self, command: Sequence[str], kubeconfig: Path, bin_dir: Path, log: Path,
                 extra: Mapping[str, str] | None = None, env: Sequence[tuple[str, str]] = ()) -> None:
        self.values = {"kubeconfig": str(kubeconfig), "drakitBin": str(bin_dir), "nodeDir": str(log.parent),
                       **(extra or {})}
        if any("{metricsPort}" in arg for arg in (*command, *(v for _, v in env))):
            self.values["metricsPort"] = str(procs.free_ports(1)[0])
        self.argv = render(command, self.values)
        self.env = dict(zip((k for k, _ in env), render([v for _, v in env], self.values)))
        self.log = log
        self.info: procs.ProcInfo | None = None
        self._popen: dict[int, object] = {}

    def start(self, settle: float = 1.0) -> None:
        popen, self.info = procs.spawn("driver-controller", self.argv, self.log,
                                       env={**os.environ, **self.env}, die_with_parent=True)
        self._popen = {popen.pid: popen}
        time.sleep(settle)
        if popen.poll() is not None:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-3:] if self.log.exists() else []
            self.info = None
            raise PluginStartError(f"the driver's controller exited (code {popen.returncode}): "
                                   f"{' | '.join(tail) or '(no output)'} (log {self.log})")

    def stop(self) -> None:
        if self.info is not None:
            procs.stop([self.info], timeout=10, popen=self._popen)  # type: ignore[arg-type]
            self.info = None
