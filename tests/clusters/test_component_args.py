"""``LocalCluster(component_args=...)``: a caller's flags replace the launcher's own flag of the
same name, and reach the running component (the scheduler's /configz shows the client rate
limits it was given)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from drakit.clusters.local import procs
from drakit.clusters.local.errors import ClusterError
from drakit.clusters.local.flags import FlagError, check_component_args, merge_flags
from drakit.clusters.local.launcher import LocalCluster


def test_a_named_flag_replaces_the_default_in_place() -> None:
    defaults = ["--a=1", "--controllers=*,x", "--v=2", "--b"]
    assert merge_flags(defaults, ["--controllers=y", "-v=1", "--qps=9"]) == [
        "--a=1", "--controllers=y", "-v=1", "--b", "--qps=9"]


def test_every_occurrence_in_extra_is_kept_and_defaults_repeated_go() -> None:
    assert merge_flags(["--x=1", "--y", "--x=2"], ["--x=3", "--z", "--x=4"]) == ["--x=3", "--x=4", "--y", "--z"]
    assert merge_flags(["--x=1"], []) == ["--x=1"]


@pytest.mark.parametrize(("args", "says"), [
    ({"kube-schedular": ["--v=1"]}, "unknown component 'kube-schedular'"),
    ({"kube-scheduler": "--v=1"}, "expected a list of flags"),
    ({"kwok": ["v=1"]}, "'v=1' is not a flag"),
    ({"etcd": ["--"]}, "'--' is not a flag"),
])
def test_bad_component_args_are_refused_with_one_line(args: dict[str, Any], says: str, tmp_path: Path) -> None:
    with pytest.raises(FlagError, match=says):
        check_component_args(args)
    with pytest.raises(ClusterError, match=says):
        LocalCluster(tmp_path / "run", bin_dir=tmp_path / "nobin", component_args=args)
    assert not (tmp_path / "run").exists()


def _cmdline(pid: int) -> list[str]:
    return [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]


def test_the_components_run_with_the_flags_given(local_cluster_factory: Callable[..., LocalCluster]) -> None:
    c = local_cluster_factory(real_nodes=False, component_args={
        "kube-scheduler": ["--kube-api-qps=123", "--kube-api-burst=456", "--v=1"],
        "kube-controller-manager": ["--controllers=resourceclaim-controller,namespace-controller"]})
    pids = {p["pid"]: n for n, p in c.status()["processes"].items()}
    lines = {n: _cmdline(pid) for pid, n in pids.items()}
    sched, kcm = lines["kube-scheduler"], lines["kube-controller-manager"]
    assert "--kube-api-qps=123" in sched and [a for a in sched if a.startswith("--v=")] == ["--v=1"]
    assert [a for a in kcm if a.startswith("--controllers=")] == ["--controllers=resourceclaim-controller,namespace-controller"]
    assert all(procs.info_alive(p) for p in c._procs)
    # What the scheduler itself says it runs with (its /configz, read with the admin client cert).
    # The scheduler authorizes /configz by asking the API server (a SubjectAccessReview with its
    # own credentials); right after start-up, before the API server's bootstrap RBAC lets it ask,
    # the answer is 403 and the scheduler keeps a refusal for 10 s: ask again until it says yes.
    deadline = time.monotonic() + 30
    while (got := c._get("scheduler", "/configz", c._api_ctx(), 10.0))[0] == 403 and time.monotonic() < deadline:
        time.sleep(0.5)
    code, body = got
    assert code == 200, body
    conn = json.loads(body)["componentconfig"]["clientConnection"]
    assert (conn["qps"], conn["burst"]) == (123, 456)
