"""``drakit node-check``: a conformance check of any DRA driver's node side, over gRPC only.

The checker plays the kubelet against a running kubelet plugin: it finds the plugin's
registration socket, registers it by the kubelet's rules, and drives NodePrepareResources /
NodeUnprepareResources with claims the driver can resolve (``--claims``: allocated
ResourceClaims, the same ones the driver reads). Claims annotated
``drakit.dev/node-check-expect: error`` must fail (for that claim only). Each claim goes through
prepare, inspection of its CDI specs and metadata files, prepare again, unprepare, and the
check that its transient specs are gone, one claim at a time (claims may share devices).

Results are ``results.json`` case entries (backend ``node-plugin``) plus a text summary.
"""

from __future__ import annotations

import threading
import time
import traceback
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import grpc

from drakit.clusters.nodeagent.client import (KUBELET_DRA_SERVICES, KUBELET_HEALTH_SERVICES, PluginInfo,
                                       RegistrationError, validate_info)
from drakit.fake_driver._gen import (dra_health_v1_pb2, dra_health_v1_pb2_grpc, dra_health_v1alpha1_pb2,
                              dra_health_v1alpha1_pb2_grpc, dra_v1_pb2, dra_v1_pb2_grpc,
                              dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, pluginregistration_v1_pb2,
                              pluginregistration_v1_pb2_grpc)

from . import cdi as cdicheck
from . import metadata as mdcheck

BACKEND = "node-plugin"
EXPECT_ANNOTATION = "drakit.dev/node-check-expect"
_DRA: dict[str, tuple[Any, Any]] = {"v1.DRAPlugin": (dra_v1_pb2, dra_v1_pb2_grpc.DRAPluginStub),
        "v1beta1.DRAPlugin": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc.DRAPluginStub)}
_HEALTH: dict[str, tuple[Any, Any]] = {"v1.DRAResourceHealth": (dra_health_v1_pb2, dra_health_v1_pb2_grpc.DRAResourceHealthStub),
           "v1alpha1.DRAResourceHealth": (dra_health_v1alpha1_pb2,
                                          dra_health_v1alpha1_pb2_grpc.DRAResourceHealthStub)}

# (id, title, features, profile, description)
CASES: tuple[tuple[str, str, tuple[str, ...], str, str], ...] = (
    ("node/registration", "Registration info is valid", ("core",), "required",
     "GetInfo answers within 1 s with type DRAPlugin, the driver name, an existing socket as "
     "endpoint and a DRA service the kubelet speaks; NotifyRegistrationStatus is accepted."),
    ("node/unprepare-unknown-claim", "Unprepare of an unknown claim succeeds", ("core",), "required",
     "Every advertised DRA service answers NodeUnprepareResources for a claim it never saw with "
     "an entry for that claim and no error."),
    ("node/prepare-missing-claim", "Prepare of a claim that does not exist fails for that claim only",
     ("core",), "required",
     "NodePrepareResources for a claim the API does not have succeeds as a call and carries a "
     "per-claim error."),
    ("node/prepare-batch", "One bad claim does not fail the other claims of a call", ("core",),
     "required", "A call with a good and a missing claim answers both: devices for the good one, "
     "an error for the other; unpreparing both in one call answers both without error."),
    ("node/prepare-devices", "Prepare returns CDI ids for exactly the allocated devices", ("core",),
     "required", "For every claim: one answer entry, no error, the allocated devices of this driver "
     "(pool and name) and no others, base request names, well-formed CDI ids, share IDs."),
    ("node/cdi-specs", "CDI spec files parse and define every returned CDI id", ("core",),
     "required", "While a claim is prepared, each CDI id resolves to exactly one device in a valid "
     "spec file (cdiVersion high enough for its content) in the CDI folders."),
    ("node/prepare-idempotent", "Prepare twice gives the same answer", ("core",), "required",
     "A second NodePrepareResources for a prepared claim returns the same devices and CDI ids."),
    ("node/prepare-concurrent", "Concurrent prepares of different claims all succeed", ("core",),
     "required", "Claims with disjoint devices, prepared in parallel calls, all succeed correctly; "
     "so do the parallel unprepares."),
    ("node/prepare-unknown-device", "A prepare the driver cannot do fails for that claim only",
     ("core",), "required", "Claims annotated drakit.dev/node-check-expect=error (e.g. naming a "
     "device the driver does not have) get a per-claim error, not a failed call."),
    ("node/unprepare-cleanup", "Unprepare removes the claim's transient CDI devices", ("core",),
     "optional", "After unprepare, no CDI device whose name contains the claim UID is left."),
    ("node/dra-v1beta1", "The v1beta1 service prepares like v1", ("core",), "optional",
     "When both are advertised, v1beta1 returns the same devices and CDI ids as v1."),
    ("node/device-metadata", "Device metadata files parse and name the allocated devices",
     ("device-metadata",), "required",
     "Metadata CDI ids (<driver>/metadata=<claimUID>_<request>) mount, read-only at the documented "
     "container path, a JSON stream with a v1beta1 DeviceMetadata object naming the claim and "
     "exactly the request's allocated devices."),
    ("node/health-stream", "The health stream sends a complete device list", ("device-status",),
     "optional", "Each advertised health service sends a first message promptly; entries name a "
     "pool and device, use a known health value and keep messages within 1024 characters."),
)


class CheckFailed(Exception):
    def __init__(self, summary: str, detail: str = "", expected: Any = None, actual: Any = None) -> None:
        super().__init__(summary)
        self.summary, self.detail, self.expected, self.actual = summary, detail, expected, actual


class CheckSkipped(Exception):
    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category, self.message = category, message


@dataclass
class Options:
    registry_dir: Path
    driver: str
    claims: list[dict[str, Any]] = field(default_factory=list)
    claims_file: str = ""
    cdi_dirs: tuple[Path, ...] = (Path("/etc/cdi"), Path("/var/run/cdi"))
    timeout: float = 10.0
    health_timeout: float = 5.0
    rerun: str = ""


@dataclass(frozen=True)
class Answer:
    """One claim's entry of a prepare answer, version-neutral."""

    present: bool
    error: str
    devices: tuple[tuple[tuple[str, ...], str, str, tuple[str, ...], str | None], ...] = ()

    def ids(self) -> list[str]:
        return [i for d in self.devices for i in d[3]]

    def comparable(self, share: bool = True) -> list[Any]:
        return sorted((tuple(sorted(r)), p, n, tuple(sorted(c)), s if share else None)
                      for r, p, n, c, s in self.devices)


@dataclass
class Observation:
    """What happened to one claim during its lifecycle."""

    claim: dict[str, Any]
    first: Answer | None = None
    second: Answer | None = None
    rpc_error: str | None = None
    cdi: list[str] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)
    metadata_ids: int = 0
    leftovers: list[str] = field(default_factory=list)
    unprepare_error: str | None = None


def _claim_meta(claim: dict[str, Any]) -> tuple[str, str, str]:
    meta = claim["metadata"]
    return meta.get("namespace", ""), meta["name"], meta.get("uid", "")


def expects_error(claim: dict[str, Any]) -> bool:
    return (claim["metadata"].get("annotations") or {}).get(EXPECT_ANNOTATION) == "error"


def driver_results(claim: dict[str, Any], driver: str) -> list[dict[str, Any]]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [r for r in (alloc.get("devices") or {}).get("results") or [] if r.get("driver") == driver]


class NodeCheck:
    def __init__(self, options: Options) -> None:
        options.registry_dir = options.registry_dir.absolute()
        options.cdi_dirs = tuple(d.absolute() for d in options.cdi_dirs)
        self.o = options
        self.info: PluginInfo | None = None
        self.registration_socket: str | None = None
        self.service: str | None = None
        self.dra_services: list[str] = []
        self.channel: grpc.Channel | None = None
        self.observations: dict[str, Observation] = {}
        self.setup_error: str | None = None

    # -- plumbing -------------------------------------------------------------------------------

    def _find_socket(self) -> str:
        conventional = self.o.registry_dir / f"{self.o.driver}-reg.sock"
        if conventional.is_socket():
            return str(conventional)
        for path in sorted(self.o.registry_dir.glob("*.sock")):  # rolling-update names
            if path.name.startswith(".") or not path.is_socket():
                continue
            try:
                if self._get_info(str(path)).name == self.o.driver:
                    return str(path)
            except grpc.RpcError:
                continue
        raise CheckFailed(f"no registration socket for driver {self.o.driver} in {self.o.registry_dir}",
                          f"expected {conventional} (or a rolling-update socket whose GetInfo names "
                          "the driver)")

    def _get_info(self, socket: str) -> PluginInfo:
        with grpc.insecure_channel(f"unix://{socket}") as ch:
            reply = pluginregistration_v1_pb2_grpc.RegistrationStub(ch).GetInfo(
                pluginregistration_v1_pb2.InfoRequest(), timeout=1.0, wait_for_ready=True)
        return PluginInfo(reply.type, reply.name, reply.endpoint, tuple(reply.supported_versions))

    def _stub(self, service: str | None = None) -> tuple[Any, Any]:
        service = service or self.service
        assert service is not None and self.channel is not None
        pb2, stub = _DRA[service]
        return pb2, stub(self.channel)

    def _claims_msg(self, pb2: Any, claims: Sequence[dict[str, Any]]) -> list[Any]:
        out = []
        for claim in claims:
            ns, name, uid = _claim_meta(claim)
            out.append(pb2.Claim(namespace=ns, name=name, uid=uid))
        return out

    def prepare(self, claims: Sequence[dict[str, Any]], service: str | None = None
                ) -> tuple[dict[str, Answer], list[str]]:
        """(uid -> answer for every requested claim, unknown UIDs in the reply)."""
        pb2, stub = self._stub(service)
        reply = stub.NodePrepareResources(
            pb2.NodePrepareResourcesRequest(claims=self._claims_msg(pb2, claims)), timeout=self.o.timeout)
        asked = [_claim_meta(c)[2] for c in claims]
        out = {}
        for uid in asked:
            if uid not in reply.claims:
                out[uid] = Answer(False, "")
                continue
            entry = reply.claims[uid]
            devices = tuple(
                (tuple(d.request_names), d.pool_name, d.device_name, tuple(d.cdi_device_ids),
                 d.share_id if "share_id" in d.DESCRIPTOR.fields_by_name and d.HasField("share_id")
                 else None)
                for d in entry.devices)
            out[uid] = Answer(True, entry.error, devices)
        return out, sorted(set(reply.claims) - set(asked))

    def unprepare(self, claims: Sequence[dict[str, Any]], service: str | None = None
                  ) -> tuple[dict[str, str | None], list[str]]:
        """(uid -> error text, or None when the entry is missing; unknown UIDs)."""
        pb2, stub = self._stub(service)
        reply = stub.NodeUnprepareResources(
            pb2.NodeUnprepareResourcesRequest(claims=self._claims_msg(pb2, claims)), timeout=self.o.timeout)
        asked = [_claim_meta(c)[2] for c in claims]
        out = {uid: (reply.claims[uid].error if uid in reply.claims else None) for uid in asked}
        return out, sorted(set(reply.claims) - set(asked))

    def valid_claims(self) -> list[dict[str, Any]]:
        return [c for c in self.o.claims if not expects_error(c)]

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
                run = CaseRun(case_id, title, features, profile, description, self.o)
                if case_id != "node/registration" and self.channel is None:
                    run.skip("backend", "the plugin did not register (see node/registration)")
                else:
                    run.execute(checks[case_id])
                cases.append(run.to_json())
        finally:
            if self.channel is not None:
                self.channel.close()
        return cases

    # -- checks ---------------------------------------------------------------------------------

    def check_registration(self, run: CaseRun) -> None:
        try:
            with run.step("find registration socket"):
                socket = self._find_socket()
            with run.step("GetInfo", "grpc"):
                try:
                    info = self._get_info(socket)
                except grpc.RpcError as err:
                    raise CheckFailed(f"GetInfo failed: {err.code().name}: {err.details()}")
            with run.step("validate plugin info"):
                try:
                    reg = validate_info(info, socket)
                except RegistrationError as err:
                    raise CheckFailed(f"the kubelet would reject the plugin: {err}",
                                      actual={"type": info.type, "name": info.name,
                                              "endpoint": info.endpoint,
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
                with grpc.insecure_channel(f"unix://{socket}") as ch:
                    try:
                        pluginregistration_v1_pb2_grpc.RegistrationStub(ch).NotifyRegistrationStatus(
                            pluginregistration_v1_pb2.RegistrationStatus(plugin_registered=True),
                            timeout=5.0)
                    except grpc.RpcError as err:
                        raise CheckFailed(f"NotifyRegistrationStatus(registered) failed: "
                                          f"{err.code().name}: {err.details()}")
        except CheckFailed as err:
            self.setup_error = err.summary
            raise
        self.info, self.registration_socket = info, socket
        self.dra_services = dra
        self.service = reg.service
        self.channel = grpc.insecure_channel(f"unix://{reg.endpoint}")

    def check_unprepare_unknown(self, run: CaseRun) -> None:
        for service in self.dra_services:
            with run.step(f"unprepare unknown claim ({service})", "grpc"):
                claim = _fake_claim()
                try:
                    answers, unknown = self.unprepare([claim], service)
                except grpc.RpcError as err:
                    raise CheckFailed(f"{service}: NodeUnprepareResources failed as a call: "
                                      f"{err.code().name}: {err.details()}")
                got = answers[claim["metadata"]["uid"]]
                if got is None:
                    raise CheckFailed(f"{service}: the answer has no entry for the claim")
                if got:
                    raise CheckFailed(f"{service}: unprepare of an unknown claim failed: {got}")
                if unknown:
                    raise CheckFailed(f"{service}: the answer names claims not asked for: {unknown}")

    def check_prepare_missing(self, run: CaseRun) -> None:
        claim = _fake_claim()
        with run.step("prepare a claim that does not exist", "grpc"):
            answers, unknown = self._prepare_or_fail([claim])
        answer = answers[claim["metadata"]["uid"]]
        if not answer.present:
            raise CheckFailed("the answer has no entry for the claim (the kubelet would retry forever)")
        if not answer.error:
            raise CheckFailed("prepare of a claim that does not exist reported success",
                              actual=answer.comparable())
        if unknown:
            raise CheckFailed(f"the answer names claims not asked for: {unknown}")
        self.unprepare([claim])

    def check_batch(self, run: CaseRun) -> None:
        good = self._first_valid()
        bad = _fake_claim()
        with run.step("prepare a good and a missing claim in one call", "grpc"):
            answers, unknown = self._prepare_or_fail([good, bad])
        g, b = answers[_claim_meta(good)[2]], answers[bad["metadata"]["uid"]]
        with run.step("unprepare both in one call", "grpc"):
            released, _ = self.unprepare([good, bad])
        problems = []
        if not g.present or g.error:
            problems.append(f"the good claim {good['metadata']['name']} failed: {g.error or 'no entry'}")
        if not b.present or not b.error:
            problems.append("the missing claim " + ("has no entry" if not b.present else "reported success"))
        if unknown:
            problems.append(f"the answer names claims not asked for: {unknown}")
        for uid, error in released.items():
            if error is None or error:
                problems.append(f"unprepare of {uid}: {'no entry' if error is None else error}")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def _first_valid(self) -> dict[str, Any]:
        claims = [c for c in self.valid_claims() if driver_results(c, self.o.driver)]
        if not claims:
            raise CheckSkipped("inventory", "no claims with devices of this driver "
                                            "(pass --claims with allocated ResourceClaims)")
        return claims[0]

    def _prepare_or_fail(self, claims: Sequence[dict[str, Any]], service: str | None = None
                         ) -> tuple[dict[str, Answer], list[str]]:
        try:
            return self.prepare(claims, service)
        except grpc.RpcError as err:
            raise CheckFailed(f"NodePrepareResources failed as a call: {err.code().name}: "
                              f"{err.details()}")

    def _lifecycle(self) -> dict[str, Observation]:
        """Prepare / inspect / prepare again / unprepare / inspect, one valid claim at a time."""
        if self.observations:
            return self.observations
        for claim in self.valid_claims():
            obs = Observation(claim)
            self.observations[claim["metadata"]["name"]] = obs
            uid = _claim_meta(claim)[2]
            try:
                answers, _ = self.prepare([claim])
                obs.first = answers[uid]
                if obs.first.present and not obs.first.error:
                    obs.cdi, obs.metadata, obs.metadata_ids = self._inspect(claim, obs.first)
                answers, _ = self.prepare([claim])
                obs.second = answers[uid]
            except grpc.RpcError as err:
                obs.rpc_error = f"{err.code().name}: {err.details()}"
            try:
                released, _ = self.unprepare([claim])
                if released[uid] is None or released[uid]:
                    obs.unprepare_error = released[uid] or "no entry in the answer"
            except grpc.RpcError as err:
                obs.unprepare_error = f"{err.code().name}: {err.details()}"
            if obs.first is not None and obs.first.present and not obs.first.error:
                index = cdicheck.SpecIndex.load(self.o.cdi_dirs)
                obs.leftovers = sorted(q for q in index.devices if uid in q.partition("=")[2])
        return self.observations

    def _inspect(self, claim: dict[str, Any], answer: Answer) -> tuple[list[str], list[str], int]:
        index = cdicheck.SpecIndex.load(self.o.cdi_dirs)
        cdi_problems, md_problems, md_count = [], [], 0
        uid = _claim_meta(claim)[2]
        for cdi_id in answer.ids():
            try:
                vendor, klass, name = cdicheck.parse_device_id(cdi_id)
            except cdicheck.CdiError as err:
                cdi_problems.append(str(err))
                continue
            found = index.devices.get(cdi_id)
            if found is None:
                related = {p: v for p, v in index.problems.items() if uid in p or self.o.driver in p}
                hint = f"; problems in related spec files: {related}" if related else ""
                cdi_problems.append(f"{cdi_id} is not defined in any valid spec in "
                                    f"{', '.join(map(str, self.o.cdi_dirs))}{hint}")
                continue
            if f"{vendor}/{klass}" == f"{self.o.driver}/metadata":
                md_count += 1
                md_problems += [f"{cdi_id}: {p}" for p in self._check_metadata(claim, name, found)]
        return cdi_problems, md_problems, md_count

    def _check_metadata(self, claim: dict[str, Any], name: str, found: cdicheck.SpecDevice) -> list[str]:
        ns, claim_name, uid = _claim_meta(claim)
        if not name.startswith(f"{uid}_"):
            return [f"metadata device name {name!r} is not <claimUID>_<request>"]
        request = name[len(uid) + 1:]
        mounts = (found.device.get("containerEdits") or {}).get("mounts") or []
        if len(mounts) != 1:
            return [f"expected one mount, got {len(mounts)}"]
        mount = mounts[0]
        problems = []
        parsed = mdcheck.parse_container_path(mount.get("containerPath", ""))
        pod_claim = (claim["metadata"].get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name")
        if parsed is None or parsed["request"] != request or parsed["driver"] != self.o.driver \
                or parsed["claim"] != (pod_claim or claim_name):
            problems.append(f"containerPath {mount.get('containerPath')!r} is not the documented "
                            f"{mdcheck.CONTAINER_ROOT}/.../{pod_claim or claim_name}/{request}/"
                            f"{self.o.driver}-metadata.json")
        if "ro" not in (mount.get("options") or []):
            problems.append("the metadata mount is not read-only")
        try:
            text = Path(mount["hostPath"]).read_text(encoding="utf-8")
        except (OSError, KeyError) as err:
            return problems + [f"cannot read hostPath {mount.get('hostPath')!r}: {err}"]
        expected = [(r["pool"], r["device"]) for r in driver_results(claim, self.o.driver)
                    if r.get("request", "").partition("/")[0] == request]
        return problems + mdcheck.check_stream(text, claim=claim, driver=self.o.driver,
                                               request=request, expected=expected)

    def _check_answer(self, claim: dict[str, Any], answer: Answer | None) -> list[str]:
        name = claim["metadata"]["name"]
        if answer is None:
            return [f"{name}: no answer"]
        if not answer.present:
            return [f"{name}: the answer has no entry for the claim"]
        if answer.error:
            return [f"{name}: prepare failed: {answer.error}"]
        problems = []
        results = driver_results(claim, self.o.driver)
        want = sorted((r["pool"], r["device"]) for r in results)
        got = sorted((p, n) for _, p, n, _, _ in answer.devices)
        if Counter(want) != Counter(got):
            problems.append(f"{name}: devices {got}, expected exactly the allocated {want}")
        requests: dict[tuple[str, str], set[str]] = {}
        for r in results:
            requests.setdefault((r["pool"], r["device"]), set()).add(r.get("request", "").partition("/")[0])
        for request_names, pool, device, ids, _share in answer.devices:
            extra = set(request_names) - requests.get((pool, device), set())
            if extra:
                problems.append(f"{name}: device {pool}/{device} serves requests {sorted(extra)} "
                                "it was not allocated for (or names a subrequest)")
            for cdi_id in ids:
                try:
                    cdicheck.parse_device_id(cdi_id)
                except cdicheck.CdiError as err:
                    problems.append(f"{name}: {err}")
        shares = {(r["pool"], r["device"], r["shareID"]) for r in results if r.get("shareID")}
        if self.service == "v1.DRAPlugin" and shares:
            got_shares = {(p, n, s) for _, p, n, _, s in answer.devices if s}
            if not shares <= got_shares:
                problems.append(f"{name}: share IDs {sorted(got_shares)}, expected {sorted(shares)}")
        return problems

    def check_devices(self, run: CaseRun) -> None:
        observations = self._lifecycle()
        if not observations:
            raise CheckSkipped("inventory", "no claims to prepare (pass --claims)")
        problems = []
        for name, obs in observations.items():
            mine = []
            if obs.rpc_error:
                mine.append(f"{name}: NodePrepareResources failed as a call: {obs.rpc_error}")
            else:
                mine += self._check_answer(obs.claim, obs.first)
            if obs.unprepare_error:
                mine.append(f"{name}: unprepare failed: {obs.unprepare_error}")
            run.record(f"prepare and unprepare {name}", "grpc", "failed" if mine else "passed")
            problems += mine
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_cdi(self, run: CaseRun) -> None:
        observations = self._prepared_observations()
        if not any(o.first and o.first.ids() for o in observations):
            raise CheckSkipped("not-applicable", "no claim was prepared with CDI ids")
        if not any(d.is_dir() for d in self.o.cdi_dirs):
            raise CheckSkipped("backend", f"no CDI folder readable here: {', '.join(map(str, self.o.cdi_dirs))}")
        problems = [f"{o.claim['metadata']['name']}: {p}" for o in observations for p in o.cdi]
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def _prepared_observations(self) -> list[Observation]:
        return [o for o in self._lifecycle().values()
                if o.first is not None and o.first.present and not o.first.error]

    def check_idempotent(self, run: CaseRun) -> None:
        observations = self._prepared_observations()
        if not observations:
            raise CheckSkipped("inventory", "no claim could be prepared")
        problems = []
        for obs in observations:
            name = obs.claim["metadata"]["name"]
            assert obs.first is not None
            if obs.second is None or not obs.second.present or obs.second.error:
                problems.append(f"{name}: second prepare failed: "
                                f"{obs.second.error if obs.second else obs.rpc_error}")
            elif obs.second.comparable() != obs.first.comparable():
                problems.append(f"{name}: second answer {obs.second.comparable()} differs from the "
                                f"first {obs.first.comparable()}")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_concurrent(self, run: CaseRun) -> None:
        chosen: list[dict[str, Any]] = []
        used: set[tuple[str, str]] = set()
        for claim in self.valid_claims():
            devices = {(r["pool"], r["device"]) for r in driver_results(claim, self.o.driver)}
            if devices and not devices & used:
                chosen.append(claim)
                used |= devices
        if len(chosen) < 2:
            raise CheckSkipped("inventory", "fewer than two claims with disjoint devices")
        answers: dict[str, Any] = {}

        def call(claim: dict[str, Any], op: Callable[..., Any]) -> None:
            try:
                answers[claim["metadata"]["name"]] = op([claim])
            except grpc.RpcError as err:
                answers[claim["metadata"]["name"]] = err

        def parallel(op: Callable[..., Any]) -> None:
            threads = [threading.Thread(target=call, args=(c, op)) for c in chosen]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        with run.step(f"prepare {len(chosen)} claims in parallel", "grpc"):
            parallel(self.prepare)
        prepared = dict(answers)
        with run.step(f"unprepare {len(chosen)} claims in parallel", "grpc"):
            answers.clear()
            parallel(self.unprepare)
        problems = []
        for claim in chosen:
            name, uid = claim["metadata"]["name"], _claim_meta(claim)[2]
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
            raise CheckSkipped("inventory", f"no claim annotated {EXPECT_ANNOTATION}=error in --claims")
        problems = []
        for claim in bad:
            name, uid = claim["metadata"]["name"], _claim_meta(claim)[2]
            with run.step(f"prepare {name}", "grpc"):
                try:
                    answers, _ = self.prepare([claim])
                except grpc.RpcError as err:
                    problems.append(f"{name}: the whole call failed ({err.code().name}: "
                                    f"{err.details()}) instead of a per-claim error")
                    continue
                finally:
                    try:
                        self.unprepare([claim])
                    except grpc.RpcError:
                        pass
            answer = answers[uid]
            if not answer.present:
                problems.append(f"{name}: the answer has no entry for the claim")
            elif not answer.error:
                problems.append(f"{name}: prepare succeeded but should have failed "
                                f"(devices {answer.comparable()})")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_cleanup(self, run: CaseRun) -> None:
        observations = self._prepared_observations()
        if not observations:
            raise CheckSkipped("inventory", "no claim could be prepared")
        problems = [f"{o.claim['metadata']['name']}: CDI devices left after unprepare: {o.leftovers}"
                    for o in observations if o.leftovers]
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_v1beta1(self, run: CaseRun) -> None:
        if not {"v1.DRAPlugin", "v1beta1.DRAPlugin"} <= set(self.dra_services):
            raise CheckSkipped("not-applicable", "the plugin does not advertise both v1 and v1beta1")
        claim = self._first_valid()
        uid = _claim_meta(claim)[2]
        try:
            with run.step("prepare over v1", "grpc"):
                v1, _ = self._prepare_or_fail([claim], "v1.DRAPlugin")
                self.unprepare([claim], "v1.DRAPlugin")
            with run.step("prepare over v1beta1", "grpc"):
                beta, _ = self._prepare_or_fail([claim], "v1beta1.DRAPlugin")
        finally:
            self.unprepare([claim], "v1beta1.DRAPlugin")
        if beta[uid].error or not beta[uid].present:
            raise CheckFailed(f"v1beta1 prepare failed: {beta[uid].error or 'no entry'}")
        if beta[uid].comparable(share=False) != v1[uid].comparable(share=False):
            raise CheckFailed("v1beta1 and v1 answers differ", expected=v1[uid].comparable(False),
                              actual=beta[uid].comparable(False))

    def check_metadata(self, run: CaseRun) -> None:
        observations = self._prepared_observations()
        if not any(o.metadata_ids for o in observations):
            raise CheckSkipped("not-applicable", "the driver returned no metadata CDI ids "
                                                 f"({self.o.driver}/metadata=...): device metadata off")
        problems = [f"{o.claim['metadata']['name']}: {p}" for o in observations for p in o.metadata]
        for obs in observations:
            assert obs.first is not None
            want = {r.get("request", "").partition("/")[0] for r in driver_results(obs.claim, self.o.driver)}
            if obs.metadata_ids != len(want):
                problems.append(f"{obs.claim['metadata']['name']}: {obs.metadata_ids} metadata CDI ids "
                                f"for {len(want)} requests with devices")
        if problems:
            raise CheckFailed(problems[0], "\n".join(problems))

    def check_health(self, run: CaseRun) -> None:
        assert self.info is not None and self.channel is not None
        services = [v for v in KUBELET_HEALTH_SERVICES if v in self.info.supported_versions]
        if not services:
            raise CheckSkipped("not-applicable", "the plugin does not advertise a health service")
        problems = []
        for service in services:
            pb2, stub = _HEALTH[service]
            with run.step(f"first message of {service}", "grpc"):
                stream = stub(self.channel).NodeWatchResources(pb2.NodeWatchResourcesRequest(),
                                                               timeout=self.o.health_timeout)
                try:
                    first = next(iter(stream))
                except grpc.RpcError as err:
                    problems.append(f"{service}: no message within {self.o.health_timeout} s: "
                                    f"{err.code().name}")
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


def _fake_claim() -> dict[str, Any]:
    uid = str(uuid.uuid4())
    return {"metadata": {"namespace": "drakit-node-check", "name": f"missing-{uid[:8]}", "uid": uid}}


class CaseRun:
    """Collects one case's steps and outcome; ``to_json`` gives a results.json case."""

    def __init__(self, case_id: str, title: str, features: tuple[str, ...], profile: str,
                 description: str, options: Options) -> None:
        self.id, self.title, self.features, self.profile = case_id, title, features, profile
        self.description = description
        self.options = options
        self.status = "passed"
        self.steps: list[dict[str, Any]] = []
        self.failure: dict[str, Any] | None = None
        self.skip_info: dict[str, str] | None = None
        self.notes: list[str] = []
        self.duration = 0.0

    @contextmanager
    def step(self, name: str, kind: str = "check") -> Iterator[None]:
        t0 = time.monotonic()
        entry = {"name": name, "kind": kind, "line": None, "status": "passed", "durationSeconds": 0.0}
        self.steps.append(entry)
        try:
            yield
        except CheckSkipped:
            entry["status"] = "skipped"
            raise
        except BaseException:
            entry["status"] = "failed"
            raise
        finally:
            entry["durationSeconds"] = round(time.monotonic() - t0, 6)

    def record(self, name: str, kind: str, status: str) -> None:
        """A step whose work happened elsewhere (e.g. in the shared claim lifecycle)."""
        self.steps.append({"name": name, "kind": kind, "line": None, "status": status,
                           "durationSeconds": 0.0})

    def note(self, text: str) -> None:
        self.notes.append(text)

    def skip(self, category: str, message: str) -> None:
        self.status = "skipped"
        self.skip_info = {"category": category, "message": message}

    def execute(self, check: Callable[[CaseRun], None]) -> None:
        t0 = time.monotonic()
        try:
            check(self)
        except CheckSkipped as err:
            self.skip(err.category, err.message)
        except CheckFailed as err:
            self.status = "failed"
            self.failure = {"summary": err.summary, "detail": err.detail or err.summary}
            if err.expected is not None:
                self.failure["expected"] = err.expected
            if err.actual is not None:
                self.failure["actual"] = err.actual
        except Exception as err:  # the checker broke, or the plugin misbehaved unexpectedly
            self.status = "error"
            self.failure = {"summary": f"{type(err).__name__}: {err}",
                            "detail": traceback.format_exc()}
        for entry in self.steps:
            if entry["status"] == "passed" and self.status == "skipped":
                entry["status"] = "skipped"
        self.duration = time.monotonic() - t0

    def to_json(self) -> dict[str, Any]:
        description = self.description + ("" if not self.notes else " Note: " + " ".join(self.notes))
        return {
            "id": self.id, "backend": BACKEND,
            "nodeid": f"node-check::{self.id}[{self.options.driver}]",
            "title": self.title, "description": description, "features": list(self.features),
            "profile": self.profile, "file": self.options.claims_file, "line": None,
            "status": self.status, "skip": self.skip_info,
            "durationSeconds": round(self.duration, 6), "steps": self.steps,
            "failure": self.failure, "rerun": self.options.rerun or None,
        }


def render_text(cases: Sequence[dict[str, Any]], driver: str) -> str:
    marks = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}
    lines = [f"drakit node-check: driver {driver}"]
    for case in cases:
        line = f"  {marks.get(case['status'], case['status'].upper()):5} {case['id']:32} {case['title']}"
        lines.append(line)
        if case["status"] in ("failed", "error") and case["failure"]:
            for detail in case["failure"]["detail"].splitlines()[:8]:
                lines.append(f"          {detail}")
        elif case["status"] == "skipped" and case["skip"]:
            lines.append(f"          [{case['skip']['category']}] {case['skip']['message']}")
    counts = Counter(c["status"] for c in cases)
    lines.append(f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
                 f"{counts.get('error', 0)} errors, {counts.get('skipped', 0)} skipped")
    return "\n".join(lines) + "\n"
