"""Every file drakit takes from a user is bounded before it is read (issue 32, sections 3 and 4).

Each kind of input (case files, a shape a case names, vendor profiles, sample-claims hardware,
explain states and claim files, results files for report / --merge / --compare, node-check and
node-agent claims, kubeconfigs) is given a FIFO, ``/dev/zero``, a folder, a 2 GiB file and (for
YAML) a billion-laughs document, through the real commands. Each must be one line naming the
file and why, exit 2, at once: never a hang (a FIFO blocked the open itself), never memory
without bound (``/dev/zero`` was read to 22.8 GiB).

All command lines run in one interpreter (``batch.py``) under a 1 GiB address-space limit, each
stopped after :data:`ALARM` seconds, the whole process after :data:`TIMEOUT`: without the fix a
row fails (a hang, a MemoryError's drakit-bug line), it does not hang the suite.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from . import corpus, inputs

ALARM = 20.0  # seconds a command may take (a refusal takes milliseconds; a run of one case about two)
TIMEOUT = 600  # the whole batch
HUGE = 2 << 30  # a sparse file: no disk, over every size limit

FIFO = r"not a regular file \(a FIFO"
DEVICE = r"not a regular file \(a character device"
FOLDER = r"not a regular file \(a folder"
OVER = r"the file is 2 GiB, over the [a-z-]+ size limit of \d+ MiB"
BOMB = r"aliases expand to more than 100,000 nodes"

# kind -> (file name, argv ({f}: the hostile file, {d}: the row's folder, {valid}: a valid case,
# {results}: a valid results.json, {state}: a valid explain state), the classes given to it)
YAML_CLASSES = ("fifo", "dev-zero", "folder", "huge", "bomb")
KINDS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "case-lint": ("x.case.yaml", ("lint", "{f}"), ("fifo", "dev-zero", "huge", "bomb")),  # a folder: of case files
    "case-run": ("x.case.yaml", ("run", "{f}", "--out", "{d}/out", "--plain"), ("fifo", "dev-zero")),
    "case-shape": ("shape.yaml", ("lint", "{d}/uses-shape.case.yaml"), YAML_CLASSES),
    "profile": ("vendor.yaml", ("lint", "{valid}", "--vendor", "{f}"), YAML_CLASSES),
    "sample-claims-hardware": ("shape.yaml", ("driver", "sample-claims", "--driver", "gpu.acme.example.com",
                                              "--node", "n1", "--hardware", "{f}"), YAML_CLASSES),
    "explain-state": ("state.yaml", ("explain", "pod", "default/p", "--state", "{f}"), YAML_CLASSES),
    "explain-claim": ("claim.yaml", ("explain", "-f", "{f}", "--state", "{state}"), YAML_CLASSES),
    "report": ("r.json", ("report", "{f}", "--out", "{d}/out"), ("fifo", "dev-zero", "folder", "huge")),
    "report-merge-cases": ("m.json", ("report", "{results}", "--merge", "{f}", "--out", "{d}/out"),
                           ("fifo", "dev-zero", "huge")),
    "report-merge-shards": ("s.json", ("report", "--merge", "{f}", "--out", "{d}/out"), ("fifo", "dev-zero", "huge")),
    "report-compare": ("new.json", ("report", "--compare", "{results}", "{f}", "--out", "{d}/out"),
                       ("fifo", "dev-zero", "huge")),
    "node-check-claims": ("claims.yaml", ("node-check", "--registry-dir", "{d}", "--driver", "gpu.acme.example.com",
                                          "--claims", "{f}"), YAML_CLASSES),
    "node-agent-claims": ("claims.yaml", ("node-agent", "--registry-dir", "{d}/r", "--node", "n1", "--state-dir",
                                          "{d}/s", "--driver-wait", "0", "--prepare", "{f}"), ("fifo", "dev-zero", "huge")),
    "kubeconfig-explain": ("kubeconfig", ("explain", "pod", "default/p", "--kubeconfig", "{f}"), YAML_CLASSES),
    "kubeconfig-run": ("kubeconfig", ("run", "{valid}", "--backend", "cluster", "--out", "{d}/out", "--kubeconfig", "{f}"),
                       ("fifo", "dev-zero")),
    "kubeconfig-driver": ("kubeconfig", ("driver", "controller", "--kubeconfig", "{f}"), ("fifo", "dev-zero", "bomb")),
}
REASONS = {"fifo": FIFO, "dev-zero": DEVICE, "folder": FOLDER, "huge": OVER, "bomb": BOMB}

MIXED = Path(__file__).parents[1] / "fixtures" / "results" / "mixed.json"


def _results_text(change: Callable[[dict[str, Any]], None]) -> str:
    doc = json.loads(inputs.VALID_RESULTS)
    change(doc)
    return json.dumps(doc)


def _timeline(seconds: float) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["run"]["wallSeconds"] = seconds
        doc["cases"][0]["timeline"] = {"worker": "main", "call": [0, seconds]}
    return change


def _backwards(doc: dict[str, Any]) -> None:
    doc["cases"][0]["timeline"] = {"worker": "main", "call": [5, 1]}


def _negative(doc: dict[str, Any]) -> None:
    doc["cases"][0]["durationSeconds"] = -1


KUBECONFIG_NAMING = """\
apiVersion: v1
kind: Config
current-context: x
clusters: [{{name: x, cluster: {{server: "https://127.0.0.1:1"}}}}]
users: [{{name: x, user: {{tokenFile: {token}}}}}]
contexts: [{{name: x, context: {{cluster: x, user: x}}}}]
"""

DUPLICATE_VERDICT = inputs.VALID_RESULTS.rstrip().removesuffix("}") + ', "verdict": {"result": "pass", "rule": "r"}}'

# results files whose numbers or keys no run writes: (name, text, the line)
RESULTS_ROWS = (
    ("durations-1e300", _results_text(_timeline(1e300)), r"\$\.run\.wallSeconds: 1e\+300 is greater than the maximum of 1000000000"),
    ("timeline-backwards", _results_text(_backwards), r"\$\.cases\[0\]\.timeline\.call: ends \(1\) before it starts \(5\)"),
    ("duration-negative", _results_text(_negative), r"\$\.cases\[0\]\.durationSeconds: -1 is less than the minimum of 0"),
    ("duplicate-verdict-key", DUPLICATE_VERDICT, r"duplicate key 'verdict' in one object: not a drakit results file"),
)


def _make(kind: str, cls: str, folder: Path) -> str:
    """The hostile file of *cls* for *kind* in *folder*; the path the command is given."""
    name = KINDS[kind][0]
    path = folder / name
    if cls == "dev-zero":
        if kind != "case-lint" and kind != "case-run":
            return "/dev/zero"
        path.symlink_to("/dev/zero")  # a case file is found by its name
    elif cls == "fifo":
        os.mkfifo(path)
    elif cls == "folder":
        path.mkdir()
    elif cls == "huge":
        with open(path, "wb") as f:
            f.truncate(HUGE)
    elif cls == "bomb":
        path.write_text(("id: hostile/bomb\n" if kind == "case-lint" else "") + inputs.bomb(), encoding="utf-8")
    return str(path)


ROWS = [(kind, cls) for kind, (_n, _a, classes) in KINDS.items() for cls in classes]


def _row_dir(root: Path, name: str) -> Path:
    return root / "rows" / name


def _build(root: Path) -> tuple[list[list[str]], dict[str, str]]:
    valid = root / "a-valid.case.yaml"
    valid.write_text(inputs.VALID, encoding="utf-8")
    results = root / "results.json"
    results.write_text(inputs.VALID_RESULTS, encoding="utf-8")
    state = root / "state.json"
    state.write_text(json.dumps({"schema": "drakit.explain.state/v1", "items": []}), encoding="utf-8")
    argvs: list[list[str]] = []
    files: dict[str, str] = {}
    for kind, cls in ROWS:
        d = _row_dir(root, f"{kind}-{cls}")
        d.mkdir(parents=True)
        f = _make(kind, cls, d)
        files[f"{kind}-{cls}"] = f
        if kind == "case-shape":
            (d / "uses-shape.case.yaml").write_text(inputs.VALID.replace("shape: small-1gpu", f"shape: {f}"), encoding="utf-8")
        fill = {"{f}": f, "{d}": str(d), "{valid}": str(valid), "{results}": str(results), "{state}": str(state)}
        argv = []
        for arg in KINDS[kind][1]:
            for key, value in fill.items():
                arg = arg.replace(key, value)
            argv.append(arg)
        argvs.append(argv)
    for name, text, _line in RESULTS_ROWS:
        d = _row_dir(root, name)
        d.mkdir(parents=True)
        (d / "r.json").write_text(text, encoding="utf-8")
        argvs.append(["report", str(d / "r.json"), "--out", str(d / "out")])
    d = _row_dir(root, "verdict-edited")
    d.mkdir(parents=True)
    mixed = json.loads(MIXED.read_text(encoding="utf-8"))
    mixed["verdict"] = {"result": "pass", "rule": mixed["verdict"]["rule"], "reasons": []}
    (d / "r.json").write_text(json.dumps(mixed), encoding="utf-8")
    argvs.append(["report", str(d / "r.json"), "--out", str(d / "out")])
    argvs.append(["report", "--compare", str(results), str(d / "r.json"), "--out", str(d / "compare")])
    d = _row_dir(root, "kubeconfig-names-huge")
    d.mkdir(parents=True)
    with open(d / "token", "wb") as f:  # the client reads a token file whole when it loads the kubeconfig
        f.truncate(HUGE)
    (d / "kubeconfig").write_text(KUBECONFIG_NAMING.format(token="token"), encoding="utf-8")
    argvs.append(["explain", "pod", "default/p", "--kubeconfig", str(d / "kubeconfig")])
    argvs.append(["driver", "controller", "--kubeconfig", str(d / "kubeconfig")])
    return argvs, files


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("readers")
    argvs, files = _build(root)
    env = {**os.environ, "MALLOC_ARENA_MAX": "2", "PYTHONPATH": str(corpus.REPO), "NO_COLOR": "1",
           "HOME": str(root), "TMPDIR": str(root), "DRAKIT_CRASH_DIR": str(root / "crashes")}
    env.pop("KUBECONFIG", None)
    # the child limits its own address space first thing (batch.py --limit-bytes: no preexec_fn, this
    # process may have threads)
    proc = subprocess.run([sys.executable, str(corpus.BATCH), "--limit-bytes", str(corpus.LIMIT_BYTES), "--alarm", str(ALARM)],
                          input=json.dumps(argvs), capture_output=True, text=True, cwd=root, env=env, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    results = [r for r in lines if "argv" in r]
    names = ([f"{k}-{c}" for k, c in ROWS] + [n for n, _t, _l in RESULTS_ROWS]
             + ["verdict-edited", "verdict-edited-compare", "kubeconfig-names-huge", "driver-kubeconfig-names-huge"])
    return {"root": root, "files": files, "rows": dict(zip(names, results)),
            "maxrss_kib": next(r["maxrss_kib"] for r in lines if "maxrss_kib" in r)}


def _text(result: dict[str, Any]) -> str:
    return result["out"] + result["err"]


def _clean(result: dict[str, Any]) -> str:
    text = _text(result)
    assert "Traceback (most recent call last)" not in text and "drakit bug" not in text, text[-3000:]
    return text


@pytest.mark.parametrize(("kind", "cls"), ROWS, ids=[f"{k}-{c}" for k, c in ROWS])
def test_a_hostile_file_is_one_line_naming_it_and_exit_2(outcome: dict[str, Any], kind: str, cls: str) -> None:
    result = outcome["rows"][f"{kind}-{cls}"]
    text = _clean(result)
    assert result["code"] == 2, f"exit {result['code']}:\n{text[-3000:]}"
    path = outcome["files"][f"{kind}-{cls}"]
    if kind == "case-run":  # a run names its files from the folder it was given
        path = Path(path).name
    want = re.escape(path) + r"\S*:? .*" + REASONS[cls]
    hits = [line for line in text.splitlines() if re.search(want, line)]
    assert hits, f"no line like {want!r} in:\n{text[-3000:]}"
    assert result["seconds"] < ALARM


def test_memory_stayed_bounded(outcome: dict[str, Any]) -> None:
    """Every row ran in one process under a 1 GiB address-space limit (a MemoryError would be a
    drakit-bug line above); this is its peak RSS."""
    assert 0 < outcome["maxrss_kib"] < corpus.LIMIT_BYTES >> 10


@pytest.mark.parametrize(("name", "line"), [(n, line) for n, _t, line in RESULTS_ROWS], ids=[n for n, _t, _l in RESULTS_ROWS])
def test_numbers_and_keys_of_a_results_file_are_checked_when_it_is_read(outcome: dict[str, Any], name: str, line: str) -> None:
    result = outcome["rows"][name]
    text = _clean(result)
    assert result["code"] == 2, text[-3000:]
    path = str(_row_dir(outcome["root"], name) / "r.json")
    assert re.search(re.escape(path) + r"(:\d+:\d+)?: " + line, text), text[-3000:]


def test_an_edited_verdict_is_recomputed_from_the_cases_and_said_so(outcome: dict[str, Any]) -> None:
    """A results file edited to say PASS above failed cases: the page says FAIL, and one line
    (console and page) says the stored verdict was not what the cases give."""
    result = outcome["rows"]["verdict-edited"]
    text = _clean(result)
    assert result["code"] == 0, text
    path = _row_dir(outcome["root"], "verdict-edited") / "r.json"
    notes = [line for line in result["err"].splitlines() if "says PASS but its cases say FAIL" in line]
    assert notes == [f"drakit report: {path} says PASS but its cases say FAIL: the verdict shown is recomputed "
                     f"from the cases"], result["err"]
    page = (path.parent / "out" / "report.html").read_text(encoding="utf-8")
    assert "Verdict: FAIL" in page and "Verdict: PASS" not in page
    assert "the results file says PASS, but its cases say FAIL" in page
    compared = outcome["rows"]["verdict-edited-compare"]  # --compare says it too, and compares the recomputed one
    assert [line for line in compared["err"].splitlines() if "says PASS but its cases say FAIL" in line], compared["err"]


def test_a_file_a_kubeconfig_names_is_checked_before_the_client_reads_it(outcome: dict[str, Any]) -> None:
    """A 2 GiB token file: the client read it whole (memory); now one line naming it, exit 2."""
    result = outcome["rows"]["kubeconfig-names-huge"]
    text = _clean(result)
    assert result["code"] == 2, text
    kubeconfig = _row_dir(outcome["root"], "kubeconfig-names-huge") / "kubeconfig"
    over = f"{kubeconfig.parent}/token: the file is 2 GiB, over the kubeconfig size limit of 16 MiB"
    assert f"drakit explain: kubeconfig {kubeconfig}: tokenFile {over}" in text.splitlines(), text
    result = outcome["rows"]["driver-kubeconfig-names-huge"]  # the fake driver's own client
    text = _clean(result)
    assert result["code"] == 2, text
    assert f"drakit driver controller: cannot load kubeconfig {kubeconfig}: tokenFile {over}" in text.splitlines(), text


# -- the reader itself ---------------------------------------------------------------------------

def test_a_fifo_put_in_place_after_the_check_is_refused_without_blocking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """stat said regular (the file was swapped for a FIFO between the check and the open): the
    open does not block (O_NONBLOCK) and fstat on the descriptor refuses it."""
    from drakit.conformance import inputs as reader
    regular = tmp_path / "regular"
    regular.write_text("x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_stat = os.stat
    monkeypatch.setattr(reader.os, "stat", lambda p, *a, **k: real_stat(regular) if str(p) == str(fifo) else real_stat(p, *a, **k))
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("the open blocked")))
    signal.setitimer(signal.ITIMER_REAL, 5)
    try:
        with pytest.raises(reader.InputError, match=r"fifo: replaced while it was being opened: not read"):
            reader.read_bytes(fifo, reader.PROFILE)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_file_growing_after_the_check_is_read_to_its_limit_and_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from drakit.conformance import inputs as reader
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (3 << 20))
    real_stat = os.stat

    class Small:
        def __init__(self, st: os.stat_result) -> None:
            self.st_mode, self.st_dev, self.st_ino, self.st_size = st.st_mode, st.st_dev, st.st_ino, 10

    monkeypatch.setattr(reader.os, "stat", lambda p, *a, **k: Small(real_stat(p)))
    reads: list[int] = []
    real_read = os.read
    monkeypatch.setattr(reader.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(reader.InputError, match=r"big\.yaml: the file goes on, over the vendor-profile size limit of 1 MiB"):
        reader.read_bytes(big, reader.PROFILE)
    assert sum(reads) == (1 << 20) + 1  # the limit and one byte, never the rest


def test_json_keys_numbers_and_nesting_are_bounded() -> None:
    from drakit.conformance.inputs import InputError, parse_json
    for text, message in (('{"a": 1, "a": 2}', "duplicate key 'a'"), ("[NaN]", "NaN (not JSON)"),
                          ("[1e400]", "a number too large"), ("[" + "9" * 41 + "]", "an integer of 41 digits"),
                          ("[" * 101 + "]" * 101, "nested deeper than 100 levels")):
        with pytest.raises(InputError, match=re.escape(message)):
            parse_json(text, "f.json")


def test_a_yaml_file_of_too_many_nodes_is_refused_while_it_is_parsed() -> None:
    from drakit.conformance.errors import LoadError
    from drakit.conformance.yamlmarks import YamlLimits, load_documents
    with pytest.raises(LoadError, match=r"more than 1,000 YAML nodes \(the limit\)"):
        list(load_documents("[" + ", ".join(["1"] * 2000) + "]", "f.yaml", YamlLimits(max_nodes=1000)))


def test_a_faults_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    from drakit.conformance.inputs import InputError
    from drakit.fake_driver.plugin import read_faults_file
    fifo = tmp_path / "faults"
    os.mkfifo(fifo)
    done: list[BaseException] = []
    t = threading.Thread(target=lambda: done.append(pytest.raises(InputError, read_faults_file, fifo).value), daemon=True)
    t.start()
    t.join(10)
    assert done and "not a regular file (a FIFO)" in str(done[0])
    assert read_faults_file(tmp_path / "none") == ()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_the_timeline_is_bounded_whatever_the_seconds() -> None:
    """The tick loop ran forever on 1e300 s (t + 7200 == t); now at most MAX_TICKS + 1 ticks."""
    from drakit.reports.timeline import MAX_TICKS, timeline_view
    for seconds in (1e9, 1e300, 7200 * 11, 0.5):
        doc = json.loads(_results_text(_timeline(seconds)))
        view = timeline_view(doc)
        assert view is not None and 2 <= len(view["ticks"]) <= MAX_TICKS + 1, (seconds, len(view["ticks"]))
