"""``drakit report --merge SHARD.json...``: a run's shards merged into one run and its reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from drakit.reports.names import clean_name

from .console import say

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def merge_results(sources: Sequence[tuple[str, dict[str, Any]]], out: Path, **how: Any) -> dict[str, Any]:
    """Merge the shards' results (``(name, results)``) and write results.json, junit.xml and
    report.html to *out*; the merged results. ShardMergeError when they are not one run's.
    *how*: ``lost`` and ``extra_reasons`` of :func:`drakit.reports.shardmerge.merge_shards`."""
    from drakit.reports.shardmerge import merge_shards
    from .results import write_results
    merged = merge_shards(sources, **how)
    write_results(merged, out)
    return merged


def merge_shard_files(paths: Sequence[str], out_arg: str | None) -> int:
    from drakit.reports import ResultsError, clean_text, load_results, verdict_note
    from drakit.reports.shardmerge import ShardMergeError
    from drakit.reports.text import render_summary
    sources = []
    for path in paths:
        try:
            sources.append((path, load_results(Path(path))))
        except (OSError, ResultsError) as exc:
            say(f"drakit report --merge: {exc}")
            return EXIT_USAGE
        note = verdict_note(sources[-1][1], path)
        if note:
            say(f"drakit report --merge: {clean_text(note)}")
    out = Path(out_arg or "drakit-out")
    if any((out / "results.json").resolve() == Path(p).resolve() for p in paths):
        say(f"drakit report --merge: --out {out} would overwrite a shard's results.json: give another --out")
        return EXIT_USAGE
    from .outdir import out_folder
    if not out_folder(out, command="drakit report --merge"):
        return EXIT_USAGE
    try:
        merged = merge_results(sources, out)
    except ShardMergeError as exc:
        say(f"drakit report --merge: {exc}")
        return EXIT_USAGE
    except OSError as exc:
        say(f"drakit report --merge: --out {out}: cannot write there: {exc.strerror or exc}")
        return EXIT_USAGE
    print(render_summary(merged, color=False, matrix=False), end="")
    print(clean_name(f"drakit: wrote {out / 'results.json'}, {out / 'junit.xml'}, {out / 'report.html'}"))
    return EXIT_OK if merged["verdict"]["result"] == "pass" else EXIT_FAILED
