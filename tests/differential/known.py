"""Divergences between drakit's allocator and upstream that are known and reported, each with a
minimal input and a matcher.

``test_known_divergences.py`` runs every minimal input as a strict xfail (it starts to pass, and
so to fail, once the divergence is fixed: then move the entry to ``FIXED``, whose inputs must
match upstream). The random differential test
skips inputs a matcher recognises (counted as a Hypothesis event) so that it keeps looking for
new ones; ``DRAKIT_DIFF_STRICT=1`` turns that off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from drakit.conformance.oracle.compare import Comparison

UPSTREAM = "k8s.io/dynamic-resource-allocation@v0.37.2/structured/internal/experimental/allocator_experimental.go"


@dataclass(frozen=True)
class Known:
    name: str
    explanation: str
    repro: dict[str, Any]
    matches: Callable[[dict[str, Any], Comparison], bool]


def _any_body(inp: dict[str, Any], pred: Callable[[dict[str, Any]], bool]) -> bool:
    for c in inp.get("claims") or ():
        for r in c["spec"]["devices"]["requests"]:
            for b in ([r["exactly"]] if "exactly" in r else r.get("firstAvailable", [])):
                if pred(b):
                    return True
    return False


def _claim(*requests: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": list(requests)}}}


_ANY = [{"metadata": {"name": "any"}}]

KNOWN: list[Known] = []

# Divergences found here and since fixed in drakit's allocator: their minimal inputs stay as
# ordinary differential tests so that they cannot come back.
FIXED: list[Known] = [
    Known(
        "capacity-gate-checked-after-other-subrequests",
        "With DRAConsumableCapacity off, upstream refuses a request whose exactly or ANY firstAvailable entry has "
        "capacity requests before it validates any entry (" + UPSTREAM + " lines 239-253, then the "
        "validateDeviceRequest loop from line 263); drakit checks entry by entry, so an earlier entry's error (class not "
        "found, All on an incomplete pool, derived attributes off) wins.",
        {"features": {"DRAPrioritizedList": True}, "node": {"name": "node-1"}, "classes": _ANY, "slices": [],
         "claims": [_claim({"name": "r", "firstAvailable": [
             {"name": "s0", "deviceClassName": "missing"},
             {"name": "s1", "deviceClassName": "any", "capacity": {"requests": {"memory": "1Gi"}}}]})]},
        lambda inp, c: c.upstream.kind == "capacity-disabled" and c.ours.kind != "capacity-disabled",
    ),
    Known(
        "subrequest-named-request-in-validation-errors",
        "Errors raised while validating a firstAvailable entry read 'claim C, request S: ...' upstream (validateDeviceRequest "
        "formats request.name(), the entry's own name, after the word 'request'; " + UPSTREAM + " line 585); drakit "
        "writes 'subrequest S' for the class lookup error.",
        {"features": {"DRAPrioritizedList": True}, "node": {"name": "node-1"}, "classes": _ANY, "slices": [],
         "claims": [_claim({"name": "r", "firstAvailable": [{"name": "s0", "deviceClassName": "missing"}]})]},
        lambda inp, c: (c.ours.kind == c.upstream.kind == "class-not-found"
                        and (c.ours.error or "").replace(", subrequest ", ", request ") == c.upstream.error),
    ),
    Known(
        "skip-node-operations-ignored-by-incubating",
        "Upstream's answer depends on the implementation NewAllocator picks. The incubating allocator (what the "
        "kube-scheduler runs with 1.37's default gates) and the stable one never look at a slice's "
        "skipNodeOperations and allocate its devices; only the experimental one (picked when an alpha gate such as "
        "DRAListTypeAttributes is on) refuses them unless DRAOptionalNodeOperations is on and the node declares the "
        "feature (" + UPSTREAM + " lines 1588-1597; no SkipNodeOperations in incubating/allocator_incubating.go). "
        "drakit always refuses them when the gate is off.",
        {"features": {}, "node": {"name": "node-1"}, "classes": _ANY,
         "slices": [{"metadata": {"name": "s"}, "spec": {
             "driver": "a.example.com", "nodeName": "node-1", "skipNodeOperations": ["*"],
             "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "d"}]}}],
         "claims": [_claim({"name": "r", "exactly": {"deviceClassName": "any"}})]},
        lambda inp, c: (c.upstream.channel == "incubating"
                        and any((s.get("spec") or {}).get("skipNodeOperations") for s in inp.get("slices") or ())),
    ),
    Known(
        "all-mode-filters-by-remaining-capacity",
        "For an All request upstream keeps every matching device whose STATIC capacity fits (validateDeviceRequest passes "
        "empty committed and in-flight capacity, " + UPSTREAM + " lines 609-640), so a device exhausted by committed "
        "shares stays in the set and the request fails; drakit's _enumerate_all also subtracts committed capacity, drops "
        "the exhausted device and allocates the rest. (Upstream table: "
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient.)",
        {"features": {"DRAConsumableCapacity": True}, "node": {"name": "node-1"}, "classes": _ANY,
         "slices": [{"metadata": {"name": "s"}, "spec": {
             "driver": "d.example.com", "nodeName": "node-1",
             "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
             "devices": [{"name": "d1", "allowMultipleAllocations": True, "capacity": {"mem": {"value": "1"}}},
                         {"name": "d2", "allowMultipleAllocations": True, "capacity": {"mem": {"value": "1"}}}]}}],
         "claims": [_claim({"name": "r", "exactly": {"deviceClassName": "any", "allocationMode": "All",
                                                      "capacity": {"requests": {"mem": "1"}}}})],
         "allocated": {"shares": [{"device": "d.example.com/p/d1", "shareID": "s1"}],
                       "capacity": {"d.example.com/p/d1": {"mem": "1"}}}},
        lambda inp, c: (bool((inp.get("allocated") or {}).get("capacity"))
                        and _any_body(inp, lambda b: b.get("allocationMode") == "All")
                        and c.ours.status != c.upstream.status),
    ),
    Known(
        "undone-share-leaves-capacity-marker",
        "After a share of an allow-multiple device is undone (backtracking), drakit restores the device's in-flight "
        "capacity entry to {} instead of deleting it, so the device still looks shared and its next share skips the "
        "shared-counter check: counters get over-committed. Upstream deletes the entry when it becomes empty and only "
        "restores an empty one if it existed before the share (" + UPSTREAM + " rollbackDevice lines 1786-1800, "
        "capacityEntryExisted at 1732, skipCounterCheck at 1608; schedulerapi ConsumedCapacityCollection.Remove).",
        {"features": {"DRAPartitionableDevices": True, "DRAConsumableCapacity": True}, "node": {"name": "node-1"},
         "classes": _ANY,
         "slices": [
             {"metadata": {"name": "devs"}, "spec": {
                 "driver": "a.example.com", "nodeName": "node-1",
                 "pool": {"name": "p", "generation": 1, "resourceSliceCount": 2},
                 "devices": [
                     {"name": "m0", "allowMultipleAllocations": True,
                      "consumesCounters": [{"counterSet": "cs", "counters": {"mem": {"value": "1"}}}]},
                     {"name": "m1", "allowMultipleAllocations": True,
                      "consumesCounters": [{"counterSet": "cs", "counters": {"mem": {"value": "1"}}}]},
                     {"name": "x", "consumesCounters": [{"counterSet": "cs", "counters": {"mem": {"value": "1"}}}]}]}},
             {"metadata": {"name": "counters"}, "spec": {
                 "driver": "a.example.com", "nodeName": "node-1",
                 "pool": {"name": "p", "generation": 1, "resourceSliceCount": 2},
                 "sharedCounters": [{"name": "cs", "counters": {"mem": {"value": "2"}}}]}}],
         "claims": [{"metadata": {"name": "c0", "namespace": "ns"}, "spec": {"devices": {"requests": [
                         {"name": "r", "exactly": {"deviceClassName": "any"}}]}}},
                    {"metadata": {"name": "c1", "namespace": "ns"}, "spec": {"devices": {"requests": [
                         {"name": "r", "exactly": {"deviceClassName": "any", "allocationMode": "All"}}]}}}]},
        lambda inp, c: (c.ours.status == "ok" and c.upstream.status != "ok"
                        and (inp.get("features") or {}).get("DRAConsumableCapacity", False)
                        and any(d.get("allowMultipleAllocations") and d.get("consumesCounters")
                                for s in inp.get("slices") or () for d in (s.get("spec") or {}).get("devices") or ())),
    ),
]
