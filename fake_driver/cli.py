"""``drakit driver ...``: run the fake DRA driver's kubelet plugin, or write sample claims.

Wire into ``drakit`` with ``add_parsers(subparsers)`` and ``run(args)``; also runnable alone as
``python -m fake_driver.cli driver serve ...``.

``serve`` learns claim allocations from ``--claims`` (a YAML/JSON file or folder, re-read on
change) or, without it, from the API server (``kubernetes`` client, in-cluster config or
KUBECONFIG). It runs until SIGTERM or SIGINT, then deregisters and exits 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_SHAPE = "server-8gpu"


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_parsers(subparsers: Any) -> None:
    """Add the ``driver`` command (with ``serve`` and ``sample-claims``) to ``drakit``."""
    driver = subparsers.add_parser("driver", help="the fake DRA driver (kubelet plugin)")
    sub = driver.add_subparsers(dest="driver_command", required=True)

    serve = sub.add_parser("serve", help="serve the kubelet plugin sockets of one fake driver")
    serve.add_argument("--driver", required=True, help="driver name, e.g. gpu.acme.example.com")
    serve.add_argument("--node", required=True, help="node name (also the pool name)")
    serve.add_argument("--plugin-dir", required=True, type=Path,
                       help="kubelet plugins folder; the DRA socket is <dir>/<driver>/dra.sock")
    serve.add_argument("--registry-dir", required=True, type=Path,
                       help="kubelet plugin registry folder; serves <dir>/<driver>-reg.sock")
    serve.add_argument("--cdi-dir", required=True, type=Path, help="where CDI specs are written")
    serve.add_argument("--hardware", default=DEFAULT_SHAPE,
                       help=f"fake_hw node shape name or file (default: {DEFAULT_SHAPE})")
    serve.add_argument("--state-dir", type=Path, default=None,
                       help="checkpoint folder (default: the driver's plugin data folder)")
    serve.add_argument("--device-metadata", action="store_true",
                       help="write device metadata files and mount them via CDI")
    serve.add_argument("--metadata-versions", type=_csv, default=["v1beta1"],
                       help="metadata API versions, newest first (default: v1beta1)")
    serve.add_argument("--claims", type=Path, default=None,
                       help="read claims from this YAML/JSON file or folder instead of the API server")
    serve.add_argument("--faults", type=Path, default=None,
                       help="poll this file for injected faults, one 'device=kind[:Effect]' a line")
    serve.add_argument("--slices-out", type=Path, default=None,
                       help="write the published ResourceSlices to this JSON file")
    serve.add_argument("--skip-node-ops", type=_csv, default=[],
                       help="devices published with skipNodeOperations, comma-separated")
    serve.add_argument("--no-health", action="store_true", help="do not serve the health stream")
    serve.add_argument("--health-resend", type=float, default=10.0,
                       help="seconds between health resends without changes (default: 10)")
    serve.add_argument("--no-device-status", action="store_true",
                       help="do not write status.devices for NICs")
    serve.add_argument("-v", "--verbose", action="store_true")

    claims = sub.add_parser("sample-claims",
                            help="write allocated claims for the driver's devices (for node-check)")
    claims.add_argument("--driver", required=True)
    claims.add_argument("--node", required=True)
    claims.add_argument("--hardware", default=DEFAULT_SHAPE)
    claims.add_argument("--namespace", default="node-check")
    claims.add_argument("--out", type=Path, default=None, help="file to write (default: stdout)")


def run(args: argparse.Namespace) -> int:
    if args.driver_command == "serve":
        return cmd_serve(args)
    return cmd_sample_claims(args)


def _inventory(shape: str, node: str) -> Any:
    from fake_hw.inventory import build_inventory
    return build_inventory(shape, node)


def cmd_sample_claims(args: argparse.Namespace) -> int:
    from fake_driver.sampleclaims import sample_claims
    try:
        claims = sample_claims(_inventory(args.hardware, args.node), args.driver,
                               namespace=args.namespace)
    except (KeyError, ValueError) as err:
        print(f"drakit driver sample-claims: {err}", file=sys.stderr)
        return EXIT_USAGE
    text = json.dumps(claims, indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {len(claims)} claims to {args.out}")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    from fake_driver.plugin import FakePlugin, FileClaimSource, KubernetesClaimSource, PluginConfig
    from fake_driver.plugin.claims import ClaimSource, ClaimSourceError
    from fake_driver.plugin.files import PathTooLong
    from fake_driver.plugin.publisher import FileSlicePublisher
    from fake_hw.shapes import ShapeError

    done = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        done.set()

    # before the sockets exist: whoever sees them may signal us at once
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        inventory = _inventory(args.hardware, args.node)
        config = PluginConfig(driver=args.driver, node=args.node,
                              plugin_dir=args.plugin_dir.absolute(),
                              registry_dir=args.registry_dir.absolute(),
                              cdi_dir=args.cdi_dir.absolute(),
                              state_dir=args.state_dir.absolute() if args.state_dir else None,
                              device_metadata=args.device_metadata,
                              metadata_versions=tuple(args.metadata_versions),
                              device_status=not args.no_device_status)
        state_dir = config.state_dir or config.data_dir
        source: ClaimSource
        if args.claims is not None:
            source = FileClaimSource(args.claims, status_dir=state_dir / "claim-status")
        else:
            source = KubernetesClaimSource()
        publisher = FileSlicePublisher(args.slices_out.absolute()) if args.slices_out else None
        plugin = FakePlugin(config, inventory, source, publisher=publisher,
                            skip_node_ops=args.skip_node_ops, health=not args.no_health,
                            resend_seconds=args.health_resend, faults_file=args.faults)
        plugin.start()
    except (ShapeError, ValueError, PathTooLong, ClaimSourceError, FileExistsError, OSError) as err:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        print(f"drakit driver serve: {err}", file=sys.stderr)
        return EXIT_USAGE

    print(f"drakit driver: serving {args.driver} on node {args.node}: "
          f"{plugin.dra_socket} (registration {plugin.registration_socket})", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        plugin.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    parser = argparse.ArgumentParser(prog="drakit")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
