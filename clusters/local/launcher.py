"""A local Kubernetes 1.37 control plane with kwok nodes, as plain processes on 127.0.0.1.

``LocalCluster`` starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok from the binaries :mod:`clusters.local.build` made, waits for each to be healthy, and
writes a kubeconfig.  ``down()`` stops every process group and removes what ``up()`` created.

Two ownership modes:

- attached (default; context manager, pytest fixture): the processes die with the Python
  process (``PR_SET_PDEATHSIG``, plus ``atexit``), so a crashed test run leaves nothing;
- detached (``drakit cluster up``): the processes outlive the CLI; ``drakit cluster down``
  stops them using ``state.json`` in the run dir.

A run dir whose owner is gone (a killed run) is detected by ``up()`` and cleaned first.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from drakit.clusters.local import build as buildmod
from drakit.clusters.local import gates as gatesmod
from drakit.clusters.local import kubeletnode, kwokconfig, ownstate, pki, procs
from drakit.clusters.local.errors import ClusterError, UnsafeRunDir
from drakit.clusters.local.flags import ComponentFlags, FlagError, check_component_args, merge_flags
from drakit.clusters.local.realnodes import KubeletNodes, RealNodes, remove_run_cgroups

RUNTIME_CONFIG = (
    "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true,"
    "resource.k8s.io/v1alpha3=true,scheduling.k8s.io/v1beta1=true"
)
from drakit.clusters.local.ownstate import MARKER  # noqa: E402 - re-exported: the run folder's marker
KUBE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")

Progress = Callable[[str], None]


def default_run_dir() -> Path:
    """Run dir of ``drakit cluster up`` / ``down`` / ``status`` when none is given."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        return Path(xdg) / "drakit" / "local"
    return Path(tempfile.gettempdir()) / f"drakit-{os.getuid()}" / "local"


def _quiet(_: str) -> None:
    pass


class LocalCluster(ComponentFlags, KubeletNodes):
    """Local control plane; see the module docstring.

    ``gates``: feature gates (mapping or ``"A=true,B=false"``) applied on top of the default set,
    every DRA gate the binaries list on (``dra_gates=False``: the binaries' defaults).

    ``component_args``: extra flags per component (``etcd``, ``kube-apiserver``,
    ``kube-controller-manager``, ``kube-scheduler``, ``kwok``), e.g.
    ``{"kube-scheduler": ["--kube-api-qps=5000", "--kube-api-burst=5000"]}``.  A flag the
    launcher also sets is replaced, not repeated (see :func:`flags.merge_flags`); changing the
    flags the launcher wires together (ports, certificates, kubeconfig) breaks the cluster.

    ``kubelet_nodes``: real kubelet nodes ``(name, labels)`` that ``up()`` starts once the
    controllers run and returns with Ready. ``prestart_kubelet_nodes``: ones it starts as soon
    as the API server is ready, beside the controllers, and does not wait for (see
    ``wait_kubelet_nodes``); one that cannot start does not stop the cluster. ``node_images``:
    image archives every containerd node imports besides drakit's own pause and busybox."""

    def __init__(
        self,
        run_dir: Path | str | None = None,
        gates: Mapping[str, bool] | str | None = None,
        *,
        dra_gates: bool = True,
        stage_set: str = kwokconfig.ON_BIND,
        runtime_config: str = RUNTIME_CONFIG,
        bin_dir: Path | None = None,
        detached: bool = False,
        keep_run_dir: bool = False,
        timeout: float = 180.0,
        progress: Progress | None = None,
        kubelet_nodes: Sequence[tuple[str, Mapping[str, str]]] = (),
        prestart_kubelet_nodes: Sequence[tuple[str, Mapping[str, str]]] = (),
        real_nodes: bool = True,
        kubelet_claim_read: bool = True,
        component_args: Mapping[str, Sequence[str]] | None = None,
        runtime: str | None = None,
        node_images: Sequence[Path] = (),
        component_gates: Mapping[str, Mapping[str, bool]] | None = None,
    ) -> None:
        try:
            self.component_args = check_component_args(component_args or {})
        except FlagError as e:
            raise ClusterError(str(e)) from None
        # Without a run dir, an attached cluster gets a fresh private temp dir (so parallel
        # test sessions never collide); a detached one uses the CLI's well-known default.
        self._tmp_run_dir = run_dir is None and not detached
        if run_dir is not None:
            self.run_dir = Path(run_dir)
        elif detached:
            self.run_dir = default_run_dir()
        else:
            self.run_dir = Path(tempfile.mkdtemp(prefix="drakit-local-"))
        self.requested_gates: dict[str, bool] = (
            gatesmod.parse_gate_string(gates) if isinstance(gates, str) else dict(gates or {})
        )
        self.dra_gates = dra_gates
        self.component_gates = {c: dict(g) for c, g in (component_gates or {}).items()}  # gates.apply_component_gates
        if stage_set not in kwokconfig.STAGE_SETS:
            raise ClusterError(f"unknown stage set {stage_set!r}; known: {', '.join(kwokconfig.STAGE_SETS)}")
        self.stage_set = stage_set
        self.runtime_config = runtime_config
        self.bin_dir = bin_dir or buildmod.bin_dir()
        self.detached = detached
        self.keep_run_dir = keep_run_dir
        self.timeout = timeout
        self.progress: Progress = progress or _quiet
        self.ports: dict[str, int] = {}
        self.gates: dict[str, dict[str, bool]] = {}
        self.timings: dict[str, float] = {}
        self._procs: list[procs.ProcInfo] = []
        self._popen: dict[int, Any] = {}
        self._created_dir = False
        self._up = False
        self._lock = threading.Lock()
        self._pki: pki.PKI | None = None
        self.kubelet_nodes = list(kubelet_nodes)
        self.prestart_kubelet_nodes = list(prestart_kubelet_nodes)
        # Real kubelet nodes need root; without it (or when asked) the cluster has kwok nodes only.
        self.real_nodes_reason = "real kubelet nodes were not asked for" if not real_nodes else kubeletnode.unavailable_reason()
        self.real: RealNodes | None = None
        self.node_runtime = runtime or os.environ.get("DRAKIT_RUNTIME") or kubeletnode.default_runtime(self.real_nodes_reason)
        if self.node_runtime not in kubeletnode.RUNTIMES:
            raise ClusterError(f"unknown node runtime {self.node_runtime!r}; use one of {', '.join(kubeletnode.RUNTIMES)}")
        # RBAC read of ResourceClaims for kubelets (realnodes.CLAIM_READ_ROLE: no authorizer race)
        self.kubelet_claim_read = kubelet_claim_read
        self._extra_dirs: list[str] = []
        self.node_images = list(node_images)

    # ------------------------------------------------------------------ paths
    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def logs_dir(self) -> Path:
        return self.run_dir / "logs"

    def _bin(self, name: str) -> Path:
        return self.bin_dir / name

    # ------------------------------------------------------------- lifecycle
    def __enter__(self) -> LocalCluster:
        return self.up()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.down()

    def up(self) -> LocalCluster:
        if self._up:
            return self
        wanted = buildmod.CLUSTER_BINARIES if self.real_nodes_reason is None else buildmod.CONTROL_PLANE_BINARIES
        missing = [n for n in wanted if not self._bin(n).is_file()]
        if missing:
            if self._tmp_run_dir:
                shutil.rmtree(self.run_dir, ignore_errors=True)
            raise ClusterError(
                f"binaries missing in {self.bin_dir}: {', '.join(missing)}; run 'drakit cluster build' first"
            )
        t0 = time.monotonic()
        self._prepare_run_dir()
        if not self.detached:
            atexit.register(self.down)
        try:
            self._start_all()
        except BaseException:
            self.progress("startup failed; tearing down")
            self.down()
            raise
        self.timings["total"] = time.monotonic() - t0
        self._up = True
        self._save_state()
        self.progress(f"cluster ready in {self.timings['total']:.1f} s; kubeconfig {self.kubeconfig}")
        return self

    def down(self) -> None:
        """Stop every process group and remove the run dir's content; safe to call twice."""
        with self._lock:
            if not self._procs and not (self.run_dir / MARKER).exists():
                return
            t0 = time.monotonic()
            self._sync_procs()
            hard = procs.stop(procs.stop_order(self._procs), popen=self._popen, progress=self.progress)
            if hard:
                self.progress(f"killed with SIGKILL: {', '.join(hard)}")
            self._procs = []
            self._popen = {}
            self._up = False
            if self.real is not None:
                self.real.nodes.clear()
            remove_run_cgroups(self.run_dir, self.progress)  # also after a killed owner
            for extra in self._extra_dirs:  # before the run dir, whose state lists them
                shutil.rmtree(extra, ignore_errors=True)
            self._extra_dirs = []
            self._remove_run_dir()
            self.timings["down"] = time.monotonic() - t0
            if not self.detached:
                try:
                    atexit.unregister(self.down)
                except Exception:
                    pass

    @classmethod
    def attach(cls, run_dir: Path | str | None = None, progress: Progress | None = None) -> LocalCluster:
        """A handle on a cluster that ``drakit cluster up`` started (for ``down`` / ``status``)."""
        c = cls(run_dir, detached=True, progress=progress)
        run = c._own_state()  # only what is proven drakit's is stopped or removed (ownstate)
        if run is None:
            raise ClusterError(f"no local cluster state in {c.run_dir}")
        state = run.state
        c._procs = [p for p in procs.procs_from_state(state) if p not in run.unproven]
        c.ports = {str(k): int(v) for k, v in state.get("ports", {}).items()}
        c._created_dir = bool(state.get("created_dir"))
        c.bin_dir = Path(state.get("bin_dir", c.bin_dir))
        c.gates = state.get("gates", {})
        c.stage_set = state.get("stage_set", c.stage_set)
        c._extra_dirs = [str(x) for x in run.tied]
        c._up = True
        return c

    def _own_state(self) -> ownstate.RunState | None:
        try:  # only what is proven drakit's is stopped or removed (ownstate)
            default = self.run_dir == default_run_dir() and not os.environ.get("XDG_RUNTIME_DIR")
            return ownstate.checked_state(self.run_dir, default, self.progress)
        except ValueError as exc:
            raise UnsafeRunDir(str(exc)) from None

    def status(self) -> dict[str, Any]:
        """Which processes are alive and whether the API server answers /readyz."""
        out: dict[str, Any] = {"run_dir": str(self.run_dir), "kubeconfig": str(self.kubeconfig)}
        out["processes"] = {p.name: {"pid": p.pid, "alive": procs.info_alive(p)} for p in self._procs}
        ready = False
        if "apiserver" in self.ports and self.kubeconfig.exists():
            try:
                ready = self._get("apiserver", "/readyz", self._api_ctx(), 5.0)[0] == 200
            except Exception:
                ready = False
        out["apiserver_ready"] = ready
        return out

    # -------------------------------------------------------------- run dir
    def _prepare_run_dir(self) -> None:
        d = self.run_dir
        run = self._own_state()
        if d.exists():
            state = run.state if run is not None else None
            if run is not None:
                self._handle_existing_state(run)
            elif any(d.iterdir()) and not (d / MARKER).exists():
                raise ClusterError(f"run dir {d} is not empty and is not a drakit run dir; pick another --run-dir")
            elif (d / MARKER).exists():
                self.progress(f"removing leftovers of an earlier run in {d}")
                ownstate.wipe(self.run_dir)
            self._created_dir = bool(state.get("created_dir")) if state else False
        else:
            d.mkdir(parents=True, mode=0o700)
            self._created_dir = True
        if self._tmp_run_dir:
            self._created_dir = True
        d.chmod(0o700)
        (d / MARKER).write_text("drakit local cluster run dir; removed by 'drakit cluster down'\n")
        self._save_state()

    def _handle_existing_state(self, run: ownstate.RunState) -> None:
        state, alive = run.state, run.procs
        owner = state.get("owner") or {}
        owner_alive = procs.is_alive(int(owner.get("pid", 0) or 0), owner.get("start_ticks"))
        if alive and state.get("detached"):
            raise ClusterError(
                f"a local cluster is already running in {self.run_dir} "
                f"({', '.join(p.name for p in alive)}); stop it with 'drakit cluster down --run-dir {self.run_dir}'"
            )
        if alive and owner_alive and int(owner.get("pid", 0)) != os.getpid():
            raise ClusterError(f"run dir {self.run_dir} is in use by process {owner.get('pid')}")
        if alive:
            self.progress(f"stale run dir {self.run_dir}: stopping {len(alive)} leftover process(es)")
            procs.stop(procs.stop_order(alive), progress=self.progress)
        else:
            self.progress(f"stale run dir {self.run_dir} from a killed run: cleaning")
        for extra in run.tied:  # only folders proven tied to this run folder
            shutil.rmtree(extra, ignore_errors=True)
        ownstate.wipe(self.run_dir)

    def _remove_run_dir(self) -> None:
        d = self.run_dir
        if not (d / MARKER).exists():
            return
        if self.keep_run_dir:
            (d / procs.STATE_FILE).unlink(missing_ok=True)
            return
        if self._created_dir:
            shutil.rmtree(d, ignore_errors=True)
        else:
            ownstate.wipe(self.run_dir)

    def _save_state(self) -> None:
        if not self.run_dir.exists():
            return
        self._sync_procs()
        procs.write_state(
            self.run_dir,
            {
                "owner": {"pid": os.getpid(), "start_ticks": procs.start_ticks(os.getpid())},
                "detached": self.detached,
                "created_dir": self._created_dir,
                "bin_dir": str(self.bin_dir),
                "ports": self.ports,
                "gates": self.gates,
                "stage_set": self.stage_set,
                "processes": procs.procs_to_state(self._procs),
                "kubeconfig": str(self.kubeconfig),
                "extra_dirs": self._extra_dirs,
                "kubelet_nodes": sorted(self.real.nodes) if self.real is not None else [],
            },
        )

    # --------------------------------------------------------------- startup
    def _start_all(self) -> None:
        d = self.run_dir
        t = time.monotonic()
        self.gates, controllers = self._resolve_gates_and_controllers()
        self.timings["gates"] = time.monotonic() - t
        t = time.monotonic()
        self._pki = p = pki.make_pki(d / "pki")
        names = ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok")
        self.ports = dict(zip(names, procs.free_ports(len(names)), strict=True))
        pki.write_kubeconfig(self.kubeconfig, p, self.server)
        (d / "kwok").mkdir(mode=0o700, exist_ok=True)
        (d / "kwok" / "kwok.yaml").write_text(kwokconfig.render_kwok_config(self.stage_set))
        self.timings["pki"] = time.monotonic() - t
        self._save_state()

        t = time.monotonic()
        self._start("etcd", self._etcd_args())
        self._wait("etcd", lambda: self._get("etcd", "/readyz", None, 2.0, scheme="http")[0] == 200)
        self.timings["etcd"] = time.monotonic() - t

        t = time.monotonic()
        self._start("kube-apiserver", self._apiserver_args())
        self._wait("kube-apiserver", lambda: self._get("apiserver", "/readyz", self._api_ctx(), 5.0)[0] == 200)
        self.timings["kube-apiserver"] = time.monotonic() - t
        self._check_api_versions()
        if self.real_nodes_reason is None:
            self._start_real_nodes(p)

        t = time.monotonic()
        self._start("kube-controller-manager", self._kcm_args(controllers))
        self._start("kube-scheduler", self._scheduler_args())
        self._start("kwok", self._kwok_args(), env={**os.environ, "KWOK_WORKDIR": str(d / "kwok")})
        ctx = self._serving_ctx()
        self._wait("kube-controller-manager", lambda: self._get("controller-manager", "/healthz", ctx, 2.0)[0] == 200)
        self._wait("kube-scheduler", lambda: self._get("scheduler", "/readyz", ctx, 2.0)[0] == 200)
        self._wait("kwok", lambda: self._get("kwok", "/healthz", ctx, 2.0)[0] == 200)
        self.timings["controllers"] = time.monotonic() - t
        if self.real_nodes_reason is None:
            if self.kubelet_nodes:
                t = time.monotonic()
                for name, labels in self.kubelet_nodes:
                    self.add_kubelet_node(name, labels, wait=False)
                self.wait_kubelet_nodes([n for n, _ in self.kubelet_nodes])
                self.timings["kubelet-nodes"] = time.monotonic() - t
        elif self.kubelet_nodes:
            self.progress(f"{self.real_nodes_reason}; the cluster has kwok nodes only")

    def _resolve_gates_and_controllers(self) -> tuple[dict[str, dict[str, bool]], str]:
        binaries = KUBE_COMPONENTS + (("kubelet",) if self.real_nodes_reason is None else ())
        with ThreadPoolExecutor(max_workers=3) as ex:
            helps = dict(zip(binaries, ex.map(lambda n: gatesmod.read_help(self._bin(n)), binaries), strict=True))
        known = {n: gatesmod.parse_help_gates(h) for n, h in helps.items()}
        for n, k in known.items():
            if not k:
                raise ClusterError(f"{n} --help lists no feature gates; is {self._bin(n)} a kube binary?")
        wanted: dict[str, bool] = {}
        if self.dra_gates:
            for k in known.values():
                wanted.update(gatesmod.default_dra_gates(k))
        wanted.update(self.requested_gates)
        try:
            per = gatesmod.resolve_gates(
                # The kubelet's --version does not check gates: it gets the names its help lists.
                wanted, known,
                probe=lambda b, n, v, others=None: b != "kubelet" and gatesmod.probe_gate(self._bin(b), n, v, others),
            )
            controllers = gatesmod.controllers_flag(gatesmod.parse_help_controllers(helps["kube-controller-manager"]))
            gatesmod.apply_component_gates(per, known, self.component_gates)
        except gatesmod.GateError as e:
            raise ClusterError(str(e)) from None
        return per, controllers

    def _start(self, name: str, args: list[str], env: Mapping[str, str] | None = None) -> None:
        argv = [str(self._bin("kwok" if name == "kwok" else name)), *merge_flags(args, self.component_args.get(name, ()))]
        popen, info = procs.spawn(
            name, argv, self.logs_dir / f"{name}.log", env=env, cwd=self.run_dir, die_with_parent=not self.detached
        )
        self._popen[popen.pid] = popen
        self._procs.append(info)
        self._save_state()
        self.progress(f"started {name} (pid {popen.pid})")

    def _wait(self, name: str, ready: Callable[[], bool]) -> None:
        info = next(p for p in self._procs if p.name == name)
        deadline = time.monotonic() + self.timeout
        while True:
            if not procs.info_alive(info):
                raise ClusterError(f"{name} exited during startup; last log lines:\n{self._log_tail(info)}")
            try:
                if ready():
                    self.progress(f"{name} ready")
                    return
            except (OSError, urllib.error.URLError, ssl.SSLError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{name} not healthy after {self.timeout:.0f} s; last log lines:\n{self._log_tail(info)}"
                )
            time.sleep(0.2)

    @staticmethod
    def _log_tail(info: procs.ProcInfo, n: int = 25) -> str:
        try:
            lines = Path(info.log).read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return "(no log)"
        return "\n".join("  | " + ln for ln in lines)

    # ------------------------------------------------------------------ HTTP
    def _api_ctx(self) -> ssl.SSLContext:
        assert self._pki is not None or (self.run_dir / "pki" / "ca.crt").exists()
        d = self.run_dir / "pki"
        ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
        ctx.load_cert_chain(str(d / "admin.crt"), str(d / "admin.key"))
        return ctx

    def _serving_ctx(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.run_dir / "pki" / "ca.crt"))

    def _get(
        self, port: str, path: str, ctx: ssl.SSLContext | None, timeout: float, scheme: str = "https"
    ) -> tuple[int, bytes]:
        url = f"{scheme}://127.0.0.1:{self.ports[port]}{path}"
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=timeout) as r:  # noqa: S310 (loopback only)
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, b""

    def _check_api_versions(self) -> None:
        import json

        ctx = self._api_ctx()
        for gv in self.runtime_config.split(","):
            group_version = gv.split("=", 1)[0]
            if not gv.endswith("=true") or "/" not in group_version:
                continue
            group, version = group_version.split("/", 1)
            code, body = self._get("apiserver", f"/apis/{group}", ctx, 10.0)
            served = [v.get("version") for v in json.loads(body).get("versions", [])] if code == 200 else []
            if version not in served:
                raise ClusterError(f"kube-apiserver does not serve {group_version} (serves: {served})")


def install_sigterm_as_exit() -> None:
    """Turn SIGTERM into SystemExit so ``finally``/context managers tear the cluster down."""

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
