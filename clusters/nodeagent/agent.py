"""``NodeAgent``: the kubelet's DRA role for one node, as a library.

Its ``PluginRegistry`` (``registry.py``) watches the plugin registry folder and registers DRA
plugins like the kubelet's plugin manager; the agent prepares and unprepares the claims of pods
on its node through those plugins' real gRPC sockets:

- ``prepare(pod_uid, claims)``: checks every claim first (allocated, reserved for the pod, the
  drivers registered), records the pod's references (checkpoint), calls NodePrepareResources
  once per driver with that pod's claims (45 s deadline), checks the answer the way the kubelet
  does (every claim answered, no unknown UIDs, no per-claim error), records the devices and
  marks the claims prepared (checkpoint). Claims already prepared for another pod are not sent
  again. Drivers whose devices all skip NodePrepareResources (``skipNodeOperations``) are not
  contacted when ``optional_node_operations`` is on; with it off such a claim fails, as on a
  kubelet with the gate off.
- ``unprepare(pod_uid)``: drops the pod's references; a claim no other pod uses is
  unprepared through its drivers (NodeUnprepareResources) and forgotten. A failure keeps the
  references, so a later call retries.

Transient gRPC failures (UNAVAILABLE, DEADLINE_EXCEEDED, ...) are retried with backoff within
one call; per-claim errors are returned at once unless ``RetryPolicy.retry_claim_errors``.
The result types and pure helpers live in ``results.py`` and are re-exported here.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import grpc

from .checkpoint import AgentCheckpoint, ClaimInfo
from .client import CALL_TIMEOUT, ClaimKey, PluginClient, PrepareAnswer
from .registry import PluginRegistry
from .results import (ALL_OPS, PREPARE, UNPREPARE, ClaimResult, DeviceHealth, DriverInfo,
                      PodResult, RetryPolicy, container_cdi_devices, skipped_operations)

__all__ = ["ALL_OPS", "PREPARE", "UNPREPARE", "ClaimResult", "DeviceHealth", "DriverInfo",
           "NodeAgent", "PodResult", "PrepareFailed", "RetryPolicy", "container_cdi_devices",
           "skipped_operations"]

TRANSIENT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED}


class PrepareFailed(Exception):
    pass


class NodeAgent:
    """The kubelet's DRA part for node ``node_name``, driven by plugins in ``registry_dir``."""

    def __init__(self, registry_dir: str | Path, node_name: str, *,
                 state_dir: str | Path | None = None, poll_interval: float = 0.1,
                 optional_node_operations: bool = False, check_reserved: bool = True,
                 driver_wait: float = 5.0, retry: RetryPolicy | None = None,
                 call_timeout: float = CALL_TIMEOUT, registration_retry: float = 0.5,
                 health_retry: float = 5.0,
                 on_health: Callable[[str, list[DeviceHealth]], None] | None = None,
                 on_driver_gone: Callable[[str], None] | None = None,
                 wipe_delay: float = 30.0, durable: bool = True) -> None:
        self.registry_dir = Path(registry_dir).absolute()
        self.node_name = node_name
        self.optional_node_operations = optional_node_operations
        self.check_reserved = check_reserved
        self.driver_wait = driver_wait
        self.retry = retry if retry is not None else RetryPolicy()
        self.call_timeout = call_timeout
        self.plugins = PluginRegistry(self.registry_dir, node_name, poll_interval=poll_interval,
                                      registration_retry=registration_retry,
                                      health_retry=health_retry, on_health=on_health,
                                      on_driver_gone=on_driver_gone, wipe_delay=wipe_delay)
        self._checkpoint = AgentCheckpoint(Path(state_dir), durable=durable) if state_dir is not None else None
        self._lock = threading.RLock()
        self._claims: dict[str, ClaimInfo] = self._checkpoint.load() if self._checkpoint else {}

    # -- lifecycle and plugins ------------------------------------------------------------------

    def start(self) -> None:
        self.plugins.start()

    def stop(self) -> None:
        self.plugins.stop()

    def __enter__(self) -> NodeAgent:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def scan(self) -> None:
        """One pass of the plugin watcher: register new sockets, drop removed ones."""
        self.plugins.scan()

    def drivers(self) -> dict[str, DriverInfo]:
        """Registered drivers by name (the preferred instance of each)."""
        return self.plugins.drivers()

    def registration_failures(self) -> dict[str, str]:
        """Registry sockets whose last registration attempt failed, with the reason."""
        return self.plugins.registration_failures()

    def wait_for_driver(self, name: str, timeout: float = 5.0) -> bool:
        return self.plugins.wait_for_driver(name, timeout)

    def health(self, driver: str) -> list[DeviceHealth]:
        """Last reported health of the driver's devices; stale entries read as Unknown."""
        return self.plugins.health(driver)

    # -- prepare --------------------------------------------------------------------------------

    def claim_infos(self) -> dict[str, ClaimInfo]:
        with self._lock:
            return dict(self._claims)

    def _save(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.save(self._claims)

    def _client(self, driver: str, wait: float) -> PluginClient:
        if wait > 0:
            self.plugins.wait_for_driver(driver, wait)
        client = self.plugins.client(driver)
        if client is None:
            raise PrepareFailed(f"DRA driver {driver} is not registered")
        return client

    def _parse(self, pod_uid: str, claim: Mapping[str, Any]
               ) -> tuple[ClaimKey, dict[str, list[Mapping[str, Any]]]]:
        meta = claim.get("metadata") or {}
        key = ClaimKey(meta.get("namespace", ""), meta.get("uid", ""), meta.get("name", ""))
        if not key.uid or not key.name:
            raise PrepareFailed("a ResourceClaim without metadata.name or metadata.uid")
        status = claim.get("status") or {}
        allocation = status.get("allocation")
        if not allocation:
            raise PrepareFailed(f"ResourceClaim {key.namespace}/{key.name} is not allocated")
        if self.check_reserved and not any(r.get("uid") == pod_uid
                                           for r in status.get("reservedFor") or []):
            raise PrepareFailed(f"pod {pod_uid} is not allowed to use ResourceClaim "
                                f"{key.namespace}/{key.name}")
        by_driver: dict[str, list[Mapping[str, Any]]] = {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            by_driver.setdefault(result.get("driver", ""), []).append(result)
        return key, by_driver

    def _retrying(self, call: Callable[[], Any]) -> Any:
        delays = iter(self.retry.delays())
        while True:
            try:
                return call()
            except grpc.RpcError as err:
                if err.code() not in TRANSIENT:
                    raise
                delay = next(delays, None)
                if delay is None:
                    raise
                time.sleep(delay)

    def prepare(self, pod_uid: str, claims: Sequence[Mapping[str, Any]]) -> PodResult:
        """Prepare the claims (wire-form ResourceClaims) of pod ``pod_uid`` on this node."""
        parsed: list[tuple[ClaimKey, dict[str, list[Mapping[str, Any]]], dict[str, set[str]]]] = []
        try:
            for claim in claims:
                key, by_driver = self._parse(pod_uid, claim)
                skips = {d: skipped_operations(rs) for d, rs in by_driver.items()}
                if any(skips.values()) and not self.optional_node_operations:
                    raise PrepareFailed(f"ResourceClaim {key.namespace}/{key.name}: "
                                        "DRAOptionalNodeOperations feature gate is disabled on kubelet")
                parsed.append((key, by_driver, skips))
            needed = list(dict.fromkeys(d for _, by_driver, skips in parsed for d in by_driver
                                        if PREPARE not in skips[d]))
            for driver in needed:
                self._client(driver, self.driver_wait)
        except PrepareFailed as err:
            return PodResult(pod_uid, tuple(ClaimResult(k.namespace, k.name, k.uid)
                                            for k, _, _ in parsed), str(err))
        with self._lock:
            for key, _by_driver, skips in parsed:
                info = self._claims.get(key.uid)
                if info is None:
                    clash = next((i for i in self._claims.values()
                                  if (i.namespace, i.name) == (key.namespace, key.name)), None)
                    if clash is not None:
                        return PodResult(pod_uid, (), f"old ResourceClaim with same name {key.name} "
                                                      f"and different UID {clash.uid} still exists")
                    info = ClaimInfo(key.uid, key.namespace, key.name)
                    self._claims[key.uid] = info
                info.pod_uids.add(pod_uid)
                info.skip_prepare = {d for d, s in skips.items() if PREPARE in s}
                info.skip_unprepare = {d for d, s in skips.items() if UNPREPARE in s}
            self._save()
            pending = [(k, bd) for k, bd, _ in parsed if not self._claims[k.uid].prepared]
        claim_errors: dict[str, str] = {}
        error = self._prepare_pending(pending, claim_errors)
        with self._lock:
            if error is None:
                for key, _ in pending:
                    self._claims[key.uid].prepared = True
            else:  # none of them is prepared: each says why (its own error, else the call's)
                for key, _ in pending:
                    claim_errors.setdefault(key.uid, error)
            self._save()
            return PodResult(pod_uid, tuple(self._claim_result(k, claim_errors.get(k.uid))
                                            for k, _, _ in parsed), error)

    def _claim_result(self, key: ClaimKey, error: str | None) -> ClaimResult:
        info = self._claims[key.uid]
        devices = tuple(d for driver in info.drivers for d in info.drivers[driver])
        return ClaimResult(key.namespace, key.name, key.uid, devices, error,
                           tuple(sorted(info.skip_prepare)))

    def _prepare_pending(self, pending: list[tuple[ClaimKey, dict[str, list[Mapping[str, Any]]]]],
                         claim_errors: dict[str, str]) -> str | None:
        batches: dict[str, list[ClaimKey]] = {}
        for key, by_driver in pending:
            info = self._claims[key.uid]
            for driver in by_driver:
                if driver not in info.skip_prepare:
                    batches.setdefault(driver, []).append(key)
        for driver, batch in batches.items():
            delays = iter(self.retry.delays())
            while True:
                claim_errors.clear()
                error, retry = self._prepare_batch(driver, batch, claim_errors)
                if error is None:
                    break
                delay = next(delays, None) if (retry or self.retry.retry_claim_errors) else None
                if delay is None:
                    return error
                time.sleep(delay)
        return None

    def _prepare_batch(self, driver: str, batch: list[ClaimKey],
                       claim_errors: dict[str, str]) -> tuple[str | None, bool]:
        """(error, worth retrying) for one NodePrepareResources call."""
        try:
            client = self._client(driver, 0)
            answer: PrepareAnswer = self._retrying(lambda: client.prepare(batch, self.call_timeout))
        except PrepareFailed as err:
            return str(err), True
        except grpc.RpcError as err:
            return f"NodePrepareResources: rpc error: code = {err.code().name} desc = {err.details()}", \
                err.code() in TRANSIENT
        with self._lock:
            for uid, devices in answer.devices.items():
                self._claims[uid].drivers[driver] = devices
        if answer.unknown:
            return (f"NodePrepareResources returned result for unknown claim UID "
                    f"{', '.join(answer.unknown)}", False)
        names = {k.uid: k.name for k in batch}
        claim_errors.update(answer.errors)
        for uid, text in answer.errors.items():
            return f"NodePrepareResources failed for ResourceClaim {names[uid]}: {text}", False
        missing = [k for k in batch if k.uid not in answer.devices]
        if missing:
            return f"NodePrepareResources skipped {len(missing)} ResourceClaims", True
        return None, False

    # -- unprepare ------------------------------------------------------------------------------

    def unprepare(self, pod_uid: str, claims: Sequence[Mapping[str, Any]] | None = None
                  ) -> PodResult:
        """Release pod ``pod_uid``'s claims. ``claims`` is only needed for claims the agent
        does not remember (e.g. after losing its checkpoint)."""
        with self._lock:
            infos: list[ClaimInfo] = [i for i in self._claims.values() if pod_uid in i.pod_uids]
            for claim in claims or ():
                meta = claim.get("metadata") or {}
                if meta.get("uid") in self._claims or not meta.get("uid"):
                    continue
                info = ClaimInfo(meta["uid"], meta.get("namespace", ""), meta.get("name", ""), {pod_uid})
                results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
                by_driver: dict[str, list[Mapping[str, Any]]] = {}
                for r in results:
                    by_driver.setdefault(r.get("driver", ""), []).append(r)
                for driver, rs in by_driver.items():
                    info.drivers[driver] = ()
                    if UNPREPARE in skipped_operations(rs) and self.optional_node_operations:
                        info.skip_unprepare.add(driver)
                infos.append(info)
            last = [i for i in infos if not (i.pod_uids - {pod_uid})]
            for info in infos:
                if info not in last:
                    info.pod_uids.discard(pod_uid)
            self._save()
        batches: dict[str, list[ClaimKey]] = {}
        for info in last:
            for driver in info.drivers:
                if driver not in info.skip_unprepare:
                    batches.setdefault(driver, []).append(ClaimKey(info.namespace, info.uid, info.name))
        error = None
        for driver, batch in batches.items():
            error = self._unprepare_batch(driver, batch)
            if error is not None:
                break
        with self._lock:
            if error is None:
                for info in last:
                    self._claims.pop(info.uid, None)
            self._save()
        return PodResult(pod_uid, tuple(ClaimResult(i.namespace, i.name, i.uid) for i in infos), error)

    def _unprepare_batch(self, driver: str, batch: list[ClaimKey]) -> str | None:
        delays = iter(self.retry.delays())
        while True:
            retry = False
            try:
                client = self._client(driver, self.driver_wait)
                answers, unknown = self._retrying(lambda client=client, batch=batch: client.unprepare(batch, self.call_timeout))
                names = {k.uid: k.name for k in batch}
                failed = [(uid, e) for uid, e in answers.items() if e]
                missing = [k for k in batch if k.uid not in answers]
                if unknown:
                    error: str | None = (f"NodeUnprepareResources returned result for unknown claim "
                                         f"UID {', '.join(unknown)}")
                elif failed:
                    error = f"NodeUnprepareResources failed for ResourceClaim {names[failed[0][0]]}: {failed[0][1]}"
                elif missing:
                    error, retry = f"NodeUnprepareResources skipped {len(missing)} ResourceClaims", True
                else:
                    return None
            except PrepareFailed as err:
                error, retry = str(err), True
            except grpc.RpcError as err:
                error = f"NodeUnprepareResources: rpc error: code = {err.code().name} desc = {err.details()}"
                retry = err.code() in TRANSIENT
            delay = next(delays, None) if (retry or self.retry.retry_claim_errors) else None
            if delay is None:
                return error
            time.sleep(delay)

    def reconcile(self, active_pod_uids: Iterable[str]) -> list[PodResult]:
        """Unprepare for pods the agent still tracks but that are no longer active."""
        active = set(active_pod_uids)
        with self._lock:
            stale = sorted({p for i in self._claims.values() for p in i.pod_uids} - active)
        return [self.unprepare(pod) for pod in stale]
