"""The session-wide upstream oracle for tests: built on first use, skipped without Go."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from drakit.conformance.oracle import Oracle, OracleUnavailable, build_oracle


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    """One oracle process per test session (per xdist worker).

    ``DRAKIT_ORACLE=0`` skips every oracle test without trying to build it.
    """
    if os.environ.get("DRAKIT_ORACLE", "1") in ("0", "false", "no", "off"):
        pytest.skip("the upstream oracle is switched off (DRAKIT_ORACLE=0)")
    try:
        binary = build_oracle()
    except OracleUnavailable as exc:
        pytest.skip(f"upstream oracle unavailable: {exc}")
    with Oracle(binary) as o:
        yield o
