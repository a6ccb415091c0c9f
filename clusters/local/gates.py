"""Feature gates and controller names, checked against each binary's own ``--help``.

Kubernetes components exit at start on an unknown feature gate name, so the launcher never
passes a name it has not seen in that binary's help (or confirmed by a probe: GA and
deprecated gates are accepted but not listed).  Everything here except :func:`read_help`
and :func:`probe_gate` is pure and unit-tested with sample help text.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# "kube:DRAListTypeAttributes=true|false (ALPHA - default=false)"; the "kube:" prefix is
# optional in older releases.  A gate may be listed twice (", or ... if
# --min-compatibility-version>=X"); the first listing wins.
_GATE_RE = re.compile(r"(?:\b[a-z][a-z0-9-]*:)?\b([A-Z][A-Za-z0-9]*)=true\|false \(([A-Z-]+) - default=(true|false)\)")

#: Gates turned on with the DRA ones by default: requirements of DRA gates (GenericWorkload
#: for DRAWorkloadResourceClaims) and scheduler features in the DRA feature registry.
DRA_COMPANION_GATES: tuple[str, ...] = ("GenericWorkload", "SchedulerPreQueueingHints")


class GateError(Exception):
    """A requested gate is malformed or not known to the binaries."""


@dataclass(frozen=True, slots=True)
class Gate:
    name: str
    stage: str  # ALPHA, BETA (GA and DEPRECATED gates are not listed by --help)
    default: bool


def parse_help_gates(help_text: str) -> dict[str, Gate]:
    """Every gate ``--help`` lists under ``--feature-gates``."""
    gates: dict[str, Gate] = {}
    for m in _GATE_RE.finditer(help_text):
        name, stage, default = m.group(1), m.group(2), m.group(3) == "true"
        if name in ("AllAlpha", "AllBeta"):
            continue
        gates.setdefault(name, Gate(name, stage, default))
    return gates


def parse_gate_string(text: str) -> dict[str, bool]:
    """``"A=true,kube:B=false"`` -> ``{"A": True, "B": False}``; a malformed item is an error."""
    out: dict[str, bool] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if name.startswith("kube:"):
            name = name[len("kube:") :]
        value = value.strip().lower()
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name) or value not in ("true", "false"):
            raise GateError(f"malformed feature gate {item!r}: expected Name=true or Name=false")
        out[name] = value == "true"
    return out


def default_dra_gates(known: Mapping[str, Gate]) -> dict[str, bool]:
    """Every DRA gate the binary lists (alpha and beta), plus companions, all on."""
    return {n: True for n in sorted(known) if n.startswith("DRA") or n in DRA_COMPANION_GATES}


def format_gates(gates: Mapping[str, bool]) -> str:
    return ",".join(f"{n}={'true' if v else 'false'}" for n, v in sorted(gates.items()))


def resolve_gates(
    requested: Mapping[str, bool],
    known_by_binary: Mapping[str, Mapping[str, Gate]],
    probe: Callable[..., bool] | None = None,
) -> dict[str, dict[str, bool]]:
    """Split the requested gates per binary.

    A name is passed to a binary whose help lists it.  A name no help lists is asked of
    ``probe(binary, name, value)`` (GA/deprecated gates are accepted but unlisted), and when
    that fails, of ``probe(binary, name, value, others)`` with the other unlisted requested
    gates set in the same flag (``DRADeviceTaints=false`` is refused alone, because
    ``DRADeviceTaintRules`` depends on it, and accepted together with
    ``DRADeviceTaintRules=false``); when no binary accepts it, :class:`GateError` names it with
    the closest known names.
    """
    per: dict[str, dict[str, bool]] = {b: {} for b in known_by_binary}
    unknown: list[str] = []
    unlisted = {n: v for n, v in requested.items() if not any(n in k for k in known_by_binary.values())}
    for name, value in requested.items():
        hit = False
        for binary, known in known_by_binary.items():
            if name in known:
                per[binary][name] = value
                hit = True
        if hit:
            continue
        others = {n: v for n, v in unlisted.items() if n != name}
        for binary in known_by_binary:
            if probe is not None and (probe(binary, name, value) or (others and probe(binary, name, value, others))):
                per[binary][name] = value
                hit = True
        if not hit:
            unknown.append(name)
    if unknown:
        all_known = sorted({n for k in known_by_binary.values() for n in k})
        parts = []
        for name in unknown:
            close = difflib.get_close_matches(name, all_known, n=3)
            parts.append(name + (f" (did you mean {', '.join(close)}?)" if close else ""))
        binaries = ", ".join(known_by_binary)
        raise GateError(f"unknown feature gate(s) for {binaries}: {'; '.join(parts)}")
    return per


@dataclass(frozen=True, slots=True)
class Controllers:
    all: tuple[str, ...]
    disabled_by_default: tuple[str, ...]


def _name_list(text: str) -> tuple[str, ...]:
    """Leading comma-separated controller names; stops at the first word that is not one."""
    names: list[str] = []
    for tok in re.split(r"[\s,]+", text.strip()):
        tok = tok.rstrip(".")
        if not re.fullmatch(r"[a-z][a-z0-9-]*", tok):
            break
        names.append(tok)
    return tuple(names)


def parse_help_controllers(help_text: str) -> Controllers:
    """kube-controller-manager's ``--controllers`` help: all names and the off-by-default ones."""
    flat = re.sub(r"\s+", " ", help_text)
    m_all = re.search(r"All controllers: (.*?)(?:\. | Disabled-by-default controllers:|$)", flat)
    m_off = re.search(r"Disabled-by-default controllers: (.*?)(?:\. | --|$)", flat)
    if not m_all:
        raise GateError("kube-controller-manager --help lists no 'All controllers:'")
    names = _name_list(m_all.group(1))
    off = _name_list(m_off.group(1)) if m_off else ()
    return Controllers(names, off)


#: Controllers the DRA conformance runs need (names differ a little between releases).
DRA_CONTROLLER_PATTERNS: tuple[str, ...] = (
    r"^resource-?claim-controller$",
    r"^device-taint-eviction-controller$",
    r"^resource-?pool-?status.*controller$",
)


#: Controllers a local cluster does without: the CSR signer (drakit issues every certificate
#: itself; the signer's four file watchers would hold four of the user's inotify instances, of
#: which every cluster and kubelet of the user shares 128 by default).
UNUSED_CONTROLLERS = ("certificatesigningrequest-signing-controller",)


def controllers_flag(ctrl: Controllers, disable: Iterable[str] = UNUSED_CONTROLLERS) -> str:
    """``--controllers`` value: defaults, plus the DRA controllers, minus ``disable``."""
    wanted = [n for n in ctrl.all if any(re.match(p, n) for p in DRA_CONTROLLER_PATTERNS)]
    if not any(re.match(DRA_CONTROLLER_PATTERNS[0], n) for n in wanted):
        raise GateError("kube-controller-manager --help lists no resource claim controller")
    items = ["*"] + [n for n in wanted if n in ctrl.disabled_by_default]
    items += [f"-{n}" for n in disable if n in ctrl.all]
    return ",".join(items)


def read_help(binary: Path, timeout: float = 60) -> str:
    proc = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=timeout, check=False)
    return proc.stdout + proc.stderr


def probe_gate(binary: Path, name: str, value: bool, together: Mapping[str, bool] | None = None,
               timeout: float = 60) -> bool:
    """Whether ``binary`` accepts ``--feature-gates=name=value`` (checked with ``--version``),
    with the ``together`` gates set in the same flag."""
    arg = "--feature-gates=" + format_gates({**(together or {}), name: value})
    proc = subprocess.run([str(binary), arg, "--version"], capture_output=True, text=True, timeout=timeout, check=False)
    return proc.returncode == 0


def apply_component_gates(per: dict[str, dict[str, bool]], known: Mapping[str, Mapping[str, Gate]],
                          component_gates: Mapping[str, Mapping[str, bool]]) -> None:
    """Set, in ``per`` (gates per binary), the gates one component alone has otherwise (version
    or configuration skew), e.g. ``{"kube-scheduler": {"DRADeviceBindingConditions": False}}``;
    a component or gate the binaries do not know is a :class:`GateError`."""
    for component, extra in component_gates.items():
        if component not in per:
            raise GateError(f"component gates for {component}: not a component of the local cluster")
        for gate, value in extra.items():
            if gate not in per[component] and gate not in known.get(component, {}):
                raise GateError(f"{component} does not know feature gate {gate}")
            per[component][gate] = value
