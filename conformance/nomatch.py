"""Why ``drakit run`` matched no case, in one line: a -k/-m selection, or cases that run on
another backend only (the driver suite needs a cluster: the line says how to start one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def no_cases_line(args: Any, paths: Sequence[Path]) -> str:
    line = ("drakit: no cases matched" + (f" -k {args.keyword!r}" if args.keyword else "")
            + (f" -m {args.markexpr!r}" if args.markexpr else ""))
    if args.keyword or args.markexpr:
        return line
    wanted = {b.strip() for b in str(args.backend).split(",") if b.strip()}
    try:
        backends, features = _cases(paths)
    except Exception:  # noqa: BLE001 - the plain line then; the run said what failed to load
        return line
    if not backends or backends & wanted:
        return line
    what = "the driver suite runs" if features and all("driver" in f for f in features) else "these cases run"
    vendor = f" --vendor {args.vendor}" if args.vendor else ""
    command = f"drakit run --backend cluster --cluster local{vendor} {' '.join(map(str, paths))}"
    return (f"drakit: {what} on a cluster only (backends: {', '.join(sorted(backends))}; this run: "
            f"{', '.join(sorted(wanted))}): start drakit's local cluster with '{command}'"
            f"{'' if vendor else ' (add --vendor PROFILE for your own driver)'}, or use yours with --backend cluster "
            f"--kubeconfig K")


def _cases(paths: Sequence[Path]) -> tuple[set[str], list[tuple[str, ...]]]:
    """The backends and the features of the cases in the paths."""
    from drakit.fake_driver.profile import load_profile
    from .cases.finder import find_case_files
    from .cases.loader import load_file
    backends: set[str] = set()
    features: list[tuple[str, ...]] = []
    vocabulary = load_profile()
    for f in find_case_files(list(paths)):
        for case in load_file(f, vocabulary, vocabulary=frozenset(vocabulary)).cases:
            backends.update(case.backends)
            features.append(tuple(case.features))
    return backends, features
