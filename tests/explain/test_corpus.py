"""Every ``podUnschedulable`` expectation of the bundled suites gets an explanation whose first
reason is the one the case is about: the kind of that reason (``summary.check``, or for an attempt
that fails as a whole the check its error comes from), case by case. The table was reviewed
against each case's title and description; ``python -m tests.explain.corpus`` prints it afresh.
Two reasons read as the allocator's order gives them: a device in use hides its other checks
(unless its selectors are false too), and a stale pool generation is not shown (the newer one's
device is in use: ``core/highest-pool-generation-wins``)."""

from __future__ import annotations

from .corpus import explained, first_check

FIRST: dict[tuple[str, str], str] = {
    ('admin-access/does-not-bypass-taints', 'blocked'): 'taint',
    ('admin-access/all-mode-over-devices-in-use', 'ordinary'): 'allocated',
    ('admin-access/same-device-not-twice-in-one-claim', 'monitor'): 'too-few-devices',
    ('compatibility-groups/different-groups-not-co-allocated', 'vgpu-user'): 'compatibility-group',
    ('compatibility-groups/grouped-and-ungrouped-exclude-each-other', 'mig-user'): 'compatibility-group',
    ('compatibility-groups/intersection-is-not-transitive', 'mig-user'): 'compatibility-group',
    ('compatibility-groups/one-claim-backtracks-to-a-common-group', 'greedy'): 'compatibility-group',
    ('compatibility-groups/groups-of-allocated-devices-read-from-current-slice', 'vgpu-user'): 'compatibility-group',
    ('compatibility-groups/gate-off-groups-dropped', 'late'): 'counters',
    ('consumable-capacity/all-mode-capacity-blocked-device', 'all'): 'capacity',
    ('consumable-capacity/shared-device-counters-after-backtrack', 'p'): 'constraint',
    ('consumable-capacity/shares-until-bandwidth-runs-out', 'pod-c'): 'capacity',
    ('consumable-capacity/default-consumption-without-request', 'second'): 'capacity',
    ('consumable-capacity/default-consumption-without-request', 'small-user'): 'capacity',
    ('consumable-capacity/valid-values-round-up', 'too-big'): 'capacity-shape',
    ('consumable-capacity/valid-values-round-up', 'rounded-too-big'): 'capacity',
    ('consumable-capacity/unknown-capacity-name-skips-device', 'lost'): 'capacity-shape',
    ('consumable-capacity/range-max-and-min', 'over-max'): 'capacity-shape',
    ('consumable-capacity/gate-off-device-is-dedicated', 'second'): 'allocated',
    ('core/exact-count-more-than-free', 'too-big'): 'allocated',
    ('core/claim-limit-of-32-devices', 'greedy'): 'claim-limit',
    ('core/all-mode-waits-for-device-in-use', 'everything'): 'allocated',
    ('core/all-mode-no-matching-device', 'nothing'): 'selector',
    ('core/all-mode-constraint-violation-is-an-error', 'contradictory'): 'constraint',
    ('core/match-attribute-unsatisfiable', 'impossible'): 'constraint',
    ('core/match-attribute-missing-on-device', 'never'): 'constraint',
    ('core/distinct-attribute-too-few-values', 'impossible'): 'constraint',
    ('core/pods-spread-over-nodes', 'third'): 'allocated',
    ('core/incomplete-pool-skipped-by-exact-count', 'second'): 'pool-incomplete',
    ('core/incomplete-pool-fails-all-mode', 'greedy'): 'pool-incomplete',
    ('core/duplicate-device-names-invalidate-pool', 'second'): 'node:DynamicResources',
    ('core/highest-pool-generation-wins', 'second'): 'allocated',
    ('core/selector-on-memory-quantity', 'impossible'): 'selector',
    ('core/selector-on-driver-version', 'future'): 'selector',
    ('core/selector-missing-attribute-is-an-error', 'victim'): 'cel-error',
    ('core/request-selector-narrows-class', 'confused'): 'selector',
    ('core/standalone-claim-deallocated-after-last-pod', 'waiting'): 'allocated',
    ('core/missing-device-class-keeps-pod-pending', 'patient'): 'no-node',
    ('core/generated-claim-deleted-with-pod', 'second'): 'allocated',
    ('derived-attributes/gate-off-field-dropped', 'user'): 'constraint',
    ('derived-attributes/derived-empty-list-value', 'p'): 'constraint',
    ('derived-attributes/mismatched-derived-values-stay-pending', 'impossible'): 'constraint',
    ('derived-attributes/runtime-error-aborts-scheduling', 'victim'): 'derived-attribute',
    ('device-taints/rule-noschedule-blocks-new-allocations', 'newcomer'): 'taint',
    ('device-taints/faulty-gpu-is-not-allocated', 'p'): 'taint',
    ('device-taints/noschedule-taint-keeps-pod-pending', 'user'): 'taint',
    ('device-taints/toleration-allows-allocation', 'wrong'): 'taint',
    ('device-taints/effects-are-tolerated-separately', 'second'): 'taint',
    ('device-taints/noexecute-taint-needs-toleration-to-schedule', 'plain-user'): 'taint',
    ('extended-resource/not-enough-devices', 'greedy'): 'too-few-devices',
    ('extended-resource/device-plugin-allocatable-takes-precedence', 'one-more'): 'node:NodeResourcesFit',
    ('extended-resource/claim-goes-with-the-pod', 'second'): 'allocated',
    ('fractional-capacity/half-steps-pack-a-device', 'four'): 'capacity',
    ('fractional-capacity/gate-off-same-requests-overfill', 'three'): 'capacity',
    ('fractional-capacity/rounded-request-above-max-skipped', 'over-max'): 'capacity-shape',
    ('fractional-capacity/unrepresentable-capacity-request', 'p'): 'capacity',
    ('list-attributes/no-common-element-stays-pending', 'impossible'): 'constraint',
    ('list-attributes/includes-selects-list-and-scalar', 'lost'): 'selector',
    ('list-attributes/intersection-over-all-devices', 'triangle'): 'constraint',
    ('list-attributes/cel-sees-lists-as-lists', 'scalar-style'): 'selector',
    ('node-allocatable/mapped-cpus-count-against-the-node', 'second'): 'node:DynamicResources',
    ('node-allocatable/mapped-claim-cannot-be-shared', 'sharer'): 'node:DynamicResources',
    ('node-allocatable/overhead-claims-are-shared-and-paid-per-pod', 'three'): 'node:DynamicResources',
    ('node-allocatable/pod-level-resources-must-cover-dra', 'tight'): 'node:DynamicResources',
    ('numa-node/vendor-numa-attribute-is-not-the-standard-one', 'user'): 'constraint',
    ('numa-node/no-shared-node-is-unschedulable', 'user'): 'constraint',
    ('optional-node-operations/node-must-declare-the-feature', 'user'): 'skip-node-operations',
    ('binding-conditions/scheduler-gate-off-skips-such-devices', 'second'): 'binding-conditions',
    ('partitionable-devices/per-device-node-selection', 'kept-off'): 'node-selection',
    ('partitionable-devices/two-3g40gb-use-up-memory', 'third'): 'counters',
    ('partitionable-devices/compute-counter-limits-small-partitions', 'late'): 'counters',
    ('partitionable-devices/whole-gpu-excluded-once-partitioned', 'whole-user-2'): 'counters',
    ('partitionable-devices/whole-gpu-excluded-once-partitioned', 'full-partition-user'): 'counters',
    ('partitionable-devices/freeing-partition-restores-counters', 'waiting'): 'counters',
    ('partitionable-devices/one-claim-counts-its-own-devices', 'greedy'): 'counters',
    ('partitionable-devices/all-mode-needs-every-partition-to-fit', 'all-user'): 'counters',
    ('partitionable-devices/device-on-two-counter-sets', 'full-user'): 'counters',
    ('partitionable-devices/missing-counter-set-invalidates-pool', 'user'): 'node:DynamicResources',
    ('partitionable-devices/counters-shared-across-nodes', 'user-b'): 'counters',
    ('prequeueing-hints/deallocation-wakes-every-pod', 'next'): 'allocated',
    ('prioritized-list/falls-back-when-preferred-in-use', 'third'): 'allocated',
    ('prioritized-list/no-alternative-fits', 'trainer'): 'too-few-devices',
    ('prioritized-list/every-alternative-class-must-exist', 'waiting'): 'no-node',
    ('workload-claims/claim-outlives-pods-not-group', 'outsider'): 'allocated',
}


def test_each_unschedulable_pod_of_the_corpus_is_explained_by_its_cases_reason() -> None:
    got: dict[tuple[str, str], str] = {}
    for case_id, pod, e in explained():
        kind = first_check(e)
        assert got.setdefault((case_id, pod), kind) == kind, f"{case_id} {pod}: two explanations differ"
        if e["verdict"] == "unschedulable":
            assert e["summary"]["reason"], f"{case_id} {pod}: no reason"
    wrong = {k: (FIRST.get(k), v) for k, v in got.items() if FIRST.get(k) != v}
    assert not wrong, f"(expected, got) per (case, pod): {wrong}"
    assert set(got) == set(FIRST), f"expectations gone: {sorted(set(FIRST) - set(got))}"
    assert len(got) >= 70
