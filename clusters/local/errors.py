"""The local cluster's one error type (here so every module of the launcher can raise it)."""


class ClusterError(Exception):
    """The local cluster could not be started or stopped; the message says why."""


class UnsafeRunDir(ClusterError):
    """A run folder (or the per-user folder of the default one) drakit may not act in: a link,
    another user's, or writable by others (a usage error: exit 2)."""
