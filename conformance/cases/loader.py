"""Load ``*.case.yaml`` files: YAML with line marks, the closed schema, feature ids,
placeholders and every manifest validated, each problem one ``file:line: path: message``.

A file with a YAML syntax error yields one error; otherwise each document stands alone, so one
broken case never hides its neighbours.

``vocabulary`` (the placeholder keys drakit's own profile defines) makes a partial vendor
profile usable: a placeholder the profile lacks but the vocabulary knows leaves the case loaded
with ``unresolved`` set (it is skipped as not applicable); any other unknown placeholder is a
load error. Each case also carries its :mod:`needs <drakit.conformance.spec.needs>`.

Limits (the way the API server bounds a request): a case file over ``max_bytes`` (1 MiB unless
overridden) is refused unread; nesting depth and alias expansion are bounded while the YAML is
composed (:class:`~conformance.yamlmarks.YamlLimits`); a file reports at most
``MAX_ERRORS_PER_FILE`` problems. A file with no case at all (empty, only comments) is an
error too: a suite that silently tests nothing is not a pass.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Mapping

import jsonschema

from ..errors import FieldError, LoadError, format_path
from ..features import BY_ID, DEFAULT_GATES
from ..inputs import CASE_FILE, InputError, read_text
from ..model import parse_object
from ..spec.case import Case, DeviceNeed, Inventory, NodeSpec, Step
from ..spec.needs import derive_needs
from ..yamlmarks import DEFAULT_LIMITS, MarkedDict, YamlLimits, line_of, load_documents
from .placeholders import PlaceholderError, resolve, substitute_runtime

SCHEMA_PATH = Path(__file__).with_name("case.v1.json")
_DURATION = re.compile(r"^([0-9]+)(ms|s|m|h)\Z")
VALIDATION_NAMESPACE = "drakit-validate"
MAX_BYTES = 1 << 20  # per case file; --max-case-size overrides
MAX_ERRORS_PER_FILE = 50
MAX_DOCUMENTS = 500  # per case file: loading is linear, a few seconds for 500 (2,600 took 22 s)
MAX_STEP_SECONDS = 24 * 3600  # a step's advance or within (a real cluster waits that long)
MAX_ALLOCATABLE = (2**63 - 1) // 1000  # a node's allocatable amount (upstream: int64 milli-units)
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(|B|K|KB|KiB|M|MB|MiB|G|GB|GiB)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000 ** 2, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1000 ** 3, "gib": 1 << 30}


def parse_size(text: str) -> int:
    """'1MiB', '512KiB', '2000000' -> bytes; ValueError with the accepted forms otherwise."""
    m = _SIZE.match(text)
    if not m or float(m.group(1)) * _UNITS[m.group(2).lower()] < 1:
        raise ValueError(f"{text!r} is not a size (use e.g. 2000000, 512KiB, 4MiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    from drakit.conformance.schemas import validator
    return validator(schema)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class LoadResult:
    cases: tuple[Case, ...]
    errors: tuple[LoadError, ...]


def load_file(path: Path, profile: Mapping[str, str], *, display: str | None = None,
              vocabulary: Collection[str] | None = None, max_bytes: int = MAX_BYTES,
              limits: YamlLimits = DEFAULT_LIMITS) -> LoadResult:
    name = display or str(path)
    try:
        text = read_text(path, CASE_FILE, max_bytes=max_bytes)
    except InputError as exc:
        line = 1 if "size limit" in exc.reason else None
        return LoadResult((), (LoadError(name, line, f"{exc.reason}; not loaded"),))
    return load_text(text, name, profile, vocabulary=vocabulary, limits=limits)


def load_text(text: str, file: str, profile: Mapping[str, str], *,
              vocabulary: Collection[str] | None = None, limits: YamlLimits = DEFAULT_LIMITS) -> LoadResult:
    source = tuple(text.splitlines())
    try:
        docs = list(itertools.islice(load_documents(text, file, limits), MAX_DOCUMENTS + 1))
    except LoadError as exc:
        return LoadResult((), (exc,))
    beyond = docs[MAX_DOCUMENTS][0] if len(docs) > MAX_DOCUMENTS else None  # not even parsed past it
    docs = docs[:MAX_DOCUMENTS]
    if not docs:
        what = "it is empty" if not text.strip() else "it holds only comments or blank documents"
        return LoadResult((), (LoadError(file, 1, f"no case in this file ({what})"),))
    cases: list[Case] = []
    errors: list[LoadError] = []
    starts = [start for start, _ in docs]
    for i, (start, doc) in enumerate(docs):
        if len(errors) == MAX_ERRORS_PER_FILE - 1:  # enough said: the rest is not even checked
            errors.append(LoadError(file, start, f"stopped after {len(errors)} problems: the "
                                                 f"{len(docs) - i:,}{'+' if beyond else ''} documents from this line "
                                                 f"on were not loaded"))
            beyond = None
            break
        end = (starts[i + 1] - 1) if i + 1 < len(docs) else len(source)
        try:
            cases.append(_load_case(doc, file, start, end, source, profile, vocabulary))
        except LoadError as exc:
            errors.append(exc)
        except _Problems as exc:
            errors.extend(exc.errors)
    if beyond is not None:
        errors.append(LoadError(file, beyond, f"more than {MAX_DOCUMENTS} documents in one file (the limit): this "
                                              f"one and those after it were not loaded; split the file"))
    loaded = CaseIds().admit(LoadResult(tuple(cases), tuple(errors)))
    errors = sorted(loaded.errors, key=lambda e: e.line or 0)
    if len(errors) > MAX_ERRORS_PER_FILE:  # duplicate ids on top
        rest = len(errors) - MAX_ERRORS_PER_FILE + 1
        errors[MAX_ERRORS_PER_FILE - 1:] = [LoadError(file, errors[MAX_ERRORS_PER_FILE - 1].line,
                                                      f"{rest:,} more problems from this line on (not shown)")]
    return LoadResult(loaded.cases, tuple(errors))


class CaseIds:
    """The case ids of a corpus, in load order: the first definition of an id wins and any later
    one is a load error naming both places (within a file or across files)."""

    def __init__(self) -> None:
        self._first: dict[str, tuple[str, int]] = {}

    def admit(self, loaded: LoadResult) -> LoadResult:
        cases, errors = [], list(loaded.errors)
        for c in loaded.cases:
            first = self._first.setdefault(c.id, (c.file, c.line))
            if first == (c.file, c.line):
                cases.append(c)
            else:
                errors.append(LoadError(c.file, c.line, f"id {c.id!r} defined twice", first=f"{first[0]}:{first[1]}"))
        return LoadResult(tuple(cases), tuple(errors))


def _size_error(doc: Any, schema: Mapping[str, Any], path: tuple[object, ...] = ()) -> tuple[tuple[object, ...], str] | None:
    """The first array or string over its schema's maxItems/maxLength along plain ``properties``,
    found before the full validation, which would walk every item of a huge list first."""
    limit = schema.get("maxItems") if isinstance(doc, list) else schema.get("maxLength") if isinstance(doc, str) else None
    if limit is not None and len(doc) > limit:
        what = "items" if isinstance(doc, list) else "characters"
        return path, f"must have at most {limit} {what}, got {len(doc):,}"
    if isinstance(doc, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in doc:
                found = _size_error(doc[key], sub, path + (key,))
                if found:
                    return found
    return None


class _Problems(Exception):
    """Every schema problem of one document (lint shows them all at once)."""

    def __init__(self, errors: list[LoadError]) -> None:
        super().__init__(str(errors[0]))
        self.errors = errors


def _schema_errors(doc: Any, file: str, start: int) -> list[LoadError]:
    if isinstance(doc, dict):
        too_big = _size_error(doc, _validator().schema)
        if too_big:
            return [LoadError(file, line_of(doc, too_big[0]) or start, too_big[1], format_path(too_big[0]))]
    found: dict[tuple[object, ...], LoadError] = {}
    for err in _validator().iter_errors(doc):
        path, problem = _schema_problem(doc, _deepest(err), file, start)
        found.setdefault(path, problem)
    # a problem of a field says more than one of the object holding it: keep the deepest
    kept = [p for path, p in found.items() if not any(o[:len(path)] == path and o != path for o in found)]
    return sorted(kept, key=lambda e: (e.line or 0, e.path or ""))


def _schema_problem(doc: Any, best: jsonschema.ValidationError, file: str,
                    start: int) -> tuple[tuple[object, ...], LoadError]:
    path = tuple(best.absolute_path)
    msg = best.message
    if best.validator in ("maxItems", "minItems", "maxLength", "minLength") and isinstance(best.instance, (list, str)):
        what = "items" if isinstance(best.instance, list) else "characters"
        bound = "at most" if best.validator.startswith("max") else "at least"
        msg = f"must have {bound} {best.validator_value} {what}, got {len(best.instance):,}"
    if best.validator == "additionalProperties":
        extra = [k for k in (best.instance or {}) if k not in (best.schema.get("properties") or {})]
        if extra:
            path = path + (extra[0],)
            msg = f"unknown field (allowed: {', '.join(sorted(best.schema.get('properties') or {}))})"
    line = line_of(doc, path) or start
    return path, LoadError(file, line, msg, format_path(path))


def _deepest(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For oneOf/anyOf failures, descend to the most specific sub-error."""
    while err.context:
        err = max(err.context, key=lambda e: (len(e.absolute_path), e.validator != "required"))
    return err


def _load_case(doc: Any, file: str, start: int, end: int, source: tuple[str, ...], profile: Mapping[str, str],
               vocabulary: Collection[str] | None = None) -> Case:
    if not isinstance(doc, MarkedDict):
        raise LoadError(file, start, "a case document must be a mapping")
    problems = _schema_errors(doc, file, start)
    if problems:
        raise _Problems(problems)
    unknown: list[tuple[tuple[object, ...], str]] = []
    try:
        doc = resolve(doc, profile, lambda p, k: unknown.append((p, k)))
    except PlaceholderError as exc:
        raise LoadError(file, line_of(doc, exc.path) or start, exc.message, format_path(exc.path)) from None
    for p, key in unknown:
        if vocabulary is None or key not in vocabulary:
            raise LoadError(file, line_of(doc, p) or start,
                            f"unknown placeholder ${{{key}}} ({_placeholder_problem(key, profile)})", format_path(p))
    unresolved = tuple(dict.fromkeys(key for _, key in unknown))
    for i, f in enumerate(doc["features"]):
        if f not in BY_ID:
            raise LoadError(file, line_of(doc, ("features", i)) or start,
                            f"unknown feature {f!r}; known: {', '.join(BY_ID)}", f"features[{i}]")
    gates = dict(doc.get("featureGates") or {})
    scheduler_gates = dict(doc.get("schedulerFeatureGates") or {})
    for key, named in (("featureGates", gates), ("schedulerFeatureGates", scheduler_gates)):
        for g in named:
            if g not in DEFAULT_GATES:
                raise LoadError(file, line_of(doc, (key, g)) or start, f"unknown feature gate {g!r}", f"{key}.{g}")
    steps = tuple(_step(doc, i, s, file, start, validate=not unresolved) for i, s in enumerate(doc["steps"]))
    hw = doc.get("hardware") or {}
    nodes = tuple(NodeSpec(n["name"], n.get("shape"), dict(n.get("labels") or {}),
                           {str(k): str(v) for k, v in (n.get("allocatable") or {}).items()}) for n in hw.get("nodes") or [])
    for j, node in enumerate(nodes):
        for resource, amount in node.allocatable.items():
            problem = _allocatable_problem(amount)
            if problem:
                raise LoadError(file, line_of(doc, ("hardware", "nodes", j, "allocatable", resource)) or start, problem,
                                f"hardware.nodes[{j}].allocatable.{resource}")
        problem = _shape_problem(node.shape) if node.shape is not None else None
        if problem:
            raise LoadError(file, line_of(doc, ("hardware", "nodes", j, "shape")) or start, problem,
                            f"hardware.nodes[{j}].shape")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise LoadError(file, line_of(doc, ("hardware", "nodes")) or start, "node names must be unique", "hardware.nodes")
    return Case(
        id=doc["id"], title=doc["title"], description=doc.get("description", ""), features=tuple(doc["features"]),
        profile=doc.get("profile", "required"), backends=tuple(doc.get("backends") or ("reference", "cluster")),
        feature_gates=gates, namespace_labels=dict((doc.get("namespace") or {}).get("labels") or {}),
        nodes=nodes, install_classes=bool(hw.get("classes", True)), steps=steps, file=file, line=start,
        end_line=end, source=source, needs=derive_needs(doc, start), unresolved=unresolved,
        behaviour=doc.get("behaviour"), inventory=_inventory(doc, file, start),
        time_budget=_time_budget(doc, file, start) if "timeBudget" in doc else None,
        scheduler_gates=scheduler_gates,
    )


def _placeholder_problem(key: str, profile: Mapping[str, str]) -> str:
    """Why a placeholder is unknown: its kind, its vendor role, or its key within the role."""
    kind, _, rest = key.partition(".")
    kinds = sorted({k.split(".", 1)[0] for k in profile if "." in k})
    if kind not in kinds:
        return f"not in the vendor profile: kinds are {', '.join(kinds)} and ${{namespace}}"
    role = rest.split(".", 1)[0]
    roles = sorted({k.split(".")[1] for k in profile if k.startswith(kind + ".") and k.count(".") >= 1})
    if role not in roles:
        return f"not in the vendor profile: no {kind} for role {role!r}; roles: {', '.join(roles)}"
    return "not in the vendor profile"


def _inventory(doc: Any, file: str, start: int) -> Inventory | None:
    raw = doc.get("inventory")
    if raw is None:
        return None
    needs: list[DeviceNeed] = []
    for j, d in enumerate(raw.get("devices") or []):
        for ref in ("sameNodeAs", "otherNodeThan", "sharesCountersWith"):
            if ref in d and d[ref] not in {n.name for n in needs}:
                raise LoadError(file, line_of(doc, ("inventory", "devices", j, ref)) or start,
                                f"{ref}: {d[ref]!r} is not a device named before it", f"inventory.devices[{j}].{ref}")
        if d["name"] in {n.name for n in needs}:
            raise LoadError(file, line_of(doc, ("inventory", "devices", j, "name")) or start,
                            f"device name {d['name']!r} is used twice", f"inventory.devices[{j}].name")
        needs.append(DeviceNeed(d["name"], d.get("sameNodeAs"), d.get("otherNodeThan"), d.get("attribute"), d.get("has"),
                                bool(d.get("selectable")), d.get("sharesCountersWith"), bool(d.get("plainNode")),
                                bool(d.get("dedicated")), bool(d.get("twice")), bool(d.get("takeable"))))
    return Inventory(tuple(needs), int(raw.get("nodes") or 0))


@functools.lru_cache(maxsize=64)
def _shape_problem(shape: str) -> str | None:
    from drakit.fake_hw.shapes import ShapeError

    from ..hwshapes import read_shape
    try:
        read_shape(shape)
    except ShapeError as exc:
        return str(exc)
    return None


def _step(doc: Any, i: int, s: Any, file: str, start: int, *, validate: bool = True) -> Step:
    path: tuple[object, ...] = ("steps", i)
    line = line_of(doc, path) or start
    name = s.get("name") or ""
    within = _duration(doc, path + ("within",), file, start) if "within" in s else None
    if "apply" in s:
        manifests = s["apply"] if isinstance(s["apply"], list) else [s["apply"]]
        if "expectError" not in s and validate:  # unresolved placeholders: the case will not run
            for j, m in enumerate(manifests):
                mpath = path + ("apply",) + ((j,) if isinstance(s["apply"], list) else ())
                _validate_manifest(doc, m, mpath, file, start)
        plain = tuple(_plain(m) for m in manifests)
        label = name or "apply " + ", ".join(f"{m['kind']}/{m['metadata'].get('name', '?')}" for m in plain)
        return Step(i, label, "apply", line, manifests=plain, expect_error=s.get("expectError"), within=within)
    if "fault" in s:
        f = _plain(s["fault"])
        f.setdefault("effect", "NoSchedule")
        return Step(i, name or f"fault {f['node']}/{f['device']} {f['kind']}", "fault", line, fault=f)
    if "restart" in s:
        r = _plain(s["restart"])
        return Step(i, name or f"restart the {r['component']} of {r['node']}", "restart", line, restart=r)
    if "advance" in s:
        return Step(i, name or f"advance {s['advance']}", "advance", line, seconds=_duration(doc, path + ("advance",), file, start))
    if "driverStatus" in s:
        body = _plain(s["driverStatus"])
        return Step(i, name or "driver status of " + _claim_label(body["claim"]), "driverStatus", line,
                    expect_error=s.get("expectError"), status=body, within=within)
    if "delete" in s:
        deletes = tuple(_plain(d) for d in s["delete"])
        return Step(i, name or "delete " + ", ".join(f"{d['kind']}/{d['name']}" for d in deletes), "delete", line,
                    deletes=deletes, within=within)
    assertions = []
    for j, a in enumerate(s["expect"]):
        (key, body), = a.items()
        assertions.append((line_of(doc, path + ("expect", j)) or line, key, _plain(body)))
    return Step(i, name or "expect " + ", ".join(k for _, k, _ in assertions), "expect", line,
                assertions=tuple(assertions), within=within)


def _validate_manifest(doc: Any, manifest: Any, mpath: tuple[object, ...], file: str, start: int) -> None:
    probe = substitute_runtime(_plain(manifest), VALIDATION_NAMESPACE)
    try:
        parse_object(probe)
    except FieldError as exc:
        line = line_of(doc, mpath + exc.path) or start
        raise LoadError(file, line, exc.message, format_path(mpath + exc.path)) from None
    _admission_problem(doc, probe, mpath, file, start)


def _field_path(text: str) -> tuple[object, ...]:
    """``spec.devices.requests[0].name`` -> ("spec", "devices", "requests", 0, "name")."""
    out: list[object] = []
    for part in re.findall(r"[^.\[\]]+|\[[^\]]*\]", text):
        if part.startswith("["):
            inner = part[1:-1]
            out.append(int(inner) if inner.isdigit() else inner)
        else:
            out.append(part)
    return tuple(out)


def _admission_problem(doc: Any, probe: dict[str, Any], mpath: tuple[object, ...], file: str, start: int) -> None:
    """What the API server's admission (the reference's model of it) refuses, with its words."""
    from ..validation.admit import KINDS, admit
    if (probe.get("apiVersion"), probe.get("kind")) not in KINDS:
        return
    gates = dict(DEFAULT_GATES, **(doc.get("featureGates") or {}))
    labels = dict((doc.get("namespace") or {}).get("labels") or {})
    verdict = admit(probe, gates=gates, namespace_labels=labels)
    if verdict.accepted:
        return
    if not verdict.errors:
        raise LoadError(file, line_of(doc, mpath) or start, verdict.message, format_path(mpath))
    first = verdict.errors[0]
    path = mpath + _field_path(first.field)
    more = f" (and {len(verdict.errors) - 1} more)" if len(verdict.errors) > 1 else ""
    raise LoadError(file, line_of(doc, path) or start, first.error_body() + more, format_path(path))


def _plain(v: Any) -> Any:
    """Drop the line-mark subclasses so the value is plain JSON data."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return copy.copy(v)


def _duration(doc: Any, path: tuple[object, ...], file: str, start: int) -> float:
    """A step's ``advance`` or ``within`` in seconds, at most :data:`MAX_STEP_SECONDS` (a cluster
    waits that long for real)."""
    text = doc
    for key in path:
        text = text[key]
    m = _DURATION.match(text)
    assert m is not None  # the schema guarantees the form
    digits, unit = m.group(1), m.group(2)
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    if len(digits.lstrip("0")) > 12 or int(digits) * scale > MAX_STEP_SECONDS:
        raise LoadError(file, line_of(doc, path) or start, f"{_cut(text)} is over the limit of "
                        f"{MAX_STEP_SECONDS // 3600}h for one step", format_path(path))
    return int(digits) * scale if unit != "ms" else int(digits) / 1000


def _time_budget(doc: Any, file: str, start: int) -> float:
    """The case's ``timeBudget`` in seconds: more than 0 (a budget of nothing would be no budget)."""
    seconds = _duration(doc, ("timeBudget",), file, start)
    if seconds <= 0:
        raise LoadError(file, line_of(doc, ("timeBudget",)) or start, f"{doc['timeBudget']} is not a time budget: it "
                        "must be more than 0 (e.g. 90s, 5m; at most 24h)", "timeBudget")
    return seconds


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def _allocatable_problem(amount: str) -> str | None:
    """Why a node's allocatable amount cannot be used (None: it can): a quantity, not negative,
    at most :data:`MAX_ALLOCATABLE` (upstream keeps quantities in an int64 of milli-units)."""
    from ..quantity import Quantity
    if len(amount) > 100:
        return f"{_cut(amount)!r} is not a quantity: {len(amount):,} characters"
    try:
        value = Quantity.parse(amount).value
    except ValueError as exc:
        return f"{_cut(amount)!r} is not a quantity: {exc}"
    if value < 0:
        return f"{_cut(amount)!r} is negative: a node cannot have less than nothing"
    if value > MAX_ALLOCATABLE:
        return f"{_cut(amount)!r} is over the limit of {MAX_ALLOCATABLE:,} (2^63-1 milli-units)"
    return None


def _claim_label(ref: Any) -> str:
    if isinstance(ref, str):
        return ref
    return f"{ref['pod']}/" + ("extended-resources" if ref.get("extendedResources") else ref["claim"])
