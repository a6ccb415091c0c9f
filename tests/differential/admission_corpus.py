"""Every manifest every bundled case applies, as admission requests (shared by the case-object
differential test and the expectError test)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.conformance.cases.loader import load_file
from drakit.conformance.cases.placeholders import substitute_runtime
from drakit.conformance.features import DEFAULT_GATES
from drakit.conformance.validation.admit import KINDS
from drakit.fake_driver.profile import load_profile

SUITES = Path(__file__).resolve().parents[2] / "conformance" / "suites"
NAMESPACE = "drakit-admission"


@dataclass
class Write:
    case: str
    step: int
    obj: dict[str, Any]
    gates: dict[str, bool]
    namespace_labels: dict[str, str]
    expect_error: str | None
    old_key: tuple[str, str, str] | None = None   # an earlier accepted write of the same object
    ident: str = field(default="")
    case_gates: dict[str, bool] = field(default_factory=dict)  # the gates the case itself sets


def case_writes() -> list[Write]:
    out: list[Write] = []
    profile = load_profile()
    for f in sorted(SUITES.rglob("*.case.yaml")):
        loaded = load_file(f, profile)
        for case in loaded.cases:
            gates = dict(DEFAULT_GATES, **case.feature_gates)
            seen: set[tuple[str, str, str]] = set()
            for step in case.steps:
                if step.kind != "apply":
                    continue
                for j, m in enumerate(step.manifests):
                    obj = substitute_runtime(m, NAMESPACE)
                    if (obj.get("apiVersion"), obj.get("kind")) not in KINDS:
                        continue
                    meta = obj.get("metadata") or {}
                    key = (obj["kind"], meta.get("namespace") or (NAMESPACE if obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate", "Pod") else ""),
                           meta.get("name") or "")
                    if obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate", "Pod"):
                        meta.setdefault("namespace", NAMESPACE)
                    w = Write(case.id, step.index, obj, gates, dict(case.namespace_labels), step.expect_error,
                              key if key in seen else None, f"{case.id}#{step.index}.{j}", dict(case.feature_gates))
                    out.append(w)
                    if step.expect_error is None:
                        seen.add(key)
    return out
