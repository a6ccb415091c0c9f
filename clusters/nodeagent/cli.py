"""``drakit node-agent``: play the kubelet's DRA part for one node from the command line.

Without ``--prepare`` it watches the registry folder until SIGTERM/SIGINT, logging driver
registrations and health reports; with ``--kubeconfig PATH`` or ``--in-cluster`` it also watches
the API server's pods bound to ``--node`` (a kwok node of drakit's "prepared" stage set) and
prepares their claims before they may run, unpreparing them when they go
(``kube.KubeNodeRuntime``). With ``--prepare CLAIMS`` (allocated ResourceClaims in a YAML/JSON
file) it prepares them for one pod, prints the result as JSON, optionally unprepares again
(``--unprepare``), and exits 0 when everything succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

from drakit.conformance.crash import last_resort

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parsers(subparsers: Any) -> None:
    p = subparsers.add_parser("node-agent", help="the kubelet's DRA role for one node (no cluster)")
    p.add_argument("--registry-dir", required=True, type=Path, help="plugin registry folder to watch")
    p.add_argument("--node", required=True, help="node name")
    p.add_argument("--state-dir", type=Path, default=None, help="checkpoint folder (default: none)")
    p.add_argument("--prepare", type=Path, default=None, metavar="CLAIMS",
                   help="prepare these allocated claims (YAML/JSON) for one pod, print the result")
    p.add_argument("--pod-uid", default="drakit-node-agent-pod", help="pod UID for --prepare")
    p.add_argument("--unprepare", action="store_true", help="unprepare again after --prepare")
    p.add_argument("--driver-wait", type=float, default=10.0,
                   help="seconds to wait for a claim's driver to register (default: 10)")
    p.add_argument("--optional-node-operations", action="store_true",
                   help="behave as a kubelet with DRAOptionalNodeOperations on")
    api = p.add_mutually_exclusive_group()
    api.add_argument("--kubeconfig", type=Path, default=None, metavar="PATH",
                     help="prepare the claims of this cluster's pods bound to --node")
    api.add_argument("--in-cluster", action="store_true",
                     help="as --kubeconfig, with the pod's service account")
    p.add_argument("--namespace", default=None, help="only pods of this namespace (default: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="log at debug level")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    from drakit.fake_driver.plugin.claims import ClaimSourceError, load_claim_documents

    from .agent import NodeAgent

    claims: list[dict[str, Any]] = []
    if args.prepare is not None:
        try:
            claims = load_claim_documents(args.prepare)
        except ClaimSourceError as err:
            print(f"drakit node-agent: {err}", file=sys.stderr)
            return EXIT_USAGE
        for claim in claims:  # the command stands in for the scheduler's reservation
            status = claim.setdefault("status", {})
            reserved = status.setdefault("reservedFor", [])
            if not any(r.get("uid") == args.pod_uid for r in reserved):
                reserved.append({"resource": "pods", "name": "drakit-node-agent", "uid": args.pod_uid})

    def on_health(driver: str, devices: list[Any]) -> None:
        bad = [f"{d.pool}/{d.device}" for d in devices if d.health != "Healthy"]
        logging.getLogger("drakit.nodeagent").info(
            "health of %s: %d devices, unhealthy: %s", driver, len(devices), ", ".join(bad) or "none")

    kube = None
    if args.kubeconfig is not None or args.in_cluster:
        if args.prepare is not None:
            print("drakit node-agent: --prepare and --kubeconfig/--in-cluster exclude each other", file=sys.stderr)
            return EXIT_USAGE
        from drakit.fake_driver.kube import Kube, KubeError, load_api_client
        try:
            kube = Kube(load_api_client(args.kubeconfig, in_cluster=args.in_cluster))
        except KubeError as err:
            print(f"drakit node-agent: {err}", file=sys.stderr)
            return EXIT_USAGE
    from .checkpoint import CheckpointError
    try:
        agent = NodeAgent(args.registry_dir, args.node, state_dir=args.state_dir,
                          optional_node_operations=args.optional_node_operations,
                          driver_wait=args.driver_wait, on_health=on_health)
    except CheckpointError as err:  # bad state: say what the agent does about it
        print(f"drakit node-agent: {err}; not started: the agent will not guess which claims are "
              f"prepared (move the file aside to start with none)", file=sys.stderr)
        return EXIT_FAILED
    agent.start()
    runtime = None
    try:
        if kube is not None:
            from drakit.fake_driver.kube import KubeError

            from .kube import KubeNodeRuntime
            runtime = KubeNodeRuntime(kube, {args.node: agent}, namespace=args.namespace)
            try:
                runtime.start()
            except KubeError as err:
                print(f"drakit node-agent: {err}", file=sys.stderr)
                return EXIT_FAILED
        if args.prepare is None:
            done = threading.Event()
            previous = {s: signal.signal(s, lambda *_: done.set())
                        for s in (signal.SIGTERM, signal.SIGINT)}
            print(f"drakit node-agent: watching {args.registry_dir} for node {args.node}"
                  + (" and its pods" if runtime is not None else ""), flush=True)
            try:
                while not done.wait(0.5):
                    pass
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)
            return EXIT_OK
        result = agent.prepare(args.pod_uid, claims)
        out: dict[str, Any] = {"prepare": result.to_json()}
        ok = result.ok
        if args.unprepare:
            released = agent.unprepare(args.pod_uid)
            out["unprepare"] = released.to_json()
            ok = ok and released.ok
        print(json.dumps(out, indent=2))
        return EXIT_OK if ok else EXIT_FAILED
    finally:
        if runtime is not None:
            for error in runtime.close():
                logging.getLogger("drakit.nodeagent").error("unprepare at exit: %s", error)
        agent.stop()


@last_resort
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drakit")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
