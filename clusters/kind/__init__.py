"""The kind provider: a Kubernetes 1.37 cluster in Docker with the DRA gates on and the fake
drivers deployed. Needs a running Docker engine and ``kind`` on PATH; see
:mod:`clusters.kind.provider`."""

from drakit.clusters.kind.config import DEFAULT_NODE_IMAGE, cluster_config, cluster_gates
from drakit.clusters.kind.provider import ClusterError, KindCluster, preflight_problems

__all__ = ["DEFAULT_NODE_IMAGE", "ClusterError", "KindCluster", "cluster_config", "cluster_gates",
           "preflight_problems"]
