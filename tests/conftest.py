"""Session-wide clean-up for the kit's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# the local control plane fixtures (they skip when the binaries are missing, or fail under
# DRAKIT_REQUIRE_CLUSTER=1)
pytest_plugins = ["drakit.clusters.local.pytest_fixture"]


@pytest.fixture(autouse=True, scope="session")
def _stop_fake_nodes() -> Iterator[None]:
    """Tests that run cases without the drakit plugin (e.g. ``run_case`` directly) start the
    reference backend's fake nodes; stop them, and remove their socket folders, at the end."""
    yield
    from drakit.conformance.backends import noderuntime
    noderuntime.shutdown()
