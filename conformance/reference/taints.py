"""The device-taint eviction controller (kube-controller-manager, DRADeviceTaints) and the
``EvictionInProgress`` status of DeviceTaintRules (DRADeviceTaintRules), after the 1.37.2
``pkg/controller/devicetainteviction``.

- A claim's eviction time is the earliest ``timeAdded`` of any ``NoExecute`` taint on one of
  its allocated devices (the device's own taints from its ResourceSlice, plus NoExecute
  DeviceTaintRules that select it), pushed back by the smallest ``tolerationSeconds`` of the
  allocation's tolerations for that taint; a matching toleration without seconds tolerates it
  for ever. As upstream, only tolerations with ``effect: NoExecute`` count here.
- A scheduled pod that uses such a claim (and is the claim's consumer: in ``reservedFor``
  directly or through its PodGroup) is evicted when that time has come: the controller emits a
  ``DeviceTaintManagerEviction`` event ("Marking for deletion"), adds the pod condition
  ``DisruptionTarget=True`` (reason ``DeletionByDeviceTaintManager``) and deletes the pod. A
  pending eviction that stops applying is cancelled ("Cancelling deletion").
- A DeviceTaintRule gets its ``EvictionInProgress`` condition right after it is created or its
  spec changes, and again ``ruleStatusPeriod`` (10 s) after pods were evicted because of it.

Time is the reference clock; nothing happens between steps unless a case advances it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterator

from .clock import parse_time
from .podclaims import pod_group_name, reserved_for_pod
from .host import ControllerHost


RULE_STATUS_PERIOD = timedelta(seconds=10)
CONDITION = "EvictionInProgress"


@dataclass(frozen=True)
class _Taint:
    key: str
    value: str | None
    effect: str
    time_added: datetime | None
    rule: str | None = None  # rule uid when the taint comes from a DeviceTaintRule


@dataclass
class _Eviction:
    when: datetime
    rules: frozenset[str]  # uids of rules among the reasons


def _tolerates(t: dict[str, Any], taint: _Taint) -> bool:
    if t.get("effect") and t["effect"] != taint.effect:
        return False
    if t.get("key") and t["key"] != taint.key:
        return False
    op = t.get("operator") or "Equal"
    if op == "Equal":
        return (t.get("value") or "") == (taint.value or "")
    return op == "Exists"


def _time(v: Any) -> datetime | None:
    return parse_time(v) if isinstance(v, str) and v else None


class TaintEvictionController:
    def __init__(self, cluster: ControllerHost) -> None:
        self.c = cluster
        self.scheduled: dict[str, datetime] = {}     # pod uid -> eviction time (pending)
        self.evicted: set[str] = set()
        self.rule_evictions: dict[str, int] = {}     # rule uid -> pods evicted because of it
        self.rule_due: dict[str, datetime] = {}      # rule uid -> next status update
        self.rule_spec: dict[str, Any] = {}          # rule uid -> last seen spec

    @property
    def enabled(self) -> bool:
        return bool(self.c.gates.get("DRADeviceTaints"))

    @property
    def rules_enabled(self) -> bool:
        return self.enabled and bool(self.c.gates.get("DRADeviceTaintRules"))

    # -- inputs --------------------------------------------------------------------------------

    def _rules(self) -> list[dict[str, Any]]:
        return list(self.c.store.list("DeviceTaintRule")) if self.rules_enabled else []

    @staticmethod
    def _rule_matches(rule: dict[str, Any], driver: str, pool: str, device: str) -> bool:
        sel = (rule.get("spec") or {}).get("deviceSelector")
        if sel is None:
            return False
        return all(sel.get(k) in (None, v) for k, v in (("driver", driver), ("pool", pool), ("device", device)))

    def _slice_devices(self) -> dict[tuple[str, str, str], dict[str, Any]]:
        """Devices of the newest generation of every pool (what the controller's pool view holds)."""
        newest: dict[tuple[str, str], int] = {}
        for s in self.c.store.list("ResourceSlice"):
            key = (s["spec"]["driver"], s["spec"]["pool"]["name"])
            newest[key] = max(newest.get(key, -1), s["spec"]["pool"]["generation"])
        out: dict[tuple[str, str, str], dict[str, Any]] = {}
        for s in self.c.store.list("ResourceSlice"):
            key = (s["spec"]["driver"], s["spec"]["pool"]["name"])
            if s["spec"]["pool"]["generation"] != newest[key]:
                continue
            for d in s["spec"].get("devices") or []:
                out.setdefault(key + (d["name"],), d)
        return out

    def _evicting_taints(self, result: dict[str, Any], devices: dict[tuple[str, str, str], dict[str, Any]],
                         rules: list[dict[str, Any]]) -> Iterator[_Taint]:
        dev = devices.get((result["driver"], result["pool"], result["device"]))
        for t in (dev or {}).get("taints") or []:
            if t.get("effect") == "NoExecute":
                yield _Taint(t["key"], t.get("value"), "NoExecute", _time(t.get("timeAdded")))
        for r in rules:
            taint = (r.get("spec") or {}).get("taint") or {}
            if taint.get("effect") == "NoExecute" and self._rule_matches(r, result["driver"], result["pool"], result["device"]):
                yield _Taint(taint["key"], taint.get("value"), "NoExecute", _time(taint.get("timeAdded")), r["metadata"]["uid"])

    def claim_eviction(self, claim: dict[str, Any], devices: dict[tuple[str, str, str], dict[str, Any]],
                       rules: list[dict[str, Any]]) -> _Eviction | None:
        """Upstream claimEvictionTime."""
        alloc = (claim.get("status") or {}).get("allocation")
        if not alloc:
            return None
        when: datetime | None = None
        reasons: set[str] = set()
        found = False
        for result in (alloc.get("devices") or {}).get("results") or []:
            for taint in self._evicting_taints(result, devices, rules):
                seconds: int | None = None
                forever = False
                for tol in result.get("tolerations") or []:
                    if tol.get("effect") == "NoExecute" and _tolerates(tol, taint):
                        if tol.get("tolerationSeconds") is None:
                            forever = True
                            break
                        s = max(int(tol["tolerationSeconds"]), 0)
                        seconds = s if seconds is None else min(seconds, s)
                if forever:
                    continue
                found = True
                if taint.rule:
                    reasons.add(taint.rule)
                t = taint.time_added
                if t is not None and seconds is not None:
                    t = t + timedelta(seconds=seconds)
                if t is not None and (when is None or t < when):
                    when = t
        if not found or when is None:
            return None
        return _Eviction(when, frozenset(reasons))

    def _pod_claims(self, pod: dict[str, Any]) -> Iterator[tuple[dict[str, Any], bool]]:
        """Upstream PodClaims: (claim, must check owner) for created claims plus the
        extended-resource claim."""
        ns = pod["metadata"].get("namespace", "")
        statuses = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        for ref in pod["spec"].get("resourceClaims") or []:
            name = ref.get("resourceClaimName")
            check = False
            if name is None:
                name = statuses.get(ref["name"])
                check = True
            if not name:
                continue
            c = self.c.store.peek("ResourceClaim", name, ns)
            if c is not None:
                yield c, check
        ext = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if ext:
            c = self.c.store.peek("ResourceClaim", ext, ns)
            if c is not None:
                yield c, True

    def pod_eviction(self, pod: dict[str, Any], devices: dict[tuple[str, str, str], dict[str, Any]],
                     rules: list[dict[str, Any]]) -> _Eviction | None:
        if not (pod.get("spec") or {}).get("nodeName"):
            return None
        workload = bool(self.c.gates.get("DRAWorkloadResourceClaims"))
        out: _Eviction | None = None
        for claim, check in self._pod_claims(pod):
            if check and not self._is_for_pod(pod, claim, workload):
                continue
            if not reserved_for_pod(claim, pod, workload):
                continue
            ev = self.claim_eviction(claim, devices, rules)
            if ev is None:
                continue
            if out is None:
                out = ev
            else:
                out = _Eviction(min(out.when, ev.when), out.rules | ev.rules)
        return out

    @staticmethod
    def _is_for_pod(pod: dict[str, Any], claim: dict[str, Any], workload: bool) -> bool:
        for r in claim["metadata"].get("ownerReferences") or []:
            if not r.get("controller"):
                continue
            if r.get("uid") == pod["metadata"]["uid"]:
                return True
            group = pod_group_name(pod)
            if workload and group and r.get("kind") == "PodGroup" and r.get("name") == group:
                return True
        return False

    # -- the control loop ----------------------------------------------------------------------

    def sync(self) -> None:
        if not self.enabled:
            return
        now = self.c.clock.now()
        rules = self._rules()
        self._notice_rule_changes(rules, now)
        self._rule_statuses(rules, now)  # a new or changed rule gets its status before any eviction
        rules = self._rules()
        has_taints = bool(self.scheduled) or any(
            (r.get("spec") or {}).get("taint", {}).get("effect") == "NoExecute" for r in rules) or any(
            t.get("effect") == "NoExecute" for s in self.c.store.list("ResourceSlice")
            for d in s["spec"].get("devices") or [] for t in d.get("taints") or [])
        if has_taints:
            devices = self._slice_devices()
            for pod in list(self.c.store.list("Pod")):
                uid = pod["metadata"]["uid"]
                if uid in self.evicted or pod["metadata"].get("deletionTimestamp"):
                    continue
                ev = self.pod_eviction(pod, devices, rules)
                if ev is None:
                    if self.scheduled.pop(uid, None) is not None:
                        self.c.store.record("Normal", "DeviceTaintManagerEviction", pod, "Cancelling deletion")
                    continue
                for r in ev.rules:
                    self.rule_due.setdefault(r, now + RULE_STATUS_PERIOD)
                if ev.when > now:
                    self.scheduled[uid] = ev.when
                    continue
                self.scheduled.pop(uid, None)
                self._evict(pod, ev, now)
        self._rule_statuses(self._rules(), now)

    def _evict(self, pod: dict[str, Any], ev: _Eviction, now: datetime) -> None:
        uid = pod["metadata"]["uid"]
        self.evicted.add(uid)
        self.c.store.record("Normal", "DeviceTaintManagerEviction", pod, "Marking for deletion")
        p = self.c.store.get("Pod", pod["metadata"]["name"], pod["metadata"].get("namespace"))
        assert p is not None
        conds = p.setdefault("status", {}).setdefault("conditions", [])
        cond = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager",
                "message": "Device Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": self.c.clock.stamp()}
        for i, c in enumerate(conds):
            if c.get("type") == "DisruptionTarget":
                conds[i] = cond
                break
        else:
            conds.append(cond)
        self.c.store.update(p)
        self.c.delete_pod(p)
        for r in ev.rules:
            self.rule_evictions[r] = self.rule_evictions.get(r, 0) + 1
            self.rule_due[r] = now + RULE_STATUS_PERIOD

    # -- DeviceTaintRule status ------------------------------------------------------------------

    def _notice_rule_changes(self, rules: list[dict[str, Any]], now: datetime) -> None:
        seen = set()
        for r in rules:
            uid = r["metadata"]["uid"]
            seen.add(uid)
            if self.rule_spec.get(uid) != r.get("spec"):
                self.rule_spec[uid] = r.get("spec")
                self.rule_due[uid] = now  # immediately, before evicting any pods
        for uid in list(self.rule_spec):
            if uid not in seen:
                self.rule_spec.pop(uid, None)
                self.rule_due.pop(uid, None)
                self.rule_evictions.pop(uid, None)

    def _pending(self, rule_uid: str, rules: list[dict[str, Any]], devices: dict[tuple[str, str, str], dict[str, Any]]) -> tuple[int, int]:
        pods = 0
        namespaces: set[str] = set()
        for pod in self.c.store.list("Pod"):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            ev = self.pod_eviction(pod, devices, rules)
            if ev is not None and rule_uid in ev.rules:
                pods += 1
                namespaces.add(pod["metadata"].get("namespace", ""))
        return pods, len(namespaces)

    def _rule_statuses(self, rules: list[dict[str, Any]], now: datetime) -> None:
        for rule in rules:
            uid = rule["metadata"]["uid"]
            due = self.rule_due.get(uid)
            if due is None or due > now:
                continue
            cond = self._rule_condition(rule, rules, now)
            if cond is None:
                continue  # rescheduled
            del self.rule_due[uid]
            existing = next((c for c in (rule.get("status") or {}).get("conditions") or [] if c.get("type") == CONDITION), None)
            compare = {k: v for k, v in (existing or {}).items() if k != "lastTransitionTime"}
            if compare == cond:
                continue
            r = self.c.store.get("DeviceTaintRule", rule["metadata"]["name"])
            assert r is not None
            conds = [c for c in (r.get("status") or {}).get("conditions") or [] if c.get("type") != CONDITION]
            conds.append({**cond, "lastTransitionTime": self.c.clock.stamp()})
            r.setdefault("status", {})["conditions"] = conds
            self.c.store.update(r)

    def _rule_condition(self, rule: dict[str, Any], rules: list[dict[str, Any]], now: datetime) -> dict[str, Any] | None:
        uid = rule["metadata"]["uid"]
        generation = rule["metadata"].get("generation", 1)
        existing = next((c for c in (rule.get("status") or {}).get("conditions") or [] if c.get("type") == CONDITION), None)
        if existing is not None and existing.get("observedGeneration") == generation and existing.get("lastTransitionTime"):
            since = now - parse_time(existing["lastTransitionTime"])
            if since < RULE_STATUS_PERIOD:
                self.rule_due[uid] = parse_time(existing["lastTransitionTime"]) + RULE_STATUS_PERIOD
                return None
        effect = (rule.get("spec") or {}).get("taint", {}).get("effect")
        devices = self._slice_devices()
        cond: dict[str, Any] = {"type": CONDITION, "status": "False", "observedGeneration": generation}
        evicted = self.rule_evictions.get(uid, 0)
        message = ""
        if effect == "NoExecute":
            pods, nss = self._pending(uid, rules, devices)
            if pods > 0:
                cond["status"] = "True"
                cond["reason"] = "PodsPendingEviction"
                message = (f"{pods} pod needs" if pods == 1 else f"{pods} pods need") + " to be evicted in " + (
                    "1 namespace." if nss == 1 else f"{nss} different namespaces.")
            elif evicted > 0:
                cond["reason"] = "Completed"
            else:
                cond["reason"] = "NotStarted"
        elif effect == "None":
            cond["reason"] = "NoEffect"
            simulated = {**rule, "spec": {**rule["spec"], "taint": {**rule["spec"]["taint"], "effect": "NoExecute"}}}
            sim_rules = [simulated if r["metadata"]["uid"] == uid else r for r in rules]
            pods, nss = self._pending(uid, sim_rules, devices)
            n_slice = sum(1 for (drv, pool, dev) in devices if self._rule_matches(rule, drv, pool, dev))
            n_alloc = sum(1 for c in self.c.store.list("ResourceClaim")
                          for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
                          if self._rule_matches(rule, r["driver"], r["pool"], r["device"]))
            message = (("1 published device selected. " if n_slice == 1 else f"{n_slice} published devices selected. ")
                       + ("1 allocated device selected. " if n_alloc == 1 else f"{n_alloc} allocated devices selected. ")
                       + ("1 pod would be evicted in " if pods == 1 else f"{pods} pods would be evicted in ")
                       + ("1 namespace " if nss == 1 else f"{nss} different namespaces ")
                       + "if the effect was NoExecute. This information will not be updated again. "
                         "Recreate the DeviceTaintRule to trigger an update.")
        else:
            cond["reason"] = "OtherEffect"
            message = "Eviction only happens for the NoExecute effect."
        if evicted > 0:
            message = (message + " " if message else "") + ("1 pod " if evicted == 1 else f"{evicted} pods ") + \
                "evicted since starting the controller."
        cond["message"] = message
        return cond
