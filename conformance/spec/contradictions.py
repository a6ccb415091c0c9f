"""A declared behaviour whose devices are published but contradict it (pure).

When a driver-suite case cannot be bound to the devices a driver publishes
(``inventory.bind``), the driver may simply lack what the case needs (a skip, ``inventory``),
or it may publish devices for the behaviour that break it. The second is a failure of that
behaviour, not a missing feature. :func:`contradiction` says which, for a behaviour the vendor
profile declares:

- ``partitionable-devices`` (KEP 4815): shared counters exist so that devices sharing hardware
  (a full device and its partitions) cannot be allocated beyond it. A counter set of a pool of
  two or more devices that no device consumes constrains nothing; nor does one that a device
  consumes whole (the full device) while its partitions, consuming the rest, still fit beside
  it. Either way partitions can be allocated together with their full device: the hardware is
  overcommitted.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable, Mapping

from .inventory import amount, current_pools


def contradiction(behaviour: str | None, slices: Iterable[Mapping[str, Any]], driver: str) -> str | None:
    """Why the devices ``driver`` publishes contradict ``behaviour``, or None."""
    if behaviour == "partitionable-devices":
        return _overcommit(slices, driver)
    return None


def _overcommit(slices: Iterable[Mapping[str, Any]], driver: str) -> str | None:
    for pool, specs in sorted(current_pools(slices, driver).items()):
        sets = {cs.get("name", ""): {c: amount(v) for c, v in (cs.get("counters") or {}).items()}
                for sp in specs for cs in sp.get("sharedCounters") or []}
        devices = [d for sp in specs for d in sp.get("devices") or []]
        node = next((sp.get("nodeName") for sp in specs if sp.get("nodeName")), "")
        for name, have in sorted(sets.items()):
            used: dict[str, Fraction] = {}
            users = []
            whole = None  # a device consuming all of one of the set's counters: the full device
            for d in devices:
                mine = {c: amount(v) for cc in d.get("consumesCounters") or [] if cc.get("counterSet") == name
                        for c, v in (cc.get("counters") or {}).items()}
                if not mine:
                    continue
                users.append(str(d.get("name")))
                for c, v in mine.items():
                    used[c] = used.get(c, Fraction(0)) + v
                    if whole is None and v > 0 and v >= have.get(c, Fraction(0)):
                        whole = str(d.get("name"))
            where = f"pool {pool} (node {node}) of driver {driver}"
            if not users and len(devices) >= 2:
                return (f"{where} publishes shared counter set {name!r} ({_show(have)}) that none of its "
                        f"{len(devices)} devices consumes: nothing keeps its devices from being allocated beyond "
                        "the hardware they share (overcommit)")
            if whole is not None and len(users) >= 2 and all(v <= have.get(c, Fraction(0)) for c, v in used.items()):
                parts = [u for u in users if u != whole]
                return (f"{where}: device {whole} consumes all of shared counter set {name!r} ({_show(have)}), yet "
                        f"it and the {len(parts)} other device(s) consuming the set ({', '.join(parts[:4])}"
                        f"{', ...' if len(parts) > 4 else ''}) consume {_show(used)} together: all of them can be "
                        "allocated at once, partitions with their full device (overcommit)")
            if whole is not None and len(users) == 1:
                parts = _partitions_of(whole, devices)
                if parts:
                    return (f"{where}: device {whole} consumes all of shared counter set {name!r} ({_show(have)}), "
                            f"and devices {', '.join(parts[:4])}{', ...' if len(parts) > 4 else ''}, which share its "
                            "identity (an attribute value no other device of the pool has), consume none of it: they "
                            "can be allocated together with it (overcommit)")
    return None


def _partitions_of(whole: str, devices: list[Mapping[str, Any]]) -> list[str]:
    """Devices consuming no counters that share a string attribute value with ``whole`` which
    not every device of the pool has (a partition names its parent's uuid or bus; a model name
    is everyone's)."""
    def values(d: Mapping[str, Any]) -> set[str]:  # under any name: a partition's parentUUID is its parent's uuid
        return {str(v["string"]) for v in (d.get("attributes") or {}).values() if isinstance(v, Mapping) and "string" in v}

    parent = next(d for d in devices if str(d.get("name")) == whole)
    common = set.intersection(*(values(d) for d in devices)) if devices else set()
    own = values(parent) - common
    return [str(d.get("name")) for d in devices if d is not parent and not d.get("consumesCounters")
            and values(d) & own]


def _show(counters: Mapping[str, Fraction]) -> str:
    return ", ".join(f"{c} {_number(v)}" for c, v in sorted(counters.items())) or "no counters"


def _number(v: Fraction) -> str:
    if v.denominator != 1:
        return f"{float(v):g}"
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if v and v.numerator % size == 0:
            return f"{v.numerator // size}{unit}"
    return str(v.numerator)
