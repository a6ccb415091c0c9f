"""Certificates and kubeconfig for the local control plane, made with the ``openssl`` CLI.

One throw-away CA per run signs a serving certificate (127.0.0.1 / localhost, used by
kube-apiserver, kube-controller-manager, kube-scheduler and kwok) and an admin client
certificate in group ``system:masters``.  A separate key pair signs service-account tokens.
All keys are ECDSA P-256 (fast to make).  Key files and the kubeconfig are mode 0600 in a 0700
directory; nothing here prints key material.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

DAYS = "3650"


class PKIError(Exception):
    """openssl is missing or failed."""


@dataclass(frozen=True, slots=True)
class PKI:
    dir: Path
    ca_crt: Path
    ca_key: Path
    serving_crt: Path
    serving_key: Path
    admin_crt: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _openssl(args: list[str], cwd: Path) -> None:
    exe = shutil.which("openssl")
    if not exe:
        raise PKIError("openssl not found in PATH; it is needed to make the local cluster's certificates")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        # openssl's stderr carries no key material.
        raise PKIError(f"openssl {args[0]} failed: {proc.stderr.strip().splitlines()[-1:]}")


def _key(path: Path, cwd: Path) -> None:
    _openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path)], cwd)
    path.chmod(0o600)


def _signed(d: Path, name: str, subject: str, ext: str) -> None:
    _key(d / f"{name}.key", d)
    _openssl(["req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr"], d)
    (d / f"{name}.ext").write_text(ext)
    serial = "0x" + os.urandom(16).hex()
    _openssl(
        ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial", serial,
         "-days", DAYS, "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.crt"],
        d,
    )  # fmt: skip
    (d / f"{name}.csr").unlink()
    (d / f"{name}.ext").unlink()


def make_pki(d: Path) -> PKI:
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    d.chmod(0o700)
    _key(d / "ca.key", d)
    _openssl(
        ["req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=drakit-local-ca", "-days", DAYS, "-sha256",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
         "-out", "ca.crt"],
        d,
    )  # fmt: skip
    _signed(
        d,
        "serving",
        "/CN=drakit-local-serving",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    _signed(
        d,
        "admin",
        "/O=system:masters/CN=drakit-admin",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    )
    _key(d / "sa.key", d)
    _openssl(["pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"], d)
    return PKI(
        d, d / "ca.crt", d / "ca.key", d / "serving.crt", d / "serving.key",
        d / "admin.crt", d / "admin.key", d / "sa.key", d / "sa.pub",
    )  # fmt: skip


def _b64(p: Path) -> str:
    return base64.b64encode(p.read_bytes()).decode()


def write_kubeconfig(path: Path, pki: PKI, server: str, name: str = "drakit-local") -> None:
    """A self-contained kubeconfig (certificate data inline), created with mode 0600."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_crt)}}],
        "users": [
            {
                "name": f"{name}-admin",
                "user": {"client-certificate-data": _b64(pki.admin_crt), "client-key-data": _b64(pki.admin_key)},
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
        "preferences": {},
    }
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(cfg, fh, sort_keys=False)
    os.replace(tmp, path)


def node_client_cert(pki: PKI, node: str) -> tuple[Path, Path]:
    """A client certificate for the kubelet of ``node``: user ``system:node:<node>`` in group
    ``system:nodes``, so the Node authorizer and NodeRestriction treat it as that node."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", node):
        raise PKIError(f"node name {node!r} is not a DNS subdomain")
    name = f"node-{node}"
    _signed(
        pki.dir,
        name,
        f"/O=system:nodes/CN=system:node:{node}",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    )
    return pki.dir / f"{name}.crt", pki.dir / f"{name}.key"
