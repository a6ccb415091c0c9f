"""A device's capacities and their request policies (consumable capacity), with upstream's
validation (``pkg/apis/resource/validation``: validateRequestPolicy and what it calls).

Upstream's validation of a fractional range depends on the DRAFractionalCapacityRange gate;
the model has no gates, so it validates as with the gate on: a range (or default) with a
fractional value is checked in milli-units and every value must then be an exact milli value.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FieldError
from ..quantity import MAX_INT64, Quantity
from .reader import Reader

MAX_VALID_VALUES = 10


@dataclass(frozen=True, slots=True)
class ValidRange:
    min: Quantity
    max: Quantity | None = None
    step: Quantity | None = None


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range: ValidRange | None = None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    value: Quantity
    request_policy: RequestPolicy | None = None


def quantity_field(r: Reader, key: str, *, required: bool = False,
                   required_message: str = "required value") -> Quantity | None:
    v = r.raw(key)
    if v is None:
        if required:
            raise FieldError(r.at(key), required_message)
        return None
    try:
        return Quantity.from_yaml(v)
    except (ValueError, TypeError) as exc:
        raise FieldError(r.at(key), f"invalid quantity {v!r}: {exc}") from None


def parse_capacity(r: Reader, *, allow_multiple: bool) -> DeviceCapacity:
    """One entry of ``device.capacity``; a request policy needs ``allowMultipleAllocations``."""
    value = quantity_field(r, "value", required=True)
    assert value is not None
    policy = None
    p = r.obj("requestPolicy")
    if p is not None:
        policy = _parse_policy(p)
        if not allow_multiple:
            raise FieldError(p.path, "Forbidden: allowMultipleAllocations must be true")
        _validate_policy(value, policy, p)
    r.done()
    return DeviceCapacity(value, policy)


def _parse_policy(p: Reader) -> RequestPolicy:
    default = quantity_field(p, "default")
    valid_values: list[Quantity] = []
    for item, path in p.items("validValues", max_items=MAX_VALID_VALUES):
        try:
            valid_values.append(Quantity.from_yaml(item))
        except (ValueError, TypeError) as exc:
            raise FieldError(path, f"invalid quantity {item!r}: {exc}") from None
    vr = None
    rr = p.obj("validRange")
    if rr is not None:
        mn = quantity_field(rr, "min", required=True,
                            required_message="Required value: required when validRange is defined")
        mx = quantity_field(rr, "max")
        st = quantity_field(rr, "step")
        rr.done()
        assert mn is not None
        vr = ValidRange(mn, mx, st)
    p.done()
    return RequestPolicy(default, tuple(valid_values), vr)


def _validate_policy(capacity: Quantity, policy: RequestPolicy, p: Reader) -> None:
    if policy.valid_values and policy.valid_range is not None:
        raise FieldError(p.path, 'Forbidden: exactly one policy can be specified, cannot specify "validValues" and '
                                 '"validRange" at the same time')
    if policy.valid_values:
        if policy.default is None:
            raise FieldError(p.at("default"), "Required value: required when validValues is defined")
        _validate_values(policy.default, capacity, policy.valid_values, p.at("validValues"))
    elif policy.valid_range is not None:
        if policy.default is None:
            raise FieldError(p.at("default"), "Required value: required when validRange is defined")
        _validate_range(policy.default, capacity, policy.valid_range, p.at("validRange"))


def _validate_values(default: Quantity, capacity: Quantity, values: tuple[Quantity, ...],
                     path: tuple[object, ...]) -> None:
    for i in range(len(values) - 1):
        if values[i] > values[i + 1]:
            raise FieldError(path + (i + 1,), f"Invalid value: {values[i + 1]}: values must be sorted in ascending "
                                              f"order")
    for i, v in enumerate(values):
        if v > capacity:
            raise FieldError(path + (i,), f"Invalid value: {v}: option is larger than capacity value: {capacity}")
    seen: set[Quantity] = set()
    for i, v in enumerate(values):
        if v in seen:
            raise FieldError(path + (i,), f"Duplicate value: {v}")
        seen.add(v)
    if default not in seen:
        raise FieldError(path, f"Invalid value: {default}: default value is not valid according to the requestPolicy")


def _fractional(q: Quantity) -> bool:
    return not q.is_integer()


def _milli_exact(q: Quantity) -> bool:
    """Whether ``q`` is an exact milli value that fits an int64 (MilliValue() reads it back)."""
    scaled = q.value * 1000
    return scaled.denominator == 1 and -(2**63) <= scaled.numerator <= MAX_INT64


def _validate_range(default: Quantity, capacity: Quantity, r: ValidRange, path: tuple[object, ...]) -> None:
    if r.min > capacity:
        raise FieldError(path + ("min",), f"Invalid value: {r.min}: min is larger than capacity value: {capacity}")
    if default < r.min:
        raise FieldError(path + ("default",), f"Invalid value: {default}: default is less than min: {r.min}")
    if r.max is not None:
        if r.min > r.max:
            raise FieldError(path + ("max",), f"Invalid value: {r.min}: min is larger than max: {r.max}")
        if r.max > capacity:
            raise FieldError(path + ("max",), f"Invalid value: {r.max}: max is larger than capacity value: {capacity}")
        if default > r.max:
            raise FieldError(path + ("default",), f"Invalid value: {default}: default is more than max: {r.max}")
    named = (("default", default), ("min", r.min), ("max", r.max), ("step", r.step))
    milli = any(q is not None and _fractional(q) for _, q in named)
    if milli:
        for name, q in named:
            if q is not None and not _milli_exact(q):
                raise FieldError(path + (name,), f"Invalid value: {q}: value cannot be represented as a milli value")
    if r.step is None:
        return
    if r.step.sign() <= 0:
        raise FieldError(path + ("step",), f"Invalid value: {r.step}: must be greater than zero")
    one_step = r.min + r.step
    if one_step > capacity:
        raise FieldError(path + ("step",), f"Invalid value: {r.step}: one step {one_step} is larger than capacity "
                                           f"value: {capacity}")
    if not milli:
        for name, q in named:
            if q is not None and q.sign() < 0:
                raise FieldError(path + (name,), f"Invalid value: {q}: must be greater than or equal to 0")
            if q is not None and q.value > MAX_INT64:
                raise FieldError(path + (name,), f"Invalid value: {q}: must not be larger than {MAX_INT64}")
    for value in (default, r.max):
        if value is not None and not _on_step(value, r.min, r.step, milli):
            raise FieldError(path + ("step",), f"Invalid value: {value}: value is not a multiple of a given step "
                                               f"({r.step}) from ({r.min})")


def _on_step(value: Quantity, low: Quantity, step: Quantity, milli: bool) -> bool:
    """``(value - min) % step == 0`` in upstream's units: milli values, or whole units rounded up."""
    if milli:
        v, m, s = (int(q.ceil_milli() * 1000) for q in (value, low, step))
    else:
        v, m, s = value.ceil_int(), low.ceil_int(), step.ceil_int()
    return (v - m) % s == 0
