"""A loaded case: what the YAML said, validated, with placeholders resolved and lines kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .needs import Need


@dataclass(frozen=True)
class Step:
    index: int
    name: str
    kind: str  # apply | delete | expect | advance | driverStatus | fault | restart
    line: int
    manifests: tuple[dict[str, Any], ...] = ()
    expect_error: str | None = None
    deletes: tuple[dict[str, str], ...] = ()
    assertions: tuple[tuple[int, str, dict[str, Any]], ...] = ()  # (line, name, body)
    within: float | None = None
    seconds: float | None = None                 # advance: how much time passes
    status: dict[str, Any] | None = None         # driverStatus: {claim, devices}
    fault: dict[str, str] | None = None          # fault: {node, device, kind, effect}
    restart: dict[str, str] | None = None        # restart: {node, component: kubelet | driver}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    shape: str | None
    labels: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceNeed:
    """One device of the driver under test a driver-suite case needs (``inventory.devices``)."""

    name: str
    same_node_as: str | None = None
    other_node_than: str | None = None
    attribute: str | None = None  # a qualified attribute name the device must publish
    has: str | None = None  # a property the device must publish (inventory.HAS)
    selectable: bool = False  # a claim can ask for this device alone (${inv.<name>.cel})
    shares_counters_with: str | None = None  # same pool; the two together exceed a shared counter
    plain_node: bool = False  # no device of its node consumes counters (allocationMode All fits)
    dedicated: bool = False  # it does not allow multiple allocations
    twice: bool = False  # two allocations of it fit at once (${inv.<name>.capacity} asks for a share)
    takeable: bool = False  # allocationMode All with ${inv.<name>.cel} on its node allocates it (see inventory)


@dataclass(frozen=True)
class Inventory:
    """What a driver-suite case needs of the driver under test's published devices."""

    devices: tuple[DeviceNeed, ...] = ()
    nodes: int = 0


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    description: str
    features: tuple[str, ...]
    profile: str
    backends: tuple[str, ...]
    feature_gates: dict[str, bool]
    namespace_labels: dict[str, str]
    nodes: tuple[NodeSpec, ...]
    install_classes: bool
    steps: tuple[Step, ...]
    file: str
    line: int
    end_line: int
    source: tuple[str, ...] = field(repr=False, default=())  # every line of the file
    needs: tuple[Need, ...] = ()            # powers only the fake driver has (derived + declared)
    unresolved: tuple[str, ...] = ()        # placeholders the vendor profile does not define
    behaviour: str | None = None            # driver suite: the contract behaviour it proves
    inventory: Inventory | None = None      # driver suite: devices bound at setup (${inv.*})
    configuration: str | None = None        # driver suite: the vendor profile's configuration it runs in
    time_budget: float | None = None        # seconds (timeBudget:); None: sized from the steps (cases.budget)
    scheduler_gates: dict[str, bool] = field(default_factory=dict)  # schedulerFeatureGates: the scheduler's own

    def excerpt(self, line: int, context: int = 3) -> dict[str, Any]:
        start = max(self.line, line - context)
        end = min(self.end_line, line + context)
        return {"file": self.file, "startLine": start, "lines": list(self.source[start - 1:end]), "markLine": line}
