"""What a run may never leave on the host: network links, firewall rules, cgroups, mounts, sysctls.

:func:`snapshot` reads them; :func:`changes` lists what differs between two snapshots, one line
each (empty when nothing did)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from drakit.clusters.local import kubeletnode

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _run(argv: list[str]) -> list[str]:
    if not shutil.which(argv[0]):
        return []
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    return res.stdout.splitlines() if res.returncode == 0 else [f"({argv[0]} failed: {res.stderr.strip()[:200]})"]


def _rules() -> list[str]:
    """The firewall's rules without counters and comments (iptables-save, nft)."""
    out = []
    for line in _run(["iptables-save"]) + _run(["ip6tables-save"]):
        if line.startswith("#"):
            continue
        out.append(re.sub(r"\[\d+:\d+\]", "", line).strip())
    out += [ln.strip() for ln in _run(["nft", "list", "ruleset"])]
    return sorted(ln for ln in out if ln)


def _links() -> list[str]:
    return sorted(ln.split(":", 2)[1].strip().split("@")[0] for ln in _run(["ip", "-o", "link", "show"]) if ":" in ln)


def _cgroups() -> list[str]:
    """Every cgroup folder two levels deep in every hierarchy."""
    out = []
    for h in sorted(CGROUP_ROOT.iterdir()) if CGROUP_ROOT.is_dir() else []:
        if not h.is_dir() or h.is_symlink():
            continue
        for d in h.iterdir():
            if d.is_dir():
                out.append(str(d))
                out += [str(e) for e in d.iterdir() if e.is_dir()]
    return sorted(out)


def _mounts() -> list[str]:
    return sorted(" ".join(ln.split()[3:5]) for ln in Path("/proc/self/mountinfo").read_text().splitlines())


def snapshot() -> dict[str, list[str]]:
    sysctls = kubeletnode.read_sysctls()
    return {"links": _links(), "rules": _rules(), "cgroups": _cgroups(), "mounts": _mounts(),
            "sysctls": [f"{k}={v}" for k, v in sorted(sysctls.items())]}


def changes(before: dict[str, list[str]], after: dict[str, list[str]], ignore: tuple[str, ...] = ()) -> list[str]:
    """What ``after`` has that ``before`` had not, and the reverse, per kind; entries containing
    one of ``ignore`` (another test's cluster, running at the same time) are left out."""
    out = []
    for kind in before:
        b, a = set(before[kind]), set(after.get(kind, []))
        for entry in sorted(a - b):
            if not any(i in entry for i in ignore):
                out.append(f"{kind}: added {entry}")
        for entry in sorted(b - a):
            if not any(i in entry for i in ignore):
                out.append(f"{kind}: removed {entry}")
    return out
