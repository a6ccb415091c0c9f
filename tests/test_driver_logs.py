"""The driver's log lines of one case's window, errors first (conformance.backends.driverlogs)."""

from __future__ import annotations

from pathlib import Path

from drakit.conformance.backends.driverlogs import DriverLogs


def test_a_window_holds_what_the_logs_gained_errors_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test's own worker is not a drakit run's
    logs = DriverLogs(tmp_path)
    plugin, controller = logs.path("n1-plugin"), logs.path("controller")
    assert plugin.parent == tmp_path / "driver-logs"
    assert plugin.parent.is_dir() and not plugin.parent.is_symlink()  # made by DriverLogs, never through a link
    plugin.write_text("# 2026-12-03 drv --node n1\nI1203 earlier case\n")
    controller.write_text("")
    marks = logs.marks()
    with plugin.open("a") as fh:
        fh.write("I1203 10:00:00 prepared claim ns/c\nE1203 10:00:01 update status: shareID is required\n")
    controller.write_text('{"level":"error","msg":"binding conditions not met"}\n{"level":"info","msg":"ok"}\n')
    got = logs.window(marks)
    assert got["errors"] == 2
    assert got["lines"][:2] == ["n1-plugin: E1203 10:00:01 update status: shareID is required",
                                'controller: {"level":"error","msg":"binding conditions not met"}']
    assert "n1-plugin: I1203 10:00:00 prepared claim ns/c" in got["lines"]
    assert not any("earlier case" in line for line in got["lines"])  # before the case's window
    assert sorted(got["files"]) == sorted([str(plugin), str(controller)])
