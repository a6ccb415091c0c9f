"""``drakit lint``, and the case paths a command line gives (shared with ``drakit run``)."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

from .console import say

SUITES = Path(__file__).with_name("suites")
EXIT_OK, EXIT_USAGE = 0, 2


def case_paths(raw: list[str], *, links: bool = False) -> list[Path] | None:
    """The paths given (the bundled suites when none); None, and the one line, when one is
    missing. *links*: a dangling or looping symlink is kept for the loader to report (lint);
    else it is named here (run: pytest cannot collect what does not resolve)."""
    paths = [Path(p) for p in raw] or [SUITES]
    missing = [p for p in paths if not (os.path.lexists(p) if links else p.exists())]
    if missing:
        def name(p: Path) -> str:
            if not p.is_symlink():
                return str(p)
            with contextlib.suppress(OSError):
                return f"{p} (a symlink to {os.readlink(p)!r} that leads nowhere)"
            return str(p)
        say(f"drakit: no such file or folder: {', '.join(map(name, missing))}")
        return None
    return paths


def cmd_lint(args: argparse.Namespace) -> int:
    from drakit.fake_driver.profile import load_profile, load_vendor_profile
    from .cases.finder import find_case_files
    from .cases.loader import MAX_BYTES, CaseIds, load_file, parse_size
    from .spec.needs import NEEDS_FAKE_DRIVER, vendor_unmet
    paths = case_paths(args.paths, links=True)
    if paths is None:
        return EXIT_USAGE
    try:
        max_bytes = parse_size(args.max_case_size) if args.max_case_size else MAX_BYTES
    except ValueError as exc:
        say(f"drakit lint: --max-case-size: {exc}")
        return EXIT_USAGE
    try:
        vendor = load_vendor_profile(args.vendor)
    except (OSError, ValueError) as exc:
        print(exc)  # file:line: field: problem
        print("vendor profile: 1 error")
        return EXIT_USAGE
    if args.vendor:
        from .vendorcheck import program_problems
        problems = program_problems(vendor)
        for problem in problems:
            print(f"{args.vendor}: {problem}")
        if problems:
            print(f"vendor profile: {len(problems)} error{'s' if len(problems) > 1 else ''}")
            return EXIT_USAGE
        kind = "drakit's fake driver" if vendor.fake else "a vendor's own driver"
        print(f"{args.vendor}: vendor profile {vendor.name!r} is valid: {', '.join(vendor.driver_names)} ({kind})")
    # a path given is read whatever it is; in folders, every *.case.yaml that is not a folder
    # (a FIFO or a dangling link is reported by the loader, never waited on or skipped), each
    # real folder once: the rule drakit run's collection follows too
    files = find_case_files(paths)
    if not files:
        say(f"drakit lint: no *.case.yaml file in {', '.join(map(str, paths))}")
        return EXIT_USAGE
    n_cases, n_errors, skipped = 0, 0, {NEEDS_FAKE_DRIVER: 0, "not-applicable": 0}
    vocabulary = frozenset(load_profile())
    ids = CaseIds()
    every = []
    for f in files:
        loaded = ids.admit(load_file(f, vendor.placeholders(), vocabulary=vocabulary, max_bytes=max_bytes))
        n_cases += len(loaded.cases)
        every += loaded.cases
        for case in loaded.cases:
            unmet = vendor_unmet(case, vendor)
            if unmet:
                skipped[unmet[0]] += 1
        for err in loaded.errors:
            n_errors += 1
            print(err)
    print(f"{len(files)} files, {n_cases} cases, {n_errors} errors")
    if args.vendor and any(skipped.values()):
        print(f"with this profile: {skipped[NEEDS_FAKE_DRIVER]} cases need drakit's fake driver and "
              f"{skipped['not-applicable']} use placeholders it does not define (both are skipped)")
    if args.vendor:
        from .lintdriver import driver_lines
        for line in driver_lines(every, vendor):
            print(line)
    return EXIT_USAGE if n_errors else EXIT_OK
