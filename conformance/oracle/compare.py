"""Run one allocator input through drakit's reference allocator and through the upstream oracle,
and report every difference that matters: feasibility, the devices chosen, the kind of error
and (where our text is meant to match upstream's) the error text.

An *input* is a plain dict, the shape the oracle reads and the upstream-table fixtures use::

    {"features": {"DRAAdminAccess": true, ...},          # feature gates by name; missing = off
     "node": {"name": "n1", "labels": {...}, "declaredFeatures": [...]},
     "classes": [DeviceClass], "slices": [ResourceSlice], "claims": [ResourceClaim],   # wire form
     "allocated": {"devices": ["driver/pool/device"],
                   "shares": [{"device": "driver/pool/device", "shareID": "..."}],
                   "capacity": {"driver/pool/device": {"name": "quantity"}}}}

``apiVersion``/``kind`` may be left out of the objects. Both sides yield an :class:`Outcome`
whose results are normalised wire form (share IDs replaced by a placeholder, quantities by
their exact value, node-selector requirements sorted, toleration operators defaulted).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..allocator import AllocatedState, AllocationError, Allocator, Features, NodeAllocationError, NodeInfo
from ..allocator.types import CHANNELS
from ..errors import FieldError
from ..model import parse_object
from ..quantity import Quantity

API = "resource.k8s.io/v1"
SHARE = "<share-id>"
DEFAULT_ALLOCATORS = ("incubating", "experimental")
"""Upstream implementations both sides may pick by default. ``stable`` is left out: its pool
order is Go map order (random); pass ``allocators=("stable",)`` on inputs with one pool to
compare drakit's stable behaviour."""

# Error kinds: the first pattern that matches an error text names its kind.
ERROR_KINDS: tuple[tuple[str, str], ...] = (
    ("invalid-pools", r"invalid resource pools were encountered"),
    ("prioritized-list-disabled", r"has subrequests, but the DRAPrioritizedList feature is disabled"),
    ("capacity-disabled", r"has capacity requests, but the DRAConsumableCapacity feature is disabled"),
    ("empty-selector", r"CEL expression empty \(unsupported selector type\?\)"),
    ("admin-access-disabled", r"admin access is requested, but the feature is disabled"),
    ("missing-class-name", r"missing device class name"),
    ("class-not-found", r"could not retrieve device class"),
    ("bad-count-mode", r"unsupported count mode"),
    ("all-pool-incomplete", r"asks for all devices, but resource pool \S+ is currently being updated"),
    ("all-pool-invalid", r"asks for all devices, but resource pool \S+ is currently invalid"),
    ("too-many-devices", r"devices exceeds the claim limit of \d+|allocation max size exceeded"),
    ("count-too-large", r"exact count \d+ is too large"),
    ("capacity-invalid", r"(checking|rechecking|computing consumed) capacity for device"),
    ("empty-constraint", r"empty constraint \(unsupported constraint type\?\)"),
    ("constraint-in-all", r"cannot add device \S+ because a claim constraint would not be satisfied"),
    ("cel-compile", r"CEL compile error"),
    ("cel-runtime", r"CEL runtime error"),
    ("derived-attribute", r"(evaluate|compile) derived attribute \S+ .*failed"),
    ("derived-attribute-disabled", r"cannot handle request with derived attributes, the feature is disabled"),
    ("node-selector-terms", r"unsupported ResourceSlice\.NodeSelector with \d+ terms"),
    ("node-selection", r"failed to perform node selection"),
    ("aborted", r"filter operation aborted|context deadline exceeded|context canceled"),
)
_KIND_RES = tuple((k, re.compile(p)) for k, p in ERROR_KINDS)
# For these kinds only the part before the marker is ours to match: the rest is the CEL
# engine's own wording (cel-go upstream, cel-expr-python here).
_TEXT_PREFIX_ONLY = {"cel-compile": "CEL compile error", "cel-runtime": "CEL runtime error",
                     "derived-attribute": " failed: "}


def error_kind(text: str) -> str:
    for kind, rx in _KIND_RES:
        if rx.search(text):
            return kind
    return "other"


@dataclass(slots=True)
class Outcome:
    """What one allocator made of one input."""

    status: str  # ok | unsatisfiable | error | rejected (our API validation refused the input) | crash
    results: list[dict[str, Any]] | None = None
    error: str | None = None
    per_node: bool = False
    steps: int | None = None
    channel: str | None = None
    nanos: int | None = None

    @property
    def kind(self) -> str | None:
        if self.status != "error" or self.error is None:
            return None
        return error_kind(self.error)

    def devices(self) -> list[list[str]] | None:
        """Per claim, ``request -> driver/pool/device`` in result order."""
        if self.results is None:
            return None
        return [[f"{d['request']} -> {d['driver']}/{d['pool']}/{d['device']}" for d in r["devices"].get("results", [])]
                for r in self.results]

    def summary(self) -> str:
        if self.status == "ok":
            return "ok " + json.dumps(self.devices())
        if self.status == "error":
            return f"error[{self.kind}{', per node' if self.per_node else ''}] {self.error}"
        if self.status in ("rejected", "crash"):
            return f"{self.status}: {self.error}"
        return self.status


# --- normalisation ---------------------------------------------------------------------------

def _qty(v: Any) -> str:
    try:
        q = Quantity.parse(str(v))
    except (ValueError, TypeError):
        return f"<bad quantity {v!r}>"
    value: Fraction = q.value
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _toleration(t: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in t.items() if v not in (None, "")}
    out.setdefault("operator", "Equal")
    return out


def _requirement(r: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    return (r.get("key", ""), r.get("operator", ""), tuple(sorted(r.get("values") or ())))


def normalise_selector(sel: Mapping[str, Any] | None) -> Any:
    if not sel:
        return None
    terms = []
    for t in sel.get("nodeSelectorTerms") or ():
        terms.append({"matchExpressions": sorted(_requirement(r) for r in t.get("matchExpressions") or ()),
                      "matchFields": sorted(_requirement(r) for r in t.get("matchFields") or ())})
    return terms


def normalise_device_result(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: d[k] for k in ("request", "driver", "pool", "device")}
    if d.get("adminAccess"):
        out["adminAccess"] = True
    if d.get("tolerations"):
        out["tolerations"] = [_toleration(t) for t in d["tolerations"]]
    for key in ("bindingConditions", "bindingFailureConditions"):
        if d.get(key):
            out[key] = list(d[key])
    if d.get("shareID"):
        out["shareID"] = SHARE
    if d.get("consumedCapacity"):
        out["consumedCapacity"] = {k: _qty(v) for k, v in sorted(d["consumedCapacity"].items())}
    skip = d.get("skipNodeOperations")
    if skip:
        out["skipNodeOperations"] = sorted(skip) if isinstance(skip, list) else skip
    return out


def _config(c: Mapping[str, Any]) -> dict[str, Any]:
    opaque = c.get("opaque") or {}
    params = opaque.get("parameters")
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            pass
    out: dict[str, Any] = {"source": c.get("source"), "driver": opaque.get("driver"), "parameters": params}
    if c.get("requests"):
        out["requests"] = list(c["requests"])
    return out


def normalise_result(r: Mapping[str, Any]) -> dict[str, Any]:
    devices = r.get("devices") or {}
    out: dict[str, Any] = {"devices": {"results": [normalise_device_result(d) for d in devices.get("results") or ()]}}
    if devices.get("config"):
        out["devices"]["config"] = [_config(c) for c in devices["config"]]
    sel = normalise_selector(r.get("nodeSelector"))
    if sel is not None:
        out["nodeSelector"] = sel
    return out


# --- running our allocator ---------------------------------------------------------------------

def _wire(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    out.setdefault("apiVersion", API)
    out.setdefault("kind", kind)
    return out


def split_device_id(s: str) -> tuple[str, str, str]:
    """``driver/pool/device``: driver and device names have no '/', pool names may."""
    first, last = s.index("/"), s.rindex("/")
    if first == last:
        raise ValueError(f"device ID {s!r}: want driver/pool/device")
    return (s[:first], s[first + 1:last], s[last + 1:])


def allocated_state(spec: Mapping[str, Any] | None) -> AllocatedState:
    spec = spec or {}
    state = AllocatedState()
    for d in spec.get("devices") or ():
        state.devices.add(split_device_id(d))
    for s in spec.get("shares") or ():
        state.shares.add((split_device_id(s["device"]), s["shareID"]))
    for d, caps in (spec.get("capacity") or {}).items():
        state.capacity[split_device_id(d)] = {k: Quantity.parse(str(v)) for k, v in caps.items()}
    return state


def node_info(spec: Mapping[str, Any]) -> NodeInfo:
    return NodeInfo(spec["name"], dict(spec.get("labels") or {}), tuple(spec.get("declaredFeatures") or ()))


def run_ours(inp: Mapping[str, Any], *, allocator: type[Allocator] = Allocator,
             allocators: Sequence[str] | None = DEFAULT_ALLOCATORS, precheck: bool = True) -> Outcome:
    """Parse the input through drakit's model (API validation included) and allocate, choosing
    among the same upstream implementations as :func:`oracle_request` (None: all, as the
    scheduler does). ``precheck=False``: search even where the node cannot fit the claims, as
    upstream does (its search steps are then comparable)."""
    try:
        features = Features.from_gates(inp.get("features") or {})
        classes = {c.name: c for c in (parse_object(_wire("DeviceClass", c)) for c in inp.get("classes") or ())}
        slices = [parse_object(_wire("ResourceSlice", s)) for s in inp.get("slices") or ()]
        claims = [parse_object(_wire("ResourceClaim", c)) for c in inp.get("claims") or ()]
        state = allocated_state(inp.get("allocated"))
        node = node_info(inp.get("node") or {"name": "node-1"})
    except FieldError as exc:
        return Outcome("rejected", error=str(exc))
    except (ValueError, KeyError, TypeError) as exc:
        return Outcome("rejected", error=f"{type(exc).__name__}: {exc}")
    counter = itertools.count()
    channels = tuple(allocators) if allocators else CHANNELS
    alloc = allocator(features, classes, slices, state, share_ids=lambda: f"share-{next(counter)}", channels=channels,
                      precheck=precheck)
    try:
        results = alloc.allocate(node, claims)
    except NodeAllocationError as exc:
        return Outcome("error", error=str(exc), per_node=True, steps=alloc.last_steps, channel=alloc.channel)
    except AllocationError as exc:
        return Outcome("error", error=str(exc), steps=alloc.last_steps, channel=alloc.channel)
    except Exception as exc:  # noqa: BLE001 - a crash is a finding, not a test-runner failure
        return Outcome("crash", error=f"{type(exc).__name__}: {exc}")
    steps = alloc.last_steps
    if results is None:
        return Outcome("unsatisfiable", steps=steps, channel=alloc.channel)
    return Outcome("ok", [normalise_result(r.to_wire()) for r in results], steps=steps, channel=alloc.channel)


# --- the oracle side ---------------------------------------------------------------------------

def with_api_defaults(claim: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a wire-form claim with the API server's defaults applied (allocationMode
    ExactCount, count 1, toleration operator Equal), as the scheduler would read it: upstream's
    allocator refuses an empty allocationMode, while drakit's model fills the defaults in."""
    out: dict[str, Any] = json.loads(json.dumps(claim))
    for r in ((out.get("spec") or {}).get("devices") or {}).get("requests") or ():
        for body in ([r["exactly"]] if r.get("exactly") else r.get("firstAvailable") or ()):
            body.setdefault("allocationMode", "ExactCount")
            if body["allocationMode"] == "ExactCount":
                body.setdefault("count", 1)
            for t in body.get("tolerations") or ():
                t.setdefault("operator", "Equal")
    return out


def oracle_request(inp: Mapping[str, Any], *, allocators: Sequence[str] | None = DEFAULT_ALLOCATORS,
                   timeout: float | None = 20.0, ident: Any = None) -> dict[str, Any]:
    """The oracle's request for one input (claims with API defaults applied)."""
    req: dict[str, Any] = {
        "features": dict(inp.get("features") or {}),
        "node": dict(inp.get("node") or {"name": "node-1"}),
        "classes": [_wire("DeviceClass", c) for c in inp.get("classes") or ()],
        "slices": [_wire("ResourceSlice", s) for s in inp.get("slices") or ()],
        "claims": [_wire("ResourceClaim", with_api_defaults(c)) for c in inp.get("claims") or ()],
        "allocated": dict(inp.get("allocated") or {}),
    }
    if allocators:
        req["allocators"] = list(allocators)
    if timeout:
        req["timeoutSeconds"] = timeout
    if ident is not None:
        req["id"] = ident
    return req


def outcome_from_oracle(answer: Mapping[str, Any]) -> Outcome:
    """The oracle's answer as an :class:`Outcome` (results normalised)."""
    if answer.get("inputError"):
        out = Outcome("rejected", error=answer["inputError"])
    elif answer.get("panic"):
        out = Outcome("crash", error=f"panic: {answer['panic']}")
    elif answer.get("error") is not None:
        out = Outcome("error", error=answer["error"], per_node=bool(answer.get("perNode")))
    elif answer.get("results") is None:
        out = Outcome("unsatisfiable")
    else:
        out = Outcome("ok", [normalise_result(r) for r in answer["results"]])
    out.steps, out.channel, out.nanos = answer.get("steps"), answer.get("channel"), answer.get("nanos")
    return out


def run_upstream(oracle: Any, inputs: Iterable[Mapping[str, Any]], **kw: Any) -> Iterator[Outcome]:
    for answer in oracle.run_many(oracle_request(i, **kw) for i in inputs):
        yield outcome_from_oracle(answer)


# --- comparing -----------------------------------------------------------------------------------

@dataclass(slots=True)
class Comparison:
    ours: Outcome
    upstream: Outcome
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # not failures: step counts, quantity formats

    @property
    def same(self) -> bool:
        return not self.differences

    def report(self) -> str:
        lines = [f"ours:     {self.ours.summary()}", f"upstream: {self.upstream.summary()}"
                 + (f"  [{self.upstream.channel}]" if self.upstream.channel else "")]
        lines += [f"  - {d}" for d in self.differences]
        lines += [f"  (note) {n}" for n in self.notes]
        return "\n".join(lines)


def comparable_error_text(kind: str | None, text: str | None) -> str:
    """The part of an error text both sides should word identically (for CEL errors: up to the
    engine's own message)."""
    text = text or ""
    marker = _TEXT_PREFIX_ONLY.get(kind or "")
    if marker and marker in text:
        return text[:text.index(marker)]
    return text


def compare(ours: Outcome, upstream: Outcome, *, check_text: bool = True, check_steps: bool = False) -> Comparison:
    c = Comparison(ours, upstream)
    d = c.differences
    if "crash" in (ours.status, upstream.status) or "rejected" in (ours.status, upstream.status):
        if ours.status != upstream.status or ours.status == "crash":
            d.append(f"outcome: ours {ours.status}, upstream {upstream.status}")
        return c
    if ours.status != upstream.status:
        d.append(f"feasibility: ours {ours.status}, upstream {upstream.status}")
        return c
    if ours.status == "error":
        if ours.kind != upstream.kind or ours.per_node != upstream.per_node:
            d.append(f"error kind: ours {ours.kind}{' (per node)' if ours.per_node else ''}, "
                     f"upstream {upstream.kind}{' (per node)' if upstream.per_node else ''}")
        elif check_text and comparable_error_text(ours.kind, ours.error) != comparable_error_text(upstream.kind, upstream.error):
            d.append(f"error text: ours {ours.error!r}, upstream {upstream.error!r}")
        return c
    if ours.status == "ok":
        assert ours.results is not None and upstream.results is not None
        od, ud = ours.devices(), upstream.devices()
        if od != ud:
            d.append(f"devices: ours {od}, upstream {ud}")
        else:
            for i, (a, b) in enumerate(zip(ours.results, upstream.results)):
                for key in ("devices", "nodeSelector"):
                    if a.get(key) != b.get(key):
                        d.append(f"claim #{i} {key}: ours {json.dumps(a.get(key), sort_keys=True)}, "
                                 f"upstream {json.dumps(b.get(key), sort_keys=True)}")
    if ours.steps is not None and upstream.steps and ours.steps != upstream.steps:
        msg = f"search steps: ours {ours.steps}, upstream {upstream.steps}"
        (d if check_steps else c.notes).append(msg)
    return c


def signature(c: Comparison) -> tuple[object, ...]:
    """What kind of divergence a comparison shows (statuses and error kinds of both sides, and
    which aspects differ): a minimised input must keep the same signature."""
    aspects = tuple(sorted({d.split(":", 1)[0].split(" ", 2)[0] for d in c.differences}))
    return (c.ours.status, c.upstream.status, c.ours.kind, c.upstream.kind, aspects)


def minimise_divergence(oracle: Any, inp: Mapping[str, Any], **kw: Any) -> tuple[dict[str, Any], Comparison]:
    """Shrink an input that diverges to a small one with the same :func:`signature`."""
    from .minimise import minimise

    mine = {k: v for k, v in kw.items() if k == "allocators"}

    def check(i: Mapping[str, Any]) -> Comparison:
        return compare(run_ours(i, **mine), outcome_from_oracle(oracle.run(oracle_request(i, **kw))))

    first = check(inp)
    if first.same:
        return dict(inp), first
    want = signature(first)
    small = minimise(dict(inp), lambda i: signature(check(i)) == want,
                     valid=lambda i: run_ours(i).status != "rejected")
    return small, check(small)


def compare_inputs(oracle: Any, inputs: Sequence[Mapping[str, Any]], **kw: Any) -> list[Comparison]:
    """Run every input through both allocators (the oracle in one batch)."""
    upstream = list(run_upstream(oracle, inputs, **{k: v for k, v in kw.items() if k in ("allocators", "timeout")}))
    rest = {k: v for k, v in kw.items() if k in ("check_text", "check_steps")}
    mine = {k: v for k, v in kw.items() if k == "allocators"}
    return [compare(run_ours(i, **mine), u, **rest) for i, u in zip(inputs, upstream)]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m drakit.conformance.oracle.compare INPUT.json...``: compare inputs given as JSON files
    (one input, a list of inputs, or JSON lines) and print the differences."""
    import argparse
    import sys

    from . import Oracle, OracleUnavailable

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0] if main.__doc__ else None)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--allocators", default=",".join(DEFAULT_ALLOCATORS),
                    help="upstream implementations the oracle may pick (comma list; empty: as the scheduler)")
    ap.add_argument("--minimise", action="store_true", help="shrink every diverging input and print it as JSON")
    args = ap.parse_args(argv)
    from ..inputs import STATE, InputError, read_text
    inputs: list[dict[str, Any]] = []
    for f in args.files:
        try:  # drakit's one reader: a regular file, its size bounded
            text = read_text(f, STATE)
        except InputError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        try:
            data = json.loads(text)
            inputs.extend(data if isinstance(data, list) else [data])
        except ValueError:
            inputs.extend(json.loads(line) for line in text.splitlines() if line.strip())
    try:
        oracle = Oracle()
    except OracleUnavailable as exc:
        print(f"oracle unavailable: {exc}", file=sys.stderr)
        return 2
    allocators = [a for a in args.allocators.split(",") if a]
    with oracle:
        comps = compare_inputs(oracle, inputs, allocators=allocators)
        bad = 0
        for i, c in enumerate(comps):
            if not c.same:
                bad += 1
            print(f"# input {i}: {'same' if c.same else 'DIFFERENT'}\n{c.report()}")
            if not c.same and args.minimise:
                small, sc = minimise_divergence(oracle, inputs[i], allocators=allocators)
                print(f"# input {i}, minimised:\n{sc.report()}\n{json.dumps(small)}")
    print(f"{len(comps) - bad} same, {bad} different")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
