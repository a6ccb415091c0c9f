"""``drakit node-check``: check any DRA driver's kubelet plugin over gRPC, playing the kubelet.

Wire into ``drakit`` with ``add_parsers(subparsers)`` and ``run(args)``. Exit status: 0 when no
required case failed (findings, failed optional cases, are listed but do not fail the run), 1
when one did, 2 for bad usage (one line: an unreadable claims file, a claim that is not
allocated, an API server that cannot be reached, ...). With ``--out DIR`` it writes
``node-check.json`` (a list of results.json cases, backend ``node-plugin``) and
``node-check.txt`` (the summary it also prints). With ``--kubeconfig`` the claims come from the
API server: the ``--claims`` given are re-read there, and without ``--claims`` node-check makes
its own for the devices the driver publishes on its node, and deletes them at the end.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

from ..console import say

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXPECT = "drakit.dev/node-check-expect"
DEFAULT_CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))


def add_parsers(subparsers: Any) -> None:
    p = subparsers.add_parser("node-check",
                              help="conformance check of a DRA driver's node side (gRPC, no cluster)")
    p.add_argument("--registry-dir", required=True, type=Path,
                   help="kubelet plugin registry folder holding <driver>-reg.sock")
    p.add_argument("--driver", required=True, help="driver name the plugin must report")
    p.add_argument("--claims", type=Path, default=None,
                   help="allocated ResourceClaims (YAML/JSON) the driver can look up; claims pods use "
                        "(status.reservedFor) are prepared but never unprepared")
    p.add_argument("--kubeconfig", default=None,
                   help="the API server the driver uses: node-check re-reads --claims there, or, "
                        "without --claims, makes its own claims for the driver's published devices")
    p.add_argument("--context", default=None, help="kubeconfig context (default: current-context)")
    p.add_argument("--node", default=None,
                   help="with --kubeconfig: the node the plugin serves (default: the only node with "
                        "devices of the driver)")
    p.add_argument("--cdi-dir", type=Path, action="append", default=None,
                   help="CDI spec folder (repeatable; default: /etc/cdi and /var/run/cdi)")
    p.add_argument("--out", type=Path, default=None, help="folder for node-check.json and .txt")
    p.add_argument("--timeout", type=call_timeout, default=10.0,
                   help=f"deadline per gRPC call in seconds, more than 0 and at most {MAX_TIMEOUT:,.0f} (default: 10)")


MAX_TIMEOUT = 86400.0  # a day: a deadline beyond it is a typo (and grpc's deadline arithmetic overflows on 1e300)


def call_timeout(text: str) -> float:
    """``--timeout``: a finite number of seconds, more than 0 and at most :data:`MAX_TIMEOUT`
    (``nan``, ``inf``, ``-1``, ``0`` are refused while the command line is parsed)."""
    import math
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds")
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of seconds more than 0 and at most {MAX_TIMEOUT:,.0f}")
    return value


def run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    from drakit.fake_driver.plugin.claims import ClaimSourceError, load_claim_documents

    from .apiclaims import ApiClaims, UsageError
    from .checks import NodeCheck
    from .inputs import Options, driver_results
    from .outcome import decides_failure, render_text

    def usage(message: str) -> int:
        say(f"drakit node-check: {message}")
        return EXIT_USAGE

    from drakit.reports.safefs import UnsafePath, check_name, preflight
    try:  # the driver's name becomes a socket's file name; --out is checked before the run
        check_name(args.driver, "--driver")
        if args.out is not None:
            preflight(args.out, ("node-check.json", "node-check.txt"), "--out")
    except UnsafePath as exc:
        return usage(str(exc))
    claims: list[dict[str, Any]] = []
    if args.claims is not None:
        try:
            claims = load_claim_documents(args.claims)
        except ClaimSourceError as err:
            return usage(str(err))
        from ..explain.state import StateError, check_document, check_object
        try:  # the types of what node-check reads of each claim (metadata, spec, status), as explain checks them
            for i, claim in enumerate(claims):
                where = f"{args.claims}: ResourceClaim #{i + 1}"
                check_document(claim, where)
                check_object(claim, where)
        except StateError as err:
            return usage(str(err))
    if not args.registry_dir.is_dir():
        return usage(f"{args.registry_dir}: no such folder")
    api: ApiClaims | None = None
    header: list[str] = []
    try:
        if args.kubeconfig is not None or args.context is not None:
            api = ApiClaims(args.kubeconfig, args.context, args.driver, args.node)
            if claims:
                claims = api.current(claims)
            else:
                node, claims = api.make()
                header.append(f"claims: {len(claims)} made by node-check in namespace {api.namespace} for "
                              f"devices the driver publishes on node {node or '(all nodes)'}; deleted at the end")
        for claim in claims:
            meta = claim["metadata"]
            where = f"{args.claims or 'claims'}: ResourceClaim {meta.get('namespace', '')}/{meta['name']}"
            if not (claim.get("status") or {}).get("allocation"):
                raise UsageError(f"{where} is not allocated (a driver prepares allocated claims only)")
            if not meta.get("uid"):
                raise UsageError(f"{where} has no metadata.uid")
            if not driver_results(claim, args.driver) and not meta.get("annotations", {}).get(EXPECT):
                header.append(f"note: {where} has no device of {args.driver}; it is not used")
        in_use = [c["metadata"]["name"] for c in claims if (c.get("status") or {}).get("reservedFor")]
        if in_use:
            header.append(f"in use by pods, prepared but never unprepared: {', '.join(in_use)}")
        rerun = ["drakit", "node-check", "--registry-dir", str(args.registry_dir), "--driver", args.driver]
        for flag, value in (("--claims", args.claims), ("--kubeconfig", args.kubeconfig),
                            ("--context", args.context), ("--node", args.node)):
            if value is not None:
                rerun += [flag, str(value)]
        for d in args.cdi_dir or ():
            rerun += ["--cdi-dir", str(d)]
        options = Options(registry_dir=args.registry_dir.absolute(), driver=args.driver, claims=claims,
                          claims_file=str(args.claims or ""),
                          cdi_dirs=tuple(d.absolute() for d in args.cdi_dir or DEFAULT_CDI_DIRS),
                          timeout=args.timeout, rerun=shlex.join(rerun))
        cases = NodeCheck(options).run()
    except UsageError as err:
        return usage(str(err))
    finally:
        if api is not None:
            api.cleanup()
    text = render_text(cases, args.driver, header)
    sys.stdout.write(text)
    if args.out is not None:
        from drakit.reports.safefs import UnsafePath, write_file
        try:
            write_file(args.out, "node-check.json", json.dumps(cases, indent=2) + "\n", what="--out")
            write_file(args.out, "node-check.txt", text, what="--out")
        except UnsafePath as exc:
            return usage(str(exc))
    return EXIT_FAILED if any(decides_failure(c) for c in cases) else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drakit")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
