"""Which files a run and lint find (issue 25): every ``*.case.yaml`` entry that is not a folder
is read or reported, and each real folder is entered once, however symlinks loop.

The not-regular files themselves (FIFO, socket, links to devices, dangling and looping links)
are rows of the corpus (``inputs.CASE_FILES``), linted alone and run beside the valid case."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drakit.conformance.cases.finder import find_case_files

from .inputs import VALID


def _tree(root: Path) -> None:
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.case.yaml").write_text(VALID)
    (root / "sub" / "deeper" / "b.case.yaml").write_text(VALID.replace("hostile/valid", "hostile/valid-b"))
    (root / "sub" / "up").symlink_to("..")              # a cycle back to the top
    (root / "sub" / "deeper" / "loop").symlink_to("../..")  # and another, two levels up
    (root / "twin").symlink_to("sub")                    # a folder linked twice
    (root / "self").symlink_to("self")                   # a link loop (not a folder)
    (root / "gone").symlink_to("nowhere")                # a dangling link, not a case file by name
    os.mkfifo(root / "pipe.case.yaml")


def test_each_real_folder_is_walked_once_and_odd_case_entries_are_kept(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = [p.relative_to(tmp_path).as_posix() for p in find_case_files([tmp_path])]
    assert found == ["a.case.yaml", "pipe.case.yaml", "sub/deeper/b.case.yaml"]


def test_a_folder_given_twice_or_through_a_link_is_walked_once(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = find_case_files([tmp_path / "sub", tmp_path / "twin", tmp_path / "sub" / "deeper"])
    # sub/deeper/loop leads to the top folder, met there for the first time: its files once
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "sub/deeper/b.case.yaml", "sub/deeper/loop/a.case.yaml", "sub/deeper/loop/pipe.case.yaml"]


def _drakit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env)


def test_a_run_over_folder_cycles_loads_each_case_once(tmp_path: Path) -> None:
    """Before: ``sub/up -> ..`` was followed about 40 levels deep (the valid case loaded 41 times,
    40 'defined twice' errors with kilobyte paths); now the run passes with the two cases once."""
    cases = tmp_path / "cases"
    cases.mkdir()
    _tree(cases)
    (cases / "pipe.case.yaml").unlink()
    proc = _drakit("run", str(cases), "--out", str(tmp_path / "out"), "--plain", cwd=tmp_path)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert sorted((c["id"], c["status"]) for c in results["cases"]) == [("hostile/valid", "passed"),
                                                                        ("hostile/valid-b", "passed")]
    assert proc.returncode == 0 and "defined twice" not in proc.stdout + proc.stderr, proc.stdout[-2000:]
    lint = _drakit("lint", str(cases), cwd=tmp_path)
    assert lint.stdout.splitlines()[-1] == "2 files, 2 cases, 0 errors" and lint.returncode == 0, lint.stdout


@pytest.mark.parametrize("make", ["fifo", "dev-zero"])
def test_an_odd_file_given_directly_is_a_load_error_of_the_run(tmp_path: Path, make: str) -> None:
    """Before: a FIFO given to ``drakit run`` made pytest refuse its own --rootdir (a message
    about pytest's options)."""
    odd = tmp_path / "odd.case.yaml"
    {"fifo": lambda: os.mkfifo(odd), "dev-zero": lambda: odd.symlink_to("/dev/zero")}[make]()
    proc = _drakit("run", str(odd), "--out", str(tmp_path / "out"), "--plain", cwd=tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "rootdir" not in text and "Traceback" not in text, text[-2000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(c["id"], c["status"]) for c in results["cases"]] == [("odd.case.yaml", "error")]
    assert results["verdict"]["result"] != "pass"


def test_a_dangling_link_given_directly_is_named_by_run_and_reported_by_lint(tmp_path: Path) -> None:
    odd = tmp_path / "odd.case.yaml"
    odd.symlink_to("nowhere")
    run = _drakit("run", str(odd), "--out", str(tmp_path / "out"), "--plain", cwd=tmp_path)
    assert run.returncode == 2 and run.stderr == (f"drakit: no such file or folder: {odd} (a symlink to 'nowhere' "
                                                  f"that leads nowhere)\n"), run.stderr
    lint = _drakit("lint", str(odd), cwd=tmp_path)
    assert lint.returncode == 2 and lint.stdout.splitlines() == [
        f"{odd}: a dangling symlink (to 'nowhere'): not a regular file; not loaded", "1 files, 0 cases, 1 errors"]


def test_several_files_of_one_folder_given_to_a_run_are_all_collected(tmp_path: Path) -> None:
    """Each file given is collected, also when another file of its folder was given before it
    (pytest collects the folder once per file; a cycle guard must not take that for a loop)."""
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "a.case.yaml").write_text(VALID)
    (cases / "b.case.yaml").write_text(VALID.replace("hostile/valid", "hostile/valid-b"))
    (cases / "c.case.yaml").write_text(VALID.replace("hostile/valid", "hostile/valid-c"))
    proc = _drakit("run", str(cases / "a.case.yaml"), str(cases / "c.case.yaml"), "--out", str(tmp_path / "out"),
                   "--plain", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert sorted(c["id"] for c in results["cases"]) == ["hostile/valid", "hostile/valid-c"]
