"""profile init on a cluster: a kubeconfig's, or drakit's local cluster with the driver started on
two nodes as the driver suite starts it (``backends.drivernodes``). Cluster I/O."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from .envgen import generalise_env
from .infer import Draft, infer



def plugin_folders(driver: str) -> list[str]:
    """Made before the plugin starts: its socket folder below the kubelet's plugins folder, as a
    DaemonSet's hostPath volume (DirectoryOrCreate) gives it."""
    return ["{pluginsDir}/" + driver]


def _say(line: str) -> None:
    print(f"drakit profile init: {line}", file=sys.stderr)


def _finish(api: Any, args: Any, extras: Any, reader: Callable[[str, str], dict[str, str] | None], source: str,
            metadata: Callable[[str, str, str], bool] | None = None) -> Draft:
    from .probe import POD_IMAGE, probe, read_objects
    slices, classes = read_objects(api)
    draft = infer(args.driver, slices, classes, role=args.role, source=source)
    if args.no_pods:
        extras.env_note = "--no-pods: no probe pod ran"
        return draft
    if draft.class_proposed:  # drakit makes no DeviceClass on a cluster it was only pointed at
        extras.env_note = "no DeviceClass selects the driver on this cluster, so no claim could be made"
        return draft
    found = probe(api, draft.driver, draft.class_name, reader, image=args.pod_image or POD_IMAGE,
                  timeout=args.timeout, say=_say, metadata=metadata)
    extras.env = generalise_env(found.observations)
    extras.observed = found.observed
    extras.notes = found.notes
    if not found.observations:
        extras.env_note = "no probe pod ran: " + ("; ".join(found.notes) or "unknown")
    return draft


def on_kubeconfig(args: Any, extras: Any) -> Draft:
    from ..backends.containers import env_from_log
    from ..backends.kubeapi import KubeApi
    api = KubeApi(args.kubeconfig, args.context)
    extras.source = "the cluster of --kubeconfig " + Path(args.kubeconfig).name
    return _finish(api, args, extras, lambda ns, pod: env_from_log(api, ns, pod, None), "--kubeconfig " + args.kubeconfig)


def _profile(args: Any, usage: Callable[[str], Exception]) -> Any:
    """The profile DriverNodes starts the driver from: the bundled one for drakit's fake driver
    under test, else one made of --plugin."""
    from drakit.fake_driver.profile import fake_driver_names, load_vendor_profile, parse_profile
    from .infer import role_for
    if not args.plugin:
        bundled = load_vendor_profile(None)
        if bundled.under_test is not None and bundled.under_test.driver == args.driver:
            return bundled
        if args.driver in fake_driver_names():
            raise usage(f"--cluster local starts drakit's fake driver {bundled.under_test.driver if bundled.under_test else ''} "
                        f"alone; for {args.driver} give --plugin")
        raise usage("--cluster local needs --plugin 'COMMAND ...': how to start the driver's kubelet plugin on a node")
    role = args.role or role_for(args.driver)
    return parse_profile({"version": 2, "name": "profile-init", "drivers": {role: args.driver},
                          "classes": {role: args.driver},
                          "driverUnderTest": {"role": role, "plugin": {
                              "command": list(extras_command(args)), "folders": plugin_folders(args.driver),
                              "deviceClasses": [{"name": args.driver, "selector": f"device.driver == '{args.driver}'"}]}}},
                         str(Path.cwd() / "profile-init.yaml"))


def extras_command(args: Any) -> list[str]:
    import shlex
    return shlex.split(args.plugin)


def on_local(args: Any, extras: Any, usage: Callable[[str], Exception]) -> Draft:
    import os
    from ..backends.base import HarnessError
    from ..backends.drivernodes import DriverNodes
    from ..backends.localtarget import LocalTarget
    profile = _profile(args, usage)
    if args.runtime:
        os.environ["DRAKIT_RUNTIME"] = args.runtime
    _say("starting drakit's local cluster and the driver on two nodes")
    target = LocalTarget({})
    nodes = None
    try:
        with tempfile.TemporaryDirectory(prefix="drakit-profile-init-") as logs:
            nodes = DriverNodes(target, profile, Path(logs))
            try:
                nodes.start()
            except HarnessError as exc:
                raise HarnessError(f"the driver's nodes cannot start: {exc}") from None
            nodes.wait_for_slices()
            extras.source = "drakit's local cluster (two nodes running the driver)"
            if profile.fake and profile.under_test is not None:
                extras.node_shapes = tuple(profile.under_test.node_shapes)
            draft = _finish(target.api, args, extras, lambda ns, pod: nodes.container_env(ns, pod, None),
                            "drakit's local cluster", _metadata_reader(nodes, args.driver))
            nodes.stop()
            nodes = None
            return draft
    finally:
        if nodes is not None:
            nodes.stop()
        target.stop()


def _metadata_reader(nodes: Any, driver: str) -> Callable[[str, str, str], bool]:
    """Whether a probe pod's container got a device metadata file of the driver for its claim,
    from what the node's runtime recorded (mounts at the KEP-5304 path)."""
    from ..nodecheck.metadata import parse_container_path

    def read(ns: str, pod: str, claim: str) -> bool:
        try:
            rec = nodes.container_record(ns, pod, "main")
        except Exception:  # noqa: BLE001 - a node side that records nothing: not observed
            return False
        for m in (rec or {}).get("mounts") or []:
            where = parse_container_path(str(m.get("containerPath", "")))
            if where and where["claim"] == claim and where["driver"] == driver:
                return True
        return False
    return read
