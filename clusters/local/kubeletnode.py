"""Real kubelet nodes for the local cluster: an unmodified v1.37.2 kubelet over containerd + runc
(``clusters.local.containerd``, the default as root) or over drakit's fake CRI (described here).

Per node (``KubeletNode``), two processes:

- ``fakecri`` (Go, ``clusters/local/fakecri``): the node's own container runtime on its own
  socket (a kubelet adopts every container of a runtime it talks to, so runtimes are never
  shared). It records each container it creates (the CDI device IDs the kubelet passed, and the
  env, mounts and device nodes they resolve to in the node's CDI folder) in ``cri.jsonl``, and
  lets init containers exit 0 at once (it reads their pod's spec as the node).
- ``kubelet``, started through ``unshare --mount`` in a private mount namespace that dies with
  it: private tmpfs on ``/var/lib`` and ``/var/log`` (the kubelet writes
  ``/var/lib/kubelet/device-plugins/kubelet.sock`` and ``/var/log/containers`` whatever its
  flags say), and the sysctls it insists on setting (:data:`SYSCTLS`) shadowed by bind mounts
  of files holding the host's values, so the host's are never changed. Its working directory
  is an empty folder (the container-log GC of a kubelet globs in it when a runtime gives no log
  path).

Every other path is per node, under the node's folder: root dir ``r/`` (with
``r/plugins_registry``, where DRA plugins register, and ``r/plugins``), ``pki/``, pod logs,
volume plugins, ``cdi/`` (the CDI spec folder drivers write and the fake CRI reads). Ports are
free 127.0.0.1 ports. The kubelet authenticates as ``system:node:<name>`` with a client
certificate from the cluster's CA. Needs root (:func:`unavailable_reason`).

Everything here but :meth:`KubeletNode.start` / ``stop`` is pure and unit-tested.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drakit.clusters.local import procs
from drakit.clusters.local.containerd import KUBELET_ROOT, ContainerdRuntime, enter_argv, remove_cgroups

#: The node runtimes: containerd + runc (real containers), or drakit's fake CRI (no process runs).
CONTAINERD = "containerd"
FAKE = "fake"
RUNTIMES = (CONTAINERD, FAKE)

#: The sysctls the kubelet's container manager sets at start (``setupKernelTunables``).
SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
#: Folders the kubelet writes to whatever its configuration says; private tmpfs in its namespace.
PRIVATE_TMPFS = ("/var/lib", "/var/log")
#: Unix socket paths are limited to 107 bytes; plugin sockets live below the node folder.
MAX_NODE_DIR = 48


def cgroup_v1(root: Path = Path("/sys/fs/cgroup")) -> bool:
    """True when the host mounts cgroup v1 (no unified hierarchy's ``cgroup.controllers``)."""
    return not (root / "cgroup.controllers").exists()


def default_runtime(unavailable: str | None) -> str:
    """The node runtime when none is asked for: containerd + runc where real nodes can run (root),
    else the fake CRI (moot: such a cluster has kwok nodes only)."""
    return CONTAINERD if unavailable is None else FAKE


def unavailable_reason() -> str | None:
    """Why real kubelet nodes cannot run here (one line), or None."""
    if os.geteuid() != 0:
        return "real kubelet nodes need root (a private mount namespace per kubelet)"
    for tool in ("unshare", "mount"):
        if not shutil.which(tool):
            return f"real kubelet nodes need {tool} (util-linux) on PATH"
    try:
        probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                               capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare --mount cannot run: {exc}"
    if probe.returncode != 0:
        return f"unshare --mount fails here: {(probe.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


@dataclass(frozen=True, slots=True)
class NodePaths:
    """Where one node's files live (all below ``dir``)."""

    dir: Path

    @property
    def root_dir(self) -> Path:
        return self.dir / "r"

    @property
    def registry_dir(self) -> Path:
        """Where DRA plugins put their registration sockets (the kubelet watches it)."""
        return self.root_dir / "plugins_registry"

    @property
    def plugins_dir(self) -> Path:
        """Where DRA plugins put their service sockets (``<dir>/<driver>/dra.sock``)."""
        return self.root_dir / "plugins"

    @property
    def cdi_dir(self) -> Path:
        return self.dir / "cdi"

    @property
    def cert_dir(self) -> Path:
        return self.dir / "pki"

    @property
    def pod_logs_dir(self) -> Path:
        return self.dir / "pod-logs"

    @property
    def volume_plugin_dir(self) -> Path:
        return self.dir / "volume-plugins"

    @property
    def sysctl_dir(self) -> Path:
        return self.dir / "sysctl"

    @property
    def cwd(self) -> Path:
        return self.dir / "cwd"

    @property
    def cri_socket(self) -> Path:
        return self.dir / "cri.sock"

    @property
    def cri_record(self) -> Path:
        """The fake CRI's record: one JSON object a line (see :func:`read_cri_record`)."""
        return self.dir / "cri.jsonl"

    @property
    def config(self) -> Path:
        return self.dir / "kubelet.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"


def kubelet_config(paths: NodePaths, *, port: int, healthz_port: int, ca_file: Path, tls_cert: Path,
                   tls_key: Path, v1: bool, max_pods: int = 110, runtime_socket: Path | None = None,
                   cgroup_root: str | None = None) -> dict[str, Any]:
    """The KubeletConfiguration of one node (feature gates go on the command line); the fake CRI
    unless ``runtime_socket`` names containerd's, whose pods' cgroups go below ``cgroup_root``."""
    endpoint = f"unix://{runtime_socket or paths.cri_socket}"
    cfg: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(tls_cert),
        "tlsPrivateKeyFile": str(tls_key),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(ca_file)}},
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": endpoint,
        "imageServiceEndpoint": endpoint,
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "failSwapOn": False,
        "podLogsDir": str(paths.pod_logs_dir),
        "volumePluginDir": str(paths.volume_plugin_dir),
        "resolvConf": "",
        "maxPods": max_pods,
        "serializeImagePulls": False,
        # The host's disk and memory are not the node's: never evict or garbage-collect images.
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "2s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "0s",
        "shutdownGracePeriod": "0s",
        "protectKernelDefaults": False,
        # The kubelet runs in the host's network namespace: never let it add its iptables
        # chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY, ...) to the host's ruleset.
        "makeIPTablesUtilChains": False,
    }
    if cgroup_root:
        # QoS and pod cgroups below the node's own parent: the runtime is handed that parent
        # (without cgroupsPerQOS it gets none, and containerd uses /k8s.io at each root)
        cfg["cgroupRoot"] = cgroup_root
        cfg["cgroupsPerQOS"] = True
    if v1:
        cfg["failCgroupV1"] = False
    return cfg


def kubelet_args(paths: NodePaths, name: str, labels: Mapping[str, str], gates: str, verbosity: int = 2,
                 root_dir: str | None = None) -> list[str]:
    """The kubelet's flags; ``root_dir`` is where the kubelet sees ``paths.root_dir`` (on a
    containerd node it is bound on ``/var/lib/kubelet`` in the node's namespace)."""
    args = [
        f"--config={paths.config}",
        f"--kubeconfig={paths.kubeconfig}",
        f"--root-dir={root_dir or paths.root_dir}",
        f"--cert-dir={paths.cert_dir}",
        f"--hostname-override={name}",
        # The kubelet serves on 127.0.0.1. It refuses a loopback node IP, so its address setter
        # fails and leaves the Node's addresses alone: drakit sets InternalIP 127.0.0.1 once the
        # Node is Ready (realnodes._set_loopback_address), for logs and exec through the API server.
        "--node-ip=127.0.0.1",
        f"--v={verbosity}",
        # One line when the kubelet's start-up wipe of the node's ResourceSlices is done
        # (KubeletNode.wiped): a publisher must publish after it.
        "--vmodule=dra_plugin_manager=3",
    ]
    if labels:
        args.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
    if gates:
        args.append(f"--feature-gates={gates}")
    return args


def namespace_script(paths: NodePaths, kubelet: Path, args: list[str]) -> str:
    """The shell script run inside the kubelet's private mount namespace: private tmpfs on
    :data:`PRIVATE_TMPFS`, shadow files bound over :data:`SYSCTLS`, then ``exec`` the kubelet
    (so the namespace lives exactly as long as the kubelet's process)."""
    lines = ["set -eu"]
    for d in PRIVATE_TMPFS:
        lines.append(f"mount -t tmpfs -o mode=0755,size=256m drakit-node {shlex.quote(d)}")
    for name in SYSCTLS:
        shadow = paths.sysctl_dir / name.replace("/", ".")
        lines.append(f"mount --bind {shlex.quote(str(shadow))} {shlex.quote('/proc/sys/' + name)}")
    lines.append(f"cd {shlex.quote(str(paths.cwd))}")
    lines.append("exec " + " ".join(shlex.quote(a) for a in [str(kubelet), *args]))
    return "\n".join(lines) + "\n"


def read_sysctls(names: tuple[str, ...] = SYSCTLS) -> dict[str, str]:
    """The host's current values of ``names`` (missing ones left out)."""
    out = {}
    for n in names:
        try:
            out[n] = Path("/proc/sys", n).read_text().strip()
        except OSError:
            continue
    return out


def read_cri_record(path: Path) -> list[dict[str, Any]]:
    """The fake CRI's record: a list of events (``RunPodSandbox``, ``CreateContainer``,
    ``StopPodSandbox``, ``RemovePodSandbox``); a torn last line is ignored."""
    out = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def containers_of(record: list[dict[str, Any]], namespace: str, pod: str,
                  container: str | None = None) -> list[dict[str, Any]]:
    """The successful CreateContainer events of a pod (optionally one container), oldest first."""
    return [e for e in record if e.get("event") == "CreateContainer" and not e.get("error")
            and (e.get("pod") or {}).get("namespace") == namespace and (e.get("pod") or {}).get("name") == pod
            and (container is None or e.get("container") == container)]


Progress = Callable[[str], None]
WIPE_LINE = '"Deleted ResourceSlices"'
STARTUP_LOGGER = 'logger="DRA registration handler.startup"'


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


class KubeletNode:
    """One real kubelet node (module docstring). ``start()`` returns at once; the caller waits
    for the Node to be Ready through the API server."""

    def __init__(self, name: str, node_dir: Path, *, bin_dir: Path, server: str, ca_file: Path,
                 client_cert: tuple[Path, Path], serving_cert: tuple[Path, Path], ports: tuple[int, int],
                 labels: Mapping[str, str] | None = None, gates: str = "", detached: bool = False,
                 progress: Progress | None = None, runtime: str = FAKE,
                 cgroup: str | None = None, images: Sequence[Path] = ()) -> None:
        self.name = name
        self.paths = NodePaths(node_dir)
        self.bin_dir = bin_dir
        self.server = server
        self.ca_file = ca_file
        self.client_cert = client_cert
        self.serving_cert = serving_cert
        self.port, self.healthz_port = ports
        self.labels = dict(labels or {})
        self.gates = gates
        self.detached = detached
        self.progress = progress or (lambda _m: None)
        self.procs: dict[str, procs.ProcInfo] = {}
        self._popen: dict[int, Any] = {}
        self._log_offset = 0
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown node runtime {runtime!r} (one of {', '.join(RUNTIMES)})")
        self.runtime = runtime
        self.containerd: ContainerdRuntime | None = None
        if runtime == CONTAINERD:
            self.containerd = ContainerdRuntime(name, node_dir, bin_dir, cgroup or f"/drakit-{name}", images)
        self._pid1: int | None = None

    @property
    def runtime_socket(self) -> Path:
        return self.containerd.socket if self.containerd is not None else self.paths.cri_socket

    # ---------------------------------------------------------------- files
    def write_files(self) -> None:
        p = self.paths
        for d in (p.dir, p.root_dir, p.registry_dir, p.plugins_dir, p.cdi_dir, p.cert_dir, p.pod_logs_dir,
                  p.volume_plugin_dir, p.sysctl_dir, p.cwd):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        p.dir.chmod(0o700)
        p.cdi_dir.chmod(0o755)
        host = read_sysctls()
        for name in SYSCTLS:
            (p.sysctl_dir / name.replace("/", ".")).write_text(host.get(name, "0") + "\n")
        rt = self.containerd
        cfg = kubelet_config(p, port=self.port, healthz_port=self.healthz_port, ca_file=self.ca_file,
                             tls_cert=self.serving_cert[0], tls_key=self.serving_cert[1], v1=cgroup_v1(),
                             runtime_socket=rt.socket if rt else None, cgroup_root=rt.cgroup if rt else None)
        if rt is not None:
            rt.write_files()
        p.config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        _write_node_kubeconfig(p.kubeconfig, self.server, self.ca_file, *self.client_cert, self.name)
        p.cri_record.touch(mode=0o600)

    # ------------------------------------------------------------ processes
    def start(self) -> list[procs.ProcInfo]:
        self.write_files()
        self.start_cri()
        self.start_kubelet()
        return list(self.procs.values())

    def _spawn(self, role: str, argv: list[str]) -> procs.ProcInfo:
        name = f"{role}/{self.name}"
        popen, info = procs.spawn(name, argv, self.paths.dir / f"{role}.log", cwd=self.paths.cwd,
                                  die_with_parent=not self.detached)
        self._popen[popen.pid] = popen
        self.procs[role] = info
        self.progress(f"started {name} (pid {popen.pid})")
        return info

    def start_cri(self) -> procs.ProcInfo:
        """Start the node's container runtime: containerd in the node's namespaces, or the fake CRI."""
        if self.containerd is not None:
            return self._start_containerd(self.containerd)
        p = self.paths
        info = self._spawn("fakecri", [str(self.bin_dir / "fakecri"), f"--listen={p.cri_socket}",
                                       f"--record={p.cri_record}", f"--cdi-dir={p.cdi_dir}", f"--fs-dir={p.dir}",
                                       # which containers are init containers: read as the node
                                       f"--api-server={self.server}", f"--ca={self.ca_file}",
                                       f"--cert={self.client_cert[0]}", f"--key={self.client_cert[1]}"])
        import time
        deadline = time.monotonic() + 10
        while not p.cri_socket.exists():
            if not procs.info_alive(info) or time.monotonic() > deadline:
                raise RuntimeError(f"fakecri of node {self.name} did not start; see {p.dir / 'fakecri.log'}")
            time.sleep(0.02)
        return info

    def _start_containerd(self, rt: ContainerdRuntime) -> procs.ProcInfo:
        shadows = {name: self.paths.sysctl_dir / name.replace("/", ".") for name in SYSCTLS}
        keep = [self.ca_file.parent, self.bin_dir, *(c.parent for c in (*self.client_cert, *self.serving_cert))]
        info = self._spawn("containerd", rt.argv(shadows, self.paths.cwd, keep))
        self._pid1 = rt.wait_started(info)
        rt.import_images()
        return info

    def enter(self, argv: list[str]) -> list[str]:
        """``argv`` run in the node's mount and PID namespaces (containerd nodes only): where a
        driver sees ``/var/lib/kubelet`` and NRI's socket as the node's own."""
        if self._pid1 is None:
            raise RuntimeError(f"node {self.name} has no namespace of its own (runtime {self.runtime})")
        return enter_argv(self._pid1, argv)

    def start_kubelet(self) -> procs.ProcInfo:
        log = self.paths.dir / "kubelet.log"
        self._log_offset = log.stat().st_size if log.exists() else 0
        if self.containerd is not None:
            args = kubelet_args(self.paths, self.name, self.labels, self.gates, root_dir=KUBELET_ROOT)
            script = (f"cd {shlex.quote(str(self.paths.cwd))}\n"
                      + "exec " + " ".join(shlex.quote(a) for a in [str(self.bin_dir / "kubelet"), *args]) + "\n")
            return self._spawn("kubelet", self.enter(["/bin/sh", "-c", script]))
        script = namespace_script(self.paths, self.bin_dir / "kubelet",
                                  kubelet_args(self.paths, self.name, self.labels, self.gates))
        return self._spawn("kubelet", ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script])

    def stop_kubelet(self, timeout: float = 15.0) -> None:
        info = self.procs.pop("kubelet", None)
        if info is not None:
            procs.stop([info], timeout=timeout, popen=self._popen)

    def restart_kubelet(self) -> procs.ProcInfo:
        self.stop_kubelet()
        return self.start_kubelet()

    def stop(self) -> None:
        order = [self.procs[r] for r in ("kubelet", "fakecri") if r in self.procs]
        procs.stop(order, popen=self._popen)
        if "containerd" in self.procs:
            # The node goes with it: containerd is its PID namespace's first process, so a SIGKILL
            # takes every shim and container along at once (the kernel kills the namespace and
            # waits for it), its mounts and network namespaces go with its mount namespace, and
            # its folders are removed. Its graceful shutdown took 1.7-1.9 s a node, for nothing.
            procs.stop([self.procs["containerd"]], timeout=0, popen=self._popen)
        self.procs.clear()
        self._pid1 = None
        if self.containerd is not None:
            remove_cgroups(self.containerd.cgroup)

    def containers(self, namespace: str, pod: str, container: str | None = None) -> list[dict[str, Any]]:
        """What the runtime gave each container of a pod (optionally one), oldest first: the fake
        CRI's record, or containerd's own (:func:`containerd.containers_from_info`)."""
        if self.containerd is not None:
            found = self.containerd.containers(namespace, pod)
            return [e for e in found if container is None or e.get("container") == container]
        return containers_of(read_cri_record(self.paths.cri_record), namespace, pod, container)

    def wiped(self) -> bool:
        """Whether the kubelet started last has deleted its node's ResourceSlices (it does that
        once at start, as soon as its Node exists; slices published earlier are lost)."""
        info = self.procs.get("kubelet")
        text = _read_from(self.paths.dir / "kubelet.log", self._log_offset)
        return info is not None and any(WIPE_LINE in ln and STARTUP_LOGGER in ln for ln in text.splitlines())

    def alive(self) -> bool:
        return all(procs.info_alive(p) for p in self.procs.values())

    def prepared_claims(self) -> list[str]:
        """``namespace/name`` of each claim the kubelet holds prepared (its DRA checkpoint,
        ``dra_manager_state``: a claim stays there until the kubelet unprepared it); a
        checkpoint that cannot be read counts as empty (see :meth:`checkpoint_claims`)."""
        return self.checkpoint_claims() or []

    def checkpoint_claims(self) -> list[str] | None:
        """As :meth:`prepared_claims`, but None when the checkpoint exists and cannot be read
        (the kubelet writes it whole, by rename: that is not expected)."""
        try:
            outer = json.loads((self.paths.root_dir / "dra_manager_state").read_text())
            # pkg/kubelet/cm/dra/state: Checkpoint{Data: JSON of CheckpointData{ClaimInfoStateList}}
            entries = json.loads(outer.get("Data") or "{}").get("ClaimInfoStateList") or []
        except FileNotFoundError:
            return []
        except (OSError, ValueError, AttributeError):
            return None
        return [f"{e.get('Namespace')}/{e.get('ClaimName')}" for e in entries if isinstance(e, dict)]

    def clear_driver_files(self, plugin_data: Path) -> None:
        """Empty the node's CDI spec folder and ``plugin_data`` (the fake drivers' files): the
        drivers of the node's next hardware start from nothing, as on a fresh node."""
        for folder in (self.paths.cdi_dir, plugin_data):
            for entry in folder.iterdir() if folder.is_dir() else ():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)


def _write_node_kubeconfig(path: Path, server: str, ca: Path, crt: Path, key: Path, node: str) -> None:
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": node,
        "clusters": [{"name": "drakit-local", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": f"system:node:{node}",
                   "user": {"client-certificate": str(crt), "client-key": str(key)}}],
        "contexts": [{"name": node, "context": {"cluster": "drakit-local", "user": f"system:node:{node}"}}],
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(cfg, fh, sort_keys=False)
