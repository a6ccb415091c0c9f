"""``drakit image build``: build drakit's images offline (no Docker) as OCI archives and print
where they are and their sizes.

    drakit image build                 # pause, busybox and drakit's own image
    ctr -n k8s.io images import ~/.cache/drakit/images/fake-driver-<version>.oci.tar
    kind load image-archive ~/.cache/drakit/images/fake-driver-<version>.oci.tar
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_parsers(subparsers: Any) -> None:
    from drakit.clusters.images.build import IMAGES
    img = subparsers.add_parser("image", help="build drakit's container images offline, without Docker (OCI archives)")
    sub = img.add_subparsers(dest="image_command", required=True)
    b = sub.add_parser(
        "build", help="build the pause, busybox and drakit images as OCI archives in drakit's cache",
        description="Build drakit's images without Docker, from Debian packages (apt-get download, dpkg-deb), "
                    "drakit's dependencies as wheels (pip) and a static pause program (gcc -static), into "
                    "$DRAKIT_CACHE/images (default ~/.cache/drakit/images). Each is an OCI archive that "
                    "'ctr -n k8s.io images import', 'kind load image-archive' and 'docker load' read. "
                    "Cached layers are reused; only what changed is rebuilt.")
    b.add_argument("--only", type=_csv, default=list(IMAGES), metavar="NAMES",
                   help=f"images to build, comma-separated (default: all: {','.join(IMAGES)})")
    b.add_argument("--force", action="store_true", help="download the packages again and rebuild every layer")
    b.add_argument("--json", action="store_true", help="print the result as JSON (ref, path, digest, sizes)")


def run(args: argparse.Namespace) -> int:
    from drakit.clusters.images.build import IMAGES, ImageBuildError, build_images

    unknown = [name for name in args.only if name not in IMAGES]
    if unknown or not args.only:
        print(f"drakit image build: unknown image(s) {', '.join(unknown) or '(none given)'}: known are "
              f"{', '.join(IMAGES)}", file=sys.stderr)
        return EXIT_USAGE
    started = time.monotonic()
    say = (lambda m: print(f"image build: {m}", file=sys.stderr, flush=True)) if args.json else \
        (lambda m: print(f"image build: {m}", flush=True))
    try:
        built = build_images(say, force=args.force, which=args.only)
    except ImageBuildError as exc:
        print(f"drakit image build: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("drakit image build: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps([{"ref": b.ref, "path": str(b.path), "digest": b.digest, "archive_bytes": b.path.stat().st_size,
                           "unpacked_bytes": b.unpacked, "rebuilt": b.rebuilt} for b in built], indent=1))
        return EXIT_OK
    for b in built:
        print(f"{b.ref}\n  {b.path}\n  {b.path.stat().st_size / 1e6:.1f} MB archive, {b.unpacked / 1e6:.1f} MB unpacked, "
              f"{b.digest[:19]}, {'built' if b.rebuilt else 'up to date'}")
    print(f"image build: done in {time.monotonic() - started:.1f}s; load with 'ctr -n k8s.io images import FILE' "
          f"or 'kind load image-archive FILE'")
    return EXIT_OK
