"""Claims for node-check through the API server (``drakit node-check --kubeconfig``).

A real driver looks every claim up in the API server, so node-check needs allocated claims
there. :class:`ApiClaims`:

- ``current(claims)``: re-reads the ``--claims`` a user gave from the API server (their UID and
  allocation as the driver will see them);
- ``make()``: makes node-check's own claims for the devices the driver publishes on its node
  (one device; two requests; one claim per device for the concurrency and batch checks; one
  naming a device the driver does not publish, which should be refused), in a namespace of
  their own, and writes their ``status.allocation`` as the scheduler would (no pod reserves
  them, so no kubelet prepares them and the claim controller leaves them alone);
- ``cleanup()``: deletes that namespace and its claims (node-check unprepares what it prepared
  before that).

Problems a user must fix (API server unreachable, a claim missing or not allocated, no devices
published, several nodes to choose from) are :class:`UsageError` with one line.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from .inputs import EXPECT_ANNOTATION, driver_results

UNKNOWN_DEVICE = "drakit-no-such-device"
CLASS = "drakit-node-check"  # never created: a class is only the scheduler's business


class UsageError(Exception):
    """Bad input for node-check; the message is one line."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class ApiClaims:
    def __init__(self, kubeconfig: str | None, context: str | None, driver: str, node: str | None) -> None:
        from drakit.conformance.backends.base import HarnessError
        from drakit.conformance.backends.kubeapi import KubeApi
        try:
            self.api = KubeApi(kubeconfig, context)
            self.api.version()
        except HarnessError as exc:
            raise UsageError(f"--kubeconfig: {exc}") from None
        self.driver = driver
        self.node = node
        self.namespace: str | None = None

    def current(self, claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for claim in claims:
            meta = claim["metadata"]
            ns, name = meta.get("namespace") or "default", meta["name"]
            live = self.api.get("ResourceClaim", name, ns)
            if live is None:
                raise UsageError(f"--claims: ResourceClaim {ns}/{name} does not exist in the API server")
            if meta.get("annotations", {}).get(EXPECT_ANNOTATION):
                live["metadata"].setdefault("annotations", {})[EXPECT_ANNOTATION] = meta["annotations"][EXPECT_ANNOTATION]
            out.append(live)
        return out

    # -- node-check's own claims ------------------------------------------------------------------

    def published(self, wait: float = 10.0) -> tuple[str, list[tuple[str, str]]]:
        """(node, [(pool, device)]) the driver publishes for the node it runs on: node-local
        slices of the newest generation of each pool (else pools for all nodes). A plugin that
        just started publishes a moment after it registers: wait up to ``wait`` seconds."""
        deadline = time.monotonic() + wait
        while True:
            slices = [s for s in self.api.list("ResourceSlice", None)
                      if (s.get("spec") or {}).get("driver") == self.driver]
            if slices or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if not slices:
            raise UsageError(f"the driver {self.driver} publishes no ResourceSlices in this cluster "
                             "(is its kubelet plugin running against this API server?)")
        nodes = sorted({s["spec"]["nodeName"] for s in slices if s["spec"].get("nodeName")})
        node = self.node
        if node is None:
            if len(nodes) > 1:
                raise UsageError(f"the driver {self.driver} publishes devices on {len(nodes)} nodes "
                                 f"({', '.join(nodes[:5])}): pass --node with the node this plugin serves")
            node = nodes[0] if nodes else ""
        mine = [s for s in slices if s["spec"].get("nodeName") == node] if node else []
        if not mine:
            mine = [s for s in slices if s["spec"].get("allNodes")]
        newest: dict[str, int] = {}
        for s in mine:
            pool = s["spec"]["pool"]
            newest[pool["name"]] = max(newest.get(pool["name"], 0), int(pool.get("generation", 0)))
        devices = [(s["spec"]["pool"]["name"], d["name"]) for s in mine
                   if int(s["spec"]["pool"].get("generation", 0)) == newest[s["spec"]["pool"]["name"]]
                   for d in s["spec"].get("devices") or []]
        if not devices:
            raise UsageError(f"the driver {self.driver} publishes no devices for node {node or '(any)'}")
        return node, sorted(devices)

    def make(self) -> tuple[str, list[dict[str, Any]]]:
        """(node, claims): node-check's own allocated claims (module docstring)."""
        node, devices = self.published()
        self.namespace = f"drakit-node-check-{uuid.uuid4().hex[:6]}"
        self.api.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": self.namespace, "labels": {"drakit.dev/node-check": "true"}}})
        pool0, dev0 = devices[0]
        plans: list[tuple[str, list[tuple[str, str, str]], dict[str, str]]] = [("nc-one", [("dev", pool0, dev0)], {})]
        if len(devices) > 1:
            plans.append(("nc-two-requests", [("first", pool0, dev0), ("second", *devices[1])], {}))
        plans += [(f"nc-device-{i}", [("dev", pool, dev)], {}) for i, (pool, dev) in enumerate(devices[:4])]
        plans.append(("nc-unknown-device", [("dev", pool0, UNKNOWN_DEVICE)], {EXPECT_ANNOTATION: "error"}))
        return node, [self._allocated(name, results, annotations, node) for name, results, annotations in plans]

    def _allocated(self, name: str, results: list[tuple[str, str, str]], annotations: dict[str, str],
                   node: str) -> dict[str, Any]:
        from drakit.conformance.errors import ApiRejected
        requests = list(dict.fromkeys(r for r, _, _ in results))
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": name, "namespace": self.namespace, "annotations": annotations},
                 "spec": {"devices": {"requests": [{"name": r, "exactly": {"deviceClassName": CLASS}}
                                                   for r in requests]}}}
        try:
            made = self.api.create(claim)
            allocation: dict[str, Any] = {"devices": {"results": [
                {"request": r, "driver": self.driver, "pool": pool, "device": dev} for r, pool, dev in results]}}
            if node:
                allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
            made["status"] = {"allocation": allocation}
            out = self.api.replace_status(made)
        except ApiRejected as exc:
            raise UsageError(f"the API server refused node-check's claim {self.namespace}/{name}: {exc}") from None
        assert driver_results(out, self.driver), out
        return out

    def cleanup(self) -> None:
        if self.namespace is not None:
            self.api.delete("Namespace", self.namespace, None)
            self.namespace = None
