"""What a user sees of a huge failure, and of a bug in drakit itself (issue 15)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from drakit.conformance import crash

BIG = "x" * 100_000
CASE = f"""\
id: hostile/big-failure
title: a 100 KB string in a failure
features: [core]
steps:
  - apply:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {{name: c, annotations: {{a: "{BIG}"}}}}
      spec: {{devices: {{requests: [{{name: r, exactly: {{deviceClassName: nope}}}}]}}}}
  - expect:
      - object: {{kind: ResourceClaim, name: c, match: {{metadata: {{annotations: {{a: "y{BIG}"}}}}}}}}
"""


def test_a_100kb_string_in_a_failure_is_shown_once_cut_and_kept_whole_in_results(tmp_path: Path) -> None:
    (tmp_path / "big.case.yaml").write_text(CASE)
    proc = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(tmp_path / "big.case.yaml"),
                           "--out", str(tmp_path / "out"), "--plain"], capture_output=True, text=True, timeout=300)
    console = proc.stdout + proc.stderr
    assert proc.returncode == 1, console[-2000:]
    assert "Traceback" not in console
    assert len(console) < 16_000, f"{len(console):,} characters on the console"
    longest = max(len(m) for m in re.findall(r"x+", console))
    assert longest <= 500, f"a run of {longest} x's reached the console"
    # cut where it is shown, saying where the rest is (the end of a line, or since the report
    # layout change its middle)
    assert re.search(r"more characters in results\.json|characters left out, all in results\.json", console)
    case = json.loads((tmp_path / "out" / "results.json").read_text())["cases"][0]
    assert case["status"] == "failed"
    assert f"y{BIG}" in json.dumps(case["failure"]), "the full text is kept in results.json"


def test_a_string_beyond_the_bound_is_cut_in_results() -> None:
    from drakit.conformance.results import MAX_STRING, bound_strings
    kept = bound_strings({"a": ["z" * (MAX_STRING + 10)], "b": "short"})
    assert kept["b"] == "short"
    assert kept["a"][0].startswith("z" * MAX_STRING) and kept["a"][0].endswith("(10 more characters not kept)")


def test_an_unexpected_exception_is_one_line_a_file_and_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(crash.CRASH_DIR_ENV, str(tmp_path))
    from drakit.conformance import cli

    def broken() -> int:
        return {}["no such key"]  # a bug

    monkeypatch.setattr(cli, "cmd_features", broken)
    assert cli.main(["features"]) == crash.EXIT_BUG == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    match = re.fullmatch(r"drakit: internal error: KeyError: 'no such key'; this is a drakit bug, "
                         r"the traceback is in (\S+)\n", err)
    assert match, err
    saved = Path(match.group(1))
    assert saved.parent == tmp_path and oct(saved.stat().st_mode & 0o777) == "0o600"
    text = saved.read_text()
    assert "Traceback (most recent call last)" in text and "in broken" in text and "command:" in text


def test_interrupts_and_exits_pass_through_the_last_resort() -> None:
    def interrupted() -> int:
        raise KeyboardInterrupt

    def exiting() -> int:
        raise SystemExit(143)

    with pytest.raises(KeyboardInterrupt):
        crash.last_resort(interrupted)()
    with pytest.raises(SystemExit) as exited:
        crash.last_resort(exiting)()
    assert exited.value.code == 143


def test_a_closed_stdout_ends_quietly(tmp_path: Path) -> None:
    """``drakit features | head -1``: the reader goes away; no BrokenPipeError traceback."""
    proc = subprocess.run(f"{sys.executable} -m drakit.conformance.cli features | head -c 10", shell=True,
                          capture_output=True, text=True, timeout=60)
    assert proc.stderr == "" and len(proc.stdout) == 10


def test_a_bug_inside_a_case_is_that_cases_error_with_the_traceback_in_a_file(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(crash.CRASH_DIR_ENV, str(tmp_path))
    from drakit.conformance.cases.loader import load_text
    from drakit.conformance.cases.runner import run_case
    from drakit.fake_driver.profile import load_profile

    from .inputs import VALID
    (case,) = load_text(VALID, "v.case.yaml", load_profile()).cases

    class BrokenSession:  # a backend with a bug in it
        namespace = "ns"
        bindings: dict[str, str] = {}  # no inventory placeholders bound

        def apply(self, *args: object, **kwargs: object) -> None:
            raise ZeroDivisionError("the backend divided by zero")

        def diagnostics(self) -> dict[str, object]:
            return {}

        def __getattr__(self, name: str) -> object:
            return self.apply

    outcome = run_case(case, BrokenSession())  # type: ignore[arg-type]
    assert outcome.status == "error"
    summary = outcome.failure["summary"]
    assert summary.startswith("internal error: ZeroDivisionError: the backend divided by zero; this is a drakit bug")
    assert "\n" not in summary and outcome.failure["detail"] == ""
    saved = Path(summary.rsplit(" ", 1)[1])
    assert saved.exists() and "ZeroDivisionError" in saved.read_text()


FULL_STDOUT = {  # (command line, whether it writes results before it prints)
    "features": (["features"], False),
    "lint": (["lint"], False),
    "report-compare": (["report", "--compare", "{r}", "{r}", "--out", "{o}"], False),
    "report": (["report", "{r}", "--out", "{o}"], False),
    "run": (["run", "{case}", "--out", "{o}", "--plain"], True),
}


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("name", FULL_STDOUT)
def test_stdout_on_a_full_disk_is_one_line_and_exit_2(tmp_path: Path, name: str) -> None:
    """Before (issue 25): 'internal error: OSError: No space left on device; this is a drakit
    bug', exit 3. Now one line saying what cannot be written; a run still writes its results."""
    from .inputs import VALID, VALID_RESULTS
    (tmp_path / "r.json").write_text(VALID_RESULTS)
    (tmp_path / "v.case.yaml").write_text(VALID)
    argv, writes = FULL_STDOUT[name]
    argv = [a.format(r=tmp_path / "r.json", o=tmp_path / "out", case=tmp_path / "v.case.yaml") for a in argv]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *argv], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.stderr == "drakit: cannot write to standard output: No space left on device\n", proc.stderr
    assert proc.returncode == 2
    if writes:
        assert json.loads((tmp_path / "out" / "results.json").read_text())["verdict"]["result"] == "pass"
