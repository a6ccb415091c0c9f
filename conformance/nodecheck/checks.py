"""``drakit node-check``: a conformance check of any DRA driver's node side, over gRPC only.

The checker plays the kubelet against a running kubelet plugin: it finds the plugin's
registration socket, registers it by the kubelet's rules, and drives NodePrepareResources /
NodeUnprepareResources with claims the driver can resolve: allocated ResourceClaims from
``--claims``, or, with ``--kubeconfig``, claims node-check makes itself for the devices the
driver publishes (``apiclaims``). Claims annotated ``drakit.dev/node-check-expect: error`` must
fail (for that claim only). Each claim goes through prepare, inspection of its CDI specs and
metadata files, prepare again, unprepare, and the check that its transient specs are gone, one
claim at a time (claims may share devices).

A claim that pods use (``status.reservedFor`` is set) belongs to the kubelet that prepared it:
node-check prepares it (idempotent, the same answer) but never unprepares it, and leaves it out
of the checks that need to unprepare (batch, concurrency, v1beta1, cleanup).

The case catalogue is ``catalog.CASES``; results are ``results.json`` case entries (backend
``node-plugin``, ``outcome``) plus a text summary.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import grpc

from drakit.clusters.nodeagent.client import (KUBELET_DRA_SERVICES, KUBELET_HEALTH_SERVICES, PluginInfo,
                                              RegistrationError, validate_info)

from . import cdi as cdicheck
from .calls import Answer, Plugin, claim_ref, find_registration_socket, get_info, missing_claim, notify_registered, rpc_text
from .catalog import CASES
from .inputs import EXPECT_ANNOTATION, Observation, Options, claim_name, driver_results, expects_error, in_use
from .inspect import answer_problems, inspect_answer
from .outcome import BACKEND, CaseRun, CheckFailed, CheckSkipped, render_text

class NodeCheck:
    def __init__(self, options: Options) -> None:
        options.registry_dir = options.registry_dir.absolute()
        options.cdi_dirs = tuple(d.absolute() for d in options.cdi_dirs)
        self.o = options
        self.info: PluginInfo | None = None
        self.dra_services: list[str] = []
        self.plugin: Plugin | None = None
        self.observations: dict[str, Observation] = {}

    # -- claims -----------------------------------------------------------------------------------

    def valid_claims(self) -> list[dict[str, Any]]:
        return [c for c in self.o.claims if not expects_error(c) and driver_results(c, self.o.driver)]

    def owned_claims(self) -> list[dict[str, Any]]:
        """Valid claims node-check may prepare and unprepare: no pod uses them, nor a device of
        theirs (a driver may rightly refuse a device another prepared claim holds)."""
        busy = {(r["pool"], r["device"]) for c in self.valid_claims() if in_use(c)
                for r in driver_results(c, self.o.driver)}
        return [c for c in self.valid_claims() if not in_use(c)
                and not busy & {(r["pool"], r["device"]) for r in driver_results(c, self.o.driver)}]

    def checked_claims(self) -> list[dict[str, Any]]:
        """The claims of the prepare lifecycle: those pods use (prepare only), then node-check's own."""
        return [c for c in self.valid_claims() if in_use(c)] + self.owned_claims()

    def disjoint(self, claims: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        chosen: list[dict[str, Any]] = []
        used: set[tuple[str, str]] = set()
        for claim in claims:
            devices = {(r["pool"], r["device"]) for r in driver_results(claim, self.o.driver)}
            if devices and not devices & used and not any(r.get("shareID") for r in driver_results(claim, self.o.driver)):
                chosen.append(claim)
                used |= devices
        return chosen

    def _first_owned(self) -> dict[str, Any]:
        claims = self.owned_claims()
        if not claims:
            what = "no claims with devices of this driver that no pod uses"
            raise CheckSkipped("inventory", f"{what} (pass --claims with allocated ResourceClaims, "
                                            "or --kubeconfig to let node-check make its own)")
        return claims[0]

    # -- calls ----------------------------------------------------------------------------------

    @property
    def p(self) -> Plugin:
        assert self.plugin is not None
        return self.plugin

    def _prepare_or_fail(self, claims: Sequence[dict[str, Any]], service: str | None = None
                         ) -> tuple[dict[str, Answer], list[str]]:
        try:
            return self.p.prepare(claims, service)
        except grpc.RpcError as err:
            raise CheckFailed(f"NodePrepareResources failed as a call: {rpc_text(err)}")

    def _release(self, claims: Sequence[dict[str, Any]], service: str | None = None) -> list[str]:
        """Unprepare claims node-check prepared; the problems (never raises for the plugin's sake)."""
        try:
            released, _ = self.p.unprepare(claims, service)
        except grpc.RpcError as err:
            return [f"unprepare failed as a call: {rpc_text(err)}"]
        return [f"unprepare of {uid}: {'no entry' if error is None else error}"
                for uid, error in released.items() if error is None or error]

    # -- run ------------------------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        checks: dict[str, Callable[[CaseRun], None]] = {
            "node/registration": self.check_registration,
            "node/unprepare-unknown-claim": self.check_unprepare_unknown,
            "node/prepare-missing-claim": self.check_prepare_missing,
            "node/prepare-batch": self.check_batch,
            "node/prepare-devices": self.check_devices,
            "node/cdi-specs": self.check_cdi,
            "node/prepare-idempotent": self.check_idempotent,
            "node/prepare-concurrent": self.check_concurrent,
            "node/prepare-unknown-device": self.check_unknown_device,
            "node/unprepare-cleanup": self.check_cleanup,
            "node/dra-v1beta1": self.check_v1beta1,
            "node/device-metadata": self.check_metadata,
            "node/health-stream": self.check_health,
        }
        cases = []
        try:
            for case_id, title, features, profile, description in CASES:
                run = CaseRun(case_id, title, features, profile, description, self.o.driver,
                              self.o.claims_file, self.o.rerun)
                if case_id != "node/registration" and self.plugin is None:
                    run.skip("backend", "the plugin did not register (see node/registration)")
                else:
                    run.execute(checks[case_id])
                cases.append(run.to_json())
        finally:
            if self.plugin is not None:
                self.plugin.close()
        return cases

    # -- checks ---------------------------------------------------------------------------------

    def check_registration(self, run: CaseRun) -> None:
        with run.step("find registration socket"):
            socket = find_registration_socket(self.o.registry_dir, self.o.driver)
            if socket is None:
                raise CheckFailed(f"no registration socket for driver {self.o.driver} in {self.o.registry_dir}",
                                  f"expected {self.o.registry_dir / (self.o.driver + '-reg.sock')} (or a "
                                  "rolling-update socket whose GetInfo names the driver)")
        with run.step("GetInfo", "grpc"):
            try:
                info = get_info(socket)
            except grpc.RpcError as err:
                raise CheckFailed(f"GetInfo failed: {rpc_text(err)}")
        with run.step("validate plugin info"):
            try:
                reg = validate_info(info, socket)
            except RegistrationError as err:
                raise CheckFailed(f"the kubelet would reject the plugin: {err}",
                                  actual={"type": info.type, "name": info.name, "endpoint": info.endpoint,
                                          "supportedVersions": list(info.supported_versions)})
            if info.name != self.o.driver:
                raise CheckFailed(f"GetInfo names driver {info.name!r}, expected {self.o.driver!r}",
                                  expected=self.o.driver, actual=info.name)
            if not Path(reg.endpoint).is_socket():
                raise CheckFailed(f"endpoint {reg.endpoint} is not a socket on this node")
            dra = [v for v in info.supported_versions if v in KUBELET_DRA_SERVICES]
            if "v1.DRAPlugin" not in dra:
                run.note("the plugin does not serve v1.DRAPlugin; kubelet 1.37 prefers it and "
                         "v1beta1 will be removed")
        with run.step("NotifyRegistrationStatus", "grpc"):
            try:
                notify_registered(socket)
            except grpc.RpcError as err:
                raise CheckFailed(f"NotifyRegistrationStatus(registered) failed: {rpc_text(err)}")
        self.info, self.dra_services = info, dra
        self.plugin = Plugin(reg.endpoint, reg.service, self.o.timeout)

    def check_unprepare_unknown(self, run: CaseRun) -> None:
        for service in self.dra_services:
            with run.step(f"unprepare unknown claim ({service})", "grpc"):
                claim = missing_claim()
                try:
                    answers, unknown = self.p.unprepare([claim], service)
                except grpc.RpcError as err:
                    raise CheckFailed(f"{service}: NodeUnprepareResources failed as a call: {rpc_text(err)}")
                got = answers[claim["metadata"]["uid"]]
                if got is None:
                    raise CheckFailed(f"{service}: the answer has no entry for the claim")
                if got:
                    raise CheckFailed(f"{service}: unprepare of an unknown claim failed: {got}")
                if unknown:
                    raise CheckFailed(f"{service}: the answer names claims not asked for: {unknown}")

    def check_prepare_missing(self, run: CaseRun) -> None:
        claim = missing_claim()
        with run.step("prepare a claim that does not exist", "grpc"):
            try:
                answers, unknown = self.p.prepare([claim])
            except grpc.RpcError as err:
                run.note(f"the plugin fails the call ({err.code().name}) rather than the claim: allowed")
                return
            finally:
                self._release([claim])
        answer = answers[claim["metadata"]["uid"]]
        if not answer.present:
            raise CheckFailed("the answer has no entry for the claim (the kubelet would retry forever)")
        if not answer.error:
            raise CheckFailed("prepare of a claim that does not exist reported success",
                              actual=answer.comparable())
        if unknown:
            raise CheckFailed(f"the answer names claims not asked for: {unknown}")

    def check_batch(self, run: CaseRun) -> None:
        good = self._first_owned()
        problems: list[str] = []
        pair = self.disjoint(self.owned_claims())[:2]
        if len(pair) == 2:
            with run.step(f"prepare {claim_name(pair[0])} and {claim_name(pair[1])} in one call", "grpc"):
                answers, unknown = self._prepare_or_fail(pair)
                for claim in pair:
                    problems += self._check_answer(claim, answers[claim_ref(claim)[2]])
                if unknown:
                    problems.append(f"the answer names claims not asked for: {unknown}")
            with run.step("unprepare both in one call", "grpc"):
                problems += self._release(pair)
        else:
            run.note("only one claim without shared devices: the two-good-claims call was not tried")
        bad = missing_claim()
        with run.step("prepare a good and a missing claim in one call", "grpc"):
            try:
                answers, unknown = self.p.prepare([good, bad])
            except grpc.RpcError as err:
                run.note(f"a call with a missing claim fails as a whole ({err.code().name}): allowed, "
                         "the kubelet fetches claims before calling the plugin")
                answers, unknown = {}, []
            finally:
                problems += self._release([good, bad])
        if answers:
            g, b = answers[claim_ref(good)[2]], answers[bad["metadata"]["uid"]]
            if not g.ok:
                problems.append(f"the good claim {claim_name(good)} failed: {g.error or 'no entry'}")
            if not b.present or not b.error:
                problems.append("the missing claim " + ("has no entry" if not b.present else "reported success"))
            if unknown:
                problems.append(f"the answer names claims not asked for: {unknown}")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def _lifecycle(self) -> dict[str, Observation]:
        """Prepare / inspect / prepare again / unprepare / inspect, one valid claim at a time;
        a claim in use is only prepared (twice) and inspected."""
        if self.observations:
            return self.observations
        for claim in self.checked_claims():
            obs = Observation(claim, owned=not in_use(claim))
            self.observations[claim_name(claim)] = obs
            uid = claim_ref(claim)[2]
            try:
                answers, _ = self.p.prepare([claim])
                obs.first = answers[uid]
                if obs.first.ok:
                    obs.cdi, obs.metadata, obs.metadata_ids = inspect_answer(
                        claim, obs.first, self.o.driver, self.o.cdi_dirs, driver_results(claim, self.o.driver))
                answers, _ = self.p.prepare([claim])
                obs.second = answers[uid]
            except grpc.RpcError as err:
                obs.rpc_error = rpc_text(err)
            if not obs.owned:
                continue
            problems = self._release([claim])
            obs.unprepare_error = problems[0] if problems else None
            if obs.first is not None and obs.first.ok:
                index = cdicheck.SpecIndex.load(self.o.cdi_dirs)
                obs.leftovers = sorted(q for q in index.devices if uid in q.partition("=")[2])
        return self.observations

    def _prepared_observations(self) -> list[Observation]:
        return [o for o in self._lifecycle().values() if o.first is not None and o.first.ok]

    def check_devices(self, run: CaseRun) -> None:
        observations = self._lifecycle()
        if not observations:
            raise CheckSkipped("inventory", "no claims with devices of this driver to prepare "
                                            "(pass --claims, or --kubeconfig to let node-check make its own)")
        problems = []
        for name, obs in observations.items():
            mine = []
            if obs.rpc_error:
                mine.append(f"{name}: NodePrepareResources failed as a call: {obs.rpc_error}")
            else:
                mine += self._check_answer(obs.claim, obs.first)
            if obs.unprepare_error:
                mine.append(f"{name}: {obs.unprepare_error}")
            what = "prepare and unprepare" if obs.owned else "prepare (in use by pods: not unprepared)"
            run.record(f"{what} {name}", "grpc", "failed" if mine else "passed")
            problems += mine
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_cdi(self, run: CaseRun) -> None:
        observations = self._prepared_observations()
        if not any(o.first and o.first.ids() for o in observations):
            raise CheckSkipped("not-applicable", "no claim was prepared with CDI ids")
        if not any(d.is_dir() for d in self.o.cdi_dirs):
            raise CheckSkipped("backend", f"no CDI folder readable here: {', '.join(map(str, self.o.cdi_dirs))}")
        problems = [f"{claim_name(o.claim)}: {p}" for o in observations for p in o.cdi]
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_idempotent(self, run: CaseRun) -> None:
        observations = self._prepared_observations()
        if not observations:
            raise CheckSkipped("inventory", "no claim could be prepared")
        problems = []
        for obs in observations:
            assert obs.first is not None
            if obs.second is None or not obs.second.ok:
                problems.append(f"{claim_name(obs.claim)}: second prepare failed: "
                                f"{obs.second.error if obs.second else obs.rpc_error}")
            elif obs.second.comparable() != obs.first.comparable():
                problems.append(f"{claim_name(obs.claim)}: second answer {obs.second.comparable()} differs from "
                                f"the first {obs.first.comparable()}")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_concurrent(self, run: CaseRun) -> None:
        chosen = self.disjoint(self.owned_claims())
        if len(chosen) < 2:
            raise CheckSkipped("inventory", "fewer than two claims with disjoint devices that no pod uses")
        answers: dict[str, Any] = {}

        def call(claim: dict[str, Any], op: Callable[..., Any]) -> None:
            try:
                answers[claim_name(claim)] = op([claim])
            except grpc.RpcError as err:
                answers[claim_name(claim)] = err

        def parallel(op: Callable[..., Any]) -> None:
            threads = [threading.Thread(target=call, args=(c, op)) for c in chosen]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        with run.step(f"prepare {len(chosen)} claims in parallel", "grpc"):
            parallel(self.p.prepare)
        prepared = dict(answers)
        with run.step(f"unprepare {len(chosen)} claims in parallel", "grpc"):
            answers.clear()
            parallel(self.p.unprepare)
        problems = []
        for claim in chosen:
            name, uid = claim_name(claim), claim_ref(claim)[2]
            got = prepared[name]
            if isinstance(got, grpc.RpcError):
                problems.append(f"{name}: prepare failed as a call: {got.code().name}")
            else:
                problems += self._check_answer(claim, got[0][uid])
            released = answers[name]
            if isinstance(released, grpc.RpcError):
                problems.append(f"{name}: unprepare failed as a call: {released.code().name}")
            elif released[0][uid] is None or released[0][uid]:
                problems.append(f"{name}: unprepare failed: {released[0][uid] or 'no entry'}")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_unknown_device(self, run: CaseRun) -> None:
        bad = [c for c in self.o.claims if expects_error(c)]
        if not bad:
            raise CheckSkipped("inventory", f"no claim annotated {EXPECT_ANNOTATION}=error")
        problems = []
        for claim in bad:
            name, uid = claim_name(claim), claim_ref(claim)[2]
            wanted = [f"{r['pool']}/{r['device']}" for r in driver_results(claim, self.o.driver)]
            with run.step(f"prepare {name} ({', '.join(wanted)})", "grpc"):
                try:
                    answers, _ = self.p.prepare([claim])
                except grpc.RpcError as err:
                    run.note(f"{name}: refused by failing the call ({err.code().name})")
                    continue
                finally:
                    self._release([claim])
            answer = answers[uid]
            if not answer.present:
                problems.append(f"{name}: the answer has no entry for the claim")
            elif not answer.error:
                problems.append(f"{name}: the driver prepared {', '.join(wanted)}, which it does not publish "
                                f"(devices {answer.comparable()}): it trusts the allocation without checking it")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_cleanup(self, run: CaseRun) -> None:
        observations = [o for o in self._prepared_observations() if o.owned]
        if not observations:
            raise CheckSkipped("inventory", "no claim node-check may unprepare could be prepared")
        problems = [f"{claim_name(o.claim)}: CDI devices left after unprepare: {o.leftovers}"
                    for o in observations if o.leftovers]
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_v1beta1(self, run: CaseRun) -> None:
        if not {"v1.DRAPlugin", "v1beta1.DRAPlugin"} <= set(self.dra_services):
            raise CheckSkipped("not-applicable", "the plugin does not advertise both v1 and v1beta1")
        claim = self._first_owned()
        uid = claim_ref(claim)[2]
        try:
            with run.step("prepare over v1", "grpc"):
                v1, _ = self._prepare_or_fail([claim], "v1.DRAPlugin")
                self._release([claim], "v1.DRAPlugin")
            with run.step("prepare over v1beta1", "grpc"):
                beta, _ = self._prepare_or_fail([claim], "v1beta1.DRAPlugin")
        finally:
            self._release([claim], "v1beta1.DRAPlugin")
        if not beta[uid].ok:
            raise CheckFailed(f"v1beta1 prepare failed: {beta[uid].error or 'no entry'}")
        if beta[uid].comparable(share=False) != v1[uid].comparable(share=False):
            raise CheckFailed("v1beta1 and v1 answers differ", expected=v1[uid].comparable(False),
                              actual=beta[uid].comparable(False))

    def check_metadata(self, run: CaseRun) -> None:
        observations = self._prepared_observations()
        if not any(o.metadata_ids for o in observations):
            raise CheckSkipped("not-applicable", "the driver returned no metadata CDI ids "
                                                 f"({self.o.driver}/metadata=...): device metadata off")
        problems = [f"{claim_name(o.claim)}: {p}" for o in observations for p in o.metadata]
        for obs in observations:
            want = {r.get("request", "").partition("/")[0] for r in driver_results(obs.claim, self.o.driver)}
            if obs.metadata_ids != len(want):
                problems.append(f"{claim_name(obs.claim)}: {obs.metadata_ids} metadata CDI ids "
                                f"for {len(want)} requests with devices")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_health(self, run: CaseRun) -> None:
        assert self.info is not None
        services = [v for v in KUBELET_HEALTH_SERVICES if v in self.info.supported_versions]
        if not services:
            raise CheckSkipped("not-applicable", "the plugin does not advertise a health service")
        problems = []
        for service in services:
            with run.step(f"first message of {service}", "grpc"):
                stream = self.p.health_stream(service, self.o.health_timeout)
                try:
                    first = next(iter(stream))
                except grpc.RpcError as err:
                    problems.append(f"{service}: no message within {self.o.health_timeout} s: {err.code().name}")
                    continue
                finally:
                    stream.cancel()
            seen = set()
            for d in first.devices:
                key = (d.device.pool_name, d.device.device_name)
                if not all(key):
                    problems.append(f"{service}: an entry without pool or device name")
                if key in seen:
                    problems.append(f"{service}: device {key} listed twice")
                seen.add(key)
                if d.health not in (0, 1, 2):
                    problems.append(f"{service}: {key}: unknown health value {d.health}")
                if len(d.message) > 1024:
                    problems.append(f"{service}: {key}: message longer than 1024 characters")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def _check_answer(self, claim: dict[str, Any], answer: Answer | None) -> list[str]:
        return answer_problems(claim, answer, driver_results(claim, self.o.driver), self.p.service)


__all__ = ["BACKEND", "CASES", "EXPECT_ANNOTATION", "NodeCheck", "Options", "render_text"]
