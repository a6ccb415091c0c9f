"""The environment a driver's CDI edits gave probe containers, generalised into ``containerEnv``
templates (``fake_driver/envtemplate.py``) by comparing devices and claims. Pure.

An :class:`Observation` is one container that used one claim: the variables it had that a
container without a claim did not (what the driver's CDI edits added), and, per device allocated
to the claim, the placeholder values (``claim``, ``claimUID``, ``request``, ``device``, ``pool``,
``node``, ...). Each variable is written as a template: every part of its name and value that
equals a placeholder's value (as is, ``ident``, ``upper``, ``lower``) becomes that placeholder;
a template is kept only when it gives, for every device of every observation, a variable the
container really had with that value. A value no placeholder explains becomes a ``pattern``
(digits as ``[0-9]+``), or ``.+``; a name no template explains for every claim is returned as
unexplained, for a commented line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

# placeholders tried, the ones naming one device first (a claim's name may contain its request's)
_NAMES = ("claimUID", "device", "claim", "namespace", "node", "pool", "request", "driver")
_DEVICE_LEVEL = ("device", "pool")


def ident(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", text)


_TRANSFORMS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("", lambda v: v), ("|ident", ident), ("|upper", str.upper), ("|ident|upper", lambda v: ident(v).upper()),
    ("|lower", str.lower), ("|ident|lower", lambda v: ident(v).lower()))


@dataclass(frozen=True, slots=True)
class Observation:
    env: Mapping[str, str]  # what the driver added (the probe container's environment minus a plain one's)
    devices: Sequence[Mapping[str, str]]  # placeholder values per device of the claim


@dataclass(frozen=True, slots=True)
class EnvResult:
    templates: tuple[tuple[str, str | dict[str, str]], ...]  # (key template, value template or {pattern: ...})
    unexplained: tuple[str, ...] = ()  # variable names no template gives for every claim
    notes: tuple[str, ...] = field(default=())


def _tokens(values: Mapping[str, str]) -> list[tuple[str, str]]:
    """(rendered text, placeholder) for the values, longest first; short values (under 3
    characters) are too likely to match by chance and are not used."""
    out: dict[str, str] = {}
    for name in _NAMES:
        value = values.get(name, "")
        if len(value) < 3:
            continue
        for suffix, fn in _TRANSFORMS:
            out.setdefault(fn(value), "{" + name + suffix + "}")
    # a device's name without its kind (gpu-3 -> 3: GPU_DEVICE_3), however short: a template
    # matching by chance does not hold for every device of every claim, and is dropped
    device = values.get("device", "")
    prefix = re.match(r"^[A-Za-z]+[-_.]?", device)
    if prefix and len(device) > prefix.end():
        for suffix, fn in _TRANSFORMS:
            out.setdefault(fn(device[prefix.end():]), "{device|trimprefix:" + prefix.group(0) + suffix + "}")
    return sorted(out.items(), key=lambda t: -len(t[0]))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def generalise(text: str, values: Mapping[str, str]) -> str:
    """``text`` as a template: each longest part equal to a placeholder's (transformed) value
    replaced by that placeholder, the rest with its braces doubled."""
    tokens = _tokens(values)
    out, i = [], 0
    literal = ""
    while i < len(text):
        hit = next(((t, ph) for t, ph in tokens if text.startswith(t, i)), None)
        if hit is None:
            literal += text[i]
            i += 1
            continue
        out.append(_escape(literal) + hit[1])
        literal = ""
        i += len(hit[0])
    return "".join(out) + _escape(literal)


def render(template: str, values: Mapping[str, str]) -> str:
    """The inverse of :func:`generalise` for the placeholders and transforms it writes."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        value = values.get(m.group(1), "")
        for spec in filter(None, (m.group(2) or "").split("|")):
            name, _, arg = spec.partition(":")
            value = value.removeprefix(arg) if name == "trimprefix" else {"ident": ident, "upper": str.upper,
                                                                           "lower": str.lower}[name](value)
        return value
    return re.sub(r"\{\{|\}\}|\{([A-Za-z]+)((?:\|[^{}|]+)*)\}", sub, template)


def _pattern(values: Sequence[str]) -> str:
    """One regular expression every observed value matches whole: the literal parts escaped and
    runs of digits as [0-9]+ (else runs of lower-case hex digits as [0-9a-f]+: UUIDs, PCI
    addresses), when that is one expression for all, else ``.+``."""
    for run, regex in ((r"[0-9]+", "[0-9]+"), (r"[0-9a-f]+", "[0-9a-f]+")):
        shapes = {re.sub(run, "\0", v) for v in values}
        if len(shapes) == 1:
            shape = next(iter(shapes))
            # envtemplate fills placeholders into patterns: literal braces are doubled
            return _escape(regex.join(re.escape(part) for part in shape.split("\0")))
    return ".+"


def _device_level(template: str) -> bool:
    return any("{" + n in template for n in _DEVICE_LEVEL)


def _holds(key: str, value: str | None, obs: Sequence[Observation]) -> bool:
    """Every device of every observation gives a variable the container had (with that value,
    when one is given); a template naming no device gives the same value for each device."""
    for o in obs:
        for dev in o.devices:
            name = render(key, dev)
            if name not in o.env:
                return False
            if value is not None and o.env[name] != render(value, dev):
                return False
    return True


def generalise_env(observations: Sequence[Observation]) -> EnvResult:
    obs = [o for o in observations if o.devices]
    if not obs:
        return EnvResult((), notes=("no probe container ran with a device of the driver",))
    templates: dict[str, str | dict[str, str]] = {}
    explained: set[tuple[int, str]] = set()
    for i, o in enumerate(obs):
        for name in sorted(o.env):
            if (i, name) in explained:
                continue
            for dev in o.devices:
                key = generalise(name, dev)
                if render(key, dev) != name or key in templates:
                    continue
                if not _holds(key, None, obs):
                    continue
                value_t: str | dict[str, str] = generalise(o.env[name], dev)
                if not _holds(key, str(value_t), obs):
                    seen = [o2.env[render(key, d)] for o2 in obs for d in o2.devices]
                    value_t = next(iter(set(seen))) if len(set(seen)) == 1 and not _device_level(key) else {"pattern": _pattern(seen)}
                    if isinstance(value_t, str):
                        value_t = _escape(value_t)
                templates[key] = value_t
                for j, o2 in enumerate(obs):
                    for d in o2.devices:
                        explained.add((j, render(key, d)))
                break
    unexplained = sorted({name for i, o in enumerate(obs) for name in o.env if (i, name) not in explained})
    return EnvResult(tuple(templates.items()), tuple(unexplained))
