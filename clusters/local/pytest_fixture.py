"""pytest fixtures for the local control plane.

Use from a conftest.py::

    from drakit.clusters.local.pytest_fixture import local_cluster, local_cluster_factory  # noqa: F401

``local_cluster`` is one cluster per session (every DRA gate on, stage set "on-bind").
``kubelet_cluster`` (per module) adds a real kubelet node over the fake CRI with the fake drivers
(needs root); ``containerd_cluster`` the same node over containerd + runc.
``local_cluster_factory(**kwargs)`` starts extra clusters (e.g. ``stage_set="prepared"``)
torn down at the end of the test.  Both skip with the reason when the binaries are not built.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from drakit.clusters.local import build
from drakit.clusters.local.launcher import LocalCluster


def skip_reason() -> str | None:
    """Why the local cluster cannot run here, or None."""
    missing = build.missing_binaries()
    if missing:
        return (
            f"local control plane binaries not built ({', '.join(missing)} missing or wrong in "
            f"{build.bin_dir()}); run 'drakit cluster build'"
        )
    return None


def skip_or_fail(reason: str) -> None:
    """Skip with the reason, unless CI demands the cluster (DRAKIT_REQUIRE_CLUSTER=1): then fail,
    so a missing build step can never pass as skipped tests."""
    if os.environ.get("DRAKIT_REQUIRE_CLUSTER") == "1":
        pytest.fail(f"DRAKIT_REQUIRE_CLUSTER=1 but {reason}")
    pytest.skip(reason)


def _progress(msg: str) -> None:
    if os.environ.get("DRAKIT_CLUSTER_VERBOSE"):
        print(f"[local-cluster] {msg}", flush=True)


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    reason = skip_reason()
    if reason:
        skip_or_fail(reason)
    with LocalCluster(tmp_path_factory.mktemp("local-cluster"), progress=_progress) as cluster:
        yield cluster


@pytest.fixture
def local_cluster_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LocalCluster]]:
    reason = skip_reason()
    if reason:
        skip_or_fail(reason)
    started: list[LocalCluster] = []

    def make(**kwargs: Any) -> LocalCluster:
        kwargs.setdefault("progress", _progress)
        c = LocalCluster(tmp_path_factory.mktemp("local-cluster"), **kwargs)
        started.append(c)
        return c.up()

    try:
        yield make
    finally:
        for c in reversed(started):
            c.down()


def kubelet_skip_reason() -> str | None:
    """Why real kubelet nodes cannot run here, or None."""
    from drakit.clusters.local.kubeletnode import unavailable_reason

    return skip_reason() or unavailable_reason()


@pytest.fixture(scope="module")
def kubelet_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A local cluster with one real kubelet node, ``node-1`` (fake hardware ``small-1gpu``),
    running the fake drivers as processes, as ``drakit cluster up --nodes 1`` starts it."""
    reason = kubelet_skip_reason()
    if reason:
        skip_or_fail(reason)
    from drakit.clusters.local.fakedrivers import deploy
    from drakit.fake_hw.inventory import build_inventory

    inv = build_inventory("small-1gpu", "node-1")
    with LocalCluster(tmp_path_factory.mktemp("kubelet-cluster"), progress=_progress, runtime="fake",
                      kubelet_nodes=[("node-1", inv.node_labels())]) as cluster:
        deploy(cluster, [("node-1", "small-1gpu")], progress=_progress)
        yield cluster


@pytest.fixture(scope="module")
def containerd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """As ``kubelet_cluster``, with containerd + runc as node-1's runtime (real containers)."""
    reason = kubelet_skip_reason()
    if reason:
        skip_or_fail(reason)
    from drakit.clusters.local.fakedrivers import deploy
    from drakit.fake_hw.inventory import build_inventory

    inv = build_inventory("small-1gpu", "node-1")
    with LocalCluster(tmp_path_factory.mktemp("containerd-cluster"), progress=_progress, runtime="containerd",
                      kubelet_nodes=[("node-1", inv.node_labels())]) as cluster:
        deploy(cluster, [("node-1", "small-1gpu")], progress=_progress)
        yield cluster
