"""An explanation as text for people: the verdict and the reason first, then the closest node
in detail, then the other nodes a line each (``full``: every node and device)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

DEVICES_SHOWN = 8
NODES_SHOWN = 5


def text(out: Mapping[str, Any], *, full: bool = False) -> str:
    lines = [f"{out['subject']}: {out['verdict']}: {out['message']}"]
    s = out.get("summary")
    if out.get("refusal"):
        lines.append(f"reason: {out['refusal']['message']}")
    if s:
        lines.append(f"reason: {s['reason']}")
        if s.get("fix"):
            lines.append(f"would fit on {s['closestNode']} after one change: {s['fix']} (checked: the allocator then "
                         f"allocates there)")
        elif s.get("blockers"):
            lines.append(f"no single change found that makes it fit on {s['closestNode']}; blockers there: "
                         + "; ".join(s["blockers"][:4]))
    lines.extend(f"warning: {w}" for w in out.get("warnings") or ())
    nodes = list(out.get("nodes") or [])
    if not nodes:
        return "\n".join(lines) + "\n"
    closest = s.get("closestNode") if s else None
    nodes.sort(key=lambda n: (n["name"] != closest, n["name"]))
    lines.append("")
    shown = nodes if full else nodes[:NODES_SHOWN]
    for i, n in enumerate(shown):
        lines.extend(_node(n, detail=full or i == 0, full=full))
    rest = nodes[len(shown):]
    if rest:
        why = Counter("fits" if n["fits"] else "; ".join(r["reason"] for r in n["refusals"]) for n in rest)
        lines.append(f"... {len(rest)} more node(s): " + ", ".join(f"{k} ({v})" for k, v in why.most_common(4)))
    if not full:
        lines.append("(--all: every node and device; -o json: everything, for tools)")
    return "\n".join(lines) + "\n"


def _node(n: Mapping[str, Any], *, detail: bool, full: bool = False) -> list[str]:
    if n["fits"]:
        return [f"{n['name']}  fits"]
    head = f"{n['name']}  " + "; ".join(f"{r['plugin']}: {r['reason']}" for r in n["refusals"])
    if not detail or not n["claims"]:
        brief = [f"claim {c['claim']} request {e['request']}: {e['pass']} of {e['need']} pass; "
                 + ", ".join(f"{k} {v}" for k, v in Counter(d["check"] for d in e["devices"] if d["check"] != "ok")
                             .most_common(3))
                 for c in n["claims"] for r in c["requests"] for e in r["entries"][:1] if e["pass"] < e["need"]]
        return [head + (f" ({', '.join(brief)})" if brief else "")]
    out = [head]
    for c in n["claims"]:
        for r in c["requests"]:
            if r.get("error"):
                out.append(f"  claim {c['claim']} request {r['request']}: {r['error']}")
            for p in r.get("pools") or []:
                out.append(f"  pool {p['pool']}: {p['problem']}")
            for e in r["entries"]:
                name = e["request"] + (f"/{e['subrequest']}" if e["subrequest"] else "")
                out.append(f"  claim {c['claim']} request {name} (class {e['class']}, needs {e['need']}, "
                           f"{e['pass']} pass)")
                other = [d for d in e["devices"] if d["check"] == "selector"
                         and str(d["values"].get("owner", "")).startswith("class ")]
                devices = e["devices"] if full else [d for d in e["devices"] if d not in other]
                if other and not full:
                    out.append(f"    ({len(other)} device(s) not of class {e['class']}: its selectors are false there)")
                for d in devices[:DEVICES_SHOWN]:
                    out.append(f"    {d['device']}  {d['check']}: {d['message']}")
                if len(devices) > DEVICES_SHOWN:
                    more = Counter(d["check"] for d in devices[DEVICES_SHOWN:])
                    out.append(f"    ... {len(devices) - DEVICES_SHOWN} more: "
                               + ", ".join(f"{k} ({v})" for k, v in more.most_common()))
    combo = n.get("combination") or {}
    for k in combo.get("constraints", ()):
        out.append(f"  constraint on {k['attribute']} ({k['claim']}): values seen "
                   + ", ".join(f"{d} = {v}" for d, v in k["valuesSeen"].items()))
    other = n.get("otherNodes") or {}
    if other.get("devicesInOtherNodesSlices") or other.get("sharedSlicesNotForThisNode"):
        out.append(f"  not on this node: {other['devicesInOtherNodesSlices']} device(s) in other nodes' slices"
                   + (f"; shared slices whose node selection leaves it out: "
                      f"{', '.join(other['sharedSlicesNotForThisNode'][:5])}" if other["sharedSlicesNotForThisNode"] else ""))
    return out
