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


@pytest.fixture(scope="session")
def admission_oracle() -> Iterator[object]:
    """The API server's admission (built from k8s.io/kubernetes v1.37.2), one process per session.

    Skipped without Go unless ``DRAKIT_REQUIRE_CLUSTER=1`` (CI), where a missing oracle fails."""
    from drakit.conformance.oracle import build_admission_oracle
    from drakit.conformance.oracle.admission import AdmissionOracle

    try:
        binary = build_admission_oracle()
    except OracleUnavailable as exc:
        if os.environ.get("DRAKIT_REQUIRE_CLUSTER", "0") not in ("0", "", "false", "no"):
            pytest.fail(f"admission oracle unavailable: {exc}")
        pytest.skip(f"admission oracle unavailable: {exc}")
    with AdmissionOracle(binary) as o:
        yield o
