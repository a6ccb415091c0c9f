"""The results of a run's shards (``drakit run --shard i/N``) merged into the run's one
``results.json`` (``drakit report --merge A B ...``). Pure.

Each shard's results record the whole plan (``run.shard.plan``: every case of the corpus and the
shard that runs it). The merge holds every case the shards ran, once; its verdict is the cases'
own, with the run-level reasons of each shard (an interrupt), plus ``shard-missing`` when a case
of the plan is in no shard's results (naming the shards that did not bring theirs: a shard not
given, or one that stopped early) and ``case-doubled`` when a case came from more than one
(the same shard given twice); both make the run ``incomplete``, never ``pass``. Shards of
different plans (another corpus, another N, another selection) are refused.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

SHARD_CODES = ("shard", "shard-missing", "case-doubled")
MAX_NAMED = 1000


class ShardMergeError(ValueError):
    """The files cannot be merged as one run's shards; one line: which file and why."""


def shard_reason(index: int, count: int, n_cases: int) -> dict[str, Any]:
    """The reason a shard's own results are ``incomplete``: they are a part of a run."""
    return {"code": "shard", "message": f"shard {index}/{count} of a run ({n_cases} cases): merge every shard's "
                                        f"results.json with 'drakit report --merge' for the run's verdict",
            "shards": [index]}


def _plan_of(source: str, results: Mapping[str, Any]) -> Mapping[str, Any]:
    shard = results.get("run", {}).get("shard")
    if not isinstance(shard, Mapping):
        raise ShardMergeError(f"{source}: not a shard's results (no run.shard): run it with 'drakit run --shard i/N'")
    return shard


def _profile_name(vendor: Any) -> str:
    return f"profile {vendor.get('name')!r}" if isinstance(vendor, Mapping) else "no profile recorded"


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def merge_shards(parts: Sequence[tuple[str, Mapping[str, Any]]], lost: Mapping[int, str] | None = None,
                 extra_reasons: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """One results dict from ``(source name, results)`` of each shard, in the order given.
    *lost*: shard index -> why its results could not be brought back (named in
    ``shard-missing``); *extra_reasons*: run-level reasons of the whole run (an interrupt)."""
    lost = lost or {}
    from drakit.reports import compute_summary, compute_verdict, validate_results
    from drakit.reports.driver import driver_reasons, driver_section
    if not parts:
        raise ShardMergeError("no shard results given")
    plans = [(source, _plan_of(source, results)) for source, results in parts]
    first_source, first = plans[0]
    expected = [(e["id"], e["backend"], e["shard"]) for e in first["plan"]]
    vendor = parts[0][1].get("environment", {}).get("vendor")
    for (source, plan), (_s, results) in zip(plans[1:], parts[1:]):
        if plan["count"] != first["count"]:
            raise ShardMergeError(f"{source}: shard {plan['index']}/{plan['count']} is not of the same run as "
                                  f"{first_source} (shard {first['index']}/{first['count']})")
        if [(e["id"], e["backend"], e["shard"]) for e in plan["plan"]] != expected:
            raise ShardMergeError(f"{source}: its plan differs from {first_source}'s: the shards ran different "
                                  f"cases (another corpus, selection or drakit version)")
        own = results.get("environment", {}).get("vendor")
        if own != vendor:
            raise ShardMergeError(f"{source}: it ran with another vendor profile than {first_source} "
                                  f"({_profile_name(own)} against {_profile_name(vendor)}): give every shard the same --vendor")
    count = first["count"]
    planned = {(cid, backend): shard for cid, backend, shard in expected}
    seen: dict[tuple[str, str], int] = {}
    cases: list[dict[str, Any]] = []
    doubled: list[dict[str, str]] = []
    first_start = min(_time(r["run"]["startedAt"]) for _s, r in parts)
    for (_source, results), (_p, plan) in zip(parts, plans):
        # the timeline of the merged run: each shard's lanes named after it, on the run's clock
        shift = (_time(results["run"]["startedAt"]) - first_start).total_seconds()
        for case in results["cases"]:
            key = (case["id"], case["backend"])
            seen[key] = seen.get(key, 0) + 1
            if seen[key] == 1:
                case = dict(case)
                if isinstance(case.get("timeline"), dict):
                    tl = case["timeline"]
                    case["timeline"] = {"worker": f"shard {plan['index']} {tl.get('worker', 'main')}",
                                        **{p: [round(s + shift, 3), round(e + shift, 3)]
                                           for p in ("setup", "call", "teardown") if (span := tl.get(p)) for s, e in [span]}}
                cases.append(case)
            elif seen[key] == 2:
                doubled.append({"id": key[0], "backend": key[1]})
    rank = {f["id"]: i for i, f in enumerate(parts[0][1]["features"])}
    order = {b: i for i, b in enumerate(parts[0][1]["environment"]["backends"])}
    cases.sort(key=lambda c: (min((rank.get(f, 99) for f in c["features"]), default=-1), c["id"],
                              order.get(c["backend"], 9)))
    missing = [(k, s) for k, s in planned.items() if k not in seen]
    unplanned = [{"id": k[0], "backend": k[1]} for k in seen if k not in planned]
    given = [plan["index"] for _s, plan in plans]
    reasons: list[dict[str, Any]] = []
    for (source, plan), (_s, results) in zip(plans, parts):
        for reason in (results.get("verdict") or {}).get("reasons") or []:
            if reason.get("code") in ("case-failed", "load-error", "required-skipped", "nothing-ran",
                                      "driver-not-exercised", *SHARD_CODES):  # the merged cases say these again
                continue
            reasons.append({**reason, "message": f"shard {plan['index']}/{count} ({source}): {reason['message']}",
                            "shards": [plan["index"]]})
    if missing:
        short = sorted({s for _k, s in missing})
        absent = [s for s in short if s not in given]
        what = ", ".join(f"{s}/{count}" + (f" (lost: {lost[s]})" if s in lost else " (not given)" if s in absent
                                           else " (stopped early)") for s in short)
        reasons.append({"code": "shard-missing", "message": f"{len(missing)} of the run's {len(planned)} cases are "
                                                            f"in no shard's results: shard {what}",
                        "shards": short, "count": len(missing),
                        "cases": [{"id": k[0], "backend": k[1]} for k, _s in missing[:MAX_NAMED]]})
    if doubled or unplanned:
        twice = [i for i in sorted(set(given)) if given.count(i) > 1]
        reasons.append({"code": "case-doubled", "message": f"{len(doubled)} cases came from more than one shard's "
                                                           f"results" + (f" (shard {', '.join(f'{i}/{count}' for i in twice)} "
                                                                         f"given twice)" if twice else "")
                        + (f"; {len(unplanned)} cases are in no shard's plan" if unplanned else ""),
                        "shards": twice, "count": len(doubled) + len(unplanned), "cases": (doubled + unplanned)[:MAX_NAMED]})
    base = parts[0][1]
    environment = {**base["environment"], "backends": dict(base["environment"]["backends"])}
    for _s, results in parts[1:]:
        for name, env in results["environment"]["backends"].items():
            environment["backends"].setdefault(name, env)
    starts = [_time(r["run"]["startedAt"]) for _s, r in parts]
    ends = [_time(r["run"]["finishedAt"]) for _s, r in parts]
    run = {k: v for k, v in base["run"].items() if k != "shard"}
    run.update({"startedAt": min(starts).isoformat().replace("+00:00", "Z"),
                "finishedAt": max(ends).isoformat().replace("+00:00", "Z"),
                "wallSeconds": round(max(0.0, (max(ends) - min(starts)).total_seconds()), 3),
                "merged": {"count": count, "shards": [
                    {"index": plan["index"], "source": source, "cases": len(results["cases"]),
                     "wallSeconds": results["run"]["wallSeconds"]} for (source, plan), (_x, results) in zip(plans, parts)]}})
    merged: dict[str, Any] = {**{k: v for k, v in base.items() if k not in ("driver",)}, "run": run,
                              "environment": environment, "cases": cases}
    merged["summary"] = compute_summary(cases)
    merged["verdict"] = compute_verdict(cases, reasons + [dict(r) for r in extra_reasons]
                                        + driver_reasons(cases, environment))
    section = driver_section(merged)
    if section is not None:
        merged["driver"] = section
    validate_results(merged, source="merged shard results")
    return merged
