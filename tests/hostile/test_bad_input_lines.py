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
    assert _one_line(err.err) == f"drakit node-check: --out {taken} is not a folder"
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


def _explain_state(tmp_path: Path) -> list[dict]:
    """A reference cluster's objects: a node with two GPUs, one held by a running pod, and a pod
    whose claim wants the other (what tests/explain/test_cli.py explains)."""
    from drakit.conformance.explain.state import KINDS
    from tests.reference.helpers import DRIVER, claim, cluster, pod, standard
    c = standard(cluster(), devices=[{"name": "d0", "attributes": {"model": {"string": "a100"}}},
                                     {"name": "d1", "attributes": {"model": {"string": "h100"}}}])
    c.apply(claim("held"))
    c.apply(pod("holder", claim_name="held"))
    c.apply(claim("want", selectors=[{"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'a100'"}}]))
    c.apply(pod("p", claim_name="want"))
    return [o for k in KINDS for o in c.list(k)]


def _paths(value: object, path: tuple = ()):  # type: ignore[no-untyped-def]
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))


def test_an_explain_state_with_a_wrong_type_anywhere_is_one_line_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32: wrong types in a state file were an AttributeError or TypeError deep in the
    allocator (exit 3; 200 of 2,016 single-field changes of this state). Every field of every
    object replaced by a list (no ``.get``, unhashable; a top-level field by a number too): exit 0, 1 or 2, and a
    refusal is one line naming the file and the field."""
    import copy
    import yaml
    from tests.reference.helpers import NS
    objects = _explain_state(tmp_path)
    state = tmp_path / "state.yaml"
    for i, obj in enumerate(objects):
        for path in list(_paths(obj))[1:]:
            for bad in ([1],) if len(path) > 1 else ([1], 7):
                changed = copy.deepcopy(objects)
                target = changed[i]
                for part in path[:-1]:
                    target = target[part]
                target[path[-1]] = bad
                state.write_text(yaml.safe_dump_all(changed))
                code = cli.main(["explain", "pod", f"{NS}/p", "--state", str(state)])
                err = capsys.readouterr().err
                assert code in (0, 1, 2) and "drakit bug" not in err, (obj["kind"], path, err)
                if code == 2:
                    assert err.startswith(f"drakit explain: {state}: ") and err.count("\n") == 1, err


def test_an_explain_state_names_the_path_of_a_bad_status_field(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import yaml
    from tests.reference.helpers import NS
    objects = _explain_state(tmp_path)
    held = next(o for o in objects if o["kind"] == "ResourceClaim" and o["metadata"]["name"] == "held")
    held["status"]["allocation"]["devices"]["results"][0]["device"] = ["d0"]
    slices = next(o for o in objects if o["kind"] == "ResourceSlice")
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(objects))
    assert cli.main(["explain", "pod", f"{NS}/p", "--state", str(state)]) == 2
    n = objects.index(held) + 1
    assert capsys.readouterr().err == (f"drakit explain: {state}: document {n}: status.allocation.devices.results[0]"
                                       f".device: must be string, got list\n")
    held["status"]["allocation"]["devices"]["results"][0]["device"] = "d0"
    slices["spec"]["devices"][1] = "d1"
    state.write_text(yaml.safe_dump_all(objects))
    assert cli.main(["explain", "pod", f"{NS}/p", "--state", str(state)]) == 2
    assert capsys.readouterr().err == (f"drakit explain: {state}: ResourceSlice #{objects.index(slices) + 1} "
                                       f"({slices['metadata']['name']!r}): spec.devices[1]: must be an object, got string\n")


CASE = Path(__file__).resolve().parents[2] / "conformance" / "suites" / "core" / "node-side.case.yaml"


@pytest.mark.parametrize("name", ["results.json", "junit.xml", "report.html"])
def test_a_folder_where_run_writes_a_file_is_one_line_before_the_run(tmp_path: Path, name: str) -> None:
    """Issue 32: a folder named results.json in --out was found once the run was over (exit 3,
    IsADirectoryError); report.html or junit.xml after the cases had run."""
    import subprocess
    import sys
    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    got = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(CASE), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 2, got.stderr[-2000:]
    assert _one_line(got.stderr) == (f"drakit: --out {out}: {name} is a folder where drakit writes a file (drakit "
                                     f"never writes through a link or over a folder): remove it or choose another folder")
    assert got.stdout == "" and sorted(p.name for p in out.iterdir()) == [name], "nothing ran"


def test_report_and_compare_refuse_a_folder_where_they_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = Path(__file__).resolve().parents[1] / "fixtures" / "results" / "mixed.json"
    for argv, name in ((["report", str(results)], "report.html"), (["report", "--compare", str(results), str(results)],
                                                                  "compare.html")):
        out = tmp_path / name.split(".")[0]
        (out / name).mkdir(parents=True)
        assert cli.main([*argv, "--out", str(out)]) == 2
        assert _one_line(capsys.readouterr().err).startswith(f"drakit: --out {out}: {name} is a folder where drakit writes a file")


def _shell(command: str, tmp_path: Path, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys
    return subprocess.run(["bash", "-c", command.format(drakit=f"{sys.executable} -m drakit.conformance.cli")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "DRAKIT_CRASH_DIR": str(tmp_path / "crashes"), **(env or {})})


@pytest.mark.parametrize("redirect", [">&-", "2>&-", ">&- 2>&-", "1</dev/null"])
def test_a_closed_console_does_not_decide_the_run(tmp_path: Path, redirect: str) -> None:
    """Issue 32: ``drakit run >&-`` exited 3 ('NoneType' object has no attribute 'write'), and
    ``2>&-`` too (pytest asserts ``sys.__stderr__``), each with a crash file. Now the run runs and
    writes its three files; its exit code is its verdict (0 here), or 2 when stdout is open but
    cannot be written (``1</dev/null``: not open for writing), said on stderr."""
    from .inputs import VALID
    (tmp_path / "v.case.yaml").write_text(VALID)
    got = _shell(f"exec 3>rc; {{drakit}} run v.case.yaml --out out --plain {redirect}; echo $? >&3", tmp_path)
    code = int((tmp_path / "rc").read_text())
    assert code == (2 if redirect == "1</dev/null" else 0), got.stderr[-2000:]
    assert not (tmp_path / "crashes").exists() and "drakit bug" not in got.stderr, got.stderr[-2000:]
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"junit.xml", "report.html", "results.json"}
    if redirect == "1</dev/null":
        assert got.stderr.endswith("drakit: cannot write to standard output: Bad file descriptor\n"), got.stderr
    code = _shell(f"exec 3>rc; {{drakit}} features {redirect}; echo $? >&3", tmp_path)
    assert int((tmp_path / "rc").read_text()) == (2 if redirect == "1</dev/null" else 0)


def test_a_reader_that_goes_away_mid_run_does_not_stop_the_run(tmp_path: Path) -> None:
    """``drakit run -v | head -1``: the first line was read, the next write failed with EPIPE and
    the run died there (a crash file, no results). Now the console is given up, the cases run on
    and the three files are written; the exit code is the shell's for a reader gone (141)."""
    suite = Path(__file__).resolve().parents[2] / "conformance" / "suites" / "core"
    got = _shell(f"exec 3>rc; ({{drakit}} run {suite} -k exact-count --out out -v; echo $? >&3) | head -1", tmp_path)
    assert int((tmp_path / "rc").read_text()) == 141, got.stderr[-2000:]
    assert not (tmp_path / "crashes").exists() and got.stderr == "", got.stderr[-2000:]
    import json
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["summary"]["total"] >= 2 and results["verdict"]["result"] != "incomplete", results["verdict"]


def test_a_console_that_cannot_encode_a_character_shows_it_escaped(tmp_path: Path) -> None:
    """``PYTHONIOENCODING=ascii:strict`` and a case file named ``café☃.case.yaml`` whose case
    fails: a UnicodeEncodeError, exit 3. Now the characters are escaped on the console; the
    files are UTF-8."""
    from .inputs import VALID
    name = "caf\u00e9\u2603.case.yaml"
    (tmp_path / name).write_text(VALID.replace("title: ", "title: Caf\u00e9 ", 1).replace("notAllocated", "allocated"),
                                 encoding="utf-8")
    got = _shell(f"exec 3>rc; {{drakit}} run {name} --out out --plain -v; echo $? >&3", tmp_path,
                 env={"PYTHONIOENCODING": "ascii:strict", "LC_ALL": "C"})
    assert int((tmp_path / "rc").read_text()) == 1, got.stderr[-2000:]
    assert not (tmp_path / "crashes").exists() and "drakit bug" not in got.stderr, got.stderr[-2000:]
    assert "caf\\xe9\\u2603.case.yaml" in got.stdout, got.stdout[-3000:]
    import json
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert results["cases"][0]["file"].endswith(name)
    got = _shell(f"exec 3>rc; {{drakit}} lint {name}; echo $? >&3", tmp_path, env={"PYTHONIOENCODING": "ascii:strict"})
    assert int((tmp_path / "rc").read_text()) in (0, 2) and "drakit bug" not in got.stderr, got.stderr


PROFILE_V2 = (Path(__file__).resolve().parents[2] / "examples" / "upstream-test-driver-v2.yaml").read_text()


@pytest.mark.parametrize("program", ["missing", "folder", "not-executable", "command-missing", "command-folder",
                                     "on-path-missing", "runnable"])
def test_lint_says_when_the_plugin_program_cannot_run(tmp_path: Path, program: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32: ``drakit lint --vendor`` called a profile valid whose plugin binary was missing
    or a folder; the run found out once the cluster was up. The program is resolved as the run
    resolves it (``binary`` relative to the profile's folder, or the first word of ``command``
    with its placeholders filled in) and must be a regular file this user may execute."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    (tmp_path / "runnable").write_text("#!/bin/sh\n")
    (tmp_path / "runnable").chmod(0o755)
    first = '"{drakitBin}/dra-test-driver"'
    text = PROFILE_V2
    if program.startswith("command-"):
        text = text.replace(first, '"{profileDir}/' + program.removeprefix("command-") + '"')
    elif program == "on-path-missing":
        text = text.replace(first, '"no-such-dra-plugin-anywhere"')
    else:
        text = text.replace("  plugin:\n    command: [" + first, f"  plugin:\n    binary: ./{program}\n    command: [\"{{binary}}\"")
    profile = tmp_path / "vendor.yaml"
    profile.write_text(text)
    case = Path(__file__).resolve().parents[2] / "conformance" / "suites" / "core" / "node-side.case.yaml"
    code = cli.main(["lint", str(case), "--vendor", str(profile)])
    out = capsys.readouterr().out
    if program == "runnable":
        assert code == 0 and "is valid" in out, out
        return
    expected = {
        "missing": f"driverUnderTest.plugin.binary: ./missing ({tmp_path}/missing): no such program",
        "folder": f"driverUnderTest.plugin.binary: ./folder ({tmp_path}/folder): is a folder, not a program",
        "not-executable": f"driverUnderTest.plugin.binary: ./not-executable ({tmp_path}/not-executable): not executable (chmod +x)",
        "command-missing": f"driverUnderTest.plugin.command[0]: {{profileDir}}/missing ({tmp_path}/missing): no such program",
        "command-folder": f"driverUnderTest.plugin.command[0]: {{profileDir}}/folder ({tmp_path}/folder): is a folder, not a program",
        "on-path-missing": "driverUnderTest.plugin.command[0]: no-such-dra-plugin-anywhere: no such program on PATH",
    }[program]
    assert code == 2 and out.splitlines() == [f"{profile}: {expected}", "vendor profile: 1 error"], out


def test_a_signal_while_drakit_imports_its_modules_still_writes_the_run(tmp_path: Path) -> None:
    """Issue 32: SIGTERM 0.1 s after ``drakit run`` started exited 143 with nothing written: drakit
    handled signals only once its modules were imported (0.2-0.5 s on a loaded machine). Now the
    first thing the command's module does is note a signal; main() hands it on. Made certain
    here: the signal comes right after that module is imported, before main() runs."""
    import json
    import signal
    import subprocess
    import sys
    out = tmp_path / "out"
    script = ("import os, signal, sys\n"
              f"sys.argv = ['drakit', 'run', {str(CASE)!r}, '--out', {str(out)!r}]\n"
              "from drakit.conformance.cli import main\n"
              "os.kill(os.getpid(), signal.SIGTERM)\n"
              "sys.exit(main())\n")
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert got.returncode == 128 + signal.SIGTERM, got.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"]["result"] == "incomplete"
    (reason,) = [r for r in results["verdict"]["reasons"] if r["code"] == "interrupted"]
    assert reason["signal"] == "SIGTERM" and reason["phase"] == "start-up" and reason["count"] == 2, reason
    assert (out / "junit.xml").exists() and (out / "report.html").exists()


def test_a_run_killed_where_it_cannot_write_leaves_an_unfinished_run_not_the_last_one(tmp_path: Path) -> None:
    """Before: a run removed results.json as it started and wrote the three files at its end; one
    SIGKILLed meanwhile left nothing, or the previous run's junit.xml and report.html (PASS)
    standing for it. Now the three files are written as the run starts (verdict incomplete,
    reason ``unfinished``), and replaced at its end."""
    import json
    import signal
    import subprocess
    import sys
    import time
    out = tmp_path / "out"
    first = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(CASE), "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0 and "PASS" in (out / "report.html").read_text(), first.stderr[-2000:]
    before = (out / "results.json").stat().st_mtime_ns
    run = subprocess.Popen([sys.executable, "-m", "drakit.conformance.cli", "run", str(CASE), "--out", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and run.poll() is None:
            path = out / "results.json"
            if path.exists() and path.stat().st_mtime_ns != before:
                break
            time.sleep(0.005)
        run.send_signal(signal.SIGKILL)
    finally:
        run.wait()
    results = json.loads((out / "results.json").read_text())
    if results["summary"]["total"]:  # the run was quicker than this test: it finished whole
        pytest.fail("the run wrote its results before it was killed; no unfinished state was seen")
    assert results["verdict"]["result"] == "incomplete"
    assert [r["code"] for r in results["verdict"]["reasons"]][-1] == "unfinished", results["verdict"]
    html, junit = (out / "report.html").read_text(), (out / "junit.xml").read_text()
    assert "INCOMPLETE" in html and "has not written its results" in html
    assert 'tests="0"' in junit


def test_names_with_control_characters_never_forge_a_console_line(tmp_path: Path) -> None:
    """Issue 32: a case file named ``a\\nPASSED fake-case.case.yaml`` printed a forged
    ``PASSED`` line (in the failure's ``at`` line and its ``rerun`` command), and an ``--out``
    with a newline split ``drakit: wrote``. Every name the console shows is escaped by one rule
    (``drakit.reports.names.clean_name``); the rerun command quotes the name as bash's ``$'...'``,
    one line that still names the file: run as printed, it runs that case again."""
    import re
    import subprocess
    import sys
    from .inputs import VALID
    cases = tmp_path / "cases"
    cases.mkdir()
    forged = "a\nPASSED fake-case\x07\x1b(B\u202e.case.yaml"  # no [...]: pytest refuses such a path
    (cases / forged).write_text(VALID.replace("notAllocated", "allocated"))
    (cases / "b\rbad.case.yaml").write_text("id: [unclosed\n")
    refused = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(cases), "--out",
                              str(tmp_path / "o\nut")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert refused.returncode == 2 and not (tmp_path / "o\nut").exists(), refused.stderr  # a name with a newline
    assert len(refused.stderr.splitlines()) == 1 and "o\\nut" in refused.stderr, refused.stderr  # said escaped
    out = tmp_path / "out"
    got = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(cases), "--out", str(out), "-v"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert got.returncode == 2, got.stderr[-2000:]  # a case file did not load
    console = got.stdout + got.stderr
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f\u202e]", console), "a raw control character reached the console"
    assert not [line for line in console.splitlines() if line.startswith(("PASSED fake", "bad.case"))], console
    assert "at a\\x0aPASSED fake-case\\x07\\x1b(B\\u202e.case.yaml:14 (hostile/valid)" in got.stdout
    assert f"drakit: wrote {tmp_path}/out/results.json" in got.stdout
    (rerun,) = [line.split("rerun: ", 1)[1] for line in got.stdout.splitlines() if "rerun: drakit run $'cases/a" in line]
    assert rerun.startswith("drakit run $'cases/a\\x0aPASSED fake-case\\x07\\x1b(B\\u202e.case.yaml' -k ")
    again = subprocess.run(["bash", "-c", rerun.replace("drakit run", f"{sys.executable} -m drakit.conformance.cli run", 1)
                            + f" --out {tmp_path}/again -q"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 1 and "1 cases: 0 passed, 1 failed" in again.stdout, again.stdout + again.stderr


def test_a_typed_name_with_a_newline_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    state = Path(__file__).resolve().parents[2] / "examples" / "explain-state.yaml"
    assert cli.main(["explain", "pod", "ns/a\nFAKE", "--state", str(state)]) == 2
    assert capsys.readouterr().err == f"drakit explain: pod ns/a\\x0aFAKE not found in {state}\n"


def test_the_pure_core_escapes_names_as_the_console_does() -> None:
    from drakit.conformance.errors import visible
    from drakit.reports.names import clean_name
    every = "".join(map(chr, range(0x3000))) + "".join(map(chr, range(0xD7F0, 0xE010))) + "\ufeff\U0001f600"
    assert visible(every) == clean_name(every)
    assert "\n" not in clean_name(every) and "\x1b" not in clean_name(every) and "\u2028" not in clean_name(every)


def test_fuzz_findings_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What tests/hostile/test_fuzz_inputs.py found, each exit 3 before: an explain state that is
    not UTF-8; a node-check claim whose allocation results hold a null."""
    state = tmp_path / "state.yaml"
    state.write_bytes(b"\x80- kind: Pod\n")
    assert cli.main(["explain", "pod", "demo/p", "--state", str(state)]) == 2
    assert capsys.readouterr().err == f"drakit explain: {state}: not UTF-8 text: invalid start byte at byte 0\n"
    import json
    from drakit.fake_driver.sampleclaims import sample_claims
    from drakit.fake_hw.inventory import build_inventory
    claims = sample_claims(build_inventory("small-1gpu", "node-a"), "gpu.acme.example.com")
    claims[0]["status"]["allocation"]["devices"]["results"][0] = None
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(claims))
    (tmp_path / "reg").mkdir()
    assert cli.main(["node-check", "--registry-dir", str(tmp_path / "reg"), "--driver", "gpu.acme.example.com",
                     "--claims", str(path)]) == 2
    assert capsys.readouterr().err == (f"drakit node-check: {path}: ResourceClaim #1: status.allocation.devices."
                                       f"results[0]: must be object, got null\n")
