"""The command lines of the local control plane's components (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok), as a mixin of :class:`launcher.LocalCluster`:
each method reads the cluster's run dir, ports, kubeconfig and resolved feature gates.
:func:`merge_flags` applies a caller's ``component_args`` on top of them (the public way to
change a component's flags, e.g. the client rate limits a benchmark raises).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from drakit.clusters.local import gates as gatesmod
from drakit.clusters.local import kwokconfig


#: The components whose command lines ``component_args`` may change (kubelet nodes have their own).
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


class FlagError(ValueError):
    """A ``component_args`` entry is not a flag of a known component."""


def flag_name(arg: str) -> str:
    """``--kube-api-qps=100`` -> ``kube-api-qps`` (``-v=2`` and ``--v=2`` are the same flag)."""
    return arg.lstrip("-").split("=", 1)[0]


def check_component_args(component_args: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """``component_args`` as a plain dict, or FlagError naming the first bad entry."""
    out: dict[str, list[str]] = {}
    for component, args in component_args.items():
        if component not in COMPONENTS:
            raise FlagError(f"component_args: unknown component {component!r}; known: {', '.join(COMPONENTS)}")
        if isinstance(args, str):
            raise FlagError(f"component_args[{component!r}]: expected a list of flags, got the string {args!r}")
        for a in args:
            if not isinstance(a, str) or not a.startswith("-") or not flag_name(a):
                raise FlagError(f"component_args[{component!r}]: {a!r} is not a flag (--name=value)")
        out[component] = list(args)
    return out


def merge_flags(defaults: Sequence[str], extra: Sequence[str]) -> list[str]:
    """``defaults`` with every flag that ``extra`` names replaced by ``extra``'s occurrences of it
    (at the first place the default had it), and ``extra``'s other flags appended in order.

    Replacing rather than appending matters for list flags (``--controllers``, which a second
    occurrence would extend) and keeps one value per flag in the command line a log shows.
    """
    named = {flag_name(a) for a in extra}
    out: list[str] = []
    placed: set[str] = set()
    for a in defaults:
        n = flag_name(a)
        if n not in named:
            out.append(a)
        elif n not in placed:
            out += [e for e in extra if flag_name(e) == n]
            placed.add(n)
    return out + [e for e in extra if flag_name(e) not in placed]


class ComponentFlags:
    run_dir: Path
    ports: dict[str, int]
    gates: dict[str, dict[str, bool]]
    runtime_config: str

    @property
    def kubeconfig(self) -> Path:
        return self.run_dir / "kubeconfig"

    def _etcd_args(self) -> list[str]:
        c, pe = self.ports["etcd"], self.ports["etcd-peer"]
        return [
            "--name=drakit",
            f"--data-dir={self.run_dir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{c}",
            f"--advertise-client-urls=http://127.0.0.1:{c}",
            f"--listen-peer-urls=http://127.0.0.1:{pe}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{pe}",
            f"--initial-cluster=drakit=http://127.0.0.1:{pe}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync=true",
            "--quota-backend-bytes=2147483648",
            "--auto-compaction-retention=1",
            "--log-level=warn",
        ]

    def _gates_flag(self, component: str) -> list[str]:
        g = self.gates.get(component) or {}
        return [f"--feature-gates={gatesmod.format_gates(g)}"] if g else []

    def _apiserver_args(self) -> list[str]:
        p = self.run_dir / "pki"
        return [
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--cert-dir={p}",
            f"--tls-cert-file={p / 'serving.crt'}",
            f"--tls-private-key-file={p / 'serving.key'}",
            f"--client-ca-file={p / 'ca.crt'}",
            # No aggregated API servers; a front-proxy identity nobody holds keeps the
            # extension-apiserver-authentication ConfigMap complete (and the logs quiet).
            f"--requestheader-client-ca-file={p / 'ca.crt'}",
            "--requestheader-allowed-names=drakit-front-proxy-unused",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p / 'sa.pub'}",
            f"--service-account-signing-key-file={p / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--endpoint-reconciler-type=none",
            "--authorization-mode=Node,RBAC",
            # logs and exec through the kubelets: dial the Node's InternalIP (127.0.0.1) as a
            # client the kubelets' x509 authentication accepts
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={p / 'admin.crt'}",
            f"--kubelet-client-key={p / 'admin.key'}",
            "--allow-privileged=true",
            # No kubelet creates service-account tokens for kwok pods; without this admission
            # plugin pods do not wait for the namespace's default ServiceAccount.
            "--disable-admission-plugins=ServiceAccount",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            f"--runtime-config={self.runtime_config}",
            *self._gates_flag("kube-apiserver"),
        ]

    def _common_component_args(self, port: str) -> list[str]:
        p = self.run_dir / "pki"
        kc = str(self.kubeconfig)
        return [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports[port]}",
            f"--tls-cert-file={p / 'serving.crt'}",
            f"--tls-private-key-file={p / 'serving.key'}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--leader-elect=false",
            "--profiling=false",
        ]

    def _kcm_args(self, controllers: str) -> list[str]:
        p = self.run_dir / "pki"
        return [
            *self._common_component_args("controller-manager"),
            f"--controllers={controllers}",
            f"--root-ca-file={p / 'ca.crt'}",
            f"--service-account-private-key-file={p / 'sa.key'}",
            *self._gates_flag("kube-controller-manager"),
        ]

    def _scheduler_args(self) -> list[str]:
        # -v=2: one line per scheduling attempt and binding, naming the pod (namespace/name), so a
        # failed case's diagnostics can quote what the scheduler decided for its pods.
        return [*self._common_component_args("scheduler"), "--v=2", *self._gates_flag("kube-scheduler")]

    def _kwok_args(self) -> list[str]:
        p = self.run_dir / "pki"
        k = self.ports["kwok"]
        key, value = kwokconfig.NODE_ANNOTATION
        return [
            f"--config={self.run_dir / 'kwok' / 'kwok.yaml'}",
            f"--kubeconfig={self.kubeconfig}",
            f"--manage-nodes-with-annotation-selector={key}={value}",
            "--node-ip=127.0.0.1",
            "--node-name=localhost",
            f"--node-port={k}",
            f"--server-address=127.0.0.1:{k}",
            f"--tls-cert-file={p / 'serving.crt'}",
            f"--tls-private-key-file={p / 'serving.key'}",
            "--node-lease-duration-seconds=40",
        ]
