"""A case's failure as the console shows it: the summary, the YAML excerpt with the line
marked, the diff (or expected/actual), every line cut to a readable length."""

from __future__ import annotations

import json
from typing import Any

from .spec.case import Case


def render_failure(case: Case, failure: dict[str, Any]) -> str:
    lines = [failure.get("summary", "failed")]
    y = failure.get("yaml")
    if y:
        from drakit.reports.names import clean_name
        lines.append(f"  at {clean_name(y['file'])}:{y['markLine']} ({clean_name(case.id)})")
        width = len(str(y["startLine"] + len(y["lines"])))
        for i, text in enumerate(y["lines"]):
            n = y["startLine"] + i
            lines.append(f"  {'>' if n == y['markLine'] else ' '} {n:>{width}} | {text}")
    if failure.get("diff"):
        lines.append("  diff (expected -> actual):")
        lines.extend("    " + d for d in failure["diff"].splitlines()[:60])
    elif failure.get("expected") is not None or failure.get("actual") is not None:
        lines.append(f"  expected: {json.dumps(failure.get('expected'), default=str)}")
        lines.append(f"  actual:   {json.dumps(failure.get('actual'), default=str)}")
    if failure.get("detail"):
        lines.append(failure["detail"])
    from drakit.reports import shorten_middle
    return "\n".join(shorten_middle(line, 500) for text in lines for line in str(text).splitlines())
