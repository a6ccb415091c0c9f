"""Templates of the environment a driver's CDI edits give a container (a profile's ``containerEnv``).

A key or value is text with ``{name}`` placeholders, each optionally followed by transforms:
``{device|trimprefix:gpu-|upper}``. ``{{`` and ``}}`` are literal braces. A value may instead be
``{pattern: <regular expression>}``: the variable must be there and its whole value match (after
the expression's own placeholders are filled in, regex-escaped), for values that depend on what
the driver chose (a cpuset, a memory size). The expression is Go's regexp syntax (RE2: linear
time, no backreferences or lookaround), compiled by ``conformance.goregex`` as CEL's are.

Placeholders (per device of the driver allocated to the claim):

=================  ==============================================================
``claim``          the claim's name        ``claimUID``   its metadata.uid
``namespace``      the claim's namespace   ``request``    the request (base name)
``device``         the device name         ``pool``       the device's pool
``node``           the pod's node          ``driver``     the driver name
``claimId``, ``requestId``, ``deviceId``   v1: name with non-alphanumerics as ``_``
``DEVICE``                                 v1: ``deviceId`` upper-cased
=================  ==============================================================

Transforms: ``upper``, ``lower``, ``ident`` (non-alphanumerics as ``_``), ``trimprefix:<text>``,
``trimsuffix:<text>``, ``replace:<old>:<new>``. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

from drakit.conformance import goregex

PLACEHOLDERS = ("claim", "claimUID", "namespace", "request", "device", "pool", "node", "driver",
                "claimId", "requestId", "deviceId", "DEVICE")
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z]+)((?:\|[^{}|]*)*)\}|[{}]")


def ident(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", text)


def _transform(spec: str) -> Callable[[str], str]:
    name, _, arg = spec.partition(":")
    if name == "upper" and not arg:
        return str.upper
    if name == "lower" and not arg:
        return str.lower
    if name == "ident" and not arg:
        return ident
    if name == "trimprefix" and arg:
        return lambda v: v.removeprefix(arg)
    if name == "trimsuffix" and arg:
        return lambda v: v.removesuffix(arg)
    if name == "replace" and ":" in arg:
        old, _, new = arg.partition(":")
        return lambda v: v.replace(old, new)
    raise ValueError(f"unknown transform {spec!r} (known: upper, lower, ident, trimprefix:<text>, "
                     f"trimsuffix:<text>, replace:<old>:<new>)")


def render(template: str, values: Mapping[str, str], escape: Callable[[str], str] = lambda v: v) -> str:
    """The template with its placeholders filled in (``escape`` applied to each filled value);
    ``ValueError`` names an unknown placeholder or transform, or a lone brace."""
    def sub(m: re.Match[str]) -> str:
        text = m.group(0)
        if text in ("{{", "}}"):
            return text[0]
        if m.group(1) is None:
            raise ValueError(f"a lone {text!r} in {template!r} (write {text * 2} for a literal brace)")
        name = m.group(1)
        if name not in PLACEHOLDERS:
            raise ValueError(f"unknown placeholder {{{name}}} in {template!r} (known: "
                             f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)})")
        value = values.get(name, "")
        for spec in filter(None, m.group(2).split("|")):
            value = _transform(spec)(value)
        return escape(value)
    return _FIELD.sub(sub, template)


@dataclass(frozen=True, slots=True)
class EnvPattern:
    """A value that must match a regular expression (its placeholders filled in first)."""

    pattern: str

    def regex(self, values: Mapping[str, str]) -> goregex.GoRegexp:
        return goregex.compile(render(self.pattern, values, goregex.quote_meta))


def check(template: str | EnvPattern) -> str | None:
    """Why a template cannot be used, or None."""
    sample = {p: "x" for p in PLACEHOLDERS}
    try:
        if isinstance(template, EnvPattern):
            template.regex(sample)
        else:
            render(template, sample)
    except goregex.GoRegexpError as exc:
        return f"not a regular expression: {exc}"
    except ValueError as exc:
        return str(exc)
    return None


def values_for(result: Mapping[str, str], claim: Mapping[str, object], node: str) -> dict[str, str]:
    """The placeholder values for one allocation result of a claim on a node."""
    meta = claim.get("metadata") or {}
    assert isinstance(meta, Mapping)
    name, request = str(meta.get("name", "")), result["request"].partition("/")[0]
    return {"claim": name, "claimUID": str(meta.get("uid", "")), "namespace": str(meta.get("namespace", "")),
            "request": request, "device": result["device"], "pool": result.get("pool", ""), "node": node,
            "driver": result.get("driver", ""), "claimId": ident(name), "requestId": ident(request),
            "deviceId": ident(result["device"]), "DEVICE": ident(result["device"]).upper()}
