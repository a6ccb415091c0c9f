"""The API server's admission as an oracle: ``admission/main.go`` built from k8s.io/kubernetes
v1.37.2 (strict decoding, defaulting, conversion, the registry strategies' PrepareForCreate /
PrepareForUpdate and Validate / ValidateUpdate with declarative validation, as rest.BeforeCreate
and rest.BeforeUpdate run them).

:class:`AdmissionOracle` keeps one process open; :meth:`AdmissionOracle.admit_many` streams a
batch. Answers become :class:`drakit.conformance.validation.Verdict`, the same shape the
reference's admission gives, so the two compare field by field.

Test and benchmark tooling (subprocess): not the pure core.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping

from ..validation.verdict import FieldErr, Verdict
from . import Oracle, OracleError, build_admission_oracle


def request(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None, gates: Mapping[str, bool] | None = None,
            namespace_labels: Mapping[str, str] | None = None, id: Any = None) -> dict[str, Any]:
    req: dict[str, Any] = {"object": obj}
    if id is not None:
        req["id"] = id
    if old is not None:
        req["old"] = old
    if gates:
        req["gates"] = dict(gates)
    if namespace_labels:
        req["namespaceLabels"] = dict(namespace_labels)
    return req


def verdict_from_answer(ans: Mapping[str, Any]) -> Verdict:
    if ans.get("inputError"):
        raise OracleError(f"the admission oracle refused the request: {ans['inputError']}")
    if "stored" in ans:
        return Verdict(True, stored=ans["stored"])
    errors = tuple(FieldErr(e["type"], e["field"], e.get("detail", ""), body=e.get("body", ""), origin=e.get("origin", ""))
                   for e in ans.get("errors") or ())
    return Verdict(False, status=ans.get("status", ""), message=ans.get("message", ""), errors=errors)


class AdmissionOracle:
    """One admission-oracle process."""

    def __init__(self, binary: Any = None) -> None:
        self._oracle = Oracle(binary or build_admission_oracle())

    def admit(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None, gates: Mapping[str, bool] | None = None,
              namespace_labels: Mapping[str, str] | None = None) -> Verdict:
        return verdict_from_answer(self._oracle.run(request(obj, old, gates, namespace_labels)))

    def admit_many(self, requests: Iterable[dict[str, Any]]) -> Iterator[Verdict]:
        """``requests`` as :func:`request` makes them."""
        for ans in self._oracle.run_many(requests):
            yield verdict_from_answer(ans)

    def default_gates(self) -> dict[str, bool]:
        return dict(self._oracle.run({"op": "gates"})["gates"])

    def close(self) -> None:
        self._oracle.close()

    def __enter__(self) -> "AdmissionOracle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["AdmissionOracle", "request", "verdict_from_answer"]


# -- comparing verdicts ------------------------------------------------------------------------

_VOLATILE_META = ("uid", "creationTimestamp", "resourceVersion", "managedFields", "generation")


def _prune(v: Any) -> Any:
    """Empty objects, lists and strings are the same as absent ones (Go writes non-omitempty structs
    as {} and drops omitempty empty strings)."""
    if isinstance(v, dict):
        return {k: p for k, x in v.items() if (p := _prune(x)) not in ({}, [], None, "")}
    if isinstance(v, list):
        return [_prune(x) for x in v]
    return v


def _normal_stored(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    import copy
    out = copy.deepcopy(dict(obj or {}))
    meta = out.get("metadata") or {}
    for k in _VOLATILE_META:
        meta.pop(k, None)
    if not meta.get("namespace"):
        meta.pop("namespace", None)
    if out.get("status") in ({}, None):
        out.pop("status", None)
    spec = out.get("spec") or {}
    for d in (spec.get("devices") or []) if isinstance(spec.get("devices"), list) else []:
        for t in d.get("taints") or []:
            t.pop("timeAdded", None)
    if isinstance(spec.get("taint"), dict):
        spec["taint"].pop("timeAdded", None)
    if out.get("kind") == "Pod":
        # Only the DRA-relevant part of a pod is the reference's business; the API server's
        # pod defaults (dnsPolicy, restartPolicy, ...) are not modelled.
        keep = {"resourceClaims": spec.get("resourceClaims"),
                "claims": [(c.get("name"), (c.get("resources") or {}).get("claims"))
                           for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])]}
        return _prune({"kind": "Pod", "metadata": {"name": meta.get("name")}, "spec": keep})
    return _prune(out)


def compare_verdicts(ours: Verdict, upstream: Verdict) -> list[str]:
    """The differences that matter, as lines; empty when admission agrees.

    Errors are compared in order, except those found while iterating a Go map (attributes,
    capacities, counters ...), whose order upstream is random; then the aggregate message, whose
    order follows them, is not compared either."""
    if ours.accepted != upstream.accepted:
        side = "accepted by the reference, refused upstream" if ours.accepted else "refused by the reference, accepted upstream"
        return [f"decision: {side}", f"  reference: {ours.message or 'stored'}", f"  upstream:  {upstream.message or 'stored'}"]
    diffs: list[str] = []
    if ours.accepted:
        a, b = _normal_stored(ours.stored), _normal_stored(upstream.stored)
        if a != b:
            import json
            diffs += ["stored object differs", "  reference: " + json.dumps(a, sort_keys=True),
                      "  upstream:  " + json.dumps(b, sort_keys=True)]
        return diffs
    if ours.status != upstream.status:
        diffs.append(f"status: reference {ours.status}, upstream {upstream.status}")
    mine = [e.message() for e in ours.errors]
    theirs = [e.message() for e in upstream.errors]
    if mine != theirs:
        # Errors found while iterating a Go map come in random order upstream: they must all be
        # there, the others in the same order.
        loose = {e.message() for e in ours.errors if e.unordered}
        if sorted(mine) != sorted(theirs) or [m for m in mine if m not in loose] != [m for m in theirs if m not in loose]:
            diffs.append("field errors differ")
            diffs += ["  reference: " + m for m in mine] or ["  reference: (none)"]
            diffs += ["  upstream:  " + m for m in theirs] or ["  upstream:  (none)"]
            return diffs
    elif ours.message != upstream.message and not any(e.unordered for e in ours.errors):
        diffs += ["message differs", f"  reference: {ours.message}", f"  upstream:  {upstream.message}"]
    return diffs
    if ours.status != "Invalid" and ours.message != upstream.message:
        diffs += ["message differs", f"  reference: {ours.message}", f"  upstream:  {upstream.message}"]
    elif ours.status == "Invalid" and mine == theirs and ours.message != upstream.message:
        diffs += ["message differs", f"  reference: {ours.message}", f"  upstream:  {upstream.message}"]
    return diffs


__all__ += ["compare_verdicts"]
