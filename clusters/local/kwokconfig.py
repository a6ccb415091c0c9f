"""kwok configuration: the project's Stage sets.

Standalone kwok has no built-in stages: every node and pod transition the local cluster needs
is described by the YAML files in ``stages/``.  A stage set is a list of those files.  Stage
documents may say ``statusTemplateFile: <name>`` under ``next``; :func:`render_stage_set`
replaces it by ``statusTemplate`` with that file's text, so one pod-running template serves
every set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

STAGES_DIR = Path(__file__).resolve().parent / "stages"

#: Pods go Running on bind, claims or not (no node side: a cluster without drakit's node runtime).
ON_BIND = "on-bind"
#: Pods with DRA claims go Running only when annotated ``drakit.dev/prepared: "true"``: what
#: ``clusters.nodeagent.kube.KubeNodeRuntime`` does once it has prepared their claims.
PREPARED = "prepared"
#: Pods are never started: a bound pod stays Pending, as in upstream's scheduler_perf (no node
#: side at all); kwok only keeps the nodes Ready and removes deleted pods.  For benchmarks.
NODES_ONLY = "nodes-only"

PREPARED_ANNOTATION = "drakit.dev/prepared"
#: Annotation kwok uses to pick the nodes it manages (see the launcher's kwok flags).
NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")

STAGE_SETS: dict[str, tuple[str, ...]] = {
    ON_BIND: ("node.yaml", "pod-on-bind.yaml", "pod-delete.yaml"),
    PREPARED: ("node.yaml", "pod-prepared.yaml", "pod-delete.yaml"),
    NODES_ONLY: ("node.yaml", "pod-delete.yaml"),
}


class StageError(Exception):
    """A stage set is unknown or malformed."""


def stage_documents(stage_set: str, stages_dir: Path = STAGES_DIR) -> list[dict[str, Any]]:
    """The Stage objects of a set, includes resolved."""
    try:
        files = STAGE_SETS[stage_set]
    except KeyError:
        raise StageError(f"unknown stage set {stage_set!r}; known: {', '.join(sorted(STAGE_SETS))}") from None
    docs: list[dict[str, Any]] = []
    names: set[str] = set()
    for fname in files:
        path = stages_dir / fname
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is None:
                continue
            if not isinstance(doc, dict) or doc.get("kind") != "Stage":
                raise StageError(f"{path}: every document must be a kwok Stage")
            name = doc.get("metadata", {}).get("name")
            if not name or name in names:
                raise StageError(f"{path}: Stage without a name or with a duplicate name {name!r}")
            names.add(name)
            nxt = doc.get("spec", {}).get("next") or {}
            include = nxt.pop("statusTemplateFile", None)
            if include is not None:
                if "statusTemplate" in nxt:
                    raise StageError(f"{path}: {name}: statusTemplate and statusTemplateFile are exclusive")
                nxt["statusTemplate"] = (stages_dir / include).read_text()
            docs.append(doc)
    return docs


class _BlockDumper(yaml.SafeDumper):  # type: ignore[misc,unused-ignore]
    """Writes multi-line strings (the Go templates) as readable ``|`` blocks."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BlockDumper.add_representer(str, _str_representer)


def render_kwok_config(stage_set: str, stages_dir: Path = STAGES_DIR) -> str:
    """Multi-document YAML for ``kwok --config``."""
    return str(yaml.dump_all(stage_documents(stage_set, stages_dir), Dumper=_BlockDumper, sort_keys=False))


#: ``status.declaredFeatures`` of a 1.37.2 kubelet with the DRA gates on and every other gate at
#: its default (sorted, as the kubelet reports them); ``stages/node.yaml`` declares the same.
DECLARED_FEATURES: tuple[str, ...] = (
    "DRANodeAllocatableResources",
    "DRAOptionalNodeOperations",
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingInitContainers",
    "RestartAllContainersOnContainerExits",
)


def fake_node(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    allocatable: dict[str, str] | None = None,
    declared_features: tuple[str, ...] | list[str] = DECLARED_FEATURES,
) -> dict[str, Any]:
    """A Node manifest that the launcher's kwok manages.

    Nodes accept status on create, so the declared features are there before any
    ResourceSlice names the node (the API server's NodeDeclaredFeatures admission checks
    them); the node stage keeps them (the API stores an empty list as none, so an empty
    ``declared_features`` gets the stage's default).  ``allocatable`` also becomes the
    capacity (with 110 pods unless it says otherwise); without it the stage gives the node 64
    cpu, 256Gi memory and 110 pods.
    """
    status: dict[str, Any] = {"declaredFeatures": sorted(declared_features)}
    if allocatable:
        # A kubelet always reports a pod count: without one the scheduler fits no pod at all.
        resources = {"pods": "110", **allocatable}
        status["capacity"] = dict(resources)
        status["allocatable"] = dict(resources)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {NODE_ANNOTATION[0]: NODE_ANNOTATION[1], "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **(labels or {}),
            },
        },
        "status": status,
    }
