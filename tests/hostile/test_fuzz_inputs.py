"""Fuzzing every input reader and the command line (issue 32 §6): whatever a file holds and
whatever the arguments are, a command ends with exit 0, 1 or 2, one line for a refusal, never
a traceback and never exit 3 ("a bug in drakit").

The readers, each through its real entry point (``drakit.conformance.cli.main``, in-process):
vendor profiles (``lint --vendor``), hardware shapes (``driver sample-claims --hardware``),
explain states (``explain pod --state``), results files (``report``, ``report --compare``,
``report --merge``), node-check claims (``node-check --claims``), and the command line itself
(every subcommand's parser; ``run``'s option checks; the commands that only read files, run).
Case files have their own fuzz test (test_fuzz_loader.py). Inputs are of three kinds: a valid
document with one to three fields replaced by random JSON data (or removed), random JSON data
dumped as YAML or JSON, and the valid document's text with bytes inserted, cut or repeated.

Budget: the hypothesis settings profile ``drakit-fuzz-ci``, derandomised (CI runs the same
examples every time), sized to keep this file near 30 s on 2 cores. ``DRAKIT_FUZZ_EXAMPLES=N``
switches to ``drakit-fuzz-local``: N examples per test, randomised, to explore further.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drakit.conformance import cli

ROOT = Path(__file__).resolve().parents[2]
settings.register_profile("drakit-fuzz-ci", max_examples=40, derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much])
settings.register_profile("drakit-fuzz-local", parent=settings.get_profile("drakit-fuzz-ci"), derandomize=False,
                          max_examples=int(os.environ.get("DRAKIT_FUZZ_EXAMPLES") or 1))
PROFILE = settings.get_profile("drakit-fuzz-local" if os.environ.get("DRAKIT_FUZZ_EXAMPLES") else "drakit-fuzz-ci")


def budget(ci_examples: int) -> settings:
    """The profile, with this test's CI share of the budget (its cost per example differs)."""
    if os.environ.get("DRAKIT_FUZZ_EXAMPLES"):
        return settings(PROFILE)
    return settings(PROFILE, max_examples=ci_examples)


# -- what the inputs are made of ----------------------------------------------------------------

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12) | st.sampled_from([
    "", " ", "a\nb", "\x1b[31m", "\u202e", "${class.gpu}", "{node}", "{binary}", "../x", "/", "-1", "0", "1e999",
    "NaN", "Infinity", "9" * 40, "1Gi", "10m", "v1", "resource.k8s.io/v1", "Pod", "ResourceClaim", "node-a",
    "gpu.acme.example.com", "default", "true", "pass", "incomplete", "reference", "2026-01-01T00:00:00Z"])
SCALAR = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True, allow_infinity=True)
          | TEXT)
JSON = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=20)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, path + (i,))
    return out


@st.composite
def changed(draw: st.DrawFn, seed: Any) -> Any:
    """*seed* with one to three fields replaced by random data, removed, or repeated."""
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            return draw(JSON)
        path = draw(st.sampled_from(paths))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        how = draw(st.sampled_from(("replace", "replace", "remove", "repeat")))
        if how == "remove":
            del parent[path[-1]]
        elif how == "repeat" and isinstance(parent, list):
            parent.insert(path[-1], copy.deepcopy(parent[path[-1]]))
        else:
            parent[path[-1]] = draw(JSON)
    return doc


def _mangled(draw: st.DrawFn, text: str) -> bytes:
    data = text.encode()
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(("insert", "cut", "repeat")))
        if how == "insert":
            data = data[:at] + draw(st.binary(max_size=6) | st.sampled_from([b"\xff", b"\xc3", b": ", b"- ", b"{", b"[",
                                                                             b"*a", b"&a ", b"\t", b"\r\n"])) + data[at:]
        elif how == "cut":
            data = data[:at] + data[at + draw(st.integers(1, 60)):]
        else:
            data = data[:at] + data[at:at + draw(st.integers(1, 40))] * draw(st.integers(2, 20)) + data[at:]
    return data


@st.composite
def documents(draw: st.DrawFn, seed: Any, form: str) -> bytes:
    """A file's bytes: the seed changed, random data, or the seed's text mangled; as YAML or JSON."""
    kind = draw(st.sampled_from(("changed", "changed", "random", "mangled")))
    value = draw(changed(seed)) if kind == "changed" else draw(JSON) if kind == "random" else seed
    as_json = form == "json" or draw(st.booleans()) and form == "either"

    def dump(v: Any) -> str:
        try:
            return json.dumps(v, indent=1) if as_json else yaml.safe_dump(v, sort_keys=False, allow_unicode=True)
        except (ValueError, yaml.YAMLError):
            return json.dumps(v)
    text = dump(value)
    return _mangled(draw, text) if kind == "mangled" else text.encode()


# -- running a command and judging its end -------------------------------------------------------

def drakit(argv: list[str], folder: Path) -> tuple[int, str, str]:
    """``drakit ARGV`` in this process; its exit code, stdout and stderr. A crash file would go
    to *folder* (none may appear)."""
    out, err = io.StringIO(), io.StringIO()
    previous = os.environ.get("DRAKIT_CRASH_DIR")
    os.environ["DRAKIT_CRASH_DIR"] = str(folder / "crashes")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(argv)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        if previous is None:
            os.environ.pop("DRAKIT_CRASH_DIR", None)
        else:
            os.environ["DRAKIT_CRASH_DIR"] = previous
    return code, out.getvalue(), err.getvalue()


def judged(argv: list[str], folder: Path, what: str) -> tuple[int, str, str]:
    code, out, err = drakit(argv, folder)
    said = out + err
    assert code in (0, 1, 2), f"{what}: exit {code}: {said[-1500:]}"
    assert "Traceback" not in said and "drakit bug" not in said, f"{what}: {said[-1500:]}"
    assert not (folder / "crashes").exists(), f"{what}: a crash file was written"
    if code == 2:
        assert said.strip(), f"{what}: exit 2 with nothing said"
    return code, out, err


def in_folder(test: Callable[[Path], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="drakit-fuzz-") as tmp:
        test(Path(tmp))


# -- the readers ---------------------------------------------------------------------------------

VENDOR = yaml.safe_load((ROOT / "examples" / "vendor-example.yaml").read_text())
UPSTREAM = yaml.safe_load((ROOT / "examples" / "upstream-test-driver-v2.yaml").read_text())
SHAPE = yaml.safe_load((ROOT / "fake_hw" / "profiles" / "acme-partitionable.yaml").read_text())
STATE = list(yaml.safe_load_all((ROOT / "examples" / "explain-state.yaml").read_text()))
RESULTS = json.loads((ROOT / "tests" / "fixtures" / "results" / "mixed.json").read_text())
CASE = str(ROOT / "conformance" / "suites" / "core" / "node-side.case.yaml")


def _claims() -> list[Any]:
    from drakit.fake_driver.sampleclaims import sample_claims
    from drakit.fake_hw.inventory import build_inventory
    return sample_claims(build_inventory("small-1gpu", "node-a"), "gpu.acme.example.com")


CLAIMS = _claims()


@budget(40)
@given(st.sampled_from([VENDOR, UPSTREAM]).flatmap(lambda seed: documents(seed, "yaml")))
def test_vendor_profiles(data: bytes) -> None:
    def check(tmp: Path) -> None:
        (tmp / "vendor.yaml").write_bytes(data)
        judged(["lint", CASE, "--vendor", str(tmp / "vendor.yaml")], tmp, "lint --vendor")
    in_folder(check)


@budget(40)
@given(documents(SHAPE, "yaml"))
def test_hardware_shapes(data: bytes) -> None:
    def check(tmp: Path) -> None:
        (tmp / "shape.yaml").write_bytes(data)
        judged(["driver", "sample-claims", "--driver", "gpu.acme.example.com", "--node", "node-a",
                "--hardware", str(tmp / "shape.yaml"), "--out", str(tmp / "claims.json")], tmp, "sample-claims --hardware")
    in_folder(check)


@st.composite
def states(draw: st.DrawFn) -> bytes:
    """A state file: one object of the example's state changed (or all of it random)."""
    docs = copy.deepcopy(STATE)
    if draw(st.integers(0, 9)) == 0:
        return draw(documents(STATE, "yaml"))
    i = draw(st.integers(0, len(docs) - 1))
    docs[i] = draw(changed(docs[i]))
    text = yaml.safe_dump_all(docs, sort_keys=False)
    return _mangled(draw, text) if draw(st.integers(0, 4)) == 0 else text.encode()


@budget(60)
@given(states(), st.sampled_from(["pod", "claim"]))
def test_explain_states(data: bytes, what: str) -> None:
    def check(tmp: Path) -> None:
        (tmp / "state.yaml").write_bytes(data)
        name = "demo/trainer" if what == "pod" else "demo/trainer-gpu"
        judged(["explain", what, name, "--state", str(tmp / "state.yaml")], tmp, "explain --state")
        judged(["explain", what, name, "--state", str(tmp / "state.yaml"), "-o", "json", "--all"], tmp, "explain -o json")
    in_folder(check)


@budget(40)
@given(documents(RESULTS, "json"), st.sampled_from(["report", "compare", "merge"]))
def test_results_files(data: bytes, how: str) -> None:
    def check(tmp: Path) -> None:
        results = tmp / "results.json"
        results.write_bytes(data)
        good = tmp / "good.json"
        good.write_text(json.dumps(RESULTS))
        argv = {"report": ["report", str(results), "--out", str(tmp / "out")],
                "compare": ["report", "--compare", str(good), str(results), "--out", str(tmp / "out")],
                "merge": ["report", str(good), "--merge", str(results), "--out", str(tmp / "out")]}[how]
        judged(argv, tmp, f"report ({how})")
    in_folder(check)


@budget(30)
@given(documents(CLAIMS, "either"), st.sampled_from([".json", ".yaml"]))
def test_node_check_claims(data: bytes, suffix: str) -> None:
    def check(tmp: Path) -> None:
        claims = tmp / f"claims{suffix}"
        claims.write_bytes(data)
        (tmp / "registry").mkdir()
        judged(["node-check", "--registry-dir", str(tmp / "registry"), "--driver", "gpu.acme.example.com",
                "--claims", str(claims), "--timeout", "0.05", "--cdi-dir", str(tmp / "cdi")], tmp, "node-check --claims")
    in_folder(check)


# -- the command line -----------------------------------------------------------------------------

def _options() -> dict[str, list[str]]:
    """Every subcommand (and sub-subcommand) with its option strings, read from the parser."""
    import argparse
    out: dict[str, list[str]] = {}

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if words:
            out[" ".join(words)] = [o for a in parser._actions for o in a.option_strings]
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, words + (name,))
    walk(cli._parser(), ())
    return out


OPTIONS = _options()
#: what runs in this process: commands that only read files and write below the test's folder
SAFE = {"lint", "report", "features", "explain", "node-check", "driver sample-claims"}
#: options that reach a cluster, or wait for one: parsed, never run
REMOTE = {"--kubeconfig", "--context", "--in-cluster"}


@st.composite
def command_lines(draw: st.DrawFn, folder: str) -> list[str]:
    command = draw(st.sampled_from(sorted(OPTIONS)))
    values = st.sampled_from([f"{folder}/{n}" for n in ("case.yaml", "results.json", "state.yaml", "vendor.yaml",
                                                        "empty", "dir", "missing", "binary")]
                             + ["auto", "0", "-1", "nan", "inf", "1e999", "4MiB", "2/3", "0/0", "x=y", "A=true,B",
                                "demo/trainer", "pod", "claim", "json", "text", "reference", "cluster,reference", ""])
    values = values | TEXT.filter(lambda t: "\x00" not in t)
    argv = command.split()
    for _ in range(draw(st.integers(0, 5))):
        option = draw(st.sampled_from(OPTIONS[command] or ["--help"]) | st.just("--no-such-option"))
        argv.append(option)
        if draw(st.integers(0, 3)):
            argv.append(draw(values))
    for _ in range(draw(st.integers(0, 2))):
        argv.append(draw(values))
    return argv


def _files(tmp: Path) -> None:
    (tmp / "case.yaml").write_text(Path(CASE).read_text())
    (tmp / "results.json").write_text(json.dumps(RESULTS))
    (tmp / "state.yaml").write_text(yaml.safe_dump_all(STATE))
    (tmp / "vendor.yaml").write_text(yaml.safe_dump(VENDOR))
    (tmp / "empty").write_text("")
    (tmp / "dir").mkdir()
    (tmp / "binary").write_bytes(bytes(range(256)) * 4)


@budget(120)
@given(st.data())
def test_command_lines(data: st.DataObject) -> None:
    """Every subcommand's parser on random options and values: it parses (or refuses, exit 2); a
    ``run`` command line goes through the checks drakit makes before it starts pytest; the
    commands that only read files run."""
    def check(tmp: Path) -> None:
        _files(tmp)
        argv = data.draw(command_lines(str(tmp)))
        command = " ".join(w for w in argv[:2] if not w.startswith("-") and " ".join(argv[:2]) in OPTIONS) or argv[0]
        if argv[0] == "run":
            parsed = _parsed(argv)
            if parsed is not None:
                with contextlib.redirect_stderr(io.StringIO()):
                    problem = cli._check_run_options(parsed)
                assert problem is None or "\n" not in problem, problem
            return
        runs = (command in SAFE or argv[0] in SAFE) and not REMOTE & set(argv)
        if argv[0] == "explain" and "--state" not in argv:
            runs = False  # a live cluster
        if argv[0] == "report" and "--out" not in argv:
            argv += ["--out", str(tmp / "out")]
        if runs:
            judged(argv + (["--out", str(tmp / "nc")] if argv[0] == "node-check" and "--out" not in argv else []),
                   tmp, " ".join(argv))
        else:
            _parsed(argv)
    in_folder(check)


def _parsed(argv: list[str]) -> Any:
    """The parsed arguments, or None when argparse refused them (exit 2; --help: exit 0)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            return cli._parser().parse_args(argv)
        except SystemExit as exc:
            assert exc.code in (0, 2), argv
            return None


def test_the_ci_budget_is_derandomised() -> None:
    """CI runs the same examples every time (a failure there is reproducible), and a local run
    with DRAKIT_FUZZ_EXAMPLES explores new ones."""
    ci = settings.get_profile("drakit-fuzz-ci")
    assert ci.derandomize and ci.database is None and ci.deadline is None
    assert not settings.get_profile("drakit-fuzz-local").derandomize
