"""Consumable capacity: how much of a device's capacity a request consumes, and whether it fits."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping

from ..quantity import Quantity
from ..model.slice import DeviceCapacity, RequestPolicy, ValidRange


class CapacityError(ValueError):
    """A request that the device's range arithmetic cannot represent (fatal upstream)."""


def _milli_exact(q: Quantity) -> bool:
    return (q.value * 1000).denominator == 1


def _units(q: Quantity, milli: bool) -> Fraction:
    """Upstream's Value() (round up to an integer) or MilliValue() (in thousandths)."""
    return q.ceil_milli() * 1000 if milli else Fraction(q.ceil_int())


def _use_milli(r: ValidRange, fractional: bool) -> bool:
    """With DRAFractionalCapacityRange on, range arithmetic runs in milli-units whenever min, max
    and step are all exactly representable in milli-units (and step is at least 1m)."""
    if not fractional:
        return False
    for q in (r.min, r.max, r.step):
        if q is not None and not _milli_exact(q):
            return False
    return r.step is None or r.step.value * 1000 >= 1


def _round_up_range(q: Quantity, r: ValidRange, fractional: bool) -> Quantity:
    if q < r.min:
        return r.min
    if r.step is None:
        return q
    milli = _use_milli(r, fractional)
    if milli and not _milli_exact(q):
        raise CapacityError(f"capacity request cannot be represented in the device's range arithmetic: "
                            f"request {q} is not a representable milli value")
    qi, mi, si = _units(q, milli), _units(r.min, milli), _units(r.step, milli)
    if si == 0:
        return q
    n = math.ceil((qi - mi) / si)
    value = mi + si * n
    # The result takes the step's format, as upstream builds it from the step.
    return Quantity.from_number(value / 1000 if milli else value, fmt=r.step.format)


def consumed_for(requested: Quantity | None, cap: DeviceCapacity, fractional: bool) -> Quantity:
    p = cap.request_policy
    if requested is None:
        return p.default if p is not None and p.default is not None else cap.value
    if p is None:
        return requested
    if p.valid_range is not None:
        return _round_up_range(requested, p.valid_range, fractional)
    if p.valid_values:
        return next((v for v in p.valid_values if requested <= v), requested)
    return requested


def violates(q: Quantity, p: RequestPolicy | None, fractional: bool) -> bool:
    if p is None:
        return False
    if p.default is not None and q == p.default:
        return False
    if p.valid_range is not None:
        r = p.valid_range
        if r.max is not None and q > r.max:
            return True
        if r.step is not None:
            milli = _use_milli(r, fractional)
            if milli and not _milli_exact(q):
                return True
            step = _units(r.step, milli)
            return step != 0 and (_units(q, milli) - _units(r.min, milli)) % step != 0
        return False
    if p.valid_values:
        return not any(q == v for v in p.valid_values)
    return False


def consumption(requests: Mapping[str, Quantity] | None, capacity: Mapping[str, DeviceCapacity],
                fractional: bool) -> dict[str, Quantity] | None:
    """What one allocation would consume of every capacity, or None if the request cannot fit the
    device's shape (a requested name the device lacks, or a value the policy refuses)."""
    requests = requests or {}
    if any(name not in capacity for name in requests):
        return None
    out: dict[str, Quantity] = {}
    for name, cap in capacity.items():
        try:
            c = consumed_for(requests.get(name), cap, fractional)
        except CapacityError as exc:
            raise CapacityError(f"capacity \"{name}\": {exc}") from None
        if violates(c, cap.request_policy, fractional):
            return None
        out[name] = c
    return out


def fits(consumed: Mapping[str, Quantity], capacity: Mapping[str, DeviceCapacity],
         committed: Mapping[str, Quantity] | None, allocating: Mapping[str, Quantity] | None) -> bool:
    for name, cap in capacity.items():
        total = consumed[name].value
        if committed and name in committed:
            total += committed[name].value
        if allocating and name in allocating:
            total += allocating[name].value
        if total > cap.value.value:
            return False
    return True
