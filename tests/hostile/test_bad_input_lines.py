"""Bad input is one clear line and exit 2, never "a bug in drakit" (issue 32 §5): each test here
gave exit 3 with a traceback file, or was accepted, before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from drakit.conformance import cli


def _one_line(err: str) -> str:
    assert "Traceback" not in err and "drakit bug" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "1e300", "ten"])
def test_node_check_refuses_a_timeout_that_is_not_a_deadline(tmp_path: Path, value: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["node-check", "--registry-dir", str(tmp_path), "--driver", "x.example.com", f"--timeout={value}"])
    assert exit_.value.code == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("drakit node-check: error: argument --timeout:") and repr(value) in line, line


def test_node_check_out_naming_a_file_is_one_line_before_anything_runs(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "reg").mkdir()
    taken = tmp_path / "taken"
    taken.write_text("keep me\n")
    assert cli.main(["node-check", "--registry-dir", str(tmp_path / "reg"), "--driver", "x.example.com",
                     "--out", str(taken), "--timeout", "0.2"]) == 2
    err = capsys.readouterr()
    assert _one_line(err.err) == (f"drakit node-check: --out {taken}: not a folder (it is a file); give a folder "
                                  f"for node-check.json and node-check.txt")
    assert err.out == "", "nothing was checked"
    assert taken.read_text() == "keep me\n"


@pytest.mark.parametrize("check", ["dns_label", "dns_subdomain", "label_value", "shape", "node", "pool"])
def test_a_name_with_a_trailing_newline_is_refused_by_every_name_check(check: str) -> None:
    """Python's ``$`` matches before a final newline: ``re.match(r"^[a-z]+$", "a\\n")`` is a match.
    Each anchored name check of an input reader refused ``name`` and accepted ``name\\n``."""
    from drakit.conformance.errors import FieldError
    from drakit.conformance.model import reader
    from drakit.fake_hw import inventory, shapes
    calls = {"dns_label": lambda v: reader.check_dns_label((), v),
             "dns_subdomain": lambda v: reader.check_dns_subdomain((), v),
             "label_value": lambda v: reader.check_label_value((), v),
             "shape": lambda v: shapes._DNS_LABEL.match(v) or _refuse(),
             "node": lambda v: inventory._DNS_SUBDOMAIN.match(v) or _refuse(),
             "pool": lambda v: __import__("drakit.conformance.cases.driverchecks", fromlist=["_POOL"])._POOL.match(v)
             or _refuse()}
    calls[check]("abc")
    with pytest.raises((FieldError, ValueError)):
        calls[check]("abc\n")


def _refuse() -> None:
    raise ValueError("refused")
