"""``drakit run --shard i/N`` and ``drakit report --merge``: the plan (deterministic by case id,
cluster-wide cases in shard 1, balanced), and the bundled suites run on the reference backend
in two shards and merged, against the same suites unsharded: the same cases with the same
statuses, one verdict; a shard left out or given twice makes the merge INCOMPLETE naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from drakit.conformance.shards import Shard, parse_shard, plan
from drakit.reports import load_results
from drakit.reports.shardmerge import ShardMergeError, merge_shards


def drakit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_parse_shard() -> None:
    assert parse_shard("2/4") == Shard(2, 4) and str(parse_shard(" 1/1 ")) == "1/1"
    for bad, says in (("3/2", "i must be 1 to N"), ("0/2", "i must be 1 to N"), ("1/0", "N must be"),
                      ("a/2", "is not i/N"), ("2", "is not i/N"), ("1/٣", "is not i/N")):
        with pytest.raises(ValueError, match=says):
            parse_shard(bad)


def test_plan_is_deterministic_balanced_and_keeps_cluster_wide_cases_in_shard_1() -> None:
    corpus = [(f"suite/case-{i}", i % 10 == 0) for i in range(200)]
    one = plan(corpus, 3)
    assert one == plan(list(reversed(corpus)), 3)  # by id, not by order
    assert set(one) == {c for c, _ in corpus} and set(one.values()) == {1, 2, 3}
    assert all(one[c] == 1 for c, wide in corpus if wide)
    sizes = [list(one.values()).count(i) for i in (1, 2, 3)]
    assert max(sizes) - min(sizes) <= 1, sizes
    # a case added moves only the few cases at the edges between shards
    more = plan([*corpus, ("suite/new", False)], 3)
    moved = [c for c in one if more[c] != one[c]]
    assert len(moved) <= 3, moved
    # both backends of a case go together, and one id named wide anywhere is wide
    both = plan([("a", False), ("a", True), ("b", False), ("c", False)], 2)
    assert both["a"] == 1


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("shards")
    for args in (["--out", "full"], ["--shard", "1/2", "--out", "s1"], ["--shard", "2/2", "--out", "s2"]):
        res = drakit("run", "--plain", "-q", *args, cwd=base)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]  # a shard whose cases pass exits 0
    return base


def _statuses(results: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(c["id"], c["backend"]): c["status"] for c in results["cases"]}


def test_merged_shards_equal_the_unsharded_run(runs: Path) -> None:
    full, s1, s2 = (load_results(runs / d / "results.json") for d in ("full", "s1", "s2"))
    assert s1["verdict"]["result"] == s2["verdict"]["result"] == "incomplete"
    assert [r["code"] for r in s1["verdict"]["reasons"]] == ["shard"]
    assert s1["run"]["shard"]["plan"] == s2["run"]["shard"]["plan"]
    assert not set(_statuses(s1)) & set(_statuses(s2)) and len(s1["cases"]) and len(s2["cases"])
    res = drakit("report", "--merge", "s1/results.json", "s2/results.json", "--out", "merged", cwd=runs)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    merged = load_results(runs / "merged" / "results.json")
    assert _statuses(merged) == _statuses(full) and len(merged["cases"]) == len(full["cases"]) > 200
    assert [(c["id"], c["backend"]) for c in merged["cases"]] == [(c["id"], c["backend"]) for c in full["cases"]]
    assert merged["verdict"]["result"] == full["verdict"]["result"] == "pass"
    assert merged["summary"] == full["summary"]
    assert [s["index"] for s in merged["run"]["merged"]["shards"]] == [1, 2]
    # the timeline: each shard's lanes are its own, on the merged run's clock
    assert {c["timeline"]["worker"] for c in merged["cases"]} == {"shard 1 main", "shard 2 main"}
    assert all(span[1] <= merged["run"]["wallSeconds"] + 1.0 for c in merged["cases"]
               for p in ("setup", "call", "teardown") if (span := c["timeline"].get(p)))
    assert "shard" not in merged["run"]
    junit = (runs / "merged" / "junit.xml").read_text()
    assert junit.count("<testcase ") == len(full["cases"])
    assert (runs / "merged" / "report.html").stat().st_size > 10_000


def test_a_missing_or_doubled_shard_is_incomplete_and_named(runs: Path) -> None:
    s1, s2 = (load_results(runs / d / "results.json") for d in ("s1", "s2"))
    res = drakit("report", "--merge", "s1/results.json", "s1/results.json", "--out", "bad", cwd=runs)
    assert res.returncode == 1
    bad = load_results(runs / "bad" / "results.json")
    assert bad["verdict"]["result"] == "incomplete"
    reasons = {r["code"]: r for r in bad["verdict"]["reasons"]}
    assert reasons["shard-missing"]["shards"] == [2] and "shard 2/2 (not given)" in reasons["shard-missing"]["message"]
    assert reasons["shard-missing"]["count"] == len(s2["cases"])
    assert reasons["case-doubled"]["shards"] == [1] and reasons["case-doubled"]["count"] == len(s1["cases"])
    assert "shard 2/2 (not given)" in res.stdout and "shard 1/2 given twice" in res.stdout
    # a shard that stopped early: its cases not run are missing, named by shard
    short = json.loads(json.dumps(s2))
    short["cases"] = short["cases"][:-3]
    short["summary"] = {**short["summary"], "total": short["summary"]["total"] - 3,
                        "passed": short["summary"]["passed"] - 3}
    merged = merge_shards([("s1", s1), ("s2", short)])
    (miss,) = [r for r in merged["verdict"]["reasons"] if r["code"] == "shard-missing"]
    assert miss["count"] == 3 and "shard 2/2 (stopped early)" in miss["message"]
    assert merged["verdict"]["result"] == "incomplete"


def test_shards_of_different_runs_are_refused(runs: Path, tmp_path: Path) -> None:
    s1, s2 = (load_results(runs / d / "results.json") for d in ("s1", "s2"))
    other = json.loads(json.dumps(s2))
    other["run"]["shard"]["plan"] = other["run"]["shard"]["plan"][1:]
    with pytest.raises(ShardMergeError, match="its plan differs"):
        merge_shards([("s1", s1), ("other", other)])
    full = load_results(runs / "full" / "results.json")
    with pytest.raises(ShardMergeError, match="not a shard's results"):
        merge_shards([("s1", s1), ("full", full)])
    res = drakit("report", "--merge", "s1/results.json", "full/results.json", cwd=runs)
    assert res.returncode == 2 and res.stderr.strip().startswith("drakit report --merge: full/results.json: not a shard")
    res = drakit("report", "--merge", "s1/results.json", "--out", "s1", cwd=runs)
    assert res.returncode == 2 and "would overwrite a shard's results.json" in res.stderr
    res = drakit("run", "--shard", "3/2", "--out", str(tmp_path), cwd=runs)
    assert res.returncode == 2 and res.stderr.strip() == "drakit run: --shard: '3/2': i must be 1 to N (2)"


def test_shards_run_with_another_vendor_profile_are_refused(runs: Path) -> None:
    s1, s2 = (load_results(runs / d / "results.json") for d in ("s1", "s2"))
    other = json.loads(json.dumps(s2))
    other["environment"]["vendor"] = {**other["environment"]["vendor"], "name": "acme", "file": "acme.yaml"}
    with pytest.raises(ShardMergeError, match=r"other: it ran with another vendor profile than s1 \(profile 'acme' "
                                              r"against profile 'drakit-fake'\)"):
        merge_shards([("s1", s1), ("other", other)])
    assert merge_shards([("s1", s1), ("s2", s2)])["environment"]["vendor"]["name"] == "drakit-fake"
