"""What the console says the cluster backend is stopping at the end of a run: only what it
started (a kubeconfig run that installed nothing names nothing)."""

from __future__ import annotations

from drakit.conformance.backends.cluster import ClusterBackend


def _backend(local: bool, installed: object, stops: int) -> ClusterBackend:
    b = ClusterBackend.__new__(ClusterBackend)  # the attributes teardown_note reads, no cluster
    b.local, b.installed, b._stops = local, installed, [lambda: None] * stops
    return b


def test_teardown_note_names_only_what_the_run_started() -> None:
    assert _backend(False, None, 1).teardown_note() is None  # driver side only: nothing to name
    assert _backend(False, object(), 2).teardown_note() == "stopping the installed fake driver"
    assert _backend(True, None, 2).teardown_note() == "stopping the local clusters and their fake nodes"
    assert _backend(True, None, 0).teardown_note() is None
