"""A pytest plugin for ``bench_kubelet.py``'s suite runs (loaded through ``PYTEST_PLUGINS``):
before a real kubelet node's folder goes (the node removed, or the cluster down), its
``kubelet.log`` and the fake CRI's ``cri.jsonl`` are copied into ``$BENCH_NODE_LOGS``, so the
benchmark can say how long the kubelet took over each deleted pod. Nothing else changes."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import Any

_seq = itertools.count()


def _keep(node: Any) -> None:
    out = Path(os.environ["BENCH_NODE_LOGS"])
    out.mkdir(parents=True, exist_ok=True)
    n = next(_seq)
    for name in ("kubelet.log", "cri.jsonl"):
        src = node.paths.dir / name
        if src.exists():
            shutil.copyfile(src, out / f"{n:03d}-{node.name}-{name}")


def pytest_configure(config: Any) -> None:
    if not os.environ.get("BENCH_NODE_LOGS"):
        return
    from drakit.clusters.local import launcher, realnodes

    remove = realnodes.RealNodes.remove

    def keeping_remove(self: Any, name: str, ctx: Any = None) -> None:
        if name in self.nodes:
            _keep(self.nodes[name])
        remove(self, name, ctx)

    down = launcher.LocalCluster.down

    def keeping_down(self: Any) -> None:
        for node in list(self.real.nodes.values()) if self.real is not None else []:
            _keep(node)
        down(self)

    realnodes.RealNodes.remove = keeping_remove  # type: ignore[method-assign]
    launcher.LocalCluster.down = keeping_down  # type: ignore[method-assign]
