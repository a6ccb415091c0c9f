"""The kind cluster configuration for DRA (``kind.x-k8s.io/v1alpha4`` ``Cluster``).

Pure: no Docker, no kind, no files. What it sets, and where each part comes from:

- ``featureGates``: every gate of the feature registry (``conformance.features``), all on by
  default, with the requested ones on top. Gates that 1.37 locks on (GA) are left out: they
  cannot be anything else, and naming them would break the config on the release that removes
  them. kind hands ``featureGates`` to the API server, controller manager, scheduler, kubelet
  and kube-proxy alike, so no ``kubeadmConfigPatches`` are needed for the kubelet or the
  scheduler, and none of the DRA controllers is off by default in kube-controller-manager.
- ``runtimeConfig``: the same beta/alpha API versions the local control plane serves
  (``clusters.local.launcher.RUNTIME_CONFIG``).
- ``containerdConfigPatches``: CDI on in containerd (the default from containerd 2.0; older
  node images need it), so the devices the fake drivers prepare reach the containers.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import yaml

from drakit.clusters.local.gates import GateError, parse_gate_string
from drakit.clusters.local.launcher import RUNTIME_CONFIG
from drakit.conformance.features import DEFAULT_GATES, LOCKED_GATES, unmet_dependencies

API_VERSION = "kind.x-k8s.io/v1alpha4"
DEFAULT_NAME = "drakit"
DEFAULT_NODE_IMAGE = (
    "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"
)
"""The 1.37 node image kind v0.33.0 publishes; pass another ``kindest/node:v1.37.x`` to override."""

CDI_PATCH = '[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'


def cluster_gates(requested: Mapping[str, bool] | str | None = None, *, dra_gates: bool = True) -> dict[str, bool]:
    """The ``featureGates`` of the kind config.

    Start from every registry gate on (``dra_gates``) or from nothing, apply ``requested``
    (a mapping or ``"A=true,B=false"``). Turning off a locked gate, or leaving a gate on
    without the gates it needs, raises :class:`GateError` naming it.
    """
    asked = parse_gate_string(requested) if isinstance(requested, str) else dict(requested or {})
    locked_off = sorted(n for n, v in asked.items() if n in LOCKED_GATES and not v)
    if locked_off:
        raise GateError(f"feature gate(s) {', '.join(locked_off)} are GA and locked on in 1.37")
    # Names outside the registry pass (kind cannot ask the binaries, as the local provider
    # does), but one that looks like a misspelt registry gate would fail minutes later, in kubeadm.
    for n in asked:
        close = difflib.get_close_matches(n, DEFAULT_GATES, n=1, cutoff=0.85)
        if n not in DEFAULT_GATES and close:
            raise GateError(f"unknown feature gate {n} (did you mean {close[0]}?)")
    chosen = {n: True for n in DEFAULT_GATES if n not in LOCKED_GATES} if dra_gates else {}
    chosen.update({n: v for n, v in asked.items() if n not in LOCKED_GATES})
    unmet = unmet_dependencies({**DEFAULT_GATES, **chosen})
    if unmet:
        raise GateError(f"feature gates do not fit together: {'; '.join(unmet)}")
    return dict(sorted(chosen.items()))


def runtime_config(spec: str = RUNTIME_CONFIG) -> dict[str, str]:
    """``"a/v1=true,b/v2=true"`` -> ``{"a/v1": "true", "b/v2": "true"}`` (kind's map form)."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = item.partition("=")
        out[key] = value if sep else "true"
    return out


def cluster_config(
    *,
    name: str = DEFAULT_NAME,
    node_image: str = DEFAULT_NODE_IMAGE,
    gates: Mapping[str, bool] | str | None = None,
    dra_gates: bool = True,
    workers: int = 1,
) -> dict[str, Any]:
    """A kind ``Cluster``: one control-plane node and ``workers`` worker nodes, DRA ready."""
    if workers < 0:
        raise ValueError(f"workers must be 0 or more, not {workers}")
    # a custom node image is the user's call; a kindest/node of another release is a mistake
    if node_image.startswith("kindest/node:") and not node_image.startswith("kindest/node:v1.37."):
        raise ValueError(f"node image {node_image!r} is not Kubernetes 1.37 (want kindest/node:v1.37.x)")
    node = {"image": node_image}
    cfg: dict[str, Any] = {
        "kind": "Cluster",
        "apiVersion": API_VERSION,
        "name": name,
        "featureGates": cluster_gates(gates, dra_gates=dra_gates),
        "runtimeConfig": runtime_config(),
        "containerdConfigPatches": [CDI_PATCH],
        "nodes": [{"role": "control-plane", **node}] + [{"role": "worker", **node} for _ in range(workers)],
    }
    return cfg


def to_yaml(cfg: Mapping[str, Any]) -> str:
    return str(yaml.safe_dump(dict(cfg), sort_keys=False, default_flow_style=False))
