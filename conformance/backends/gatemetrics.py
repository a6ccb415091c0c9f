"""Feature gates as the components themselves report them: ``kubernetes_feature_enabled`` in a
component's ``/metrics``.

Every Kubernetes component exports one sample per gate it knows, ``1`` when on::

    kubernetes_feature_enabled{name="DRAFractionalCapacityRange",stage="BETA"} 1

The API server's ``/metrics`` is usually readable through the kubeconfig (``system:monitoring``,
cluster-admin). The scheduler's and controller manager's are read only on a local cluster drakit
started (``drakit cluster up`` or ``--cluster local``), where their ports and CA are known; a
``drakit run --in-cluster`` there reads them and hands them to its shards (:data:`CALLER_ENV`),
whose pods cannot reach those ports.

A gate acts in some components and not others. :data:`SCHEDULER_ONLY_GATES` change only what
the scheduler does: the API server lists them too, but its value says nothing about the
scheduler's, so for these only the scheduler's own metrics (or the user, ``--feature-gates``)
count. Every other DRA gate acts in the API server (it drops or validates the gated fields,
serves the gated resources), and the API server's value is taken for the cluster.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import urllib.request
from pathlib import Path
from typing import Any, Callable

SCHEDULER_ONLY_GATES = frozenset({"DRAFractionalCapacityRange", "SchedulerPreQueueingHints"})
_SAMPLE = re.compile(r'^kubernetes_feature_enabled\{([^}]*)\}\s+([0-9.eE+-]+)\s*$')
_NAME = re.compile(r'(?:^|,)\s*name="([^"]+)"')
MAX_METRICS_BYTES = 32 << 20
CALLER_ENV = "DRAKIT_COMPONENT_GATES"  # JSON {component: {gate: bool}} read by the in-cluster caller


def parse_feature_metrics(text: str) -> dict[str, bool]:
    """Gate name -> enabled, from Prometheus text exposition (other metrics are ignored)."""
    gates: dict[str, bool] = {}
    for line in text.splitlines():
        if not line.startswith("kubernetes_feature_enabled{"):
            continue
        m = _SAMPLE.match(line.strip())
        if not m:
            continue
        name = _NAME.search(m.group(1))
        if name:
            try:
                gates[name.group(1)] = float(m.group(2)) >= 1.0
            except ValueError:
                continue
    return gates


def apiserver_gates(api_client: Any) -> tuple[dict[str, bool] | None, str]:
    """The API server's gates through the kubeconfig's credentials, or (None, why not)."""
    try:
        text = _get_text(api_client, "/metrics")
    except Exception as exc:  # RBAC (403), a proxy, no metrics: the gates stay to be inferred
        status = getattr(exc, "status", None)
        return None, f"kube-apiserver /metrics not readable ({f'HTTP {status}' if status else type(exc).__name__})"
    gates = parse_feature_metrics(text)
    return (gates, "") if gates else (None, "kube-apiserver /metrics lists no kubernetes_feature_enabled")


class _HttpStatus(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def _get_text(api_client: Any, path: str) -> str:
    """GET *path* of the API server with the kubeconfig's credentials, as text (bounded)."""
    params = api_client.param_serialize(method="GET", resource_path=path, auth_settings=["BearerToken"])
    response = api_client.call_api(*params, _request_timeout=15)
    response.read()
    if response.status != 200:
        raise _HttpStatus(int(response.status))
    data = response.data
    return bytes(data[:MAX_METRICS_BYTES]).decode("utf-8", errors="replace")


def local_component_gates(run_dir: Path, get: Callable[[str, ssl.SSLContext], str] | None = None
                          ) -> dict[str, dict[str, bool]]:
    """kube-scheduler's and kube-controller-manager's gates on a local cluster drakit started
    (its run dir: ``state.json`` with the ports, ``pki/ca.crt``); components that do not answer
    are left out."""
    from drakit.clusters.local import procs
    state = procs.read_state(run_dir)
    ca = run_dir / "pki" / "ca.crt"
    if state is None or not ca.is_file():
        return {}
    ctx = ssl.create_default_context(cafile=str(ca))
    fetch = get or _https_get
    out: dict[str, dict[str, bool]] = {}
    for component, port_name in (("kube-scheduler", "scheduler"), ("kube-controller-manager", "controller-manager")):
        port = (state.get("ports") or {}).get(port_name)
        if not port:
            continue
        try:
            gates = parse_feature_metrics(fetch(f"https://127.0.0.1:{int(port)}/metrics", ctx))
        except Exception:  # noqa: BLE001 - a component that does not answer is simply not observed
            continue
        if gates:
            out[component] = gates
    return out


def _https_get(url: str, ctx: ssl.SSLContext) -> str:
    with urllib.request.urlopen(url, context=ctx, timeout=10) as r:  # noqa: S310 - loopback, drakit's own cluster
        return r.read(MAX_METRICS_BYTES).decode("utf-8", errors="replace")  # type: ignore[no-any-return]


def local_run_dir(kubeconfig: str | Path | None) -> Path | None:
    """The run dir of a local cluster drakit started, when *kubeconfig* is the one it wrote there
    (``drakit cluster up`` prints it), else None."""
    if not kubeconfig:
        return None
    from drakit.clusters.local.launcher import MARKER
    folder = Path(kubeconfig).resolve().parent
    return folder if (folder / MARKER).is_file() and (folder / "state.json").is_file() else None


def observed_gates(api: Any) -> dict[str, dict[str, bool]]:
    """component -> gates from /metrics for a cluster reached through *api* (a ``KubeApi``): the
    API server's through the kubeconfig; on a local cluster drakit started (its kubeconfig in
    the run dir), the scheduler's and controller manager's too."""
    observed: dict[str, dict[str, bool]] = {}
    gates, _why = apiserver_gates(api.api_client)
    if gates:
        observed["kube-apiserver"] = gates
    run_dir = local_run_dir(api.target.config_file)
    if run_dir is not None:
        observed.update(local_component_gates(run_dir))
    for component, seen in caller_gates(os.environ).items():
        observed.setdefault(component, seen)
    return observed


def caller_gates(environ: Any) -> dict[str, dict[str, bool]]:
    """The components' gates an in-cluster run's caller read (:data:`CALLER_ENV`); what is not
    of that shape is left out."""
    try:
        data = json.loads(environ.get(CALLER_ENV) or "{}")
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(c): {str(g): v for g, v in gates.items() if isinstance(v, bool)}
            for c, gates in data.items() if isinstance(gates, dict) and c != "kube-apiserver"}


def stated_gates(spec: str | None) -> dict[str, bool]:
    """The gates the user named in ``--feature-gates`` (not the defaults filled in around them)."""
    from drakit.clusters.local.gates import GateError, parse_gate_string

    from .base import HarnessError
    try:
        return parse_gate_string(spec or "")
    except GateError as exc:
        raise HarnessError(f"--feature-gates: {exc}") from None
