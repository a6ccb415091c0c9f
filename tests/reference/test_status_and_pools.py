"""Status subresource writes (claim device status, rule conditions) and the pool status controller."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.conformance.errors import ApiRejected
from drakit.conformance.reference.poolstatus import calculate

from .helpers import NS, claim, cluster, pod, results, standard


def _allocated() -> Any:
    c = standard(cluster(), devices=[{"name": "d0"}, {"name": "d1"}])
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c"))
    return c


def _entry(c: Any, **extra: Any) -> dict[str, Any]:
    r = results(c, "c")[0]
    return {"driver": r["driver"], "pool": r["pool"], "device": r["device"], **extra}


def _write(c: Any, *entries: dict[str, Any]) -> dict[str, Any]:
    st = dict(c.get("ResourceClaim", "c", NS)["status"])
    st["devices"] = list(entries)
    return c.update_status("ResourceClaim", "c", NS, st)


def test_valid_device_status_round_trips() -> None:
    c = _allocated()
    entry = _entry(c, data={"a": 1}, networkData={"interfaceName": "net1", "ips": ["10.0.0.1/24", "fd00::1/64"],
                                                  "hardwareAddress": "02:00:00:00:00:01"})
    out = _write(c, entry)
    assert out["status"]["devices"] == [entry]


@pytest.mark.parametrize("extra,where", [
    ({"networkData": {"ips": [f"10.0.0.{i}/24" for i in range(17)]}}, "networkData.ips"),
    ({"networkData": {"ips": ["10.0.0.1/24", "10.0.0.1/24"]}}, "Duplicate value"),
    ({"networkData": {"ips": ["010.0.0.1/24"]}}, "networkData.ips[0]"),
    ({"networkData": {"ips": ["fd00:0::1/64"]}}, "canonical form"),
    ({"networkData": {"interfaceName": "x" * 257}}, "interfaceName"),
    ({"networkData": {"hardwareAddress": "x" * 129}}, "hardwareAddress"),
    ({"data": {"k": "x" * 10240}}, "data: Too long"),
    ({"data": [1, 2]}, "must be a valid JSON object"),
    ({"conditions": [{"type": f"C{i}", "status": "True", "reason": "R", "lastTransitionTime": "t"} for i in range(9)]},
     "conditions: Too many"),
    ({"conditions": [{"type": "Ready", "status": "Maybe", "reason": "R", "lastTransitionTime": "t"}]}, "conditions[0].status"),
    ({"conditions": [{"type": "Ready", "status": "True", "reason": "not ok", "lastTransitionTime": "t"}]}, "conditions[0].reason"),
    ({"conditions": [{"type": "Ready", "status": "True", "reason": "R"}]}, "lastTransitionTime"),
    ({"shareID": "not-a-uuid"}, "shareID"),
])
def test_invalid_device_status_is_rejected(extra: dict[str, Any], where: str) -> None:
    c = _allocated()
    with pytest.raises(ApiRejected, match=where.replace("[", r"\[").replace("]", r"\]")):
        _write(c, _entry(c, **extra))


def test_status_for_unallocated_device_is_rejected() -> None:
    c = _allocated()
    with pytest.raises(ApiRejected, match="must be an allocated device in the claim"):
        _write(c, {**_entry(c), "device": "d1"})


def test_deallocation_drops_status_entries() -> None:
    c = _allocated()
    _write(c, _entry(c, conditions=[{"type": "Ready", "status": "True", "reason": "R", "lastTransitionTime": "t"}]))
    c.delete("Pod", "p", NS)
    assert "devices" not in (c.get("ResourceClaim", "c", NS).get("status") or {})


def test_rule_status_conditions_are_limited() -> None:
    c = cluster()
    c.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
             "spec": {"deviceSelector": {}, "taint": {"key": "k", "effect": "None"}}})
    conds = [{"type": f"T{i}", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "t"} for i in range(9)]
    with pytest.raises(ApiRejected, match="Too many"):
        c.update_status("DeviceTaintRule", "r", None, {"conditions": conds})


# --- pool status ----------------------------------------------------------------------------------

def _slice(name: str, pool: str, devices: list[dict[str, Any]], *, gen: int = 1, count: int = 1,
           node: str | None = "n1", driver: str = "d.example.com") -> dict[str, Any]:
    sel = {"nodeName": node} if node else {"allNodes": True}
    return {"spec": {"driver": driver, **sel, "pool": {"name": pool, "generation": gen, "resourceSliceCount": count},
                     "devices": devices}}


def test_calculate_counts_and_generations() -> None:
    slices = [_slice("a", "p1", [{"name": "x"}], gen=1), _slice("b", "p1", [{"name": "y"}, {"name": "z"}], gen=2),
              _slice("c", "p0", [{"name": "t", "taints": [{"key": "k", "effect": "NoExecute"}]}, {"name": "u"}], node="n2"),
              _slice("d", "p9", [{"name": "v"}], driver="other.example.com")]
    claims = [{"status": {"allocation": {"devices": {"results": [
        {"driver": "d.example.com", "pool": "p1", "device": "y"},
        {"driver": "d.example.com", "pool": "p1", "device": "y", "shareID": "s"},
        {"driver": "d.example.com", "pool": "p0", "device": "u", "adminAccess": True}]}}}}]
    req = {"spec": {"driver": "d.example.com", "limit": 100}}
    status, incomplete = calculate(req, slices, claims, [], "T")
    assert not incomplete and status["poolCount"] == 2
    p0, p1 = status["pools"]
    assert (p0["poolName"], p0["totalDevices"], p0["allocatedDevices"], p0["unavailableDevices"], p0["availableDevices"]) == \
        ("p0", 2, 0, 1, 1)
    assert (p1["poolName"], p1["generation"], p1["totalDevices"], p1["allocatedDevices"], p1["availableDevices"]) == \
        ("p1", 2, 2, 1, 1)
    assert status["conditions"][0]["message"] == "Calculated status for 2 pools"


def test_calculate_incomplete_and_mixed_nodes() -> None:
    status, incomplete = calculate({"spec": {"driver": "d.example.com", "limit": 5}},
                                   [_slice("a", "p", [{"name": "x"}], count=2)], [], [], "T")
    assert incomplete and status["pools"][0]["validationError"].startswith("PoolIncomplete: ")
    status, _ = calculate({"spec": {"driver": "d.example.com", "limit": 5}},
                          [_slice("a", "p", [{"name": "x"}], count=2), _slice("b", "p", [{"name": "y"}], count=2, node="n2")],
                          [], [], "T")
    assert "nodeName" not in status["pools"][0]


def test_rules_make_devices_unavailable_unless_selector_is_missing() -> None:
    slices = [_slice("a", "p", [{"name": "x"}, {"name": "y"}])]
    rules = [{"spec": {"deviceSelector": {"device": "x"}, "taint": {"key": "k", "effect": "NoSchedule"}}},
             {"spec": {"taint": {"key": "k", "effect": "NoSchedule"}}},
             {"spec": {"deviceSelector": {}, "taint": {"key": "k", "effect": "None"}}}]
    status, _ = calculate({"spec": {"driver": "d.example.com", "limit": 5}}, slices, [], rules, "T")
    assert status["pools"][0]["unavailableDevices"] == 1


def test_request_status_is_written_once() -> None:
    c = standard(cluster(DRAResourcePoolStatus=True))
    req = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest", "metadata": {"name": "q"},
           "spec": {"driver": "gpu.example.com"}}
    first = c.apply(req)
    assert first["spec"]["limit"] == 100 and first["status"]["pools"][0]["allocatedDevices"] == 0
    c.apply(claim("c"))
    c.apply(pod("p", claim_name="c"))
    assert c.get("ResourcePoolStatusRequest", "q")["status"] == first["status"]  # type: ignore[index]
    c.advance(3600)
    assert c.get("ResourcePoolStatusRequest", "q") is None
