"""containerd + runc as the container runtime of a real kubelet node, in a namespace of the node's own.

Per node, one ``unshare --mount --pid --fork --mount-proc --kill-child`` process holds the node's
private mount and PID namespaces; inside it :func:`namespace_script` mounts private tmpfs on
``/var/lib``, ``/var/log`` and ``/run``, binds the node's kubelet folder (``<node>/r``) on
``/var/lib/kubelet`` (so the stock paths drivers hard-code are the node's own), shadows the
sysctls the kubelet sets (files holding the host's values), and execs containerd as the
namespace's PID 1. The kubelet joins both namespaces (``nsenter``), so the tmpfs mounts it makes
for secret and emptyDir volumes are the runtime's too; so may a foreign driver that needs NRI
(``/var/run/nri/nri.sock``) or ``/var/lib/kubelet`` (:meth:`ContainerdRuntime.enter`).

Nothing reaches the host: the namespaces die with containerd, and every process in them (runc
shims, containers, the kubelet) with the PID namespace; containerd's PID 1 gets SIGKILL when
drakit's ``unshare`` dies, which gets it when its owner dies. Pods get a network namespace with a
veth pair of their own (drakit's ``podnet`` CNI plugin, host-local IPAM): no link, route or
firewall rule in the host's namespace. The kubelet's QoS and pod cgroups, and runc's for the
containers, sit below a parent of the node's own (:func:`cgroup_parent`, the kubelet's
``cgroupRoot`` with ``cgroupsPerQOS``; a kubelet without it gives the runtime no parent, and
containerd then uses ``/k8s.io`` at the root of every hierarchy), removed at teardown
(:func:`remove_cgroups`). CDI specs come from the node's CDI folder, read by containerd's own
CDI library.

The pure parts (configuration text, scripts, parsing ``ctr`` output) are unit-tested; the rest
runs the binaries :mod:`clusters.local.build` makes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from drakit.clusters.local import procs

#: The CRI's name for this runtime (``status.nodeInfo.containerRuntimeVersion`` is ``containerd://<v>``).
RUNTIME_NAME = "containerd"
#: The pause image every sandbox runs (containerd's pinned sandbox image).
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
#: Folders private to the node's mount namespace (tmpfs).
PRIVATE_TMPFS = ("/var/lib", "/var/log", "/run")
#: Where stock DRA drivers and the kubelet expect the kubelet's folder.
KUBELET_ROOT = "/var/lib/kubelet"
#: Where stock drivers write CDI specs: bound on the node's CDI folder, which containerd reads.
CDI_DIR = "/var/run/cdi"
#: NRI's conventional socket, inside the node's namespace.
NRI_SOCKET = "/var/run/nri/nri.sock"
#: The CNI plugins a node's pods use (built by clusters/local/build.py, group podnet).
CNI_PLUGINS = ("podnet", "host-local")
#: containerd plugins that would write outside the node's folders (``/opt/containerd``) or are
#: of no use here.
DISABLED_PLUGINS = ("io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp",
                    "io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.blockfile",
                    "io.containerd.snapshotter.v1.erofs", "io.containerd.snapshotter.v1.native")
#: cgroup v1 hierarchies' root.
CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_parent(run_dir: Path, node: str) -> str:
    """The cgroup (cgroupfs form) below which runc puts a node's pods: one per run and node, so
    parallel clusters never share one and teardown knows what to remove."""
    token = hashlib.sha256(str(run_dir).encode()).hexdigest()[:10]
    return f"/drakit-{token}/{node}"


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string for these values


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


def config_toml(node_dir: Path, bin_dir: Path, *, debug: bool = False) -> str:
    """containerd's configuration (version 3) for the node in ``node_dir``."""
    d = node_dir
    return f"""version = 3
root = {_toml_str(str(d / "containerd"))}
state = "/run/containerd"
disabled_plugins = {_toml_list(DISABLED_PLUGINS)}

[grpc]
  address = {_toml_str(str(d / "containerd.sock"))}

[ttrpc]
  address = "/run/containerd/containerd.sock.ttrpc"

[debug]
  level = {_toml_str("debug" if debug else "info")}

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = {_toml_str(SANDBOX_IMAGE)}

[plugins."io.containerd.cri.v1.runtime"]
  # this host drops CAP_SYS_RESOURCE: a sandbox may not lower its oom_score_adj below containerd's
  restrict_oom_score_adj = true
  cdi_spec_dirs = {_toml_list([str(d / "cdi")])}
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = {_toml_str(str(bin_dir / "runc"))}
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = {_toml_list([str(d / "cni-bin")])}
    conf_dir = {_toml_str(str(d / "cni"))}
    max_conf_num = 1
    # containerd sets the pod's lo up itself: one CNI plugin process less per sandbox and teardown
    use_internal_loopback = true

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = {_toml_str(NRI_SOCKET)}
  plugin_path = {_toml_str(str(d / "nri" / "plugins"))}
  plugin_config_path = {_toml_str(str(d / "nri" / "conf.d"))}
"""


def cni_config(node_dir: Path, subnet: str) -> dict[str, Any]:
    """The node's one CNI network: drakit's podnet plugin with host-local IPAM in ``subnet``."""
    return {"cniVersion": "1.0.0", "name": "drakit-podnet", "type": "podnet", "mtu": 1500,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]],
                     "dataDir": str(node_dir / "cni-ipam")}}


def node_subnet(node: str) -> str:
    """A /24 of 10.244.0.0/16 per node name (pod addresses never leave the pod's namespace, so
    two nodes sharing one would still be correct; distinct ones read better)."""
    return f"10.244.{int(hashlib.sha256(node.encode()).hexdigest()[:4], 16) % 250 + 1}.0/24"


def hidden_by_tmpfs(paths: Iterable[Path]) -> list[Path]:
    """The folders of ``paths`` below ``/run`` or ``/var/lib`` (a run dir in ``$XDG_RUNTIME_DIR``)
    that the node's private tmpfs would hide, outermost only."""
    under = [p for p in sorted({Path(os.path.abspath(p)) for p in paths})
             if any(p.is_relative_to(t) for t in PRIVATE_TMPFS if t != "/var/log")]
    return [p for p in under if not any(p != o and p.is_relative_to(o) for o in under)]


def namespace_script(node_dir: Path, bin_dir: Path, sysctl_shadows: Mapping[str, Path], cwd: Path,
                     keep: Iterable[Path] = ()) -> str:
    """The shell run as PID 1 of the node's new namespaces (module docstring); it execs containerd.
    The folders of ``keep`` (the node's, the cluster's certificates) stay visible where a tmpfs
    covers them: bound aside on the first tmpfs (``/var/log``), and back after the others."""
    q = shlex.quote
    kept = hidden_by_tmpfs([node_dir, *keep])
    if any(Path(p).is_relative_to("/var/log") for p in [node_dir, *keep]):
        raise ValueError(f"a containerd node's folders cannot live below /var/log ({node_dir})")
    lines = ["set -eu"]
    order = ["/var/log", *(f for f in PRIVATE_TMPFS if f != "/var/log")]
    for folder in order:
        lines.append(f"mount -t tmpfs -o mode=0755,size=256m drakit-node {q(folder)}")
        if folder == "/var/log":
            for i, path in enumerate(kept):
                lines.append(f"mkdir -p /var/log/.drakit-keep/{i} && mount --bind {q(str(path))} /var/log/.drakit-keep/{i}")
    for i, path in enumerate(kept):
        lines.append(f"mkdir -p {q(str(path))} && mount --bind /var/log/.drakit-keep/{i} {q(str(path))}")
    lines.append(f"mkdir -p {q(KUBELET_ROOT)} /var/run/nri")
    lines.append(f"mount --bind {q(str(node_dir / 'r'))} {q(KUBELET_ROOT)}")
    # the stock CDI folder is the node's too: what a driver pod writes to its hostPath /var/run/cdi
    # (fake_driver/deploy) is what containerd reads
    lines.append(f"mkdir -p {q(str(node_dir / 'cdi'))} {q(CDI_DIR)} && mount --bind {q(str(node_dir / 'cdi'))} {q(CDI_DIR)}")
    for name, shadow in sysctl_shadows.items():
        lines.append(f"mount --bind {q(str(shadow))} {q('/proc/sys/' + name)}")
    lines.append(f"cd {q(str(cwd))}")
    lines.append(f"export PATH={q(str(bin_dir))}:\"$PATH\" TMPDIR={q(str(node_dir / 'tmp'))}")
    lines.append("exec " + " ".join(q(a) for a in [str(bin_dir / "containerd"), "--config",
                                                    str(node_dir / "containerd.toml")]))
    return "\n".join(lines) + "\n"


def unshare_argv(script: str) -> list[str]:
    return ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child", "--propagation", "private",
            "--", "/bin/sh", "-c", script]


def hierarchies(root: Path = CGROUP_ROOT) -> list[Path]:
    """The mounted cgroup v1 hierarchies (not their symlinked aliases), or the unified root."""
    if (root / "cgroup.controllers").exists():
        return [root]
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def cgroup_dirs(parent: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """The folders of ``parent`` in every hierarchy that exist now."""
    rel = parent.strip("/")
    return [h / rel for h in hierarchies(root) if (h / rel).is_dir()]


def make_cgroups(parent: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """Create ``parent`` in every hierarchy (the kubelet checks that its ``cgroupRoot`` exists in
    each), cpuset's with its parent's CPUs and memory nodes; return the folders made."""
    made = []
    rel = parent.strip("/")
    for h in hierarchies(root):
        path = h
        for part in rel.split("/"):
            parent_dir, path = path, path / part
            if not path.is_dir():
                path.mkdir()
                made.append(path)
                for knob in ("cpuset.cpus", "cpuset.mems"):
                    if (path / knob).exists() and not (path / knob).read_text().strip():
                        (path / knob).write_text((parent_dir / knob).read_text())
    return made


def remove_cgroups(parent: str, root: Path = CGROUP_ROOT, timeout: float = 10.0) -> list[str]:
    """Kill what is left in ``parent`` (and below) in every hierarchy, then remove its folders
    deepest first; return the folders that could not be removed (empty when all went)."""
    deadline = time.monotonic() + timeout
    left: list[str] = []
    for top in cgroup_dirs(parent, root):
        while True:
            dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
            dirs.append(top)
            busy = False
            for d in dirs:
                for pid in _cgroup_pids(d):
                    busy = True
                    try:
                        os.kill(pid, 9)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    busy = True
            if not busy or not top.exists() or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if top.exists():
            left.append(str(top))
    # the per-run folder above the node's goes when its last node's did
    run_level = "/" + parent.strip("/").split("/")[0]
    if run_level != "/" + parent.strip("/"):
        for d in cgroup_dirs(run_level, root):
            try:
                d.rmdir()
            except OSError:
                pass
    return left


def _cgroup_pids(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def containers_from_info(infos: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What containerd gave each container (``ctr containers info`` objects), in the shape of the
    fake CRI's CreateContainer events (:func:`kubeletnode.containers_of` reads both): the CDI
    device IDs the kubelet asked for (the CRI config containerd keeps) and the env, mounts and
    device nodes of the OCI spec after containerd's CDI library applied the devices' edits."""
    out = []
    for info in infos:
        labels = info.get("Labels") or {}
        if labels.get("io.cri-containerd.kind") != "container":
            continue
        spec = info.get("Spec") or {}
        config = _cri_config(info)
        out.append({
            "event": "CreateContainer",
            "id": info.get("ID"),
            "created": info.get("CreatedAt"),
            "pod": {"namespace": labels.get("io.kubernetes.pod.namespace"), "name": labels.get("io.kubernetes.pod.name"),
                    "uid": labels.get("io.kubernetes.pod.uid")},
            "container": labels.get("io.kubernetes.container.name"),
            "cdiDevices": [str(d.get("name")) for d in config.get("CDI_devices") or config.get("cdi_devices") or []
                           if isinstance(d, dict) and d.get("name")],
            "effective": {
                "env": list((spec.get("process") or {}).get("env") or []),
                "mounts": [{"containerPath": m.get("destination"), "hostPath": m.get("source")}
                           for m in spec.get("mounts") or [] if _is_bind(m)],
                "deviceNodes": [{"path": dn.get("path"), "type": dn.get("type")}
                                for dn in (spec.get("linux") or {}).get("devices") or []],
            },
        })
    out.sort(key=lambda e: str(e.get("created") or ""))
    return out


def _is_bind(mount: Mapping[str, Any]) -> bool:
    """A bind mount of the OCI spec: the kubelet's say ``type: bind``; a CDI spec's mount edits
    (a driver's device-metadata file, for one) often give no type, only ``bind``/``rbind`` options."""
    return mount.get("type") == "bind" or (not mount.get("type") and bool(
        {"bind", "rbind"} & {str(o) for o in mount.get("options") or []}))


def _cri_config(info: Mapping[str, Any]) -> dict[str, Any]:
    """The CRI ContainerConfig containerd stored with the container (its CRI metadata extension)."""
    for key, ext in (info.get("Extensions") or {}).items():
        if "cri" not in key or not isinstance(ext, Mapping):
            continue
        raw = ext.get("value")
        try:
            data = json.loads(base64.b64decode(raw)) if isinstance(raw, str) else raw
        except (ValueError, TypeError):
            continue
        meta = (data or {}).get("Metadata") if isinstance(data, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("Config"), dict):
            return dict(meta["Config"])
    return {}


Progress = Callable[[str], None]


class ContainerdRuntime:
    """The runtime half of one real kubelet node (module docstring)."""

    def __init__(self, node: str, node_dir: Path, bin_dir: Path, cgroup: str, images: Iterable[Path] = ()) -> None:
        self.node = node
        self.dir = node_dir
        self.bin_dir = bin_dir
        self.cgroup = cgroup
        self.images = list(images)

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    def write_files(self) -> None:
        make_cgroups(self.cgroup)
        d = self.dir
        for sub in ("containerd", "cni", "cni-bin", "cni-ipam", "tmp", "nri/plugins", "nri/conf.d"):
            (d / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        (d / "containerd.toml").write_text(config_toml(d, self.bin_dir))
        (d / "cni" / "10-drakit-podnet.conflist").unlink(missing_ok=True)
        (d / "cni" / "10-drakit-podnet.conf").write_text(json.dumps(cni_config(d, node_subnet(self.node)), indent=1))
        for plugin in CNI_PLUGINS:
            link = d / "cni-bin" / plugin
            link.unlink(missing_ok=True)
            link.symlink_to(self.bin_dir / plugin)

    def argv(self, sysctl_shadows: Mapping[str, Path], cwd: Path, keep: Iterable[Path] = ()) -> list[str]:
        return unshare_argv(namespace_script(self.dir, self.bin_dir, sysctl_shadows, cwd, keep))

    def wait_started(self, info: procs.ProcInfo, timeout: float = 30.0) -> int:
        """Wait for containerd's socket; return the host pid of the namespaces' PID 1 (containerd)."""
        deadline = time.monotonic() + timeout
        while True:
            if not procs.info_alive(info):
                raise RuntimeError(f"containerd of node {self.node} exited at start; see {info.log}")
            pid1 = _only_child(info.pid)
            if pid1 is not None and self.socket.exists() and _cri_ready(self, pid1):
                return pid1
            if time.monotonic() > deadline:
                raise RuntimeError(f"containerd of node {self.node} did not start in {timeout:.0f} s; see {info.log}")
            time.sleep(0.05)

    def ctr(self, *args: str, timeout: float = 60.0, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(self.bin_dir / "ctr"), "--address", str(self.socket), "--namespace", "k8s.io", *args],
                              input=stdin, capture_output=True, timeout=timeout, check=False)

    def import_images(self, archives: Iterable[Path] | None = None) -> None:
        """Import OCI archives into the node's image store (``ctr images import``)."""
        for archive in self.images if archives is None else archives:
            res = self.ctr("images", "import", "--no-unpack=false", "--local", str(archive))
            if res.returncode != 0:
                res = self.ctr("images", "import", str(archive))
            if res.returncode != 0:
                raise RuntimeError(f"node {self.node}: importing {archive} failed: "
                                   f"{res.stderr.decode(errors='replace').strip()[-300:]}")

    def containers(self, namespace: str | None = None, pod: str | None = None) -> list[dict[str, Any]]:
        """What containerd gave each container of a pod (:func:`containers_from_info`)."""
        filters = ["labels.\"io.cri-containerd.kind\"==container"]
        if namespace:
            filters.append(f"labels.\"io.kubernetes.pod.namespace\"=={namespace}")
        if pod:
            filters.append(f"labels.\"io.kubernetes.pod.name\"=={pod}")
        listing = self.ctr("containers", "list", "--quiet", ",".join(filters), timeout=20)
        if listing.returncode != 0:
            return []
        infos = []
        for cid in listing.stdout.decode().split():
            res = self.ctr("containers", "info", cid, timeout=20)
            if res.returncode == 0:
                try:
                    infos.append(json.loads(res.stdout))
                except ValueError:
                    continue
        return containers_from_info(infos)

    def version(self) -> str:
        res = subprocess.run([str(self.bin_dir / "containerd"), "--version"], capture_output=True, text=True,
                             timeout=10, check=False)
        parts = res.stdout.split()
        return parts[2].lstrip("v") if len(parts) > 2 else "unknown"


def enter_argv(pid1: int, argv: list[str]) -> list[str]:
    """``argv`` run inside a node's mount and PID namespaces (those of its containerd, ``pid1``)."""
    return ["nsenter", f"--target={pid1}", "--mount", "--pid", "--", *argv]


def _only_child(pid: int) -> int | None:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(kids[0]) if len(kids) == 1 else None


def _cri_ready(rt: ContainerdRuntime, pid1: int) -> bool:
    try:
        exe = os.readlink(f"/proc/{pid1}/exe")
    except OSError:
        return False
    if not exe.endswith("containerd"):
        return False
    res = rt.ctr("version", timeout=10)
    return res.returncode == 0
