"""The amounts of a pod's resources (issue 25: ``cpu: -5`` was accepted in silence) and the
quantities of DRA objects, through the reference's admission and the 1.37.2 API server's (the
admission oracle): the same decision, the same errors, the same stored object.

Upstream refuses a negative amount in a container's or the pod's ``resources`` and in its
``overhead``, but admits a negative *capacity request* in a claim and a negative capacity in a
slice (the allocator then refuses the device: "capacity value is negative"); the reference must
do both the same way."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.features import DEFAULT_GATES
from drakit.conformance.oracle.admission import compare_verdicts
from drakit.conformance.validation.admit import admit


def _pod(*containers: dict[str, Any], spec: dict[str, Any] | None = None, init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": list(containers), **(spec or {})}
    if init:
        s["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}, "spec": s}


def _c(name: str = "main", **resources: Any) -> dict[str, Any]:
    return {"name": name, "image": "pause", "resources": resources}


def _claim(requests: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "n"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com",
                                                                       "capacity": {"requests": requests}}}]}}}


def _slice(capacity: dict[str, Any], shared: bool = False) -> dict[str, Any]:
    dev: dict[str, Any] = {"name": "d0", "capacity": capacity}
    if shared:
        dev["allowMultipleAllocations"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                     "devices": [dev]}}


# name -> (object, refused upstream)
WRITES: dict[str, tuple[dict[str, Any], bool]] = {
    "cpu -5 (a YAML integer)": (_pod(_c(requests={"cpu": -5})), True),
    "cpu -100m": (_pod(_c(requests={"cpu": "-100m"})), True),
    "several negative, limits and requests": (_pod(_c(requests={"cpu": "-5", "memory": "-1"}, limits={"cpu": "-1"})), True),
    "limit only, defaulted to the request": (_pod(_c(limits={"memory": "-1Gi"})), True),
    "extended resource negative": (_pod(_c(requests={"example.com/gpu": "-1"}, limits={"example.com/gpu": "-1"})), True),
    "extended resource fraction": (_pod(_c(requests={"example.com/gpu": "500m"}, limits={"example.com/gpu": "500m"})), True),
    "extended resource without limit": (_pod(_c(requests={"example.com/gpu": "1"})), True),
    "extended resource request != limit": (_pod(_c(requests={"example.com/gpu": "1"}, limits={"example.com/gpu": "2"})), True),
    "request over limit": (_pod(_c(requests={"cpu": "2"}, limits={"cpu": "1"})), True),
    "hugepages without cpu or memory": (_pod(_c(limits={"hugepages-2Mi": "2Mi"})), True),
    "init container negative": (_pod(_c(), init=[_c("i", requests={"memory": "-1"})]), True),
    "pod-level negative": (_pod(_c(), spec={"resources": {"requests": {"cpu": "-1"}, "limits": {"cpu": "-2"}}}), True),
    "overhead negative": (_pod(_c(), spec={"overhead": {"cpu": "-5", "memory": "-1"}}), True),
    "negative beside a claim problem": (_pod({"name": "main", "image": "x", "resources": {"requests": {"cpu": "-1"},
                                                                                          "claims": [{"name": "nope"}]}}), True),
    "not a quantity": (_pod(_c(requests={"cpu": "four"})), True),
    "bad suffix": (_pod(_c(requests={"cpu": "1e"})), True),
    "fine, canonical form stored": (_pod(_c(requests={"cpu": "1000m", "memory": "1024Mi"}, limits={"cpu": "1500m"})), False),
    "fine, zero": (_pod(_c(requests={"cpu": "0"})), False),
    "fine, extended whole": (_pod(_c(limits={"example.com/gpu": "2"})), False),
    "claim capacity request -5 (admitted)": (_claim({"memory": "-5"}), False),
    "claim capacity request not a quantity": (_claim({"memory": "lots"}), True),
    "slice capacity -5 (admitted)": (_slice({"memory": {"value": "-5"}}), False),
    "slice capacity not a quantity": (_slice({"memory": {"value": "x1"}}), True),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_quantities_are_admitted_as_upstream_does(name: str, admission_oracle: Any) -> None:
    obj, refused = WRITES[name]
    up = admission_oracle.admit(obj, gates=DEFAULT_GATES)
    ours = admit(obj, gates=DEFAULT_GATES)
    assert up.accepted is not refused, f"the table is wrong about upstream: {up.message}"
    diffs = compare_verdicts(ours, up)
    assert not diffs, "\n".join(diffs)
