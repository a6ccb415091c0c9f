"""Differential: every object every bundled case applies, through the reference's admission and
the 1.37.2 API server's (the admission oracle): same decision, same field errors in the same
order with the same words, the same stored object. Updates (an object applied again later in the
case) are sent as updates of the previously stored object."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.oracle.admission import compare_verdicts
from drakit.conformance.validation.admit import admit

from .admission_corpus import case_writes

WRITES = case_writes()


@pytest.fixture(scope="module")
def verdicts(admission_oracle: Any) -> dict[str, Any]:
    """Both sides for every write, in case order (updates need the earlier stored object)."""
    out: dict[str, Any] = {}
    stored_ours: dict[tuple[str, str, str, str], Any] = {}
    stored_up: dict[tuple[str, str, str, str], Any] = {}
    for w in WRITES:
        k = (w.case, *w.old_key) if w.old_key else None
        old_o = stored_ours.get(k) if k else None
        old_u = stored_up.get(k) if k else None
        ours = admit(w.obj, old_o, gates=w.gates, namespace_labels=w.namespace_labels)
        up = admission_oracle.admit(w.obj, old_u, w.gates, w.namespace_labels)
        meta = w.obj.get("metadata") or {}
        key = (w.case, w.obj["kind"], meta.get("namespace") or "", meta.get("name") or "")
        if ours.accepted and up.accepted:
            stored_ours[key], stored_up[key] = ours.stored, up.stored
        out[w.ident] = (ours, up)
    return out


def test_corpus_is_not_empty() -> None:
    kinds = {w.obj["kind"] for w in WRITES}
    assert len(WRITES) > 300 and {"ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice", "Pod",
                                  "DeviceTaintRule"} <= kinds, (len(WRITES), kinds)


@pytest.mark.parametrize("ident", [w.ident for w in WRITES])
def test_case_object_admission_matches_upstream(ident: str, verdicts: dict[str, Any]) -> None:
    ours, up = verdicts[ident]
    diffs = compare_verdicts(ours, up)
    assert not diffs, f"{ident}:\n" + "\n".join(diffs)


# Kinds whose API the case's gates switch off are refused before admission ("could not find the
# requested resource"): not admission's words.
EXPECTED = [w for w in WRITES if w.expect_error is not None
            and not (w.obj["kind"] == "ResourcePoolStatusRequest" and not w.gates.get("DRAResourcePoolStatus"))]


@pytest.mark.parametrize("ident", [w.ident for w in EXPECTED])
def test_expect_error_holds_on_both_admissions(ident: str, verdicts: dict[str, Any]) -> None:
    """A case's ``expectError`` is upstream's text: both the oracle and the reference refuse the
    object with a message containing it."""
    w = next(x for x in EXPECTED if x.ident == ident)
    ours, up = verdicts[ident]
    assert not up.accepted and w.expect_error in up.message, f"upstream: {up.message or 'accepted'}"
    assert not ours.accepted and w.expect_error in ours.message, f"reference: {ours.message or 'accepted'}"
