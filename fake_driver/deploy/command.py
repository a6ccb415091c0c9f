"""``drakit driver manifests``: print the fake drivers' install manifests as a YAML stream.

    drakit driver manifests --image drakit/fake-driver:0.1.0 | kubectl apply -f -
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

EXIT_OK, EXIT_USAGE = 0, 2


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``manifests`` to the ``drakit driver`` subcommands."""
    from drakit.fake_hw.shapes import DEFAULT_SHAPE
    from drakit.fake_driver.deploy import DEFAULT_IMAGE, KNOWN_DRIVERS

    p: argparse.ArgumentParser = subparsers.add_parser(
        "manifests", help="print the manifests that install the fake drivers in a cluster (YAML stream)")
    p.add_argument("--image", default=DEFAULT_IMAGE, help=f"driver image (default: {DEFAULT_IMAGE})")
    p.add_argument("--hardware", default=DEFAULT_SHAPE,
                   help=f"bundled fake_hw node shape every node emulates (default: {DEFAULT_SHAPE})")
    p.add_argument("--drivers", type=_csv, default=None,
                   help=f"fake drivers to install, comma-separated (default: all: {','.join(KNOWN_DRIVERS)})")
    p.add_argument("--api-server", default=None, metavar="HOST:PORT",
                   help="only for clusters whose pods cannot reach the kubernetes Service (no kube-proxy, e.g. "
                        "drakit's local cluster): run the pods in the host's network and reach the API server "
                        "at HOST:PORT (default: neither; the manifests suit any cluster with a Service network)")
    return p


def run(args: argparse.Namespace) -> int:
    from drakit.fake_driver.deploy import manifests, to_yaml

    try:
        objs = manifests(image=args.image, shape=args.hardware, drivers=args.drivers, api_server=args.api_server)
    except ValueError as err:
        print(f"drakit driver manifests: {err}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(to_yaml(objs))
    return EXIT_OK
