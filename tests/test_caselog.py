"""Diagnostics of a failed cluster case: drakit's own component logs and the control plane's
lines about the case namespace."""

from __future__ import annotations

import logging
from pathlib import Path

from drakit.conformance.backends.caselog import CaseLog, control_plane_lines


def test_case_log_keeps_drakit_records_while_open_and_only_the_newest() -> None:
    log = CaseLog(limit=3).__enter__()
    try:
        logging.getLogger("drakit.driver").info("prepared claim %s", "ns/c")
        logging.getLogger("other.library").warning("not ours")
        for i in range(3):
            logging.getLogger("drakit.nodeagent").warning("line %d", i)
    finally:
        log.close()
    logging.getLogger("drakit.driver").info("after close")
    lines = log.snapshot()
    assert len(lines) == 3 and lines[-1].endswith("drakit.nodeagent: line 2")
    assert not any("not ours" in line or "after close" in line or "ns/c" in line for line in lines)


def test_control_plane_lines_are_those_naming_the_namespace(tmp_path: Path) -> None:
    (tmp_path / "kube-scheduler.log").write_text(
        'I1 "Unable to schedule pod" pod="case-ns/p"\nI2 other pod="x/y"\nI3 "Successfully bound" pod="case-ns/q"\n')
    (tmp_path / "kwok.log").write_text("nothing here\n")
    got = control_plane_lines(tmp_path, "case-ns")
    assert got == {"kube-scheduler": ['I1 "Unable to schedule pod" pod="case-ns/p"', 'I3 "Successfully bound" pod="case-ns/q"']}
    assert control_plane_lines(None, "case-ns") == {}
    assert control_plane_lines(tmp_path / "missing", "case-ns") == {}
