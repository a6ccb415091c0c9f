from drakit.clusters.local.pytest_fixture import local_cluster, local_cluster_factory  # noqa: F401
