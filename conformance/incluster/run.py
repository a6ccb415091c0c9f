"""``drakit run --in-cluster --shards N``: the command (options, console, results, exit code)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MAX_SHARDS = 64


def add_run_options(run: argparse.ArgumentParser) -> None:
    """The options of ``drakit run`` for a run in the cluster and for a shard or plugin in a pod."""
    run.add_argument("--in-cluster", action="store_true",
                     help="run the cases inside the cluster (--kubeconfig): one Job per shard (--shards), results "
                          "brought back from their logs and merged; everything created is deleted at the end")
    run.add_argument("--shards", type=int, default=2, metavar="N", help="--in-cluster: how many Jobs (default: 2)")
    run.add_argument("--image", default=None, help="--in-cluster: the drakit image (default: drakit/fake-driver:<version>, "
                                                   "'drakit image build')")
    run.add_argument("--keep", action="store_true", help="--in-cluster: leave the run's namespace and RBAC in place")
    run.add_argument("--start-timeout", type=float, default=300.0, metavar="SECONDS",
                     help="--in-cluster: a shard whose pod has not started by then is lost (default: 300)")
    run.add_argument("--host-network", action="store_true",
                     help="--in-cluster: shard pods in the nodes' network, reaching the API server at the kubeconfig's "
                          "address (clusters whose pods cannot reach the kubernetes Service: drakit's local cluster)")
    run.add_argument("--sonobuoy", action="store_true", help="as a sonobuoy plugin: the reports in a tarball in "
                     "$SONOBUOY_RESULTS_DIR and its 'done' file (see 'drakit sonobuoy-plugin'); exit 0 once handed over")
    run.add_argument("--emit-results", action="store_true", help=argparse.SUPPRESS)  # a shard in a pod: progress and results in its log


def default_image() -> str:
    from drakit.fake_driver.deploy import DEFAULT_IMAGE
    return DEFAULT_IMAGE  # the offline-built image: drakit, its Python, the suites


def _problem(args: argparse.Namespace) -> str | None:
    if not (1 <= args.shards <= MAX_SHARDS):
        return f"--shards: {args.shards} is not 1 to {MAX_SHARDS}"
    if [b.strip() for b in args.backend.split(",") if b.strip()] not in (["reference"], ["cluster"]):
        return "--in-cluster runs the cluster backend only: drop --backend"
    for flag, given in (("--cluster", args.cluster), ("--install-driver", args.install_driver),
                        ("--driver-image", args.driver_image), ("--runtime", args.runtime),
                        ("--shard", args.shard), ("--shard-lock", args.shard_lock),
                        ("--keep-on-failure", args.keep_on_failure)):
        if given:
            return f"{flag} does not apply to --in-cluster"
    if str(args.workers) != "0":
        return "-n/--workers does not apply to --in-cluster: each shard runs its cases one after another; " \
               "give more --shards"
    # what the shards would refuse, said once here before anything is created
    from drakit.conformance.cases.budget import seconds_option
    from drakit.conformance.cases.loader import parse_size
    from drakit.conformance.features import parse_gates
    for flag, value, check in (("--feature-gates", args.feature_gates, parse_gates),
                               ("--max-case-size", args.max_case_size, parse_size),
                               ("--case-timeout", args.case_timeout, seconds_option)):
        try:
            if value:
                check(value)
        except ValueError as exc:
            return f"{flag}: {exc}"
    return None


def case_files(raw: list[str]) -> list[tuple[str, str]] | None:
    """``(path relative to the files' common folder, text)`` of the case files named (folders:
    their ``*.case.yaml``); None for none named (the image's own suites run)."""
    if not raw:
        return None
    paths = [Path(p) for p in raw]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ValueError(f"no such file or folder: {', '.join(missing)}")
    files = sorted({f.resolve() for p in paths for f in ([p] if p.is_file() else p.rglob("*.case.yaml"))})
    if not files:
        raise ValueError(f"no *.case.yaml file in {', '.join(raw)}")
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    from ..inputs import CASE_FILE, InputError, read_text
    try:  # drakit's one reader: regular files, their size bounded (a ConfigMap holds less anyway)
        return [(str(f.relative_to(root)), read_text(f, CASE_FILE)) for f in files]
    except InputError as exc:
        raise ValueError(str(exc)) from None


def vendor_profile(path: str | None) -> tuple[str, str] | None:
    """``(file name, text)`` of the vendor profile to carry into the shards (None: none given),
    checked here first: a bad profile is a ValueError of one line, before anything is created."""
    if not path:
        return None
    from drakit.fake_driver.profile import ProfileError, parse_profile_text

    from ..inputs import PROFILE, InputError, read_text
    try:  # read once, by drakit's one reader; the text checked is the text carried
        text = read_text(path, PROFILE)
        parse_profile_text(text, path)
        return Path(path).name, text
    except ProfileError as exc:  # file:line: field: problem
        raise ValueError(f"vendor profile: {exc}") from None
    except InputError as exc:
        raise ValueError(f"vendor profile: {path}: cannot read it: {exc.reason}") from None


def shard_args(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for flag, value in (("-k", args.keyword), ("-m", args.markexpr), ("--feature-gates", args.feature_gates),
                        ("--max-case-size", args.max_case_size), ("--case-timeout", args.case_timeout)):
        if value:
            out += [flag, value]
    return out


def run_in_cluster(args: argparse.Namespace) -> int:
    problem = _problem(args)
    if problem:
        print(f"drakit run: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        files = case_files(args.paths)
        profile = vendor_profile(args.vendor)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"drakit run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out)
    from ..outdir import out_folder
    if not out_folder(out, command="drakit run"):  # a link or a folder in it, or not writable: before the shards
        return EXIT_USAGE
    from drakit.conformance.backends.base import HarnessError
    from drakit.conformance.backends.kubeapi import KubeApi
    try:
        api = KubeApi(args.kubeconfig, args.context)
    except HarnessError as exc:
        print(f"drakit run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from .manifests import case_files as configmap, profile_configmap
    try:
        if files is not None:
            configmap(files, "check")
        if profile:
            profile_configmap(*profile, "check")
    except ValueError as exc:
        print(f"drakit run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from .orchestrate import InCluster
    run_id = uuid.uuid4().hex[:8]
    say = _sayer()
    server = str(api.api_client.configuration.host) if args.host_network else None
    from .channel import PART_ENV, part_bytes
    part = part_bytes(os.environ) if os.environ.get(PART_ENV) else None  # carried into the shards
    from drakit.conformance.backends.gatemetrics import local_component_gates, local_run_dir
    local = local_run_dir(api.target.config_file)  # drakit's local cluster: its scheduler's gates, for the shards
    run = InCluster(api, run_id, args.shards, args.image or default_image(), shard_args(args), files, say=say,
                    api_server=server, start_timeout=args.start_timeout, profile=profile, part=part,
                    component_gates=local_component_gates(local) if local is not None else None)
    interrupted: str | None = None  # SIGINT/SIGTERM: drakit.conformance.interrupt raises KeyboardInterrupt
    started = time.monotonic()
    from drakit.conformance.interrupt import INTERRUPTS
    try:
        try:
            # drakit run holds a signal from its first instant (cli.main) until pytest has collected
            # the cases; there is no pytest here: from now on a signal stops the shards (one that
            # came already does so now, before anything is created)
            INTERRUPTS.release()
            run.create()
            last, failures = "", 0
            while not run.finished():
                try:
                    run.poll()
                    failures = 0
                except KeyboardInterrupt:
                    raise
                except Exception:  # noqa: BLE001 - the API server may blink; a minute of it ends the run
                    failures += 1
                    if failures * POLL_SECONDS > 60:
                        raise
                line = run.progress_line()
                if line != last:
                    say(f"drakit: {line}")
                    last = line
                if not run.finished():
                    time.sleep(POLL_SECONDS)
        except KeyboardInterrupt as exc:
            interrupted = str(exc) or "SIGINT"
            say(f"drakit: interrupted by {interrupted}: stopping the shards")
        except Exception as exc:  # noqa: BLE001 - the API refused something: say it, delete what was made
            from drakit.conformance.backends.kubeapi import first_line
            say(f"drakit: in-cluster run failed: {first_line(exc)}")
            interrupted = interrupted or "error"
    finally:
        INTERRUPTS.enter("teardown")  # a signal from here on is only recorded: the deletes finish
        with INTERRUPTS.shield():
            wall = time.monotonic() - started
            if args.keep:
                say(f"drakit: --keep: namespace {run.namespace} and ClusterRole {run.namespace} left in place")
            else:
                for p in run.delete():
                    say(f"drakit: deleting: {p}")
                left = run.leftovers()
                say("drakit: deleted everything the run created" if not left
                    else f"drakit: still in the cluster: {', '.join(left[:10])}")
    return _report(run, out, interrupted, wall)


POLL_SECONDS = 2.0


def _sayer() -> Any:
    def say(text: str) -> None:
        print(text, flush=True)
    return say


def _report(run: Any, out: Path, interrupted: str | None, wall: float) -> int:
    from drakit.conformance.shardcli import merge_results
    from drakit.reports.text import render_summary
    lost = {s.index: s.why for s in run.shards if s.results is None}
    for index, why in lost.items():
        print(f"drakit: shard {index}/{run.count} lost: {why or 'it did not end'}")
    parts = [(f"shard {s.index}/{run.count} (pod {s.pod})", s.results) for s in run.shards if s.results is not None]
    extra = []
    if interrupted in ("SIGINT", "SIGTERM"):
        extra.append({"code": "interrupted", "signal": interrupted, "phase": "cases",
                      "message": f"interrupted by {interrupted} while the shards ran: "
                                 f"{len(parts)} of {run.count} shards brought back"})
    if not parts:
        print(f"drakit: verdict INCOMPLETE: no shard brought results back ({wall:.0f} s); nothing written",
              file=sys.stderr)
        return EXIT_FAILED
    from drakit.reports.safefs import UnsafePath, write_file
    from ..results import written_folder
    merged = merge_results(parts, out, lost={i: (w or "it did not end") for i, w in lost.items()}, extra_reasons=extra)
    out = written_folder(out)  # another folder when --out refused them (said)
    for s in run.shards:
        if s.results is not None:
            try:
                write_file(out, f"shard-{s.index}.json", json.dumps(s.results), what="--out")
            except UnsafePath as exc:
                print(f"drakit: {exc}", file=sys.stderr)
    print(render_summary(merged, color=False, matrix=True), end="")
    print(f"drakit: {run.count} shards in the cluster, {wall:.1f} s wall; wrote {out / 'results.json'}, "
          f"{out / 'junit.xml'}, {out / 'report.html'}")
    return EXIT_OK if merged["verdict"]["result"] == "pass" else EXIT_FAILED
