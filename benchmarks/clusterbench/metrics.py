"""What explains a throughput figure: the scheduler's /metrics (its secure port, served with the
run dir's CA; /metrics is always allowed) and the CPU seconds each component used.

``scheduler_schedule_attempts_total`` by result, ResourceClaim events and the time spent handling
them (``scheduler_event_handling_duration_seconds``, recorded synchronously), pre-hint evaluations,
and queueing hint calls.  The scheduler records hint calls through a buffer of 1,000 a second and
drops the rest, so hint counts are floors."""

from __future__ import annotations

import os
import re
import ssl
import urllib.request
from pathlib import Path
from typing import Any, Callable

from drakit.clusters.local.launcher import LocalCluster

GATE = "SchedulerPreQueueingHints"
Obj = dict[str, Any]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_WANTED = ("scheduler_schedule_attempts_total", "scheduler_queueing_hint_execution_duration_seconds_count",
           "scheduler_event_handling_duration_seconds_", "scheduler_pre_queueing_hint_evaluations_total",
           "kubernetes_feature_enabled", "scheduler_pending_pods", "scheduler_queue_incoming_pods_total",
           "scheduler_pod_scheduled_after_flush_total")


def scrape(c: LocalCluster) -> Samples:
    """The scheduler's /metrics, the samples named in ``_WANTED``."""
    ctx = ssl.create_default_context(cafile=str(c.run_dir / "pki" / "ca.crt"))
    with urllib.request.urlopen(f"https://127.0.0.1:{c.ports['scheduler']}/metrics", context=ctx,  # noqa: S310
                                timeout=30) as r:
        text = r.read().decode()
    out: Samples = {}
    for m in map(_SAMPLE.match, text.splitlines()):
        if m and m.group(1).startswith(_WANTED):
            out[(m.group(1), tuple(sorted(_LABEL.findall(m.group(2) or ""))))] = float(m.group(3))
    return out


def explain(before: Samples, after: Samples) -> Obj:
    """Scheduler counters between two scrapes (see the module docstring)."""
    d = {k: v - before.get(k, 0.0) for k, v in after.items()}

    def by(name: str, label: str, keep: Callable[[dict[str, str]], bool] = lambda _: True) -> dict[str, float]:
        out: dict[str, float] = {}
        for (n, labels), v in d.items():
            if n == name and keep(dict(labels)):
                key = dict(labels).get(label, "")
                out[key] = out.get(key, 0.0) + v
        return {k: v for k, v in sorted(out.items()) if v}

    def claim(lab: dict[str, str]) -> bool:
        return lab.get("event", "").startswith("resource.k8s.io/ResourceClaim")

    ev = "scheduler_event_handling_duration_seconds_"
    return {"attempts": by("scheduler_schedule_attempts_total", "result"),
            "claimEvents": sum(by(ev + "count", "event", claim).values()),
            "claimEventSeconds": sum(by(ev + "sum", "event", claim).values()),
            "preHint": by("scheduler_pre_queueing_hint_evaluations_total", "result"),
            "incoming": by("scheduler_queue_incoming_pods_total", "queue"),
            "incomingByEvent": dict(sorted(by("scheduler_queue_incoming_pods_total", "event").items(),
                                           key=lambda kv: -kv[1])[:6]),
            "scheduledAfterFlush": sum(by("scheduler_pod_scheduled_after_flush_total", "").values()),
            "hintCallsAtLeast": sum(by("scheduler_queueing_hint_execution_duration_seconds_count", "plugin",
                                       lambda lab: lab.get("plugin") == "DynamicResources").values())}


def pending(samples: Samples) -> dict[str, float]:
    """``scheduler_pending_pods`` by queue (active, backoff, unschedulable, gated)."""
    return {dict(labels).get("queue", ""): v for (n, labels), v in samples.items() if n == "scheduler_pending_pods"}


def gate_enabled(samples: Samples) -> bool | None:
    for (n, labels), v in samples.items():
        if n == "kubernetes_feature_enabled" and dict(labels).get("name") == GATE:
            return v == 1.0
    return None


def cpu_seconds(c: LocalCluster) -> dict[str, float]:
    """CPU time (user + system) of each component so far, and of this process (``bench``)."""
    out: dict[str, float] = {}
    for name, p in c.status()["processes"].items():
        try:
            f = Path(f"/proc/{p['pid']}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = int(f[11]) + int(f[12])  # utime + stime
        out[name.removeprefix("kube-").replace("controller-manager", "kcm")] = ticks / os.sysconf("SC_CLK_TCK")
    t = os.times()
    return {**out, "bench": t.user + t.system}


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def load_average() -> str:
    """``uptime``'s three load averages."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def counters(x: Obj) -> str:
    a = ", ".join(f"{k} {v:.0f}" for k, v in x["attempts"].items())
    pre = ", ".join(f"{k} {v:.0f}" for k, v in x["preHint"].items()) or "none"
    cpu = ", ".join(f"{k} {v:.1f}" for k, v in sorted(x["cpuSeconds"].items(), key=lambda kv: -kv[1]))
    return (f"attempts: {a}; {x['claimEvents']:.0f} claim events handled in {x['claimEventSeconds']:.2f} s; "
            f"pre-hints: {pre}; DRA hint calls >= {x['hintCallsAtLeast']:.0f}; CPU s: {cpu}")
