"""``drakit node-check``: check any DRA driver's kubelet plugin over gRPC, without a cluster.

Wire into ``drakit`` with ``add_parsers(subparsers)`` and ``run(args)``. Exit status: 0 when no
case failed, 1 when one did, 2 for bad usage. With ``--out DIR`` it writes
``node-check.json`` (a list of results.json cases, backend ``node-plugin``) and
``node-check.txt`` (the summary it also prints).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))


def add_parsers(subparsers: Any) -> None:
    p = subparsers.add_parser("node-check",
                              help="conformance check of a DRA driver's node side (gRPC, no cluster)")
    p.add_argument("--registry-dir", required=True, type=Path,
                   help="kubelet plugin registry folder holding <driver>-reg.sock")
    p.add_argument("--driver", required=True, help="driver name the plugin must report")
    p.add_argument("--claims", type=Path, default=None,
                   help="allocated ResourceClaims (YAML/JSON) the driver can look up")
    p.add_argument("--cdi-dir", type=Path, action="append", default=None,
                   help="CDI spec folder (repeatable; default: /etc/cdi and /var/run/cdi)")
    p.add_argument("--out", type=Path, default=None, help="folder for node-check.json and .txt")
    p.add_argument("--timeout", type=float, default=10.0, help="deadline per gRPC call (default: 10)")


def run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    from drakit.fake_driver.plugin.claims import ClaimSourceError, load_claim_documents

    from .checks import NodeCheck, Options, render_text

    claims: list[dict[str, Any]] = []
    if args.claims is not None:
        try:
            claims = load_claim_documents(args.claims)
        except ClaimSourceError as err:
            print(f"drakit node-check: {err}", file=sys.stderr)
            return EXIT_USAGE
    if not args.registry_dir.is_dir():
        print(f"drakit node-check: {args.registry_dir}: no such folder", file=sys.stderr)
        return EXIT_USAGE
    rerun = ["drakit", "node-check", "--registry-dir", str(args.registry_dir), "--driver", args.driver]
    if args.claims is not None:
        rerun += ["--claims", str(args.claims)]
    for d in args.cdi_dir or ():
        rerun += ["--cdi-dir", str(d)]
    options = Options(registry_dir=args.registry_dir.absolute(), driver=args.driver, claims=claims,
                      claims_file=str(args.claims or ""),
                      cdi_dirs=tuple(d.absolute() for d in args.cdi_dir or DEFAULT_CDI_DIRS), timeout=args.timeout,
                      rerun=shlex.join(rerun))
    cases = NodeCheck(options).run()
    text = render_text(cases, args.driver)
    sys.stdout.write(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "node-check.json").write_text(json.dumps(cases, indent=2) + "\n", encoding="utf-8")
        (args.out / "node-check.txt").write_text(text, encoding="utf-8")
    return EXIT_FAILED if any(c["status"] in ("failed", "error") for c in cases) else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drakit")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
