"""``drakit report``: re-render a results.json, add the cases of another source (``--merge``), or
compare two runs (``--compare``). Every results file is read by :func:`drakit.reports.load_results`
(drakit's one input reader, the verdict recomputed from the cases)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from drakit.reports.names import clean_name

from .console import say
from .outdir import out_folder

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def cmd_report(args: argparse.Namespace) -> int:
    from drakit.reports import ResultsError, load_results
    from drakit.reports.render import render_all
    if args.compare and (args.merge or args.results) or not (args.compare or args.results or args.merge):
        print("drakit report: give RESULTS.json [--merge CASES.json], --merge SHARD.json... or --compare OLD.json "
              "NEW.json", file=sys.stderr)
        return EXIT_USAGE
    if args.compare:
        return cmd_compare(args)
    if args.results is None:
        from .shardcli import merge_shard_files
        return merge_shard_files(args.merge, args.out)
    try:
        results = load_results(Path(args.results))
    except (OSError, ResultsError) as exc:
        say(f"drakit: {exc}")
        return EXIT_USAGE
    _say_recomputed(results, args.results)
    out = Path(args.out) if args.out else Path(args.results).parent
    if args.merge:
        from drakit.reports import merge_cases
        for source in args.merge:
            try:
                results = _merge(results, Path(source), merge_cases, load_results)
            except (OSError, ValueError, RecursionError, ResultsError) as exc:
                say(f"drakit: --merge {source}: {_merge_problem(exc).removeprefix(f'{source}: ')}")
                return EXIT_USAGE
    if not out_folder(out):
        return EXIT_USAGE
    from drakit.reports.safefs import UnsafePath
    try:
        if args.merge:  # the merged results become the run's results.json, with its reports
            from .results import write_results
            written = write_results(results, out, fallback=False)
        else:
            written = render_all(results, out)
    except UnsafePath as exc:
        say(f"drakit: {exc}")
        return EXIT_USAGE
    for _name, path in sorted(written.items()):
        print(clean_name(f"wrote {path}"))
    return EXIT_OK


def _say_recomputed(results: dict, source: str) -> None:
    """The one line when a results file's stored verdict is not what its cases give."""
    from drakit.reports import clean_text, verdict_note
    note = verdict_note(results, source)
    if note:
        print(f"drakit report: {clean_text(note)}", file=sys.stderr)


def _merge(results: dict, source: Path, merge_cases: Any, load_results: Any) -> dict:
    """*results* with the cases of *source*: another results.json (read and validated as one)
    or a list of cases, as ``drakit node-check`` writes it."""
    from drakit.reports import read_json
    extra = read_json(source)
    if isinstance(extra, dict):
        other = load_results(source)
        _say_recomputed(other, str(source))
        return merge_cases(results, other["cases"], other["environment"]["backends"])
    if not isinstance(extra, list):
        raise ValueError(f"expected a results.json object or a list of cases, found {type(extra).__name__}")
    from drakit.reports import validate_cases
    validate_cases(extra, source="cases")
    return merge_cases(results, extra)


def _merge_problem(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep to be drakit results"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: {exc.reason} at byte {exc.start}"
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno} column {exc.colno}: not valid JSON: {exc.msg}"
    if isinstance(exc, OSError):
        return f"cannot read: {exc.strerror or exc}"
    return str(exc)


def cmd_compare(args: argparse.Namespace) -> int:
    """``drakit report --compare OLD NEW``: text on stdout, compare.html, exit 1 on new failures."""
    from drakit.reports import ResultsError, load_results
    from drakit.reports.compare import compare_results, gate_exit_code, render_compare_html, render_compare_text
    old_path, new_path = (Path(p) for p in args.compare)
    try:
        old, new = load_results(old_path), load_results(new_path)
    except (OSError, ResultsError) as exc:
        say(f"drakit: {exc}")
        return EXIT_USAGE
    _say_recomputed(old, str(old_path))
    _say_recomputed(new, str(new_path))
    comparison = compare_results(old, new, allow_removed=args.allow_removed)
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    out = Path(args.out) if args.out else new_path.parent
    if not out_folder(out, ("compare.html",)):
        return EXIT_USAGE
    from drakit.reports.safefs import UnsafePath, write_file
    try:
        target = write_file(out, "compare.html", render_compare_html(comparison), what="--out")
    except UnsafePath as exc:
        say(f"drakit: {exc}")
        return EXIT_USAGE
    _print_to_pipe(render_compare_text(comparison, color=color) + clean_name(f"wrote {target}") + "\n")
    return gate_exit_code(comparison)


def _print_to_pipe(text: str) -> None:
    """Write to stdout; a reader that stopped early (``| head``) ends the output quietly, and
    stdout goes to /dev/null so the interpreter's last flush does not complain either."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
