"""``drakit profile init``: draft a vendor profile from a driver that runs, or from its saved slices.

Three sources, one of them:

- ``--slices FILE``: ResourceSlices (and DeviceClasses) saved with ``kubectl get -o yaml``; no
  cluster, no probing (no ``containerEnv``);
- ``--kubeconfig K``: a cluster where the driver runs: its slices and classes, then probe pods;
- ``--cluster local --plugin 'COMMAND ...'``: drakit's local cluster with two nodes running the
  driver's kubelet plugin from COMMAND (the placeholders of a profile's ``plugin.command``); for
  drakit's fake driver no ``--plugin`` is needed.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MAX_SLICES_BYTES = 64 << 20


def add_parsers(sub: Any) -> None:
    prof = sub.add_parser("profile", help="vendor profiles: draft one from a running driver (profile init)")
    psub = prof.add_subparsers(dest="profile_command", required=True)
    p = psub.add_parser("init", help="draft a version 2 vendor profile from what a running driver shows",
                        description="Draft a version 2 vendor profile of a DRA driver from its ResourceSlices and "
                                    "DeviceClasses and, where pods can run, from the environment its CDI edits give "
                                    "containers. Every value written was observed; what drakit cannot know is a "
                                    "commented line saying what to decide. Give one source: --slices FILE, "
                                    "--kubeconfig K, or --cluster local (with --plugin for a driver of your own).")
    p.add_argument("--driver", required=True, metavar="NAME", help="the driver name, as in its ResourceSlices")
    p.add_argument("--slices", default=None, metavar="FILE",
                   help="saved ResourceSlices (and DeviceClasses), YAML or JSON, e.g. from "
                        "'kubectl get resourceslices,deviceclasses -o yaml': no cluster, no probing")
    p.add_argument("--kubeconfig", default=None, help="a cluster where the driver runs")
    p.add_argument("--context", default=None, help="with --kubeconfig: the kubeconfig context")
    p.add_argument("--cluster", default=None, choices=("local",), help="start drakit's local cluster and the driver on it")
    p.add_argument("--plugin", default=None, metavar="'COMMAND ...'",
                   help="with --cluster local: the driver's kubelet plugin command, one shell-quoted string, with the "
                        "placeholders of a profile's plugin.command ({node}, {kubeconfig}, {cdiDir}, {registryDir}, "
                        "{pluginsDir}, {metricsPort}, {drakitBin}, ...)")
    p.add_argument("--runtime", default=None, choices=("containerd", "fake"), help="with --cluster local: the nodes' runtime")
    p.add_argument("--role", default=None, help="the role key for the driver (default: from its name: gpu, nic, cpu, else dev)")
    p.add_argument("--name", default=None, help="the profile's name (default: the driver's)")
    p.add_argument("--no-pods", action="store_true", help="read the cluster's objects only; run no probe pod")
    p.add_argument("--pod-image", default=None, help="the probe pods' image (default: the driver suite's busybox)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the probe pods (default: 120)")
    p.add_argument("-o", "--out", default="-", metavar="FILE", help="where to write the profile (default: stdout)")


def run(args: argparse.Namespace) -> int:
    if args.profile_command != "init":
        return EXIT_USAGE
    sources = [s for s, given in (("--slices", args.slices), ("--kubeconfig", args.kubeconfig),
                                  ("--cluster local", args.cluster)) if given]
    if len(sources) != 1:
        return _usage("give one of --slices FILE, --kubeconfig K and --cluster local"
                      + (f", not {' and '.join(sources)}" if sources else ""))
    if args.plugin is not None and not args.cluster:
        return _usage("--plugin starts the driver on drakit's local cluster: give --cluster local with it")
    if args.role is not None and not _is_key(args.role):
        return _usage(f"--role {args.role!r}: a role is an identifier such as gpu or nic")
    from drakit.fake_driver.profile import _is_subdomain
    if not _is_subdomain(args.driver, 63):
        return _usage(f"--driver {args.driver!r}: a driver name is a DNS subdomain of at most 63 characters")
    command: list[str] = []
    if args.plugin is not None:
        from drakit.fake_driver.profile import template_problem
        try:
            command = shlex.split(args.plugin)
        except ValueError as exc:
            return _usage(f"--plugin: {exc}")
        if not command:
            return _usage("--plugin: an empty command")
        problem = next((p for p in map(template_problem, command) if p), None)
        if problem:
            return _usage(f"--plugin: {problem}")
    from .infer import InferError
    from .render import Extras
    extras = Extras(plugin_command=tuple(command), profile_name=args.name or "")
    try:
        if args.slices:
            draft = _from_file(args, extras)
        else:
            draft = _from_cluster(args, extras)
    except InferError as exc:
        print(f"drakit profile init: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except _Usage as exc:
        return _usage(str(exc))
    except _Failed as exc:
        print(f"drakit profile init: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return _write(args, draft, extras)


class _Usage(Exception):
    pass


class _Failed(Exception):
    pass


def _usage(message: str) -> int:
    print(f"drakit profile init: {message}", file=sys.stderr)
    return EXIT_USAGE


def _is_key(text: str) -> bool:
    import re
    return bool(re.match(r"^[a-z][A-Za-z0-9]*$", text))


def _from_file(args: argparse.Namespace, extras: Any) -> Any:
    from .infer import infer
    from .objects import read_objects_file
    slices, classes = read_objects_file(Path(args.slices), MAX_SLICES_BYTES, _Usage)
    extras.source = f"saved objects in {Path(args.slices).name}"
    extras.env_note = "--slices runs no pod"
    return infer(args.driver, slices, classes, role=args.role, source=args.slices)


def _from_cluster(args: argparse.Namespace, extras: Any) -> Any:
    from ..backends.base import HarnessError
    from .clusterrun import on_kubeconfig, on_local
    try:
        if args.cluster:
            return on_local(args, extras, _Usage)
        return on_kubeconfig(args, extras)
    except HarnessError as exc:
        raise _Failed(str(exc)) from None


def _write(args: argparse.Namespace, draft: Any, extras: Any) -> int:
    import yaml

    from drakit.fake_driver.profile import ProfileError, parse_profile
    from .render import render
    shown = " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["profile"] else ""
    text = render(draft, extras, shown.removeprefix("profile init ").strip())
    try:
        parse_profile(yaml.safe_load(text), args.out)
    except (ProfileError, yaml.YAMLError) as exc:  # a bug of drakit's: say it, keep the text
        print(f"drakit profile init: the draft does not load (a drakit bug, please report it): {exc}", file=sys.stderr)
        sys.stdout.write(text)
        return EXIT_FAILED
    if args.out == "-":
        sys.stdout.write(text)
    else:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"drakit profile init: -o {args.out}: cannot write: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_FAILED
    optional = [b.name for b in draft.optional] + [b for b, _ in extras.observed if b not in {x.name for x in draft.optional}]
    env = len(extras.env.templates) if extras.env is not None else 0
    print(f"drakit profile init: {'wrote ' + args.out if args.out != '-' else 'profile'}: driver {draft.driver}, "
          f"{len(draft.attributes)} attributes, {len(draft.capacities)} capacities, pools {draft.pools}, "
          f"optional [{', '.join(optional)}], {env} containerEnv template(s)", file=sys.stderr)
    for note in extras_notes(extras):
        print(f"  note: {note}", file=sys.stderr)
    if args.out != "-":
        print(f"next: read its commented lines, then: drakit lint --vendor {args.out}", file=sys.stderr)
    return EXIT_OK


def extras_notes(extras: Any) -> list[str]:
    notes = list(getattr(extras, "notes", []))
    if extras.env is not None:
        notes += list(extras.env.notes)
    return notes
