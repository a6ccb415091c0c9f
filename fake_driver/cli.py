"""``drakit driver ...``: run the fake DRA driver's kubelet plugin, or write sample claims.

Wire into ``drakit`` with ``add_parsers(subparsers)`` and ``run(args)``; also runnable alone as
``python -m drakit.fake_driver.cli driver serve ...``.

``serve`` learns claim allocations from ``--claims`` (a YAML/JSON file or folder, re-read on
change) or from the API server. With ``--in-cluster`` (the pod's service account) or
``--kubeconfig PATH`` it is a driver of that cluster: claims are read from the API, NIC device
status is applied to the claims' status, and the node's ResourceSlices are published and kept
in sync (``fake_driver.kube``). Without any of the three, claims are read from the API
(in-cluster config or KUBECONFIG) and nothing is written there. It runs until SIGTERM or SIGINT,
then deregisters and exits 0.

``controller`` (``--in-cluster`` or ``--kubeconfig PATH``) is the drivers' controller side: it
watches claims and attaches devices that wait for binding conditions.
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

from drakit.conformance.crash import last_resort
from drakit.fake_hw.shapes import DEFAULT_SHAPE

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_parsers(subparsers: Any) -> None:
    """Add the ``driver`` command (``serve``, ``controller``, ``sample-claims``, ``manifests``) to ``drakit``."""
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
    serve.add_argument("--hardware-label", default=None, metavar="LABEL",
                       help="emulate the shape named by this label of the node, when the node has it "
                            "(else --hardware); needs --in-cluster or --kubeconfig")
    serve.add_argument("--idle-without-devices", action="store_true",
                       help="when the node's hardware has no device of --driver, wait for SIGTERM without serving "
                            "(a DaemonSet's pod on such a node) instead of exiting with an error")
    serve.add_argument("--ready-file", type=Path, default=None,
                       help="create this file once the kubelet has registered the plugin (or, idle, at once) and "
                            "remove it on exit: a readiness probe's 'test -f'")
    serve.add_argument("--state-dir", type=Path, default=None,
                       help="checkpoint folder (default: the driver's plugin data folder)")
    serve.add_argument("--sync-journal", action="store_true",
                       help="fdatasync the checkpoint journal before each answer (durable against power loss, "
                            "at the disk's flush latency per call; concurrent calls share a flush)")
    serve.add_argument("--device-metadata", action="store_true",
                       help="write device metadata files and mount them via CDI")
    serve.add_argument("--metadata-versions", type=_csv, default=["v1beta1"],
                       help="metadata API versions, newest first (default: v1beta1)")
    serve.add_argument("--claims", type=Path, default=None,
                       help="read claims from this YAML/JSON file or folder instead of the API server")
    _add_api_flags(serve, "claims from, status and ResourceSlices to")
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
    serve.add_argument("--grpc-server", choices=("loop", "grpcio"), default="loop",
                       help="loop (default): prepare and unprepare answered on the gRPC server's own thread "
                            "when they wait on nothing (claims from --claims, no --sync-journal); "
                            "grpcio: grpcio's thread-pool server, every call in a pool thread (the earlier one)")
    serve.add_argument("-v", "--verbose", action="store_true", help="log at debug level")

    controller = sub.add_parser("controller",
                                help="the drivers' controller side: attach devices with binding conditions")
    _add_api_flags(controller, "claims from and binding conditions to")
    controller.add_argument("--driver", dest="drivers", action="append", default=None, metavar="NAME",
                            help="a driver to act for (repeatable; default: every fake driver)")
    controller.add_argument("-v", "--verbose", action="store_true", help="log at debug level")

    claims = sub.add_parser("sample-claims",
                            help="write allocated claims for the driver's devices (for node-check)",
                            description="Write ResourceClaims allocated to devices of one fake driver on one node, "
                                        "as a JSON list, for 'drakit node-check --claims' or 'drakit driver serve "
                                        "--claims' without an API server.")
    claims.add_argument("--driver", required=True, help="driver name, e.g. gpu.acme.example.com")
    claims.add_argument("--node", required=True, help="node name the claims are allocated on (also the pool name)")
    claims.add_argument("--hardware", default=DEFAULT_SHAPE,
                        help=f"fake_hw node shape name or file whose devices are used (default: {DEFAULT_SHAPE})")
    claims.add_argument("--namespace", default="node-check", help="namespace of the claims (default: node-check)")
    claims.add_argument("--out", type=Path, default=None, help="file to write (default: stdout)")

    from drakit.fake_driver.deploy.command import add_parser as add_manifests_parser
    add_manifests_parser(sub)


def _add_api_flags(parser: argparse.ArgumentParser, what: str) -> None:
    api = parser.add_mutually_exclusive_group(required=parser.prog.endswith("controller"))
    api.add_argument("--in-cluster", action="store_true",
                     help=f"the API server of the pod's service account ({what} it)")
    api.add_argument("--kubeconfig", type=Path, default=None, metavar="PATH",
                     help=f"the API server of this kubeconfig ({what} it)")


def run(args: argparse.Namespace) -> int:
    if args.driver_command == "manifests":
        from drakit.fake_driver.deploy.command import run as run_manifests
        return run_manifests(args)
    if args.driver_command == "serve":
        return cmd_serve(args)
    if args.driver_command == "controller":
        return cmd_controller(args)
    return cmd_sample_claims(args)


def _node_hardware(kube: Any, args: argparse.Namespace) -> str:
    """The shape to emulate: the value of the node's ``--hardware-label`` when the node carries
    it (read from the API), else ``--hardware``."""
    if not args.hardware_label:
        return str(args.hardware)
    if kube is None:
        raise ValueError("--hardware-label reads the node's labels from the API: it needs --in-cluster or --kubeconfig")
    import urllib.parse
    node = kube.get(f"/api/v1/nodes/{urllib.parse.quote(args.node)}")
    if node is None:
        raise ValueError(f"--hardware-label: node {args.node} is not in the API")
    return str(((node.get("metadata") or {}).get("labels") or {}).get(args.hardware_label) or args.hardware)


def _inventory(shape: str, node: str) -> Any:
    from drakit.conformance.hwshapes import build_inventory
    return build_inventory(shape, node)


def cmd_sample_claims(args: argparse.Namespace) -> int:
    from drakit.fake_driver.sampleclaims import sample_claims
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
        from drakit.reports.safefs import UnsafePath, check_path, write_file
        try:  # never through a link, never over a folder
            target = check_path(args.out, "--out")
            write_file(target.parent, target.name, text, what="--out: folder")
        except UnsafePath as err:
            print(f"drakit driver sample-claims: {err}", file=sys.stderr)
            return EXIT_USAGE
        print(f"wrote {len(claims)} claims to {args.out}")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    from drakit.fake_driver.plugin import FakePlugin, FileClaimSource, KubernetesClaimSource, PluginConfig
    from drakit.fake_driver.plugin.checkpoint import CheckpointError
    from drakit.fake_driver.plugin.claims import ClaimSource, ClaimSourceError
    from drakit.fake_driver.kube import KubeClaimSource, KubeError, KubeSlicePublisher
    from drakit.fake_driver.plugin.files import PathTooLong
    from drakit.fake_driver.plugin.publisher import CallbackSlicePublisher, FileSlicePublisher, SlicePublisher
    from drakit.fake_hw.shapes import ShapeError

    done = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        done.set()

    # before the sockets exist: whoever sees them may signal us at once
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    api_publisher = None
    try:
        if args.claims is not None and (args.in_cluster or args.kubeconfig):
            raise ValueError("--claims and --in-cluster/--kubeconfig exclude each other")
        kube = _kube(args) if args.in_cluster or args.kubeconfig else None
        inventory = _inventory(_node_hardware(kube, args), args.node)
        if args.idle_without_devices and args.driver not in inventory.drivers:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            return _idle(args, inventory)
        config = PluginConfig(driver=args.driver, node=args.node,
                              plugin_dir=args.plugin_dir.absolute(),
                              registry_dir=args.registry_dir.absolute(),
                              cdi_dir=args.cdi_dir.absolute(),
                              state_dir=args.state_dir.absolute() if args.state_dir else None,
                              device_metadata=args.device_metadata,
                              metadata_versions=tuple(args.metadata_versions),
                              device_status=not args.no_device_status, sync=args.sync_journal)
        state_dir = config.state_dir or config.data_dir
        source: ClaimSource
        publishers: list[SlicePublisher] = []
        if args.claims is not None:
            if not args.claims.exists():
                raise ValueError(f"--claims {args.claims}: no such claims file or folder")
            source = FileClaimSource(args.claims, status_dir=state_dir / "claim-status")
        elif kube is not None:
            source = KubeClaimSource(kube)
            api_publisher = KubeSlicePublisher(kube, args.node)
            publishers.append(api_publisher)
        else:
            source = KubernetesClaimSource()
        if args.slices_out:
            publishers.append(FileSlicePublisher(args.slices_out.absolute()))

        def publish_all(driver: str, slices: list[dict[str, Any]]) -> None:
            for each in publishers:
                each.publish(driver, slices)

        publisher = (None if not publishers else publishers[0] if len(publishers) == 1
                     else CallbackSlicePublisher(publish_all))
        plugin = FakePlugin(config, inventory, source, publisher=publisher,
                            skip_node_ops=args.skip_node_ops, health=not args.no_health,
                            resend_seconds=args.health_resend, faults_file=args.faults,
                            server_options={"server": args.grpc_server})
        plugin.start()
        if api_publisher is not None:
            api_publisher.start()
    except (ShapeError, ValueError, PathTooLong, ClaimSourceError, FileExistsError, OSError, KubeError,
            CheckpointError) as err:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if isinstance(err, CheckpointError):  # bad state: say what the driver does about it
            print(f"drakit driver serve: {err}; not started: the driver will not guess which claims it "
                  f"prepared (move the file aside to start with none prepared; the kubelet prepares "
                  f"them again)", file=sys.stderr)
            return EXIT_FAILED
        print(f"drakit driver serve: {err}", file=sys.stderr)
        return EXIT_USAGE

    print(f"drakit driver: serving {args.driver} on node {args.node}: "
          f"{plugin.dra_socket} (registration {plugin.registration_socket})", flush=True)
    try:
        while not done.wait(0.5):
            if args.ready_file is not None and plugin.server.registered.is_set():
                _ready(args.ready_file, True)
    finally:
        if api_publisher is not None:
            api_publisher.stop()
        plugin.stop()
        if args.ready_file is not None:
            _ready(args.ready_file, False)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return EXIT_OK


def _ready(path: Path, ready: bool) -> None:
    if not ready:
        path.unlink(missing_ok=True)
    elif not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def _idle(args: argparse.Namespace, inventory: Any) -> int:
    """``--idle-without-devices`` on a node without the driver's hardware: ready, serving nothing."""
    done = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    print(f"drakit driver: {args.driver} has no devices on node {args.node} (drivers there: "
          f"{', '.join(inventory.drivers) or 'none'}); idle until stopped", flush=True)
    try:
        if args.ready_file is not None:
            _ready(args.ready_file, True)
        done.wait()
    finally:
        if args.ready_file is not None:
            _ready(args.ready_file, False)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return EXIT_OK


def _kube(args: argparse.Namespace) -> Any:
    from drakit.fake_driver.kube import Kube, load_api_client
    return Kube(load_api_client(args.kubeconfig, in_cluster=args.in_cluster))


def cmd_controller(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    from drakit.fake_driver.kube import BindingConditionsController, KubeError
    from drakit.fake_hw.vendors import VENDORS

    drivers = args.drivers or [v.driver for v in VENDORS]
    done = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            controller = BindingConditionsController(_kube(args), drivers)
        except KubeError as err:
            print(f"drakit driver controller: {err}", file=sys.stderr)
            return EXIT_USAGE
        controller.start()
        print(f"drakit driver controller: attaching devices with binding conditions for "
              f"{', '.join(drivers)}", flush=True)
        try:
            while not done.wait(0.5):
                pass
        finally:
            controller.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return EXIT_OK


@last_resort
def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    parser = argparse.ArgumentParser(prog="drakit")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
