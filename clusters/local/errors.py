"""The local cluster's one error type (here so every module of the launcher can raise it)."""


class ClusterError(Exception):
    """The local cluster could not be started or stopped; the message says why."""
