"""Bounds on time and on workers (issue 25): a case over its time budget is an error naming the
budget while the run goes on; ``-n`` is capped at what the machine can run, said in one line;
a kubeconfig exec plugin answers within its budget or is stopped, and never outlives drakit.

Before: one case with 3,000 pods ran 123 s (12,000 past 300 s, killed with nothing written),
``-n 100000`` spawned workers for minutes, a hanging exec plugin hung drakit over 300 s and was
left orphaned after a SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drakit.conformance.cases.budget import budget_of
from drakit.conformance.cases.loader import load_text
from drakit.fake_driver.profile import load_profile
from tests.interrupting import run_and_signal

from .inputs import VALID

POD = "      - {{apiVersion: v1, kind: Pod, metadata: {{name: p{i}}}, spec: {{containers: [{{name: m, image: x}}]}}}}\n"


def _many_pods(n: int, budget: str | None = None) -> str:
    head = VALID.replace("hostile/valid", "hostile/many-pods")
    if budget:
        head = head.replace("features: [core]\n", f"features: [core]\ntimeBudget: {budget}\n")
    return head + "  - apply:\n" + "".join(POD.format(i=i) for i in range(n))


def _drakit(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "NO_COLOR": "1", "HOME": str(cwd), **(env or {})})


BUDGETS = [  # (how the budget is given, the case's timeBudget, extra options, what the error names)
    ("timeBudget", "1s", (), r"1 s \(the case's timeBudget\)"),
    ("--case-timeout", None, ("--case-timeout", "1s"), r"1 s \(--case-timeout\)"),
    ("--case-timeout wins", "10m", ("--case-timeout", "1"), r"1 s \(--case-timeout\)"),
]


@pytest.mark.parametrize(("name", "budget", "options", "named"), BUDGETS, ids=[b[0] for b in BUDGETS])
def test_a_case_over_its_budget_is_an_error_and_the_run_goes_on(tmp_path: Path, name: str, budget: str | None,
                                                               options: tuple[str, ...], named: str) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "a-valid.case.yaml").write_text(VALID)
    (cases / "pods.case.yaml").write_text(_many_pods(3000, budget))
    t0 = time.monotonic()
    proc = _drakit("run", str(cases), "--out", str(tmp_path / "out"), "--plain", *options, cwd=tmp_path)
    took = time.monotonic() - t0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    status = {c["id"]: c for c in results["cases"]}
    assert status["hostile/valid"]["status"] == "passed"
    over = status["hostile/many-pods"]
    assert over["status"] == "error", over["status"]
    import re
    assert re.fullmatch(rf"timeout: timeBudget exceeded in step [0-9]+ \(line [0-9]+\): the case ran over its time budget of {named}; raise it with 'timeBudget:' in the "
                        r"case or 'drakit run --case-timeout'", over["failure"]["summary"]), over["failure"]["summary"]
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert took < 60, f"{took:.0f} s"


def test_the_default_budget_is_sized_from_the_steps() -> None:
    case = load_text(_many_pods(2), "x.case.yaml", load_profile()).cases[0]  # 3 steps
    assert budget_of(case, "reference") == (30.15, "30 s + 0.05 s a step on the reference backend")
    waiting = load_text(VALID + "  - advance: 90s\n", "x.case.yaml", load_profile()).cases[0]
    assert budget_of(waiting, "cluster") == (120 + 3 * 15 + 90, "120 s + 15 s a step on the cluster backend + its "
                                                                 "90 s of advance/within")
    assert budget_of(waiting, "reference")[0] == 30.15  # the reference's clock is its own: no wait


@pytest.mark.parametrize("value", ["0", "-1", "soon", "25h", "1e9"])
def test_a_bad_case_timeout_is_one_line_and_exit_2(tmp_path: Path, value: str) -> None:
    (tmp_path / "v.case.yaml").write_text(VALID)
    proc = _drakit("run", str(tmp_path / "v.case.yaml"), "--out", str(tmp_path / "out"), "--case-timeout", value,
                   cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (f"drakit run: --case-timeout: {value!r} is not a time budget (e.g. 90, 90s, 5m; at "
                           f"most 24h)\n"), proc.stderr


def test_a_time_budget_over_a_day_is_a_load_error() -> None:
    loaded = load_text(VALID.replace("features: [core]\n", "features: [core]\ntimeBudget: 25h\n"), "x.case.yaml",
                       load_profile())
    assert [str(e) for e in loaded.errors] == ["x.case.yaml:4: timeBudget: 25h is over the limit of 24h for one step"]


def test_a_huge_worker_count_is_capped_in_one_line(tmp_path: Path) -> None:
    from drakit.conformance.cli import max_workers
    cap, why = max_workers()
    (tmp_path / "v.case.yaml").write_text(VALID)
    t0 = time.monotonic()
    proc = _drakit("run", str(tmp_path / "v.case.yaml"), "--out", str(tmp_path / "out"), "-n", "100000", "--plain",
                   cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "-n 100,000" in line]
    assert lines == [f"drakit run: -n 100,000: running {cap} workers, the most this machine can run ({why})"]
    assert 1 <= cap <= 4 * (os.cpu_count() or 1) and time.monotonic() - t0 < 120


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:1"}}}}]
users: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/sh,
  args: ["-c", "echo $$ > {pid}; exec sleep 1000"], interactiveMode: Never}}}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _plugin(tmp_path: Path) -> tuple[Path, Path]:
    pid = tmp_path / "plugin.pid"
    (tmp_path / "kubeconfig").write_text(KUBECONFIG.format(pid=pid))
    (tmp_path / "v.case.yaml").write_text(VALID)
    return tmp_path / "kubeconfig", pid


def test_a_hanging_exec_plugin_is_stopped_at_its_budget(tmp_path: Path) -> None:
    kubeconfig, pid = _plugin(tmp_path)
    t0 = time.monotonic()
    proc = _drakit("run", str(tmp_path / "v.case.yaml"), "--backend", "cluster", "--kubeconfig", str(kubeconfig),
                   "--out", str(tmp_path / "out"), cwd=tmp_path, env={"DRAKIT_EXEC_PLUGIN_TIMEOUT": "2"})
    assert time.monotonic() - t0 < 60
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        f"drakit: cluster backend: kubeconfig {kubeconfig}: context 'x': exec: the credential plugin '/bin/sh' gave no "
        f"answer within 2 s and was stopped (DRAKIT_EXEC_PLUGIN_TIMEOUT=SECONDS changes the budget)"), proc.stderr
    assert not _alive(int(pid.read_text()))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_an_exec_plugin_dies_with_drakit(tmp_path: Path, sig: signal.Signals) -> None:
    kubeconfig, pid = _plugin(tmp_path)
    got = run_and_signal([str(tmp_path / "v.case.yaml"), "--backend", "cluster", "--kubeconfig", str(kubeconfig)],
                         tmp_path, sig, lambda out, err, tdir: pid.exists() and pid.read_text().strip() != "",
                         timeout=120)
    plugin = int(pid.read_text())
    deadline = time.monotonic() + 10
    while _alive(plugin) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(plugin), f"the exec plugin {plugin} outlived drakit ({sig.name})" + got.explain()
    if sig == signal.SIGTERM:
        assert got.returncode == 143 and "Traceback" not in got.stderr, got.explain()
