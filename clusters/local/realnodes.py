"""The real kubelet nodes of one local cluster (:class:`RealNodes`), started and stopped with it.

``LocalCluster`` owns one ``RealNodes``: ``add(name, labels)`` starts a
:class:`kubeletnode.KubeletNode` (its fake CRI and kubelet join the cluster's processes, so
``down()``, a killed run's cleanup and ``drakit cluster down`` stop them like any component),
``wait_ready(names)`` waits for the Nodes to be Ready and untainted through the API server,
``remove(name)`` stops one and deletes its Node object.

Node folders live in the run dir (``n/<name>``) when that path is short enough for the Unix
sockets below it; otherwise in a private folder under the system temp dir, recorded in the
run dir's state so that cleanup finds it.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from drakit.clusters.local import gates as gatesmod
from drakit.clusters.local import pki, procs
from drakit.clusters.local.errors import ClusterError
from drakit.clusters.local.containerd import cgroup_parent, remove_cgroups
from drakit.clusters.local.kubeletnode import CONTAINERD, FAKE, MAX_NODE_DIR, KubeletNode

#: How often a kubelet node that exits while starting is started again (each time with fresh ports).
START_ATTEMPTS = 3
#: A kubelet exits at start when it gets no inotify instance (cAdvisor needs one; each kubelet
#: takes about 6, a control plane about 12, and all of a user's processes share
#: fs.inotify.max_user_instances, 128 by default): such a start is tried this often, waiting
#: INOTIFY_WAIT seconds between tries for other clusters and kubelets to give some back.
INOTIFY_ATTEMPTS = 6
INOTIFY_WAIT = 5.0
INOTIFY_NOTE = ("the kubelet got no inotify instance (too many open files): this user's kubelets and control "
                "planes hold them all (fs.inotify.max_user_instances); run fewer clusters or workers at once")

Progress = Callable[[str], None]

#: Gates every kubelet node gets on top of the run's (a run that sets one itself wins).
#: EventedPLEG (alpha): the kubelet relists a pod as soon as the runtime's container event
#: stream says one of its containers stopped (drakit's fake CRI sends the events containerd and
#: CRI-O send) instead of at its next periodic relist, which comes once a second: an init
#: container's completion and a stopped container are seen at once.
KUBELET_EXTRA_GATES = {"EventedPLEG": True}
#: The images every containerd node imports at start (clusters.images): the sandbox's and the
#: cases' pods'. Others (the fake driver's) are imported by whoever runs them.
NODE_IMAGES = ("pause", "busybox")


class RealNodeError(ClusterError):
    """A kubelet node could not start or become Ready; the message says why and where the log is."""


def short_temp_dir() -> str:
    """The temp folder when a ``drakit-n-XXXXXXXX/<15-character node>`` path fits in it within
    ``MAX_NODE_DIR``, else the first writable of ``/tmp``, ``/var/tmp``, ``/dev/shm``."""
    for base in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"):
        if len(base) + len("/drakit-n-XXXXXXXX/") + 15 <= MAX_NODE_DIR and os.access(base, os.W_OK | os.X_OK):
            return base
    return tempfile.gettempdir()  # nothing shorter: the node folders' own check names the problem


class RealNodes:
    def __init__(self, *, run_dir: Path, bin_dir: Path, server: str, pki_: pki.PKI, kubelet_gates: Mapping[str, bool],
                 detached: bool, on_procs: Callable[[], None], progress: Progress, nodes_dir: Path | None = None,
                 runtime: str = FAKE, extra_images: Sequence[Path] = ()) -> None:
        self.run_dir = run_dir
        self.bin_dir = bin_dir
        self.server = server
        self.pki = pki_
        self.gates = gatesmod.format_gates({**KUBELET_EXTRA_GATES, **kubelet_gates})
        self.detached = detached
        self.on_procs = on_procs
        self.progress = progress
        self.nodes: dict[str, KubeletNode] = {}
        self.nodes_dir = nodes_dir or self._pick_nodes_dir()
        # Folders outside the run folder, tied to it (leftovers.py sweeps them, and the cgroups of
        # its pods, once it is gone): the nodes' folder when it is outside, else, for containerd
        # nodes, a record of its own, so that the pods' cgroups do not outlive a removed run folder.
        self.tied_dirs = [self.nodes_dir] if self.outside_run_dir else []
        if runtime == CONTAINERD and not self.tied_dirs:
            record = Path(tempfile.mkdtemp(prefix="drakit-cg-"))
            procs.tie(record, run_dir)
            self.tied_dirs.append(record)
        self.runtime = runtime
        self._images: list[Path] | None = None
        self.extra_images = list(extra_images)  # a user's archives (drakit cluster up --load-image)

    def images(self) -> list[Path]:
        """The image archives every containerd node imports (built once, then cached)."""
        if self._images is None:
            from drakit.clusters.images import ensure_images

            try:
                self._images = ensure_images(self.progress, which=NODE_IMAGES) + self.extra_images
            except Exception as exc:  # noqa: BLE001 - any build failure is one line for the user
                raise RealNodeError(f"the node images cannot be built: {exc}") from None
        return self._images

    def _pick_nodes_dir(self) -> Path:
        """The nodes' folder: in the run folder when its path leaves room for the kubelet's Unix
        sockets, else a folder of its own in the temp folder, or in ``/tmp`` (said in one line)
        when TMPDIR itself is too long (a CI runner's ``/home/runner/work/_temp``)."""
        inside = self.run_dir / "n"
        if len(str(inside)) <= MAX_NODE_DIR - 16:  # room for a 15-character node name
            return inside
        base = short_temp_dir()
        folder = Path(tempfile.mkdtemp(prefix="drakit-n-", dir=base))
        procs.tie(folder, self.run_dir)
        if base != tempfile.gettempdir():  # said on drakit run's console too (sockdir.notice)
            from drakit.clusters import sockdir
            sockdir.notice(f"kubelet nodes' folders in {folder}: the temp folder {tempfile.gettempdir()} is too long "
                           f"for their Unix sockets")
        return folder

    @property
    def outside_run_dir(self) -> bool:
        try:
            self.nodes_dir.relative_to(self.run_dir)
            return False
        except ValueError:
            return True

    def procs(self) -> list[procs.ProcInfo]:
        return [p for n in self.nodes.values() for p in n.procs.values()]

    def add(self, name: str, labels: Mapping[str, str] | None = None) -> KubeletNode:
        if name in self.nodes:
            raise RealNodeError(f"kubelet node {name} is already running")
        from drakit.reports.safefs import UnsafePath, check_name
        try:
            node_dir = self.nodes_dir / check_name(name, "node name")  # a case's node name: never a path
        except UnsafePath as exc:
            raise RealNodeError(str(exc)) from None
        if len(str(node_dir)) > MAX_NODE_DIR:
            raise RealNodeError(f"node folder {node_dir} is too long for its Unix sockets; use a shorter node name")
        try:
            crt = pki.node_client_cert(self.pki, name)
        except pki.PKIError as exc:
            raise RealNodeError(str(exc)) from None
        ports = procs.free_ports(2)
        real = self.runtime == CONTAINERD
        node = KubeletNode(name, node_dir, bin_dir=self.bin_dir, server=self.server, ca_file=self.pki.ca_crt,
                           client_cert=crt, serving_cert=(self.pki.serving_crt, self.pki.serving_key),
                           ports=(ports[0], ports[1]), labels=labels, gates=self.gates, detached=self.detached,
                           progress=self.progress, runtime=self.runtime,
                           cgroup=cgroup_parent(self.run_dir, name) if real else None,
                           images=self.images() if real else ())
        self.nodes[name] = node
        try:
            node.start()
        except (OSError, RuntimeError) as exc:
            self.on_procs()
            raise RealNodeError(f"kubelet node {name} cannot start: {exc}") from None
        finally:
            self.on_procs()
        return node

    def wait_ready(self, names: list[str], ctx: ssl.SSLContext, timeout: float) -> dict[str, float]:
        """Wait until each Node is Ready, carries no ``node.kubernetes.io/`` taint, and its kubelet
        has done its start-up wipe of the node's ResourceSlices; returns the seconds each took."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        took: dict[str, float] = {}
        pending = list(names)
        while pending:
            name = pending[0]
            node = self.nodes[name]
            if not node.alive():
                dead = [role for role, p in node.procs.items() if not procs.info_alive(p)]
                raise RealNodeError(f"kubelet node {name}: {' and '.join(dead)} exited; last log lines: "
                                    + " | ".join(f"{role}: {_tail(node.paths.dir / f'{role}.log', 6)}" for role in dead))
            if node.wiped() and _node_ready(self.server, name, ctx):
                _set_loopback_address(self.server, name, ctx)
                took[name] = time.monotonic() - t0
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise RealNodeError(f"kubelet node {name} not Ready after {timeout:.0f} s; last log lines:\n"
                                    f"{_tail(node.paths.dir / 'kubelet.log')}")
            time.sleep(0.05)
        return took

    def remove(self, name: str, ctx: ssl.SSLContext | None = None) -> None:
        node = self.nodes.pop(name, None)
        if node is None:
            return
        node.stop()
        self.on_procs()
        if ctx is not None:
            try:
                req = urllib.request.Request(f"{self.server}/api/v1/nodes/{name}", method="DELETE")
                urllib.request.urlopen(req, context=ctx, timeout=10).close()  # noqa: S310 (loopback only)
            except (urllib.error.URLError, OSError):
                pass
        shutil.rmtree(node.paths.dir, ignore_errors=True)

    def stop_all(self) -> None:
        for name in list(self.nodes):
            node = self.nodes.pop(name)
            node.stop()
        self.on_procs()
        remove_run_cgroups(self.run_dir, self.progress)

    def remove_dirs(self) -> None:
        for folder in self.tied_dirs:
            shutil.rmtree(folder, ignore_errors=True)


class KubeletNodes:
    """The kubelet-node part of :class:`launcher.LocalCluster` (a mixin: it uses the cluster's
    process list, state file and API credentials)."""

    real: RealNodes | None
    node_runtime: str
    real_nodes_reason: str | None
    prestart_kubelet_nodes: list[tuple[str, Mapping[str, str]]]
    run_dir: Path
    bin_dir: Path
    detached: bool
    gates: dict[str, dict[str, bool]]
    _extra_dirs: list[str]
    node_images: list[Path]
    kubelet_claim_read: bool
    timeout: float
    progress: Progress
    _procs: list[procs.ProcInfo]
    _popen: dict[int, Any]

    @property
    def server(self) -> str:
        raise NotImplementedError

    def _api_ctx(self) -> ssl.SSLContext:
        raise NotImplementedError

    def _save_state(self) -> None:
        raise NotImplementedError

    def _start_real_nodes(self, pki_: pki.PKI) -> None:
        """The cluster's :class:`RealNodes`, once its API server is ready, and the
        ``prestart_kubelet_nodes`` started at once (a kubelet needs nothing else), so that their
        start overlaps the controllers'; ``up()`` does not wait for them. One that cannot start
        is said and left to whoever asked for it (its ``alive()`` is false): the cluster still
        comes up."""
        self.real = RealNodes(run_dir=self.run_dir, bin_dir=self.bin_dir, server=self.server, pki_=pki_,
                              kubelet_gates=self.gates.get("kubelet", {}), detached=self.detached,
                              on_procs=self._save_state, progress=self.progress, runtime=self.node_runtime,
                              extra_images=self.node_images)
        self._extra_dirs += [str(d) for d in self.real.tied_dirs]
        self._save_state()
        for name, labels in self.prestart_kubelet_nodes:
            try:
                self.add_kubelet_node(name, labels, wait=False)
            except ClusterError as exc:
                self.progress(f"kubelet node {name} not started early: {exc}")

    def _sync_procs(self) -> None:
        """The cluster's process list, with the real nodes' current processes."""
        if self.real is not None:
            mine = {p.pid for p in self.real.procs()}
            self._procs = [p for p in self._procs if not _node_proc(p) or p.pid in mine]
            known = {p.pid for p in self._procs}
            self._procs += [p for p in self.real.procs() if p.pid not in known]
            for node in self.real.nodes.values():
                self._popen.update(node._popen)

    def add_kubelet_node(self, name: str, labels: Mapping[str, str] | None = None, *, wait: bool = True) -> KubeletNode:
        """Start a real kubelet node (fake CRI + kubelet) named ``name`` with node ``labels``;
        with ``wait``, return once the Node is Ready. Raises ClusterError without root."""
        if self.real is None:
            raise RealNodeError(self.real_nodes_reason or "the cluster is not up")
        if self.kubelet_claim_read and not self.real.nodes:
            grant_claim_read(self.real.server, self._api_ctx())
        node = self.real.add(name, labels)
        if not wait:
            return node
        attempts = START_ATTEMPTS
        attempt = 0
        while True:
            attempt += 1
            try:
                self.wait_kubelet_nodes([name])
                return node
            except RealNodeError as failure:
                starved = not node.alive() and _inotify_starved(node.paths.dir / "kubelet.log")
                if starved:  # wait for other kubelets and control planes to give instances back
                    attempts = INOTIFY_ATTEMPTS
                if node.alive() or attempt >= attempts:
                    if starved:
                        raise RealNodeError(f"kubelet node {name} exited at start: {INOTIFY_NOTE} ({failure})") from None
                    raise
                # Again with fresh ports: a port free_ports found free can be taken by another
                # process on a busy machine before the kubelet binds it. Each failed log is kept.
                failed = node.paths.dir / "kubelet.log"
                kept = self.real.run_dir / "logs" / f"kubelet-{name}-failed-start-{attempt}.log"
                kept.parent.mkdir(parents=True, exist_ok=True)
                try:
                    kept.write_bytes(failed.read_bytes())
                except OSError:
                    pass
                self.progress(f"kubelet node {name} exited at start; starting it again ({failure})")
                if starved:
                    time.sleep(INOTIFY_WAIT)
                self.real.remove(name, self._api_ctx())
                node = self.real.add(name, labels)

    def wait_kubelet_nodes(self, names: list[str]) -> dict[str, float]:
        assert self.real is not None
        took = self.real.wait_ready(names, self._api_ctx(), self.timeout)
        for n, secs in took.items():
            self.progress(f"kubelet node {n} Ready ({secs:.1f} s)")
        return took

    def reset_kubelet_node(self, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
        """Make the Node of a running kubelet node look as if it had just registered with
        ``labels`` (its next case may have other hardware): labels other than the kubelet's
        own (:data:`KUBELET_LABELS`) and ``labels`` removed, ``labels`` set, taints other than
        the ``node.kubernetes.io/`` ones the kubelet and node controller manage removed, not
        unschedulable. The kubelet applies its ``--node-labels`` only when it creates its Node,
        so this is how a running kubelet gets new ones (a restart keeps them: they are its
        flags from now on). Returns the merge patch sent ({} when nothing differed)."""
        node = self.kubelet_node(name)
        if node is None:
            raise RealNodeError(f"node {name} is not a running kubelet node")
        node.labels = dict(labels)
        ctx = self._api_ctx()
        url = f"{node.server}/api/v1/nodes/{name}"
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=10) as r:  # noqa: S310 (loopback only)
                obj: dict[str, Any] = json.loads(r.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RealNodeError(f"reading Node {name}: {exc}") from None
        patch = node_reset_patch(obj, labels)
        if patch:
            req = urllib.request.Request(url, method="PATCH", data=json.dumps(patch).encode(),
                                         headers={"Content-Type": "application/merge-patch+json"})
            try:
                urllib.request.urlopen(req, context=ctx, timeout=10).close()  # noqa: S310 (loopback only)
            except (urllib.error.URLError, OSError) as exc:
                raise RealNodeError(f"resetting Node {name}: {exc}") from None
        return patch

    def kubelet_node(self, name: str) -> KubeletNode | None:
        return self.real.nodes.get(name) if self.real is not None else None

    def remove_kubelet_node(self, name: str) -> None:
        """Stop the node's kubelet and fake CRI, delete its Node object and folder."""
        if self.real is not None:
            self.real.remove(name, self._api_ctx())

    def track(self, info: procs.ProcInfo, popen: Any = None) -> None:
        """Make a process started for this cluster (e.g. a driver) part of its teardown."""
        self._procs.append(info)
        if popen is not None:
            self._popen[info.pid] = popen
        self._save_state()


#: RBAC that lets every kubelet read ResourceClaims. The Node authorizer allows a kubelet the
#: claims of the pods bound to it only once its graph has seen the binding; a kubelet that gets a
#: freshly bound pod first is refused ("no relationship found between node ... and this
#: object") and retries after its pod-worker backoff (about 10 s). Measured on a loaded 2-core
#: machine: 20 of 50 pods waited for that retry. Granting the read through RBAC (evaluated
#: after the Node authorizer) takes the race away without changing what the kubelet does.
CLAIM_READ_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
    "metadata": {"name": "drakit:kubelet-read-resourceclaims"},
    "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]}],
}
CLAIM_READ_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": "drakit:kubelet-read-resourceclaims"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}],
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "drakit:kubelet-read-resourceclaims"},
}


def grant_claim_read(server: str, ctx: ssl.SSLContext) -> None:
    """Create :data:`CLAIM_READ_ROLE` and its binding (an existing one is left as it is)."""
    for path, obj in (("clusterroles", CLAIM_READ_ROLE), ("clusterrolebindings", CLAIM_READ_BINDING)):
        req = urllib.request.Request(f"{server}/apis/rbac.authorization.k8s.io/v1/{path}", method="POST",
                                     data=json.dumps(obj).encode(), headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, context=ctx, timeout=10).close()  # noqa: S310 (loopback only)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise RealNodeError(f"creating {obj['kind']} {obj['metadata']['name']}: HTTP {exc.code}") from None


def _inotify_starved(log: Path) -> bool:
    """Whether a kubelet's log says it could not get an inotify instance."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return False
    return "inotify_init: too many open files" in text or "fsnotify watcher: too many open files" in text


#: The labels a kubelet sets on its Node itself (``kubelet_node_status.go``: hostname, os, arch).
KUBELET_LABELS = ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch",
                  "beta.kubernetes.io/os", "beta.kubernetes.io/arch")


def node_reset_patch(node: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """The JSON merge patch :meth:`KubeletNodes.reset_kubelet_node` sends for ``node``."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    have = dict(meta.get("labels") or {})
    want = {k: v for k, v in have.items() if k in KUBELET_LABELS}
    want.update(labels)
    label_patch: dict[str, str | None] = {k: None for k in have if k not in want}
    label_patch.update({k: v for k, v in want.items() if have.get(k) != v})
    patch: dict[str, Any] = {}
    if label_patch:
        patch["metadata"] = {"labels": label_patch}
    taints = spec.get("taints") or []
    kept = [t for t in taints if str(t.get("key", "")).startswith("node.kubernetes.io/")]
    if len(kept) != len(taints):
        patch.setdefault("spec", {})["taints"] = kept or None
    if spec.get("unschedulable"):
        patch.setdefault("spec", {})["unschedulable"] = None
    return patch


def remove_run_cgroups(run_dir: Path, progress: Progress) -> None:
    """Remove the cgroups below a run's parent (its containerd nodes' pods); say what stays."""
    if left := remove_cgroups(cgroup_parent(run_dir, "")):
        progress(f"cgroups that could not be removed: {', '.join(left)}")


def _node_proc(info: procs.ProcInfo) -> bool:
    return info.name.split("/", 1)[0] in ("kubelet", "fakecri", "containerd")


def _set_loopback_address(server: str, name: str, ctx: ssl.SSLContext) -> None:
    """Give the Node the address its kubelet serves on, 127.0.0.1, so that the API server reaches
    it for logs and exec (``--kubelet-preferred-address-types=InternalIP``). The kubelet refuses a
    loopback ``--node-ip`` (``validateNodeIP``); given one, its address setter fails before it
    writes, so the address set here stays (its other status fields are still updated), while
    without one it would put eth0's address there, where it does not listen."""
    body = {"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": name}]}}
    req = urllib.request.Request(f"{server}/api/v1/nodes/{name}/status", method="PATCH", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/merge-patch+json"})
    try:
        urllib.request.urlopen(req, context=ctx, timeout=10).close()  # noqa: S310 (loopback only)
    except (urllib.error.URLError, OSError) as exc:
        raise RealNodeError(f"setting Node {name}'s address: {exc}") from None


def _node_ready(server: str, name: str, ctx: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(f"{server}/api/v1/nodes/{name}", context=ctx, timeout=5) as r:  # noqa: S310
            node: dict[str, Any] = json.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    tainted = any(str(t.get("key", "")).startswith("node.kubernetes.io/") for t in (node.get("spec") or {}).get("taints") or [])
    return ready and not tainted


def _tail(path: Path, n: int = 25) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()[-n:]
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join("  | " + ln for ln in lines) or "(empty log)"
