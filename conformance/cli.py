"""``drakit``: run the conformance suites, re-render reports, lint cases, list features."""

from __future__ import annotations

import signal as _signal
import sys as _sys

# ``drakit run`` catches SIGINT/SIGTERM from its first instant: here, before any other import (the
# interpreter's own start is the only moment left), a signal is only noted; main() hands it to
# conformance.interrupt, and the run stops once its cases are collected, with its files written.
_EARLY: list[int] = []
if ((__name__ == "__main__" or _sys.argv[0].rsplit("/", 1)[-1] in ("drakit", "kubectl-drakit"))
        and "run" in _sys.argv[1:] and _signal.getsignal(_signal.SIGTERM) is _signal.SIG_DFL):
    for _sig in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(_sig, lambda signum, frame: _EARLY.append(signum))

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from drakit.reports.names import clean_name

from .console import say
from .crash import CRASH_DIR_ENV, EXIT_BUG, last_resort
from .lintcli import case_paths as _paths, cmd_lint
from .outdir import LOCK_FILE, RUN_FILES, lock_out as _lock_out, out_folder as _out_folder
from .vendorcheck import plugin_problem
from .workers import max_workers as max_workers, workers_for as _workers  # max_workers: part of this module's interface

SUITES = Path(__file__).with_name("suites")
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="drakit", description="Conformance kit for Kubernetes 1.37 Dynamic Resource Allocation.")
    from .results import _kit_version
    p.add_argument("--version", action="version", version=f"drakit {_kit_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run case suites (the bundled ones when no path is given)")
    run.add_argument("paths", nargs="*", help="case files or folders (default: the bundled suites)")
    run.add_argument("--backend", default="reference", help="reference, cluster, or both comma-separated (default: reference)")
    run.add_argument("--out", default="drakit-out", help="folder for results.json, junit.xml, report.html (default: drakit-out); "
                     "written without following a link, a link or folder in their place refused")
    run.add_argument("-n", "--workers", default="0", help="parallel workers (pytest-xdist), a number or 'auto' (default: 0; 'auto' on the reference "
                          "backend alone is serial, which is faster there)")
    run.add_argument("-k", dest="keyword", default=None, help="only cases matching this pytest -k expression")
    run.add_argument("-m", dest="markexpr", default=None, help="only cases matching this marker expression, e.g. feature_core")
    run.add_argument("--feature-gates", default="", help="reference backend gates on top of the 1.37 defaults, A=true,B=false")
    run.add_argument("--vendor", "--profile", dest="vendor", default=None, metavar="PROFILE",
                     help="vendor profile YAML: the driver under test, its device classes and attribute names "
                          "(default: drakit's fake drivers, fake_driver/profile.yaml). For a vendor's own driver "
                          "the cluster's ResourceSlices are used and cases needing the fake driver are skipped")
    run.add_argument("--kubeconfig", default=None,
                     help="cluster backend: the cluster's kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
    run.add_argument("--context", default=None, help="cluster backend: kubeconfig context (default: current-context)")
    run.add_argument("--install-driver", action="store_true",
                     help="cluster backend: install drakit's fake driver for the run and remove it afterwards "
                          "(without it drakit installs nothing cluster-wide beyond each case's own objects)")
    run.add_argument("--driver-image", default=None, help="cluster backend: the fake driver image for --install-driver")
    run.add_argument("--cluster", default=None, choices=("local",),
                     help="cluster backend: start drakit's local control plane for the run (see 'drakit cluster build')")
    run.add_argument("--runtime", default=None, choices=("containerd", "fake"), help="--cluster local: the kubelet nodes' "
                     "runtime, containerd + runc (default: real containers) or drakit's fake CRI (faster; runs no process)")
    run.add_argument("--keep-on-failure", action="store_true", help="cluster backend: keep a failed case's objects")
    run.add_argument("--max-case-size", default=None, metavar="SIZE",
                     help="refuse case files larger than this, e.g. 4MiB (default: 1 MiB)")
    run.add_argument("--shard", default=None, metavar="I/N",
                     help="run only the i-th of N shards of the cases (split by case id; the cluster-wide ones all in "
                          "shard 1); merge the shards' results.json with 'drakit report --merge'")
    run.add_argument("--shard-lock", default=None, metavar="NAMESPACE/NAME",
                     help="cluster backend with --shard: the Lease the shards share so that cluster-wide cases run "
                          "alone (default: $DRAKIT_SHARD_LOCK, else default/drakit-shard-lock)")
    from .incluster.run import add_run_options
    add_run_options(run)  # --in-cluster, --shards, --image, --keep, --host-network, --sonobuoy
    run.add_argument("--case-timeout", default=None, metavar="SECONDS",
                     help="the time budget of every case, e.g. 90s or 5m (default: sized from each case's steps, "
                          "or its timeBudget); a case over it is an error and the run goes on")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress and no matrix: print only failures and the verdict")
    run.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    run.add_argument("--plain", action="store_true",
                     help="output for logs: no colour, no line rewriting, a progress line per tenth of the run "
                          "(the default when stdout is not a terminal)")

    rep = sub.add_parser("report", help="re-render junit.xml and report.html from a results.json, or compare two runs",
                         description="Re-render junit.xml and report.html from a results.json, or, with --compare, "
                                     "show what changed between two runs and write compare.html. With --compare the "
                                     "exit code is 1 when a case fails or errors in NEW that did not in OLD (cases "
                                     "new in NEW included) or when a required case that passed in OLD is missing or "
                                     "skipped in NEW (unless --allow-removed), 0 otherwise, 2 when a file cannot be "
                                     "read: use it to gate CI on regressions.")
    rep.add_argument("results", nargs="?", help="results.json of an earlier run")
    rep.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), default=None,
                     help="compare two results.json files: newly failing, newly passing, newly skipped, added, removed")
    rep.add_argument("--allow-removed", action="store_true",
                     help="with --compare: required cases that passed in OLD and are missing or skipped in NEW are "
                          "listed but do not fail the gate (a suite or selection shrunk on purpose)")
    rep.add_argument("--merge", nargs="+", action="extend", default=[], metavar="FILE",
                     help="without RESULTS.json: the results.json of every shard of a run ('drakit run --shard i/N'), "
                          "merged into one run with one verdict (incomplete when a case is missing or doubled). "
                          "With RESULTS.json: add the cases of another source, e.g. node-check.json from 'drakit "
                          "node-check --out' (their backend, node-plugin, becomes a matrix column)")
    rep.add_argument("--out", default=None, help="output folder (default: next to results.json, or next to NEW)")

    lint = sub.add_parser("lint", help="load case files and print every problem (no target needed)",
                          description="Load case files (the bundled suites when no path is given) and print every "
                                      "problem as file:line: path: message. With --vendor the profile is checked "
                                      "first, and the cases it leaves out are counted.")
    lint.add_argument("paths", nargs="*", help="case files or folders (default: the bundled suites)")
    lint.add_argument("--vendor", "--profile", dest="vendor", default=None, metavar="PROFILE",
                      help="vendor profile YAML to check and to resolve the placeholders with")
    lint.add_argument("--max-case-size", default=None, metavar="SIZE",
                      help="refuse case files larger than this, e.g. 4MiB (default: 1 MiB)")

    sub.add_parser("features", help="list the DRA features of Kubernetes 1.37 that drakit knows")
    for module in _command_modules().values():
        module.add_parsers(sub)
    _describe(p)
    return p


def _describe(parser: argparse.ArgumentParser) -> None:
    """Every subcommand's --help gets a description: its line of the command list, if it has none."""
    for action in (a for a in parser._actions if isinstance(a, argparse._SubParsersAction)):
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            sub.description = sub.description or (helps[name][:1].upper() + helps[name][1:].rstrip(".") + ".")
            _describe(sub)


@last_resort
def main(argv: Sequence[str] | None = None) -> int:
    if _command(sys.argv[1:] if argv is None else argv) == "run":
        # before anything slow (the parser imports every command's modules): a signal from the first instant is
        # recorded; the run stops once its cases are collected, counting each as not run (conformance.interrupt)
        from .interrupt import INTERRUPTS
        INTERRUPTS.install()
        INTERRUPTS.hold()
        if _EARLY:  # came while the modules were imported: recorded now, as if it came now
            INTERRUPTS.arrived(_EARLY[0])
    try:
        return _dispatch(argv)
    except KeyboardInterrupt:  # Ctrl-C in a command without its own handling: one line, no traceback
        say("drakit: interrupted")
        return 130


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand of a command line (its first word that is not an option), before parsing."""
    return next((a for a in argv if not a.startswith("-")), None)


def _dispatch(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "report":
        from .reportcli import cmd_report
        return cmd_report(args)
    if args.command == "lint":
        return cmd_lint(args)
    if args.command == "features":
        return cmd_features()
    return _command_modules()[args.command].run(args)  # type: ignore[no-any-return]


def _command_modules() -> dict[str, Any]:
    """The subcommands that live in modules of their own: name -> module (add_parsers, run)."""
    from drakit.clusters import cli as cluster_cli
    from drakit.clusters.images import cli as image_cli
    from drakit.clusters.nodeagent import cli as agent_cli
    from drakit.fake_driver import cli as driver_cli
    from .explain import cli as explain_cli
    from .incluster import sonobuoy
    from .nodecheck import cli as nodecheck_cli
    from .profileinit import cli as profile_cli
    return {"cluster": cluster_cli, "image": image_cli, "driver": driver_cli, "node-check": nodecheck_cli,
            "node-agent": agent_cli, "explain": explain_cli, "sonobuoy-plugin": sonobuoy, "profile": profile_cli}



def _check_run_options(args: argparse.Namespace) -> str | None:
    """The option errors drakit can see before pytest starts, named as the user typed them."""
    from .features import parse_gates
    from .plugin import BACKEND_ORDER
    workers = str(args.workers)
    if workers not in ("auto", "logical") and not (workers.isdigit() and workers.isascii()):
        return f"-n/--workers: {workers!r} is not a number of workers or 'auto'"
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    unknown = [b for b in backends if b not in BACKEND_ORDER]
    if unknown or not backends:
        return f"--backend: unknown backend {', '.join(map(repr, unknown)) or '(none)'}; use reference, cluster or both"
    try:
        parse_gates(args.feature_gates)
    except ValueError as exc:
        return f"--feature-gates: {exc}"
    if args.case_timeout is not None:
        from .cases.budget import seconds_option
        try:
            seconds_option(args.case_timeout)
        except ValueError as exc:
            return f"--case-timeout: {exc}"
    if args.shard is not None:
        from .shards import parse_shard
        try:
            parse_shard(args.shard)
        except ValueError as exc:
            return f"--shard: {exc}"
    cluster_only = [flag for flag, given in (("--kubeconfig", args.kubeconfig), ("--context", args.context),
                                             ("--cluster", args.cluster), ("--install-driver", args.install_driver), ("--runtime", args.runtime))
                    if given]
    if cluster_only and "cluster" not in backends:
        verb = "applies" if len(cluster_only) == 1 else "apply"
        return (f"{', '.join(cluster_only)} only {verb} to the cluster backend, and --backend is {args.backend!r}: "
                f"add --backend cluster (or reference,cluster)")
    return plugin_problem(args) if args.cluster and args.vendor else None


def cmd_run(args: argparse.Namespace) -> int:
    from .interrupt import INTERRUPTS
    INTERRUPTS.install()  # SIGINT/SIGTERM: stop, clean up, results with verdict incomplete, exit 130/143
    try:
        code = _run(args)
    except KeyboardInterrupt:  # a signal outside pytest (before it started): nothing ran
        code = EXIT_FAILED
    finally:
        INTERRUPTS.enter("teardown")  # what is left is printing: a signal is only recorded
    if args.sonobuoy:  # the verdict travels in junit.xml; sonobuoy's worker waits for the done file
        from drakit.reports.safefs import UnsafePath
        from .incluster.sonobuoy import hand_over
        from .results import written_folder
        written = written_folder(Path(args.out))
        try:
            print(clean_name(f"drakit: handed {hand_over(written)} to sonobuoy"))
        except UnsafePath as exc:  # sonobuoy's results folder holds a link or a folder where a file belongs
            say(f"drakit: sonobuoy's results: {exc}")
            return EXIT_USAGE
        results = written / "results.json"  # the run's own, not the one written as it started
        finished = results.is_file() and results.stat().st_ino != getattr(args, "unfinished_inode", None)
        return EXIT_OK if finished and (written / "junit.xml").is_file() else code
    return INTERRUPTS.exit_code() or code


def _run(args: argparse.Namespace) -> int:
    if args.in_cluster:
        from .incluster.run import run_in_cluster
        return run_in_cluster(args)
    import pytest
    from .interrupt import INTERRUPTS
    from .progress import ProgressReporter, progress_mode
    problem = _check_run_options(args)
    if problem:
        say(f"drakit run: {problem}")
        return EXIT_USAGE
    paths = _paths(args.paths)
    if paths is None:
        return EXIT_USAGE
    out = Path(args.out)
    if not _out_folder(out, RUN_FILES + (LOCK_FILE,)):
        return EXIT_USAGE
    args.out_lock = _lock_out(out)  # held until the process ends
    if args.out_lock is None:
        return EXIT_USAGE
    results_path = out / "results.json"
    from .results import write_unfinished
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    started = args.unfinished_inode = write_unfinished(out, backends)["results.json"].stat().st_ino  # replaced at the end
    root = Path(os.path.commonpath([str(p.absolute()) for p in paths]))
    if not root.is_dir():  # a file, a FIFO, a link: its folder
        root = root.parent
    # pytest's own terminal output is off: ProgressReporter prints progress and failures on the
    # controller, and the summary below is rendered from results.json.
    pytest_args = ["-c", os.devnull, "--rootdir", str(root), "-p", "no:cacheprovider", "-p", "no:terminal",
                   "--drakit-backend", args.backend, "--drakit-out", str(out), "-n", _workers(args),
                   "--drakit-handle-signals"]
    if str(args.workers) != "0":  # a gate set's cases stay on one worker (xdist_group: its alternate local cluster)
        pytest_args += ["--dist", "loadgroup"]
    if args.feature_gates:
        pytest_args += ["--drakit-feature-gates", args.feature_gates]
    if args.vendor:
        pytest_args += ["--drakit-vendor", args.vendor]
    if args.kubeconfig:
        pytest_args += ["--drakit-kubeconfig", args.kubeconfig]
    if args.context:
        pytest_args += ["--drakit-context", args.context]
    if args.install_driver:
        pytest_args += ["--drakit-install-driver"]
    if args.driver_image:
        pytest_args += ["--drakit-driver-image", args.driver_image]
    if args.cluster:
        pytest_args += ["--drakit-cluster", args.cluster]
    os.environ.update({"DRAKIT_RUNTIME": args.runtime} if args.runtime else {})  # every worker's local clusters
    if args.keep_on_failure:
        pytest_args += ["--drakit-keep-on-failure"]
    if args.max_case_size:
        pytest_args += ["--drakit-max-case-size", args.max_case_size]
    if args.case_timeout:
        pytest_args += ["--drakit-case-timeout", args.case_timeout]
    if args.keyword:
        pytest_args += ["-k", args.keyword]
    if args.markexpr:
        pytest_args += ["-m", args.markexpr]
    if args.shard:
        pytest_args += ["--drakit-shard", args.shard]
    if args.shard_lock:
        pytest_args += ["--drakit-shard-lock", args.shard_lock]
    pytest_args += [str(p) for p in paths]
    from drakit.clusters.leftovers import sweep
    sweep(progress=lambda m: say(f"drakit: {m}"))  # what killed runs left behind
    mode, color = progress_mode(quiet=args.quiet, plain=args.plain, stream=sys.stdout)
    progress = ProgressReporter(sys.stdout, mode=mode, verbose=args.verbose, color=color)
    os.environ.setdefault(CRASH_DIR_ENV, str(out.absolute()))  # a bug's traceback lands beside results.json
    plugins: list[Any] = [progress]
    channel = None
    if args.emit_results:
        from .incluster.channel import Channel
        from .incluster.frames import ProgressLines
        channel = Channel(os.environ["DRAKIT_RESULTS_CONFIGMAP"]) if os.environ.get("DRAKIT_RESULTS_CONFIGMAP") else None
        plugins.append(ProgressLines(sys.stdout, channel))
    code = pytest.main(pytest_args, plugins=plugins)
    if code == pytest.ExitCode.INTERNAL_ERROR and not INTERRUPTS.interrupted:  # the one line was printed by ProgressReporter
        return EXIT_BUG
    if code == pytest.ExitCode.USAGE_ERROR and not INTERRUPTS.interrupted:
        return EXIT_USAGE
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        from .nomatch import no_cases_line
        say(no_cases_line(args, paths))
    from .results import written_folder
    out = written_folder(out)  # another folder when --out could not take them at the end (said)
    results_path = out / "results.json"
    if not results_path.is_file() or results_path.stat().st_ino == started:
        say(f"drakit: the run did not write {results_path}")
        return EXIT_USAGE
    results = json.loads(results_path.read_text())
    if args.emit_results:
        from .incluster.frames import emit_results
        emit_results(results_path.read_text(encoding="utf-8"), sys.stdout)
        if channel is not None:
            channel.results(results_path.read_text(encoding="utf-8"), len(results["cases"]))
    from drakit.reports.text import render_summary
    print("")
    print(render_summary(results, color=color, matrix=mode != "quiet", rule=bool(getattr(args, "verbose", False))), end="")
    print(clean_name(f"drakit: wrote {results_path}, {out / 'junit.xml'}, {out / 'report.html'}"))
    if INTERRUPTS.interrupted:
        say(f"drakit: interrupted by {INTERRUPTS.signal}: verdict {results['verdict']['result']}")
        return EXIT_FAILED  # cmd_run turns it into 130/143
    if any(c.get("backend") == "-" for c in results["cases"]):
        return EXIT_USAGE
    if results["verdict"]["result"] == "pass":
        return EXIT_OK
    # a shard is a part of a run (verdict incomplete): it exits 0 when its own cases did
    return EXIT_OK if args.shard and {r["code"] for r in results["verdict"]["reasons"]} == {"shard"} else EXIT_FAILED


def cmd_features() -> int:
    from .features import FEATURES
    print(f"{'feature':26} {'KEP':6} {'stage':6} {'default':8} gates")
    for f in FEATURES:
        print(f"{f.id:26} {f.kep:6} {f.stage:6} {'on' if f.default_on else 'off':8} {', '.join(f.gates) or '-'}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
