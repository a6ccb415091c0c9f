"""When the cluster backend's cleanup may count a pod on a real kubelet node as gone
(kubeletside.CaseKubeletNodes.released): being deleted, terminal phase, and none of its
namespace's claims in the kubelet's DRA checkpoint (read as the kubelet writes it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from drakit.clusters.local.kubeletnode import KubeletNode
from drakit.conformance.backends.kubeletside import CaseKubeletNodes


def _node(tmp_path: Path, entries: list[dict[str, Any]] | None, *, alive: bool = True, raw: str | None = None) -> KubeletNode:
    node = KubeletNode("node-a", tmp_path / "node-a", bin_dir=tmp_path, server="https://127.0.0.1:1", ca_file=tmp_path / "ca",
                       client_cert=(tmp_path / "c", tmp_path / "k"), serving_cert=(tmp_path / "c", tmp_path / "k"),
                       ports=(1, 2))
    node.paths.root_dir.mkdir(parents=True)
    if raw is not None:
        (node.paths.root_dir / "dra_manager_state").write_text(raw)
    elif entries is not None:  # the kubelet's checkpoint: the claim cache as JSON inside "Data"
        (node.paths.root_dir / "dra_manager_state").write_text(
            json.dumps({"Data": json.dumps({"kind": "DRACheckpoint", "apiVersion": "checkpoint/v1", "ClaimInfoStateList": entries}), "Checksum": 1}))
    node.alive = lambda: alive  # type: ignore[method-assign]
    return node


class _Cluster:
    def __init__(self, node: KubeletNode) -> None:
        self.node = node

    def kubelet_node(self, name: str) -> KubeletNode | None:
        return self.node if name == self.node.name else None


class _Side:
    def __init__(self, node: KubeletNode) -> None:
        self.cluster = _Cluster(node)


def _nodes(node: KubeletNode) -> CaseKubeletNodes:
    return CaseKubeletNodes(_Side(node), {"node-a": object()}, None)  # type: ignore[arg-type, dict-item]


def _pod(phase: str, *, deleting: bool = True, node: str = "node-a", ns: str = "case-ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": ns}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_released_once_terminal_and_unprepared(tmp_path: Path) -> None:
    nodes = _nodes(_node(tmp_path, [{"Namespace": "other-ns", "ClaimName": "x"}]))
    assert nodes.released(_pod("Succeeded"))
    assert nodes.released(_pod("Failed"))


@pytest.mark.parametrize("pod", [
    _pod("Running"),  # the kubelet has not finished terminating it (unprepare comes first)
    _pod("Pending"),  # a prepare may still be under way
    _pod("Succeeded", deleting=False),  # not deleted: nothing was asked of the kubelet
    _pod("Succeeded", node="node-b"),  # not on a real kubelet node of the case
    _pod("Succeeded", node=""),
])
def test_not_released(tmp_path: Path, pod: dict[str, Any]) -> None:
    assert not _nodes(_node(tmp_path, [])).released(pod)


def test_not_released_while_the_checkpoint_holds_a_claim_of_the_namespace(tmp_path: Path) -> None:
    # a pod that completed by itself is terminal before the kubelet unprepared its claims
    node = _node(tmp_path, [{"Namespace": "case-ns", "ClaimName": "c", "PodUIDs": {"u": {}}}])
    assert not _nodes(node).released(_pod("Succeeded"))
    assert node.prepared_claims() == ["case-ns/c"]


def test_an_unreadable_checkpoint_or_a_dead_kubelet_releases_nothing(tmp_path: Path) -> None:
    torn = _node(tmp_path / "a", None, raw='{"Data": "{\\"ClaimInfoSt')
    assert torn.checkpoint_claims() is None and torn.prepared_claims() == []
    assert not _nodes(torn).released(_pod("Succeeded"))
    assert not _nodes(_node(tmp_path / "b", [], alive=False)).released(_pod("Succeeded"))
    assert _node(tmp_path / "c", None).checkpoint_claims() == []  # no checkpoint yet: nothing prepared
