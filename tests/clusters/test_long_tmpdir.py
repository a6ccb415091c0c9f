"""The driver suite on drakit's local cluster with a TMPDIR far longer than a Unix socket path
allows (issue 25: with a 23-character TMPDIR every driver-suite node failed to start; with a
136-character one the suite without root errored every case, 'bind: invalid argument').
As a user runs it: ``TMPDIR=<long> drakit run --backend cluster --cluster local ...
conformance/suites/driver``. The sockets go to a short folder of drakit's own, said in one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from drakit.clusters.local import build
from drakit.clusters.local.pytest_fixture import skip_or_fail

from .test_driver_suite import SEVEN, UPSTREAM, _binaries, behaviours, run_suite  # noqa: F401 - _binaries: autouse

TOO_LONG = "is too long for their Unix sockets"


def _long_tmpdir(tmp_path: Path) -> Path:
    long = tmp_path / ("t" * 60) / ("u" * 60)
    long.mkdir(parents=True)
    assert len(str(long)) > 130
    return long


def _said_once(text: str, what: str, long: Path) -> None:
    lines = [line for line in text.splitlines() if TOO_LONG in line]
    assert [line for line in lines if line.startswith(f"drakit: {what} ")] and \
        all(str(long) in line for line in lines), text[-4000:]
    assert len([line for line in lines if line.startswith(f"drakit: {what} ")]) == 1, lines
    assert "bind: invalid argument" not in text and "is too long for" not in text.replace(TOO_LONG, ""), text[-4000:]


def test_upstream_test_driver_on_kubelet_nodes_with_a_long_tmpdir(tmp_path: Path) -> None:
    if not (build.bin_dir() / "dra-test-driver").is_file():
        skip_or_fail("dra-test-driver not built; run 'drakit cluster build'")
    long = _long_tmpdir(tmp_path)
    code, results, text, wall = run_suite(tmp_path / "run", "--vendor", str(UPSTREAM), env={"TMPDIR": str(long)})
    print(f"driver suite vs upstream's test driver, TMPDIR of {len(str(long))} characters: {wall:.1f} s")
    side = results["environment"]["backends"]["cluster"]["driverUnderTest"]["nodes"]["nodeSide"]
    if not side.startswith("real kubelet"):
        pytest.skip(f"no real kubelet nodes here ({side}; they need root): the agent-node test covers this machine")
    assert code == 0 and results["verdict"]["result"] == "pass", text[-4000:]
    got = behaviours(results)
    assert all(got[b] == "proven" for b in (*SEVEN, "several-pods", "kubelet-restart")), got
    assert got["plugin-restart"] == "finding"  # as with a short TMPDIR (test_driver_suite.py)
    _said_once(text, "kubelet nodes' folders", long)


def test_fake_driver_on_agent_nodes_with_a_long_tmpdir(tmp_path: Path) -> None:
    """Without root (here: DRAKIT_NODE_SIDE=agent) the driver's nodes are kwok nodes whose plugin
    sockets drakit keeps itself."""
    long = _long_tmpdir(tmp_path)
    code, results, text, wall = run_suite(tmp_path / "run", env={"TMPDIR": str(long), "DRAKIT_NODE_SIDE": "agent"})
    print(f"driver suite vs the fake driver on agent nodes, TMPDIR of {len(str(long))} characters: {wall:.1f} s")
    got = behaviours(results)
    assert all(got[b] == "proven" for b in (*SEVEN, "several-pods")), (got, text[-4000:])
    bad = [c["id"] for c in results["cases"] if c["status"] in ("error", "failed")]
    assert not bad, (bad, text[-4000:])
    # agent nodes' own limits (no container to read, no kubelet writing device health), as with
    # a short TMPDIR (test_driver_suite.py): skipped, never failed
    assert {c["id"] for c in results["cases"] if (c.get("skip") or {}).get("category") == "no-node-side"} >= {
        "driver/device-metadata", "driver/health"}, results["cases"]
    _said_once(text, "the driver's node sockets", long)
