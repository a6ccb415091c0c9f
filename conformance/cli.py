"""``drakit``: run the conformance suites, re-render reports, lint cases, list features."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

SUITES = Path(__file__).with_name("suites")
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="drakit", description="Conformance kit for Kubernetes 1.37 Dynamic Resource Allocation.")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run case suites (the bundled ones when no path is given)")
    run.add_argument("paths", nargs="*", help="case files or folders (default: the bundled suites)")
    run.add_argument("--backend", default="reference", help="reference, cluster, or both comma-separated (default: reference)")
    run.add_argument("--out", default="drakit-out", help="folder for results.json, junit.xml, report.html (default: drakit-out)")
    run.add_argument("-n", "--workers", default="0", help="parallel workers (pytest-xdist), a number or 'auto' (default: 0)")
    run.add_argument("-k", dest="keyword", default=None, help="only cases matching this pytest -k expression")
    run.add_argument("-m", dest="markexpr", default=None, help="only cases matching this marker expression, e.g. feature_core")
    run.add_argument("--feature-gates", default="", help="reference backend gates on top of the 1.37 defaults, A=true,B=false")
    run.add_argument("--profile", default=None, help="vendor profile YAML for the case placeholders")
    run.add_argument("-q", "--quiet", action="store_true", help="print only failures and the verdict")
    run.add_argument("-v", "--verbose", action="store_true", help="one line per case")

    rep = sub.add_parser("report", help="re-render junit.xml and report.html from a results.json")
    rep.add_argument("results", help="results.json of an earlier run")
    rep.add_argument("--out", default=None, help="output folder (default: next to results.json)")

    lint = sub.add_parser("lint", help="load case files and print every problem (no target needed)")
    lint.add_argument("paths", nargs="*")
    lint.add_argument("--profile", default=None)

    sub.add_parser("features", help="list the DRA features of Kubernetes 1.37 that drakit knows")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "report":
        return cmd_report(args)
    if args.command == "lint":
        return cmd_lint(args)
    return cmd_features()


def _paths(raw: list[str]) -> list[Path] | None:
    paths = [Path(p) for p in raw] or [SUITES]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"drakit: no such file or folder: {', '.join(map(str, missing))}", file=sys.stderr)
        return None
    return paths


def cmd_run(args: argparse.Namespace) -> int:
    import pytest
    paths = _paths(args.paths)
    if paths is None:
        return EXIT_USAGE
    out = Path(args.out)
    results_path = out / "results.json"
    if results_path.exists():
        results_path.unlink()
    root = Path(os.path.commonpath([str(p.resolve()) for p in paths]))
    if root.is_file():
        root = root.parent
    pytest_args = ["-c", os.devnull, "--rootdir", str(root), "-p", "no:cacheprovider",
                   "--drakit-backend", args.backend, "--drakit-out", str(out), "-n", str(args.workers),
                   "-o", "console_output_style=count", "--tb=short", "-rfE"]
    if args.feature_gates:
        pytest_args += ["--drakit-feature-gates", args.feature_gates]
    if args.profile:
        pytest_args += ["--drakit-profile", args.profile]
    if args.keyword:
        pytest_args += ["-k", args.keyword]
    if args.markexpr:
        pytest_args += ["-m", args.markexpr]
    pytest_args += ["-qq"] if args.quiet else (["-v"] if args.verbose else ["-q"])
    pytest_args += [str(p) for p in paths]
    code = pytest.main(pytest_args)
    if code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
        return EXIT_USAGE
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        print("drakit: no cases matched", file=sys.stderr)
        return EXIT_USAGE
    if not results_path.exists():
        print(f"drakit: the run did not write {results_path}", file=sys.stderr)
        return EXIT_USAGE
    results = json.loads(results_path.read_text())
    if any(c.get("backend") == "-" for c in results["cases"]):
        return EXIT_USAGE
    return EXIT_OK if results["verdict"]["result"] == "pass" else EXIT_FAILED


def cmd_report(args: argparse.Namespace) -> int:
    from reports import ResultsError, load_results, render_all
    try:
        results = load_results(Path(args.results))
    except (OSError, ResultsError) as exc:
        print(f"drakit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out) if args.out else Path(args.results).parent
    out.mkdir(parents=True, exist_ok=True)
    for name, path in sorted(render_all(results, out).items()):
        print(f"wrote {path}")
    return EXIT_OK


def cmd_lint(args: argparse.Namespace) -> int:
    from fake_driver.profile import load_profile
    from .cases.loader import load_file
    paths = _paths(args.paths)
    if paths is None:
        return EXIT_USAGE
    try:
        profile = load_profile(args.profile)
    except (OSError, ValueError) as exc:
        print(f"drakit: --profile: {exc}", file=sys.stderr)
        return EXIT_USAGE
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("*.case.yaml"))})
    n_cases, n_errors = 0, 0
    for f in files:
        loaded = load_file(f, profile)
        n_cases += len(loaded.cases)
        for err in loaded.errors:
            n_errors += 1
            print(err)
    print(f"{len(files)} files, {n_cases} cases, {n_errors} errors")
    return EXIT_USAGE if n_errors else EXIT_OK


def cmd_features() -> int:
    from .features import FEATURES
    print(f"{'feature':26} {'KEP':6} {'stage':6} {'default':8} gates")
    for f in FEATURES:
        print(f"{f.id:26} {f.kep:6} {f.stage:6} {'on' if f.default_on else 'off':8} {', '.join(f.gates) or '-'}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
