"""The mutation suite's planted faults on the reference backend: scheduler-like bugs in the
reference allocator (conformance/allocator/), each one rule broken on purpose; the fake driver's
planted faults (fake_driver/planted.py) as its real gRPC plugins serve the reference backend's
kubelet part; and kubelet-like bugs in drakit's node agent (clusters/nodeagent/), which calls
them. Each with the cases of the corpus that must fail with it.

A corpus that passes an allocator with one of these bugs would pass a real scheduler with the
same bug, so each fault names the behaviour (cases) it breaks; tests/mutation/test_planted_faults.py
plants them one at a time (:func:`planted`: a function or method replaced, or the fake driver's
fault switched on, for the length of a run; nothing in drakit's own code knows of the allocator
ones) and holds the run to failing exactly those cases, as failures (not skips, not errors),
with a summary that names the cause. A fault that no case fails is a missing case.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

A = "drakit.conformance.allocator."


@dataclass(frozen=True)
class PlantedFault:
    name: str
    bug: str                                   # the scheduler (or driver) bug it stands for
    patch: tuple[tuple[str, str, Callable[..., Any]], ...]  # (module, attribute, replacement)
    suites: tuple[str, ...]                    # the corpus folders its run covers (and core, see plant_run)
    breaks: frozenset[str]                     # exactly the cases that must fail
    says: tuple[str, ...]                      # each broken case's failure summary says one of these
    plant: str = ""                            # a fake driver fault (fake_driver/planted.py) instead of a patch


def _true(*_: Any, **__: Any) -> bool:
    return True


def _no_counters(self: Any, pool: Any, used: Any, device: Any) -> Callable[[], None]:
    return lambda: None  # every device's counters "fit", and nothing is consumed


def _first_only(self: Any, rd: Any, ri: int, si: int) -> list[Any]:
    return _ENUMERATE_ALL(self, rd, ri, si)[:1]


_ENUMERATE_ALL = importlib.import_module(A + "search").Allocator._enumerate_all


FAULTS: tuple[PlantedFault, ...] = (
    PlantedFault(
        "ignores-binding-gate", "allocates devices with binding conditions while the scheduler's "
        "DRADeviceBindingConditions gate is off",
        ((A + "selectable", "gate_allows", _true),), ("binding-conditions",),
        frozenset({"binding-conditions/scheduler-gate-off-skips-such-devices"}), ("expected devices", "expected it to stay pending")),
    PlantedFault(
        "ignores-per-device-node-selection", "takes every device of a perDeviceNodeSelection slice as "
        "available on every node the slice reaches (the device's own nodeName/nodeSelector/allNodes unread)",
        ((A + "selectable", "on_node", _true),), ("partitionable-devices",),
        frozenset({"partitionable-devices/per-device-node-selection", "partitionable-devices/counters-shared-across-nodes"}),
        ("expected n2", "expected node-b")),
    PlantedFault(
        "ignores-device-taints", "allocates a device whose NoSchedule taint the request does not tolerate",
        ((A + "search", "tolerated", _true),), ("device-taints",),
        frozenset({"device-taints/effects-are-tolerated-separately", "device-taints/faulty-gpu-is-not-allocated",
                   "device-taints/noexecute-taint-needs-toleration-to-schedule", "device-taints/noschedule-taint-keeps-pod-pending",
                   "device-taints/rule-noschedule-blocks-new-allocations", "device-taints/toleration-allows-allocation"}),
        ("expected it to stay pending", "expected devices", "does not exist")),
    PlantedFault(
        "ignores-match-attribute", "allocates devices that differ in a matchAttribute constraint's attribute",
        ((A + "constraints", "ConstraintTracker._accepts_match", _true),), (),
        frozenset({"core/all-mode-constraint-violation-is-an-error", "core/constraint-applies-only-to-named-requests",
                   "core/match-attribute-two-gpus-one-root", "core/match-attribute-unsatisfiable", "core/match-numa-gpu-and-nic",
                   "core/match-pcie-root-backtracks"}),
        ("expected it to stay pending", "expected devices")),
    PlantedFault(
        "ignores-distinct-attribute", "allocates devices that share a distinctAttribute constraint's attribute",
        ((A + "constraints", "ConstraintTracker._accepts_distinct", _true),), (),
        frozenset({"core/distinct-attribute-compares-all-pairs", "core/distinct-attribute-spreads-gpus",
                   "core/distinct-attribute-too-few-values"}),
        ("expected it to stay pending", "expected devices")),
    PlantedFault(
        "ignores-shared-counters", "allocates partitions beyond the counters their counter set holds",
        ((A + "counters", "CounterBook.reserve", _no_counters),), ("partitionable-devices",),
        frozenset({"partitionable-devices/all-mode-needs-every-partition-to-fit",
                   "partitionable-devices/compute-counter-limits-small-partitions",
                   "partitionable-devices/counters-shared-across-nodes", "partitionable-devices/device-on-two-counter-sets",
                   "partitionable-devices/freeing-partition-restores-counters",
                   "partitionable-devices/one-claim-counts-its-own-devices", "partitionable-devices/two-3g40gb-use-up-memory",
                   "partitionable-devices/whole-gpu-excluded-once-partitioned"}),
        ("expected it to stay pending", "expected devices")),
    PlantedFault(
        "ignores-consumable-capacity", "shares a device beyond its consumable capacity",
        ((A + "capacity", "fits", _true),), ("consumable-capacity",),
        frozenset({"consumable-capacity/all-mode-capacity-blocked-device",
                   "consumable-capacity/default-consumption-without-request",
                   "consumable-capacity/shares-until-bandwidth-runs-out", "consumable-capacity/unknown-capacity-name-skips-device",
                   "consumable-capacity/valid-values-round-up"}),
        ("expected it to stay pending", "expected devices")),
    PlantedFault(
        "all-mode-takes-one", "allocationMode All allocates only the first matching device",
        ((A + "search", "Allocator._enumerate_all", _first_only),), (),
        frozenset({"core/all-mode-constraint-violation-is-an-error", "core/all-mode-every-matching-device",
                   "core/all-mode-waits-for-device-in-use", "core/all-mode-with-selector"}),
        ("expected it to stay pending", "allocated devices, got 1")),
)

# The fake driver's planted faults on the reference backend, whose kubelet part prepares claims
# through the fake drivers' real gRPC sockets (the driver suite holds them on real kubelets:
# tests/clusters/test_driver_suite.py).
DRIVER_FAULTS: tuple[PlantedFault, ...] = (
    PlantedFault(
        "driver:no-cdi-spec", "prepares claims but writes no CDI spec", (), ("device-metadata",),
        frozenset({"core/container-gets-its-claims-cdi-devices", "core/driver-restart-registers-again",
                   "core/prepare-failure-is-retried-until-the-device-is-back", "core/two-containers-share-a-claim",
                   "device-metadata/container-gets-the-metadata-mount"}),
        ("CDI device injection failed: unresolvable CDI devices",), plant="no-cdi-spec"),
    PlantedFault(
        "driver:leak-on-unprepare", "unprepares but leaves the claim's files behind", (), ("device-metadata",),
        frozenset({"device-metadata/removed-when-unprepared"}), ("a metadata file for request gpu exists",),
        plant="leak-on-unprepare"),
)

# drakit's node agent (clusters/nodeagent/: the reference backend's kubelet part) with a
# kubelet's bug planted.
AGENT_FAULTS: tuple[PlantedFault, ...] = (
    PlantedFault(
        "agent:ignores-skip-node-operations", "calls NodePrepareResources and NodeUnprepareResources for devices "
        "whose allocation says to skip them (DRAOptionalNodeOperations)",
        (("drakit.clusters.nodeagent.agent", "skipped_operations", lambda results: frozenset()),),
        ("optional-node-operations",), frozenset({"optional-node-operations/skipped-device-beside-the-drivers-own"}),
        ("Pending", "NodePrepareResources")),
)

BY_NAME = {f.name: f for f in (*FAULTS, *DRIVER_FAULTS, *AGENT_FAULTS)}


@contextlib.contextmanager
def planted(fault: PlantedFault) -> Iterator[None]:
    """The fault planted for the length of the ``with`` block (in this process only)."""
    with contextlib.ExitStack() as stack:
        if fault.plant:
            from drakit.fake_driver.planted import ENV
            stack.enter_context(mock.patch.dict("os.environ", {ENV: fault.plant}))
        for module, attribute, replacement in fault.patch:
            owner: Any = importlib.import_module(module)
            *path, leaf = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            if not hasattr(owner, leaf):
                raise AttributeError(f"planted fault {fault.name}: {module}.{attribute} does not exist")
            stack.enter_context(mock.patch.object(owner, leaf, replacement))
        yield
