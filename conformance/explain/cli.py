"""``drakit explain``: why a pod (or a claim) cannot be scheduled, device by device.

    drakit explain pod NS/NAME   [--kubeconfig F] [--context C] [--state FILE] [-o text|json] [--all]
    drakit explain claim NS/NAME ...
    drakit explain -f CLAIM_OR_TEMPLATE.yaml [-n NS] ...      would it fit, and where?

The live cluster is only read (lists of classes, slices, taint rules, nodes, the claims and pods
of every namespace, and the namespace's templates); ``--state`` reads a saved state instead
(``--save-state`` writes one). Exit 0: it is scheduled, allocated or would fit; 1: it cannot be
(the explanation says why); 2: bad input (one line: an unknown pod, an unreachable cluster, a file that cannot be used).
Also a kubectl plugin: ``kubectl drakit explain pod NS/NAME``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..console import say

EXIT_OK, EXIT_CANNOT, EXIT_USAGE = 0, 1, 2


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("explain", help="why a pod or claim cannot be scheduled, device by device (read-only)",
                       description="Explain, node by node and device by device, why a pod's claims cannot be "
                                   "allocated: each device's first failing check in the allocator's order with the "
                                   "values involved, then the closest node and the one change that makes the pod fit "
                                   "there (checked by running the allocator again). Exit 0 when it is scheduled or "
                                   "would fit, 1 when it cannot, 2 for bad input.")
    p.add_argument("what", nargs="?", choices=("pod", "claim"), help="what to explain (or -f FILE)")
    p.add_argument("name", nargs="?", metavar="NS/NAME", help="namespace/name (namespace 'default' when omitted)")
    p.add_argument("-f", "--filename", default=None, help="a ResourceClaim or ResourceClaimTemplate file: would it fit?")
    p.add_argument("-n", "--namespace", default=None, help="with -f: the namespace to place the claim in")
    p.add_argument("--state", default=None, metavar="FILE",
                   help="read the cluster's objects from this file (YAML/JSON objects or lists, or --save-state's "
                        "output) instead of a live cluster")
    p.add_argument("--save-state", default=None, metavar="FILE", help="also write the objects read (and the gates) here")
    p.add_argument("--kubeconfig", default=None, help="the cluster's kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
    p.add_argument("--context", default=None, help="kubeconfig context (default: current-context)")
    p.add_argument("--feature-gates", default="", help="gates that differ from what the cluster shows, A=true,B=false")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default) or json")
    p.add_argument("--all", action="store_true", help="text: every node and every device")


def _fail(message: str) -> int:
    say(f"drakit explain: {message}")
    return EXIT_USAGE


def _split(name: str) -> tuple[str, str]:
    ns, _, n = name.rpartition("/")
    return ns or "default", n


def run(args: argparse.Namespace) -> int:
    from ..errors import FieldError
    from .state import StateError
    if args.filename is None and (args.what is None or not args.name):
        return _fail("say what to explain: pod NS/NAME, claim NS/NAME, or -f CLAIM_OR_TEMPLATE.yaml")
    if args.filename is not None and args.what is not None:
        return _fail("give either pod/claim NS/NAME or -f FILE, not both")
    warnings: list[str] = []
    try:
        gates, objects = _read_state(args, warnings)
        out = _explain(args, gates, objects)
    except (StateError, _Missing) as exc:
        return _fail(str(exc))
    except FieldError as exc:
        return _fail(f"{args.filename or args.name}: {exc}")
    if warnings:
        out["warnings"] = warnings
        for w in warnings:
            say(f"drakit explain: warning: {w}")
    if args.save_state:
        from .state import saved_state
        from drakit.reports.safefs import UnsafePath, check_path, write_file
        try:
            target = check_path(args.save_state, "--save-state")
            write_file(target.parent, target.name, json.dumps(saved_state(objects, gates), indent=1, default=str) + "\n",
                       what="--save-state: folder")
        except UnsafePath as exc:
            return _fail(str(exc))
    if args.output == "json":
        print(json.dumps(out, indent=2))
    else:
        from .render import text
        sys.stdout.write(text(out, full=args.all))
    return EXIT_OK if out["verdict"] in ("fits", "scheduled", "allocated") else EXIT_CANNOT


class _Missing(Exception):
    pass


def _read_state(args: argparse.Namespace, warnings: list[str]) -> tuple[dict[str, bool], list[dict[str, Any]]]:
    from drakit.clusters.local.gates import GateError, parse_gate_string

    from ..features import DEFAULT_GATES
    from .state import KINDS, StateError, read_state
    try:
        stated = parse_gate_string(args.feature_gates or "")
    except GateError as exc:
        raise StateError(f"--feature-gates: {exc}") from None
    if args.state:
        saved, objects = read_state(Path(args.state))
        return {**DEFAULT_GATES, **saved, **stated}, objects
    from ..backends.base import HarnessError
    from ..backends.gatemetrics import observed_gates
    from ..backends.kubeapi import KubeApi, first_line
    try:
        api = KubeApi(args.kubeconfig, args.context)
        observed = observed_gates(api)
        ns = _split(args.name)[0] if args.name else (args.namespace or "default")
        objects: list[dict[str, Any]] = []
        for kind in KINDS:
            objects.extend({**o, "kind": kind, "apiVersion": o.get("apiVersion") or ""}
                           for o in _listed(api, kind, ns, warnings))
    except HarnessError as exc:
        raise StateError(str(exc)) from None
    except Exception as exc:  # the client's own errors: an unreachable server, a refused list
        raise StateError(f"cannot read the cluster: {first_line(exc)}") from None
    seen = observed.get("kube-scheduler") or observed.get("kube-apiserver") or {}
    return {**DEFAULT_GATES, **seen, **stated}, objects


def _listed(api: Any, kind: str, ns: str, warnings: list[str]) -> list[dict[str, Any]]:
    """The objects of ``kind`` explain reads. Claims and pods of every namespace: the scheduler
    counts each allocated device (and each share of one) and each pod's requests on a node,
    whoever's they are; where listing them cluster-wide is refused, the namespace's, with a warning."""
    from kubernetes.dynamic.exceptions import ForbiddenError

    from ..backends.kubeapi import first_line
    from .state import POD_NAMESPACE_ONLY
    if kind in POD_NAMESPACE_ONLY:
        return api.list(kind, ns)
    try:
        return api.list(kind, None)
    except ForbiddenError as exc:
        if kind not in ("ResourceClaim", "Pod"):
            raise
        warnings.append(f"{kind}s of other namespaces not read ({first_line(exc.summary())}): what they hold "
                        f"is taken as free")
        return api.list(kind, ns)


def _explain(args: argparse.Namespace, gates: dict[str, bool], objects: list[dict[str, Any]]) -> dict[str, Any]:
    from .run import explain_claim, explain_pod, template_claim
    from .state import StateError, load_store, read_objects
    store = load_store(objects)
    if args.filename is not None:
        docs = read_objects(Path(args.filename))
        if len(docs) != 1 or docs[0].get("kind") not in ("ResourceClaim", "ResourceClaimTemplate"):
            raise StateError(f"{args.filename}: expected one ResourceClaim or ResourceClaimTemplate")
        doc = docs[0]
        if args.namespace:
            doc.setdefault("metadata", {})["namespace"] = args.namespace
        if doc["kind"] == "ResourceClaimTemplate":
            meta = doc["metadata"]
            return explain_claim(store, template_claim(doc, args.namespace),
                                 gates, f"template {meta.get('namespace') or 'default'}/{meta['name']}")
        doc.pop("status", None)
        return explain_claim(store, doc, gates)
    ns, name = _split(args.name)
    kind = "Pod" if args.what == "pod" else "ResourceClaim"
    obj = store.get(kind, name, ns)
    if obj is None:
        raise _Missing(f"{args.what} {ns}/{name} not found" + (f" in {args.state}" if args.state else ""))
    if kind == "Pod":
        return explain_pod(store, obj, gates)
    return explain_claim(store, obj, gates)
