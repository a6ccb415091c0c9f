"""Issue 32 §1: everything under ``--out`` is created without following a link. A link, a folder
or a FIFO where drakit writes a file is one line and exit 2 before the run; a name from an input
never leaves its folder; a file refused at the end of a run sends the results elsewhere, said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drakit.reports.safefs import UnsafePath, check_name, write_file

from .inputs import VALID


def _drakit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], capture_output=True, text=True,
                          timeout=180, cwd=cwd, env={**os.environ, "NO_COLOR": "1"})


#: Names earlier versions wrote through (the write probe, results.json's temporary file, the shard plan).
OLD_NAMES = (".drakit-write-test", "results.json.tmp", ".drakit-shard.json")


@pytest.fixture(scope="module")
def results_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run's results.json (one small case, reference backend), run with links planted in its
    --out under the names earlier versions wrote through; their targets are checked untouched."""
    folder = tmp_path_factory.mktemp("run")
    (folder / "v.case.yaml").write_text(VALID)
    out = folder / "out"
    out.mkdir()
    for name in OLD_NAMES:
        (folder / f"victim{name}").write_text("keep\n")
        (out / name).symlink_to(folder / f"victim{name}")
    res = _drakit("run", str(folder / "v.case.yaml"), "--out", str(out), "--plain")
    assert res.returncode == 0, res.stdout + res.stderr
    return out / "results.json"


@pytest.mark.parametrize("entry", ["report.html", ".drakit-run.lock"])
def test_a_link_in_out_is_refused_before_the_run_and_its_target_is_untouched(tmp_path: Path, entry: str) -> None:
    (tmp_path / "v.case.yaml").write_text(VALID)
    victim = tmp_path / "victim"
    victim.write_text("not drakit's\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / entry).symlink_to(victim)
    res = _drakit("run", str(tmp_path / "v.case.yaml"), "--out", str(out), "--plain")
    assert res.returncode == 2, res.stderr
    assert res.stderr == (f"drakit: --out {out}: {entry} is a symbolic link where drakit writes a file (drakit "
                          f"never writes through a link or over a folder): remove it or choose another folder\n")
    assert victim.read_text() == "not drakit's\n"
    assert (out / entry).is_symlink()


def test_a_folder_or_fifo_where_a_file_belongs_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "v.case.yaml").write_text(VALID)
    out = tmp_path / "out"
    (out / "results.json").mkdir(parents=True)
    res = _drakit("run", str(tmp_path / "v.case.yaml"), "--out", str(out), "--plain")
    assert (res.returncode, res.stderr.count("\n")) == (2, 1), res.stderr
    assert "results.json is a folder where drakit writes a file" in res.stderr
    os.rmdir(out / "results.json")
    os.mkfifo(out / "junit.xml")  # never opened (it would block): refused as it is
    from drakit.reports.safefs import preflight
    with pytest.raises(UnsafePath, match="junit.xml is not a regular file"):
        preflight(out, ("results.json", "junit.xml"), "--out")
    with pytest.raises(UnsafePath, match="junit.xml is not a regular file"):
        write_file(out, "junit.xml", "x")


def test_a_run_writes_none_of_the_names_earlier_drakit_wrote_through(results_file: Path) -> None:
    """Links under the names earlier versions wrote: a complete run leaves their targets alone
    and writes its three files."""
    out = results_file.parent
    assert all((out.parent / f"victim{n}").read_text() == "keep\n" for n in OLD_NAMES)
    assert all((out / n).is_symlink() for n in OLD_NAMES)
    assert json.loads(results_file.read_text())["verdict"]["result"] == "pass"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


def test_report_and_node_check_refuse_a_link_in_their_out(tmp_path: Path, results_file: Path) -> None:
    results = results_file
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "junit.xml").symlink_to(victim)
    res = _drakit("report", str(results), "--out", str(out))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stdout + res.stderr
    assert "junit.xml is a symbolic link" in res.stderr
    (out / "node-check.txt").symlink_to(victim)
    res = _drakit("node-check", "--registry-dir", str(tmp_path), "--driver", "gpu.example.com", "--out", str(out))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stdout + res.stderr
    assert "node-check.txt is a symbolic link" in res.stderr
    (out / "claims.json").symlink_to(victim)
    res = _drakit("driver", "sample-claims", "--driver", "gpu.acme.example.com", "--node", "node-1",
                  "--out", str(out / "claims.json"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stdout + res.stderr
    assert "claims.json is a symbolic link" in res.stderr
    assert victim.read_text() == "keep\n"


def test_names_from_inputs_never_leave_their_folder(tmp_path: Path) -> None:
    for bad in ("../x", "/etc/passwd", "a/b", "..", ".", "", "a\nb", "a\0b", "a\x1b[2J", "x" * 256):
        with pytest.raises(UnsafePath):
            check_name(bad, "name")
    res = _drakit("node-check", "--registry-dir", str(tmp_path), "--driver", "../../etc/x")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--driver '../../etc/x' is not a plain name" in res.stderr
    res = _drakit("run", str(tmp_path), "--out", f"{tmp_path}/a\nforged line")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "holds the control character '\\n'" in res.stderr
    from drakit.conformance.backends.driverlogs import DriverLogs
    logs = DriverLogs(tmp_path / "out2")
    with pytest.raises(UnsafePath):
        logs.path("../../escaped")
    from drakit.fake_driver.plugin.driver import FakeDriver, PluginConfig
    config = PluginConfig(driver="../../../etc", node="n", plugin_dir=tmp_path, registry_dir=tmp_path, cdi_dir=tmp_path)
    with pytest.raises(UnsafePath, match="driver name '../../../etc' is not a plain name"):
        FakeDriver(config, None, None)  # type: ignore[arg-type]


def test_a_link_planted_between_the_check_and_the_write_is_replaced_not_followed(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from drakit.reports import safefs
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "out").mkdir()
    monkeypatch.setattr(safefs, "_check_entry", lambda *a: (tmp_path / "out" / "report.html").symlink_to(victim))
    write_file(tmp_path / "out", "report.html", "drakit's")
    assert victim.read_text() == "keep\n"
    assert (tmp_path / "out" / "report.html").read_text() == "drakit's"
    assert not (tmp_path / "out" / "report.html").is_symlink()


def test_files_refused_at_the_end_of_a_run_go_elsewhere_and_it_is_said(tmp_path: Path, results_file: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from drakit.conformance.results import write_results, written_folder
    results = json.loads(results_file.read_text())
    out = tmp_path / "out"
    (out / "report.html").mkdir(parents=True)  # planted while the run ran
    files = write_results(results, out)
    other = written_folder(out)
    assert other != out and files["results.json"] == other / "results.json" and (other / "report.html").is_file()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the results went to {other} instead" in err
    import shutil
    shutil.rmtree(other)


def test_the_sonobuoy_hand_over_writes_no_file_through_a_link(tmp_path: Path, results_file: Path) -> None:
    from drakit.conformance.incluster.sonobuoy import TARBALL, hand_over
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    handed = tmp_path / "sonobuoy"
    handed.mkdir()
    (handed / TARBALL).symlink_to(victim)
    with pytest.raises(UnsafePath, match=f"{TARBALL} is a symbolic link"):
        hand_over(results_file.parent, {"SONOBUOY_RESULTS_DIR": str(handed)})
    (handed / TARBALL).unlink()
    (handed / "done").symlink_to(victim)
    with pytest.raises(UnsafePath, match="done is a symbolic link"):
        hand_over(results_file.parent, {"SONOBUOY_RESULTS_DIR": str(handed)})
    (handed / "done").unlink()
    import tarfile
    with tarfile.open(hand_over(results_file.parent, {"SONOBUOY_RESULTS_DIR": str(handed)})) as tar:
        assert sorted(tar.getnames()) == ["junit.xml", "report.html", "results.json"]
    assert victim.read_text() == "keep\n" and (handed / "done").read_text() == str(handed / TARBALL)
