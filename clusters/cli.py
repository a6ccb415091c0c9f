"""``drakit cluster ...``: build, start, stop and inspect a cluster provider.

Wire into the top-level parser with::

    cluster_cli.add_parsers(sub)            # sub = parser.add_subparsers(dest="command")
    if args.command == "cluster":
        return cluster_cli.run(args)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drakit.clusters.kind import KindCluster

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PROVIDERS = ("local", "kind")
# The default hardware of `cluster up`: the bundled profile's driverUnderTest.nodeShapes, the two
# nodes the driver suite runs the fake driver on (tests/test_cli.py holds the two equal).
DRIVER_SUITE_SHAPES = ("server-8gpu", "acme-partitionable")


def add_parsers(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    cl = subparsers.add_parser("cluster", help="build, start, stop or inspect a test cluster (providers: local, kind)")
    sub = cl.add_subparsers(dest="cluster_command", required=True)

    b = sub.add_parser("build", help="build the local control plane binaries (Go needed; cached outside the repo)")
    b.add_argument("--force", action="store_true", help="rebuild even when the cached binaries are current")

    up = sub.add_parser(
        "up", help="start a cluster with the fake drivers' nodes and print its kubeconfig",
        description="local (default): etcd, kube-apiserver, kube-controller-manager, kube-scheduler 1.37.2 "
                    "and kwok on 127.0.0.1, plus --nodes real kubelet nodes (kubelet 1.37.2 over containerd + runc, or "
                    "drakit's fake CRI with --runtime fake; each in a private mount namespace; needs root, else kwok nodes only) named node-1, node-2, ... "
                    "with the fake hardware --hardware, each running the fake drivers of that hardware (registered "
                    "with the kubelet, publishing their ResourceSlices), the drivers' controller and DeviceClasses. "
                    "kind: a kind cluster with the fake driver installed (needs Docker).")
    up.add_argument("--provider", default="local", choices=PROVIDERS, help="local (default) or kind")
    up.add_argument("--nodes", type=int, default=2,
                    help="local: real kubelet nodes with the fake drivers (default: 2; 0: control plane and kwok only)")
    up.add_argument("--hardware", default=None, metavar="SHAPE[,SHAPE...]",
                    help="bundled fake_hw shape(s) the nodes emulate, node i taking the i-th and the list repeating "
                         "(default: the fake driver's driver-suite nodes, " + ",".join(DRIVER_SUITE_SHAPES) + ": "
                         "whole GPUs and NICs, then GPUs with partitions sharing counters, so that every behaviour "
                         "of the fake driver under test has its devices)")
    up.add_argument("--no-device-metadata", action="store_true",
                    help="local: the fake drivers write no device metadata files")
    up.add_argument("--feature-gates", default="", help="gates on top of the default (every DRA gate on), A=true,B=false")
    up.add_argument("--no-dra-gates", action="store_true", help="start from the binaries' default gates, not all DRA gates on")
    up.add_argument("--run-dir", default=None, help="where certificates, logs and state go (default: per-user temp dir)")
    up.add_argument("--runtime", default=None, choices=("containerd", "fake"),
                    help="the kubelet nodes' container runtime: containerd + runc (default, as root) or drakit's "
                         "fake CRI (faster; runs no process)")
    up.add_argument(
        "--stage-set",
        default="on-bind",
        choices=("on-bind", "prepared"),
        help="kwok pod behaviour: Running on bind, or Running once the node agent marks claims prepared",
    )
    up.add_argument("--load-image", action="append", default=[], metavar="ARCHIVE",
                    help="local: import this image archive (OCI layout or docker save tar) into every containerd "
                         "kubelet node, for pods of your own (a driver's DaemonSet, drakit run --in-cluster); "
                         "repeatable; 'drakit' is drakit's own image (built by 'drakit image build', here if needed)")
    up.add_argument("--timeout", type=float, default=None,
                    help="seconds to wait for each component (default: 180 local, 600 kind)")
    kind = up.add_argument_group("kind provider (needs a running Docker engine and kind on PATH)")
    kind.add_argument("--name", default=None, help="kind cluster name (default: drakit)")
    kind.add_argument("--node-image", default=None, help="kindest/node:v1.37.x image (default: kind v0.33.0's v1.37.0)")
    kind.add_argument("--workers", type=int, default=1, help="worker nodes (default: 1)")
    kind.add_argument("--image", default=None, help="fake driver image (default: drakit/fake-driver:<version>)")
    kind.add_argument("--no-build", action="store_true",
                      help="do not build drakit's images offline; load --image from the local Docker engine instead")
    kind.add_argument("--no-driver", action="store_true", help="do not install the fake drivers")
    kind.add_argument("--keep-on-failure", action="store_true", help="keep the cluster when installing the drivers fails")

    down = sub.add_parser("down", help="stop a cluster started with 'cluster up' and remove its run dir")
    down.add_argument("--provider", default="local", choices=PROVIDERS, help="the provider the cluster was started with")
    down.add_argument("--name", default=None, help="kind cluster name (default: drakit)")
    down.add_argument("--run-dir", default=None, help="the --run-dir given to 'drakit cluster up' (default: per-user temp dir)")
    down.add_argument("--keep-logs", action="store_true", help="keep the run dir's logs/ folder")

    bd = sub.add_parser("build-driver", help="build a vendor driver's programs its profile names with goInstall or source "
                                             "(profile v2) into drakit's driver cache",
                        description="Runs the go command for the profile's driverUnderTest.plugin and .controller: "
                                    "'go install <module>@<version>' (goInstall) or 'go build' in a local checkout "
                                    "(source), into ${XDG_CACHE_HOME:-~/.cache}/drakit/drivers (or $DRAKIT_CACHE/drivers). "
                                    "Prints each program's path. A binary the profile names is only looked up.")
    bd.add_argument("--vendor", "--profile", required=True, metavar="PROFILE", help="the vendor profile YAML")
    bd.add_argument("--force", action="store_true", help="rebuild even when the cached program is current")

    st = sub.add_parser("status", help="show binaries and whether a cluster is running")
    st.add_argument("--run-dir", default=None, help="the --run-dir given to 'drakit cluster up' (default: per-user temp dir)")
    st.add_argument("--json", action="store_true", help="print the status as JSON")
    return cl  # type: ignore[no-any-return,unused-ignore]


def run(args: argparse.Namespace) -> int:
    cmd = args.cluster_command
    from drakit.clusters.local.errors import UnsafeRunDir
    from drakit.reports.safefs import UnsafePath, check_path
    try:
        if getattr(args, "run_dir", None) is not None:
            check_path(args.run_dir, "--run-dir")  # a newline in it would forge console lines
        if cmd == "build":
            return _build(args)
        if cmd == "build-driver":
            return _build_driver(args)
        if cmd == "up":
            return _up(args)
        if cmd == "down":
            return _down(args)
        if cmd == "status":
            return _status(args)
    except KeyboardInterrupt:
        print("drakit cluster: interrupted", file=sys.stderr)
        return 130
    except (UnsafePath, UnsafeRunDir) as exc:  # a run folder drakit may not act in: nothing was touched
        print(f"drakit cluster: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"drakit cluster: unknown command {cmd!r}", file=sys.stderr)
    return EXIT_USAGE


def _err(msg: str) -> int:
    print(f"drakit cluster: error: {msg}", file=sys.stderr)
    return EXIT_FAILED


def _build(args: argparse.Namespace) -> int:
    from drakit.clusters.local import build

    from drakit.conformance.oracle import OracleUnavailable, build_admission_oracle

    try:
        build.build(force=args.force, progress=lambda m: print(m, flush=True))
    except build.BuildError as e:
        return _err(str(e))
    # The admission oracle (the API server's own validation, for the admission differential
    # tests) shares the control plane's module graph and Go build cache.
    try:
        path = build_admission_oracle(progress=lambda m: print(f"build: {m}", flush=True))
    except OracleUnavailable as e:
        return _err(str(e))
    print(f"build: admission oracle {path}", flush=True)
    return EXIT_OK


def _build_driver(args: argparse.Namespace) -> int:
    from drakit.clusters.local.driverbuild import DriverBuildError, build
    from drakit.fake_driver.profile import ProfileError, load_vendor_profile
    try:
        profile = load_vendor_profile(args.vendor)
    except ProfileError as e:
        return _err(str(e))
    dut = profile.under_test
    specs = [(role, spec) for role, spec in (("plugin", dut.plugin if dut else None),
                                             ("controller", dut.controller if dut else None))
             if spec is not None and (spec.binary is not None or spec.builds)]
    if not specs:
        return _err(f"{args.vendor}: the profile names no program to build (driverUnderTest.plugin or .controller "
                    f"with binary, goInstall or source)")
    for role, spec in specs:
        print(f"build-driver: {role}: {spec.go_install or (spec.source and spec.source.package) or spec.binary} ...",
              flush=True)
        try:
            path, took = build(spec, force=args.force)
        except DriverBuildError as e:
            return _err(f"{role}: {e}")
        print(f"build-driver: {role}: {path}" + (f" (built in {took:.0f} s)" if took else " (current)"), flush=True)
    return EXIT_OK


def _up(args: argparse.Namespace) -> int:
    if args.provider == "kind":
        return _up_kind(args)
    from drakit.clusters.local import build as buildmod
    from drakit.clusters.local import gates, launcher
    from drakit.conformance.hwshapes import build_inventory

    try:
        requested = gates.parse_gate_string(args.feature_gates)
    except gates.GateError as e:
        print(f"drakit cluster: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.nodes < 0:
        print("drakit cluster: --nodes must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    shapes = [s.strip() for s in args.hardware.split(",")] if args.hardware else list(DRIVER_SUITE_SHAPES)
    if not all(shapes):
        print(f"drakit cluster: --hardware: an empty shape name in {args.hardware!r}", file=sys.stderr)
        return EXIT_USAGE
    node_shapes = [shapes[(i - 1) % len(shapes)] for i in range(1, args.nodes + 1)]
    try:
        inventories = [build_inventory(shape, f"node-{i}") for i, shape in enumerate(node_shapes, 1)]
    except (KeyError, ValueError) as e:
        print(f"drakit cluster: --hardware: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        node_images = _node_images(args)
    except ValueError as e:
        print(f"drakit cluster: --load-image: {e}", file=sys.stderr)
        return EXIT_USAGE
    launcher.install_sigterm_as_exit()
    cluster = launcher.LocalCluster(
        args.run_dir,
        requested,
        dra_gates=not args.no_dra_gates,
        stage_set=args.stage_set,
        detached=True,
        timeout=180.0 if args.timeout is None else args.timeout,
        progress=lambda m: print(f"cluster: {m}", flush=True),
        kubelet_nodes=[(inv.node_name, inv.node_labels()) for inv in inventories],
        runtime=args.runtime,
        node_images=node_images,
    )
    try:
        cluster.up()
        if inventories and cluster.real is not None:
            from drakit.clusters.local.fakedrivers import DeployError, deploy
            try:
                drivers = deploy(cluster, [(inv.node_name, shape) for inv, shape in zip(inventories, node_shapes, strict=True)],
                                 device_metadata=not args.no_device_metadata,
                                 progress=lambda m: print(f"cluster: {m}", flush=True))
            except DeployError as e:
                cluster.down()
                return _err(str(e))
            for node, names in drivers.items():
                shape = dict(zip((inv.node_name for inv in inventories), node_shapes, strict=True)).get(node, "?")
                print(f"node {node} (kubelet {buildmod.KUBE_VERSION}, hardware {shape}): {', '.join(names)}")
    except launcher.UnsafeRunDir:
        raise  # one line and exit 2 (run); nothing of the run dir was touched
    except (launcher.ClusterError, gates.GateError) as e:
        return _err(str(e))
    except BaseException:
        cluster.down()
        raise
    on = sorted(n for n, v in cluster.gates.get("kube-apiserver", {}).items() if v)
    print(f"feature gates on: {', '.join(on) or '(defaults)'}")
    print(f"API server: {cluster.server}")
    print(f"logs: {cluster.logs_dir}")
    print(f"kubeconfig: {cluster.kubeconfig}")
    print(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}")
    rd = "" if args.run_dir is None else f" --run-dir {shlex.quote(str(args.run_dir))}"
    print(f"stop with: drakit cluster down{rd}")
    return EXIT_OK


def _node_images(args: argparse.Namespace) -> list[Path]:
    """The archives of ``--load-image``, checked (each names an image) before the cluster starts;
    ``ValueError`` says which one is wrong and why."""
    if not args.load_image:
        return []
    from drakit.clusters.images.oci import archive_refs
    from drakit.clusters.local import kubeletnode
    named: dict[str, tuple[Path, list[str]]] = {}
    for value in args.load_image:
        if value != "drakit":
            path = Path(value).expanduser()
            if not path.is_file():
                raise ValueError(f"{value}: no such file" if not path.exists() else f"{value}: not a file")
            named[value] = (path, archive_refs(path))
    reason = kubeletnode.unavailable_reason()
    runtime = args.runtime or os.environ.get("DRAKIT_RUNTIME") or kubeletnode.default_runtime(reason)
    if reason is not None or runtime != kubeletnode.CONTAINERD or args.nodes == 0:
        why = reason or ("--nodes 0 starts none" if args.nodes == 0 else f"the nodes' runtime is {runtime}")
        raise ValueError(f"images are imported into kubelet nodes on containerd, and {why}")
    if "drakit" in args.load_image:
        from drakit.clusters.images import build_images
        from drakit.clusters.images.build import ImageBuildError
        try:
            (built,) = build_images(lambda m: print(f"cluster: {m}", flush=True), which=("driver",))
        except ImageBuildError as e:
            raise ValueError(f"drakit's image cannot be built: {e}") from None
        named["drakit"] = (built.path, [built.ref])
    for path, refs in named.values():
        print(f"cluster: every node imports {', '.join(refs)} ({path})", flush=True)
    return [path for path, _ in named.values()]


def _down(args: argparse.Namespace) -> int:
    if args.provider == "kind":
        return _down_kind(args)
    from drakit.clusters.leftovers import sweep
    from drakit.clusters.local import launcher

    sweep(progress=lambda m: print(f"cluster: {m}", flush=True))  # what killed drakit runs left behind
    try:
        cluster = launcher.LocalCluster.attach(args.run_dir, progress=lambda m: print(f"cluster: {m}", flush=True))
    except launcher.UnsafeRunDir:
        raise  # one line and exit 2 (run)
    except launcher.ClusterError as e:
        print(f"drakit cluster: nothing to stop: {e}")
        return EXIT_OK
    cluster.keep_run_dir = args.keep_logs
    cluster.down()
    print(f"stopped; removed {cluster.run_dir}" + (" (logs kept)" if args.keep_logs else ""))
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from drakit.clusters.local import build, launcher

    out: dict[str, object] = {"bin_dir": str(build.bin_dir()), "missing_binaries": build.missing_binaries()}
    run_dir = Path(args.run_dir) if args.run_dir else launcher.default_run_dir()
    try:
        out["cluster"] = launcher.LocalCluster.attach(run_dir).status()
    except launcher.UnsafeRunDir:
        raise  # one line and exit 2 (run)
    except launcher.ClusterError:
        out["cluster"] = None
    if args.json:
        print(json.dumps(out, indent=2))
        return EXIT_OK
    missing = out["missing_binaries"]
    print(f"binaries: {out['bin_dir']} ({'missing: ' + ', '.join(missing) if missing else 'all present'})")  # type: ignore[arg-type]
    c = out["cluster"]
    if not c:
        print(f"cluster: none running in {run_dir}")
        return EXIT_OK
    assert isinstance(c, dict)
    alive = ", ".join(f"{n}{'' if p['alive'] else ' (dead)'}" for n, p in c["processes"].items())
    print(f"cluster: {run_dir}: {'ready' if c['apiserver_ready'] else 'NOT ready'}; processes: {alive}")
    print(f"export KUBECONFIG={shlex.quote(str(c['kubeconfig']))}")
    return EXIT_OK


def _kind_cluster(args: argparse.Namespace, **kwargs: Any) -> KindCluster:
    from drakit.clusters.kind import KindCluster

    return KindCluster(args.name or "drakit", run_dir=args.run_dir,
                       progress=lambda m: print(f"cluster: {m}", flush=True), **kwargs)


def _up_kind(args: argparse.Namespace) -> int:
    from drakit.clusters.kind import ClusterError
    from drakit.clusters.local.gates import GateError

    opts: dict[str, Any] = {"gates": args.feature_gates, "dra_gates": not args.no_dra_gates,
                            "workers": args.workers, "install_driver": not args.no_driver,
                            "build_image": not args.no_build, "keep_on_failure": args.keep_on_failure}
    if args.hardware is not None and "," in args.hardware:
        print("drakit cluster: --hardware: kind's workers all emulate one shape; name one", file=sys.stderr)
        return EXIT_USAGE
    for key, value in (("node_image", args.node_image), ("driver_image", args.image),
                       ("shape", args.hardware), ("timeout", args.timeout)):
        if value is not None:
            opts[key] = value
    try:
        cluster = _kind_cluster(args, **opts)
    except (ClusterError, GateError) as e:
        print(f"drakit cluster: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        cluster.up()
    except ClusterError as e:
        return _err(str(e))
    on = sorted(n for n, v in cluster.gates.items() if v)
    print(f"feature gates on: {', '.join(on) or '(defaults)'} (GA gates locked on are not listed)")
    print(f"kubeconfig: {cluster.kubeconfig}")
    print(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}")
    print(f"stop with: drakit cluster down --provider kind --name {shlex.quote(cluster.name)}")
    return EXIT_OK


def _down_kind(args: argparse.Namespace) -> int:
    from drakit.clusters.kind import ClusterError

    try:
        cluster = _kind_cluster(args, install_driver=False)
        cluster.down()
    except ClusterError as e:
        return _err(str(e))
    print(f"deleted kind cluster {cluster.name}")
    return EXIT_OK
