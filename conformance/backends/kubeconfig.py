"""The kubeconfig provider: which file, context and cluster a run targets, checked before
anything connects.

:func:`resolve_kubeconfig` reads the file(s) (``--kubeconfig``, else ``$KUBECONFIG``, a
``os.pathsep``-separated list as kubectl reads it, else ``~/.kube/config``, else inside a pod
its service account) and checks that the
chosen context (``--context``, else ``current-context``) exists and names a cluster with a
server. Every problem is a :class:`KubeconfigError` with one line naming the file and the
problem. Messages and :class:`KubeTarget` carry names only (context, cluster, user entry name):
never a server address, a certificate, a key, a token or any other part of the file's content.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

DEFAULT_PATH = "~/.kube/config"


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class KubeTarget:
    """The resolved kubeconfig: files, context and the names the context points at."""

    files: tuple[Path, ...]
    context: str
    cluster: str
    user: str | None

    @property
    def config_file(self) -> str:
        """The value to hand the kubernetes client (a pathsep-joined list for several files)."""
        return os.pathsep.join(str(f) for f in self.files)


def _entries(data: Mapping[str, Any], field: str, where: str) -> dict[str, Any]:
    raw = data.get(field) or []
    if not isinstance(raw, list):
        raise KubeconfigError(f"kubeconfig {where}: {field}: expected a list of {{name, {field[:-1]}}}")
    out: dict[str, Any] = {}
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise KubeconfigError(f"kubeconfig {where}: {field}[{i}]: expected a mapping with a name")
        body = entry.get(field[:-1])
        if not isinstance(body, Mapping):
            raise KubeconfigError(f"kubeconfig {where}: {field}[{i}] ({entry['name']!r}): "
                                  f"missing its {field[:-1]} mapping")
        out[entry["name"]] = body
    return out


def _read(path: Path) -> dict[str, Any] | None:
    """One kubeconfig file as data, None when it does not exist. Read by drakit's one reader (a
    regular file, its size bounded, strict UTF-8) and parsed by the kit's bounded YAML loader
    (depth, nodes and aliases: an alias bomb is refused as it is parsed)."""
    from ..errors import LoadError
    from ..inputs import KUBECONFIG, InputError, read_text
    from ..yamlmarks import load_documents
    if not os.path.lexists(path):
        return None
    try:
        text = read_text(path, KUBECONFIG)
    except InputError as exc:
        raise KubeconfigError(f"kubeconfig {exc}") from None
    try:
        docs = [d for _, d in load_documents(text, str(path))]
    except LoadError as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        # the YAML error text quotes the file's content, which may hold credentials: only the bound is shown
        bound = exc.message.removeprefix("YAML: ") if "(the limit" in exc.message else "not valid YAML"
        raise KubeconfigError(f"kubeconfig {where}: {bound}") from None
    if len(docs) > 1:
        raise KubeconfigError(f"kubeconfig {path}: {len(docs)} YAML documents; a kubeconfig is one")
    data = docs[0] if docs else None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise KubeconfigError(f"kubeconfig {path}: not a kubeconfig (expected a mapping with clusters, "
                              f"users and contexts)")
    return dict(data)


SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER = "in-cluster"


def in_cluster_kubeconfig(environ: Mapping[str, str], account: Path = SERVICE_ACCOUNT) -> Path | None:
    """Inside a pod (``KUBERNETES_SERVICE_HOST`` set, the service account's token mounted): a
    kubeconfig of context ``in-cluster`` naming the API server, the account's CA file and token
    file (read by the client, never copied), written to the private key folder; else None.
    ``$DRAKIT_API_SERVER`` names the server instead of the ``kubernetes`` Service (a host-network
    pod on a cluster without a Service proxy: ``drakit run --in-cluster --host-network``)."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not (host or environ.get("DRAKIT_API_SERVER")) or not (account / "token").is_file():
        return None
    server = environ.get("DRAKIT_API_SERVER") or (f"https://[{host}]:{port}" if ":" in host
                                                  else f"https://{host}:{port}")
    data = {"apiVersion": "v1", "kind": "Config", "current-context": IN_CLUSTER,
            "clusters": [{"name": IN_CLUSTER, "cluster": {"server": server,
                                                          "certificate-authority": str(account / "ca.crt")}}],
            "users": [{"name": IN_CLUSTER, "user": {"tokenFile": str(account / "token")}}],
            "contexts": [{"name": IN_CLUSTER, "context": {"cluster": IN_CLUSTER, "user": IN_CLUSTER}}]}
    path = _key_dir() / "in-cluster.kubeconfig"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def resolve_kubeconfig(path: str | None, context: str | None,
                       environ: Mapping[str, str] | None = None, account: Path = SERVICE_ACCOUNT) -> KubeTarget:
    """The kubeconfig target of a run; see the module docstring. With no kubeconfig named and
    none at ``~/.kube/config``, inside a pod: the pod's service account (as kubectl does)."""
    env = os.environ if environ is None else environ
    if not path and not env.get("KUBECONFIG") and not Path(DEFAULT_PATH).expanduser().exists():
        inside = in_cluster_kubeconfig(env, account)
        if inside is not None:
            path = str(inside)
    raw = path or env.get("KUBECONFIG") or DEFAULT_PATH
    files = [Path(p).expanduser() for p in raw.split(os.pathsep) if p]
    label = ", ".join(str(f) for f in files) or raw
    contexts: dict[str, Any] = {}
    clusters: dict[str, Any] = {}
    users: dict[str, Any] = {}
    current: str | None = None
    found: list[Path] = []
    origin: dict[tuple[str, str], Path] = {}  # (field, entry name) -> the file that defines it
    for f in files:
        data = _read(f)
        if data is None:
            if len(files) == 1:
                raise KubeconfigError(f"kubeconfig {f}: no such file")
            continue  # like kubectl: missing entries of a $KUBECONFIG list are skipped
        found.append(f)
        for table, field in ((contexts, "contexts"), (clusters, "clusters"), (users, "users")):
            for name, body in _entries(data, field, str(f)).items():
                table.setdefault(name, body)  # the first file that names an entry wins
                origin.setdefault((field, name), f)
        if current is None and isinstance(data.get("current-context"), str) and data["current-context"]:
            current = data["current-context"]
    if not found:
        raise KubeconfigError(f"kubeconfig {label}: none of these files exists")
    label = ", ".join(str(f) for f in found)
    known = ", ".join(sorted(contexts)) or "none"
    chosen = context or current
    if not chosen:
        raise KubeconfigError(f"kubeconfig {label}: no current-context set; choose one with --context "
                              f"(contexts: {known})")
    if chosen not in contexts:
        raise KubeconfigError(f"kubeconfig {label}: context {chosen!r} not found (contexts: {known})")
    ctx = contexts[chosen]
    cluster = ctx.get("cluster")
    if not isinstance(cluster, str) or cluster not in clusters:
        raise KubeconfigError(f"kubeconfig {label}: context {chosen!r} names cluster {cluster!r}, "
                              f"which the file does not define")
    if not clusters[cluster].get("server"):
        raise KubeconfigError(f"kubeconfig {label}: cluster {cluster!r} has no server")
    user = ctx.get("user")
    if user is not None and (not isinstance(user, str) or user not in users):
        raise KubeconfigError(f"kubeconfig {label}: context {chosen!r} names user {user!r}, "
                              f"which the file does not define")
    _check_named_files(clusters[cluster], origin[("clusters", cluster)], ("certificate-authority",))
    if user is not None:
        _check_named_files(users[user], origin[("users", user)], ("client-certificate", "client-key", "tokenFile"))
    return KubeTarget(tuple(found), chosen, cluster, user)


def _check_named_files(body: Mapping[str, Any], source: Path, fields: tuple[str, ...]) -> None:
    """The files a cluster or user entry names (a CA, a client certificate and key, a token
    file), checked by drakit's one reader before the kubernetes client reads them: a FIFO or
    ``/dev/zero`` named there would hang it or fill memory. Relative paths are relative to the
    kubeconfig's folder, as the client reads them; a missing file is left to the client."""
    from ..inputs import KUBECONFIG, InputError, read_bytes
    for field in fields:
        value = body.get(field)
        if not isinstance(value, str) or not value:
            continue
        named = Path(value) if os.path.isabs(value) else source.parent / value
        if not os.path.lexists(named):
            continue
        try:
            read_bytes(named, KUBECONFIG)
        except InputError as exc:
            raise KubeconfigError(f"kubeconfig {source}: {field} {exc}") from None


_KEY_DIR: Path | None = None


def _key_dir() -> Path:
    """The private folder (0700) where the kubernetes client writes the kubeconfig's inline
    certificates and keys as files: one per process, removed at exit, and marked with its owner
    so that the next run removes it when this one was killed (``drakit.clusters.leftovers``)."""
    global _KEY_DIR
    if _KEY_DIR is None or not _KEY_DIR.is_dir():
        import atexit
        import shutil
        import tempfile

        from drakit.clusters.leftovers import claim
        _KEY_DIR = Path(tempfile.mkdtemp(prefix="drakit-kc-"))
        claim(_KEY_DIR)
        atexit.register(shutil.rmtree, _KEY_DIR, True)
    return _KEY_DIR


def client_configuration(target: KubeTarget) -> Any:
    """A ``kubernetes.client.Configuration`` for the target; KubeconfigError when the client
    cannot use the context (unreadable certificate files, a failing exec plugin...)."""
    from kubernetes import config as kconfig
    from kubernetes.client import Configuration

    from .execplugin import FAILURES, install
    install()  # an exec plugin answers within its budget or is stopped, and dies with drakit
    cfg = Configuration()
    FAILURES.clear()
    try:
        kconfig.load_kube_config(config_file=target.config_file, context=target.context,  # type: ignore[no-untyped-call]
                                 client_configuration=cfg, persist_config=False, temp_file_path=str(_key_dir()))
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        from drakit.reports import redact
        shown = redact({"message": text[:200]})[0].get("message", "")
        raise KubeconfigError(f"kubeconfig {', '.join(map(str, target.files))}: context {target.context!r}: "
                              f"{type(exc).__name__}: {shown}") from None
    if FAILURES:  # the client only logged it
        raise KubeconfigError(f"kubeconfig {', '.join(map(str, target.files))}: context {target.context!r}: {FAILURES[-1]}")
    return cfg
