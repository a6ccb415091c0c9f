"""Consumable capacity: how much of a device's capacity a request consumes, and whether it fits.

Upstream does the range arithmetic of a request policy in int64: in whole units
(``Quantity.Value()``, rounded up) or, with DRAFractionalCapacityRange on and a range that is
exact in thousandths, in milli-units. A request it cannot represent there, or that rounds up
past the int64 range, and a consumed amount below zero are fatal errors (:class:`CapacityError`),
not a device that does not fit. The arithmetic below follows Go's: truncating division, and
sums that wrap around at 64 bits where upstream's guards leave them unguarded.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from ..quantity import MAX_INT64, Quantity
from ..model.capacity import DeviceCapacity, RequestPolicy, ValidRange

NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"
NEGATIVE = "capacity value is negative"


class CapacityError(ValueError):
    """A capacity the allocator refuses to compute with (fatal upstream)."""


def _wrap(v: int) -> int:
    """``v`` as a Go int64 (two's complement wrap-around)."""
    return (v + 2**63) % 2**64 - 2**63


def _div(a: int, b: int) -> int:
    """Go's ``a / b`` on integers: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _mod(a: int, b: int) -> int:
    """Go's ``a % b``: the sign follows ``a``."""
    return a - b * _div(a, b)


def _value(q: Quantity) -> int:
    """Upstream ``Value()``: rounded up (away from zero) to a whole number, as an int64."""
    return _wrap(q.ceil_int())


def _milli(q: Quantity) -> int:
    """Upstream ``MilliValue()``: rounded up to thousandths, as an int64."""
    return _wrap(int(q.ceil_milli() * 1000))


def _safe_milli(q: Quantity) -> int | None:
    """The milli value of ``q`` if it is exact and fits an int64 (upstream ``safeMilliValue``)."""
    scaled = q.value * 1000
    if scaled.denominator != 1 or not -(2**63) <= scaled.numerator <= MAX_INT64:
        return None
    return scaled.numerator


def use_milli(r: ValidRange, fractional: bool) -> bool:
    """Milli-unit arithmetic: with DRAFractionalCapacityRange on, when min, max and step are all
    exact milli values that fit an int64 and the step is at least 1m."""
    if not fractional:
        return False
    for q in (r.min, r.max, r.step):
        if q is not None and _safe_milli(q) is None:
            return False
    return r.step is None or _milli(r.step) >= 1


def _round_up_range(q: Quantity, r: ValidRange, fractional: bool) -> Quantity:
    if q < r.min:
        return r.min
    if r.step is None:
        return q
    if use_milli(r, fractional):
        requested = _safe_milli(q)
        if requested is None:
            raise CapacityError(f"{NOT_REPRESENTABLE}: request {q} is not a representable milli value")
        step, low = _milli(r.step), _milli(r.min)
        added = _wrap(requested - low)
        n = _div(added, step) + (1 if _mod(added, step) else 0)
        if n > _div(_wrap(MAX_INT64 - low), step):
            raise CapacityError(f"{NOT_REPRESENTABLE}: rounding request {q} up to the next step passes the "
                                f"milli-value range")
        value = _wrap(low + _wrap(step * n))
        whole = _mod(value, 1000) == 0
        return Quantity.from_number(_div(value, 1000) if whole else Fraction(value, 1000), fmt=r.step.format)
    if q.value > MAX_INT64:
        raise CapacityError(f"{NOT_REPRESENTABLE}: request {q} exceeds MaxInt64")
    requested, step, low = _value(q), _value(r.step), _value(r.min)
    added = _wrap(requested - low)
    n = _wrap(_div(added, step) + (1 if _mod(added, step) else 0))
    if low >= 0 and n > _div(MAX_INT64 - low, step):
        raise CapacityError(f"{NOT_REPRESENTABLE}: rounding request {q} up to the next step passes MaxInt64")
    # The result takes the step's format, as upstream builds it from the step.
    return Quantity.from_number(_wrap(low + _wrap(step * n)), fmt=r.step.format)


def consumed_for(requested: Quantity | None, cap: DeviceCapacity, fractional: bool) -> Quantity:
    """What one allocation consumes of one capacity (upstream ``calculateConsumedCapacity``)."""
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
    """Whether a consumed amount breaks the capacity's request policy (the device does not fit)."""
    if p is None:
        return False
    if p.default is not None and q == p.default:
        return False
    if p.valid_range is not None:
        r = p.valid_range
        if r.max is not None and q > r.max:
            return True
        if r.step is None:
            return False
        if use_milli(r, fractional):
            requested = _safe_milli(q)
            if requested is None:
                return True
            step, low = _milli(r.step), _milli(r.min)
        else:
            requested, step, low = _value(q), _value(r.step), _value(r.min)
        return _mod(_wrap(requested - low), step) != 0
    if p.valid_values:
        return not any(q == v for v in p.valid_values)
    return False


def consumption(requests: Mapping[str, Quantity] | None, capacity: Mapping[str, DeviceCapacity],
                fractional: bool) -> dict[str, Quantity] | None:
    """What one allocation would consume of every capacity, or None if the request cannot fit the
    device's shape (a requested name the device lacks, or a value the policy refuses).

    Every capacity is resolved before any policy is checked, so that an amount that cannot be
    computed (:class:`CapacityError`) aborts whatever the other capacities say."""
    requests = requests or {}
    if any(name not in capacity for name in requests):
        return None
    out: dict[str, Quantity] = {}
    for name, cap in capacity.items():
        try:
            c = consumed_for(requests.get(name), cap, fractional)
        except CapacityError as exc:
            raise CapacityError(f"capacity \"{name}\": {exc}") from None
        if c.sign() < 0:
            raise CapacityError(f"capacity \"{name}\": {NEGATIVE}")
        out[name] = c
    for name, cap in capacity.items():
        if violates(out[name], cap.request_policy, fractional):
            return None
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
