"""The four acceptance bugs of issue 14: refused by the reference's admission with the API
server's message (checked against the admission oracle) and by ``drakit lint``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drakit.conformance.cli import main
from drakit.conformance.features import DEFAULT_GATES
from drakit.conformance.validation.admit import admit


def _claim(expr: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "n"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com",
                                                                       "selectors": [{"cel": {"expression": expr}}]}}]}}}


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
       "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
                "containers": [{"name": "c", "image": "pause", "resources": {"claims": [{"name": "gpu"}, {"name": "gpu"}]}}]}}

BUGS = {
    "not-bool": (_claim("device.driver"), "must evaluate to bool or the unknown type, not string"),
    "type-error": (_claim("device.driver + 1 == 2"), "found no matching overload for '_+_' applied to '(string, int)'"),
    "cost": (_claim("device.attributes.all(d, device.attributes[d].all(a, device.attributes.all(e, "
                    "device.attributes[e].all(b, a == b))))"), "Forbidden: too complex, exceeds cost limit"),
    "duplicate-claim": (POD, 'spec.containers[0].resources.claims[1]: Duplicate value: "gpu"'),
}


@pytest.mark.parametrize("name", list(BUGS))
def test_reference_refuses_with_upstreams_message(name: str, admission_oracle: Any) -> None:
    obj, words = BUGS[name]
    ours = admit(obj, gates=DEFAULT_GATES)
    up = admission_oracle.admit(obj, gates=DEFAULT_GATES)
    assert not up.accepted and words in up.message
    assert not ours.accepted and ours.message == up.message


@pytest.mark.parametrize("name", list(BUGS))
def test_lint_refuses(name: str, tmp_path: Path, capsys: Any) -> None:
    import yaml
    obj, words = BUGS[name]
    case = {"id": f"t/{name}", "title": name, "features": ["core"], "steps": [{"apply": obj}]}
    f = tmp_path / "bug.case.yaml"
    f.write_text(yaml.safe_dump(case))
    assert main(["lint", str(f)]) != 0
    out = capsys.readouterr().out
    assert f"{f}:" in out and words.split(": ", 1)[-1] in out, out
