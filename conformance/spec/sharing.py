"""What two allocations of one published device need, so that a driver case asks for what fits (pure).

A driver-suite case that puts two claims on one device (two shares of a device that allows
multiple allocations, or an admin-access claim on top of a dedicated allocation) must ask for
amounts the device's capacity and its pool's counters allow twice. The rules are the 1.37.2
structured allocator's (``conformance.allocator.capacity``, ``reference/allocator-and-cel.md``
§11-12):

- a capacity a request does not mention consumes its ``requestPolicy.default``, else the whole
  value, so a device whose default is the whole device never takes a second share unless the
  claims ask for less;
- an amount must be one the policy allows (a default, one of ``validValues``, or on
  ``validRange``'s steps), and the shares together must fit the value;
- a device that allows multiple allocations and has capacities pays its counters once; without
  capacities, and for an admin-access allocation of a dedicated device, the counters are reserved
  again (upstream issues #140729 and the double count of §11).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

from drakit.conformance.allocator.capacity import CapacityError, consumed_for, violates
from drakit.conformance.model.capacity import DeviceCapacity, RequestPolicy, ValidRange
from drakit.conformance.quantity import Quantity


def _quantity(raw: Any) -> Quantity | None:
    if raw is None:
        return None
    return Quantity.from_yaml(raw)


def parse_capacity(raw: Mapping[str, Any]) -> DeviceCapacity:
    """A wire-form capacity entry (``{value, requestPolicy}``); ``ValueError`` when malformed."""
    value = _quantity(raw.get("value"))
    if value is None:
        raise ValueError("capacity without a value")
    policy = None
    p = raw.get("requestPolicy")
    if isinstance(p, Mapping):
        r = p.get("validRange")
        valid_range = None
        if isinstance(r, Mapping) and r.get("min") is not None:
            valid_range = ValidRange(Quantity.from_yaml(r["min"]), _quantity(r.get("max")), _quantity(r.get("step")))
        policy = RequestPolicy(_quantity(p.get("default")),
                               tuple(Quantity.from_yaml(v) for v in p.get("validValues") or ()), valid_range)
    return DeviceCapacity(value, policy)


def _candidates(cap: DeviceCapacity) -> list[Quantity]:
    """Amounts the policy itself names (each consumed as it is), smallest first; where the policy
    allows any amount (none, or a default alone), half the value too (milli-units, rounded down)."""
    p = cap.request_policy
    found = [q for q in (p.default, *p.valid_values, p.valid_range.min if p.valid_range else None)
             if q is not None] if p is not None else []
    if p is None or (not p.valid_values and p.valid_range is None):  # any amount is allowed
        half = Fraction(int(cap.value.value * 1000 / 2), 1000)
        if half > 0:
            found.append(Quantity.from_number(half, cap.value.format))
    return sorted(found, key=lambda q: q.value)


def two_shares(capacity: Mapping[str, Any]) -> dict[str, str] | None:
    """Capacity requests with which two allocations of a device that allows multiple allocations
    fit together (every capacity named: one left out consumes its default or the whole value), or
    None when no amount the policies allow fits twice. ``{}`` for a device without capacities."""
    out: dict[str, str] = {}
    for name, raw in capacity.items():
        try:
            cap = parse_capacity(raw)
        except (ValueError, TypeError):
            return None
        chosen = None
        for q in _candidates(cap):
            try:
                consumed = consumed_for(q, cap, True)
            except CapacityError:
                continue
            if not violates(consumed, cap.request_policy, True) and 2 * consumed.value <= cap.value.value:
                chosen = q
                break
        if chosen is None:
            return None
        out[name] = str(chosen)
    return out


def counters_fit(consumes: tuple[tuple[str, str, Fraction], ...], counters: tuple[tuple[str, str, Fraction], ...],
                 times: int) -> bool:
    """The device's counter consumption, ``times`` over, fits its pool's shared counters."""
    have: dict[tuple[str, str], Fraction] = {}
    for cs, c, v in counters:
        have[(cs, c)] = have.get((cs, c), Fraction(0)) + v
    need: dict[tuple[str, str], Fraction] = {}
    for cs, c, v in consumes:
        need[(cs, c)] = need.get((cs, c), Fraction(0)) + v * times
    return all(key in have and amount <= have[key] for key, amount in need.items())
