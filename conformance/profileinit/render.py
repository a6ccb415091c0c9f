"""A :class:`~.infer.Draft` written as a version 2 vendor profile: YAML with a comment on each
fact saying what showed it, and a commented line for each thing only the driver's author knows
(what to decide, and how to find out). Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Sequence

from .envgen import EnvResult
from .infer import Draft

ALL_OPTIONAL = ("admin-access", "prioritized-list", "partitionable-devices", "consumable-capacity", "device-status",
                "device-metadata", "health", "device-taints", "binding-conditions")
# what to decide, and how to find out, for a behaviour drakit did not observe
QUESTIONS = {
    "admin-access": "does your driver prepare a device already in use for a claim with adminAccess (a monitoring "
                    "pod)? That is your driver's intent, not something it publishes; declare it and driver/admin-access "
                    "checks it",
    "prioritized-list": "a claim with firstAvailable subrequests (the scheduler picks one); declare it when your "
                        "driver prepares such a claim (drakit checks it when pods can run: profile init with a cluster)",
    "device-metadata": "does your kubelet plugin write device metadata files for containers (KEP 5304)? declare it "
                       "and driver/device-metadata checks them (on drakit's local cluster)",
    "health": "does your kubelet plugin report device health on the DRAResourceHealth stream (KEP 4680)? declare "
              "it and driver/health checks it reaches the pod's status",
    "device-status": "does your driver write device status (status.devices, network data) into claims it "
                     "prepares? declare it and driver/device-status checks it",
    "partitionable-devices": "none of its devices consumes shared counters here; declare it if another "
                             "configuration of your driver publishes partitions",
    "consumable-capacity": "none of its devices allows multiple allocations here; declare it if another "
                           "configuration does",
    "binding-conditions": "none of its devices has binding conditions here; declare it if your driver sets them",
    "device-taints": "none of its devices is tainted here; declare it if your driver taints unhealthy devices",
}


@dataclass
class Extras:
    """What the draft adds beyond the slices: the probes' findings and how the plugin starts."""

    source: str = "saved ResourceSlices"
    env: EnvResult | None = None
    env_note: str = ""  # why no containerEnv was derived
    observed: list[tuple[str, str]] = field(default_factory=list)  # (behaviour, why) seen on the node side
    plugin_command: Sequence[str] = ()
    node_shapes: Sequence[str] = ()
    profile_name: str = ""
    notes: list[str] = field(default_factory=list)  # what the probes could not do, for the console


def q(value: object) -> str:
    """A YAML scalar (JSON's spelling is valid YAML)."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else json.dumps(value)


def render(draft: Draft, extras: Extras, command: str = "") -> str:
    role, lines = draft.role, list[str]()
    add = lines.append
    add(f"# Drafted by `drakit profile init{(' ' + command) if command else ''}`")
    add(f"# from {extras.source}: driver {draft.driver}, {draft.slices} ResourceSlice(s), {draft.devices} device(s)"
        + (f" on node(s) {', '.join(draft.nodes[:4])}{' ...' if len(draft.nodes) > 4 else ''}" if draft.nodes else "") + ".")
    add("# Every value below was observed; each commented line is a decision only you can make: read it,")
    add("# then uncomment or delete it. Check the result with: drakit lint --vendor <this file>")
    add("version: 2")
    add(f"name: {q(extras.profile_name or draft.driver)}")
    add(f"description: {q(f'{draft.driver}, drafted by drakit profile init')}")
    add("")
    add("drivers:")
    add(f"  {role}: {q(draft.driver)}")
    add("")
    add("classes:")
    name, selector = draft.classes[0]
    if draft.class_proposed:
        add(f"  {role}: {q(name)}   # proposed: no DeviceClass selects the driver; create one with: {selector}")
    else:
        add(f"  {role}: {q(name)}   # selects it: {selector}")
        for other, sel in draft.classes[1:4]:
            add(f"  # another DeviceClass that selects it: {other} ({sel})")
    _names(add, "attributes", role, [(a.key, a.name, _attr_note(a, draft.devices)) for a in draft.attributes])
    _names(add, "capacities", role, [(c.key, c.name, _cap_note(c, draft.devices)) for c in draft.capacities])
    if draft.values:
        add("")
        add("# values the devices have, for cases that select on a concrete one (the most common)")
        add("values:")
        add(f"  {role}:")
        for key, value in draft.values:
            add(f"    {key}: {q(value)}")
    add("")
    _under_test(add, draft, extras)
    return "\n".join(lines) + "\n"


def _attr_note(a: object, total: int) -> str:
    from .infer import Attribute
    assert isinstance(a, Attribute)
    parts = [a.type or "not typed"]
    parts.append("drakit's logical key" if a.matched else "a key of its own")
    if a.note:
        parts.append(a.note)
    elif a.devices == total:
        parts.append(f"on all {total} devices")
    return ", ".join(parts)


def _cap_note(c: object, total: int) -> str:
    from .infer import Capacity
    assert isinstance(c, Capacity)
    parts = [f"on {c.devices} of {total} devices" if c.devices < total else f"on all {total} devices"]
    parts.append(f"requestPolicy: {c.policy}" if c.policy else "no requestPolicy")
    return ", ".join(parts)


def _names(add: object, section: str, role: str, rows: list[tuple[str, str, str]]) -> None:
    assert callable(add)
    if not rows:
        return
    add("")
    add(f"{section}:")
    add(f"  {role}:")
    width = max(len(f"    {k}: {q(n)}") for k, n, _ in rows)
    for key, name, note in rows:
        text = f"    {key}: {q(name)}"
        add(f"{text.ljust(width)}   # {note}")


def _under_test(add: object, draft: Draft, extras: Extras) -> None:
    assert callable(add)
    add("driverUnderTest:")
    add(f"  role: {draft.role}")
    add(f"  pools: {draft.pools}   # {draft.pools_why}")
    add(f"  numaNode: {q(draft.numa_node)}   # {draft.numa_why}")
    typed = [a for a in draft.attributes if a.type is not None and a.devices == draft.devices]
    if typed:
        add("  attributeTypes:   # every device publishes these with this type")
        for a in typed:
            add(f"    {a.key}: {a.type}")
    declared = [(b.name, b.why) for b in draft.optional] + [b for b in extras.observed if b[0] not in {x.name for x in draft.optional}]
    names = {n for n, _ in declared}
    add("  optional:" + ("" if declared else " []") + "   # the optional behaviours it showed; the driver suite checks each")
    for n, why in declared:
        add(f"    - {n}   # {why}")
    for n in ALL_OPTIONAL:
        if n not in names:
            add(f"    # - {n}   # decide: {QUESTIONS[n]}")
    _env(add, extras)
    if not extras.plugin_command and not extras.node_shapes:
        add("  # plugin:   # decide: how drakit's local cluster starts your kubelet plugin on a node, for --cluster local")
        add("  #   command: [\"{binary}\", \"--node-name={node}\", \"--kubeconfig={kubeconfig}\", \"--cdi-root={cdiDir}\"]"
            "   # with binary: PATH (docs/guide/driver.md)")
    if extras.plugin_command:
        add("  plugin:   # how drakit's local cluster starts its kubelet plugin on each node")
        add("    command: [" + ", ".join(q(a) for a in extras.plugin_command) + "]")
        add(f"    folders: [{q('{pluginsDir}/' + draft.driver)}]   # its socket folder, made before it starts")
        add("    deviceClasses:")
        for cname, sel in draft.classes[:1]:
            add(f"      - name: {q(cname)}")
            add(f"        selector: {q(sel)}")
    if extras.node_shapes:
        add("  nodeShapes: [" + ", ".join(q(s) for s in extras.node_shapes) + "]   # drakit's fake driver: the shapes it ran on")


def _env(add: object, extras: Extras) -> None:
    assert callable(add)
    env = extras.env
    if env is None or not env.templates:
        why = extras.env_note or (env.notes[0] if env is not None and env.notes else
                                  "no pod ran here (a --slices draft)")
        add(f"  # containerEnv:   # not derived: {why}. Run profile init on a cluster where pods run, or write")
        add("  #   \"VAR_{claimUID}\": \"{device}\"   # what your CDI edits give a container, per device (docs/guide/driver.md)")
    else:
        add("  containerEnv:   # what its CDI edits gave the probe containers, generalised over devices and claims")
        for key, value in env.templates:
            shown = "{pattern: " + q(value["pattern"]) + "}" if isinstance(value, dict) else q(value)
            add(f"    {q(key)}: {shown}")
    for name in (env.unexplained if env is not None else ())[:20]:
        add(f"    # {q(name)}: ...   # decide: seen in some probe containers only; write its template by hand if it is per device")
