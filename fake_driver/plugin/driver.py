"""The fake driver's node-side logic: prepare and unprepare claims, independent of gRPC.

``FakeDriver.prepare`` takes claim references (namespace, name, UID), looks each claim up in a
``ClaimSource``, checks it (same UID, allocated, devices of this driver that exist on this
node and are not prepared for another claim), writes CDI specs (and device metadata when
enabled), records the answer in the checkpoint and returns it. Per-claim problems come back as
an error string for that claim; nothing a single claim does fails the whole call.

Concurrency: calls for different claims run in parallel; calls for the same claim are
serialised by a per-claim lock; the shared state (prepared claims, the checkpoint file) has its
own lock. Both operations are idempotent: preparing a prepared claim returns the recorded
answer (rewriting any of its files that went missing), unpreparing an unknown claim succeeds.
"""

from __future__ import annotations

import collections

import logging
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Any, Mapping, NamedTuple, Sequence

from drakit.fake_hw.inventory import Device, NodeInventory

from ..planted import answered, planted
from ..status import NIC_KINDS, device_status
from . import cdi, metadata
from .checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from .claimlocks import ClaimLocks
from .claims import ClaimSource, ClaimSourceError
from .files import atomic_write_text, ensure_dir, remove_file
from drakit.conformance.crash import log_bug

MAX_CALLS = 10000
log = logging.getLogger("drakit.driver")

PRIVATE_DIR_MODE = 0o700
CHECKPOINT_NAME = "checkpoint.json"


class ClaimRef(NamedTuple):
    """What the kubelet sends for one claim (a named tuple: made for every claim of every call)."""

    namespace: str
    uid: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


# what a claim reference can hold: a namespace is a DNS label, a name a DNS subdomain, a UID a
# UUID (room to spare); longer ones are refused before they reach a message, a path or a lock
_REF_LIMITS = (("namespace", 63), ("name", 253), ("uid", 128))


def _check_ref(ref: ClaimRef) -> None:
    for field_name, limit in _REF_LIMITS:
        value = getattr(ref, field_name)
        if len(value) > limit:
            raise ClaimError(f"claim {field_name} of {len(value):,} characters: longer than a Kubernetes "
                             f"{field_name} can be ({limit})")
    if not ref.uid or not ref.name:
        raise ClaimError(f"claim {ref} (uid {ref.uid!r}): namespace, name and uid are required")


@dataclass(frozen=True, slots=True)
class PluginConfig:
    """Where the plugin lives and what it does. ``plugin_dir`` is the kubelet's plugins folder
    (``/var/lib/kubelet/plugins``); the driver's own data folder is ``plugin_dir/<driver>``."""

    driver: str
    node: str
    plugin_dir: Path
    registry_dir: Path
    cdi_dir: Path
    state_dir: Path | None = None
    device_metadata: bool = False
    metadata_versions: tuple[str, ...] = ("v1beta1",)
    device_status: bool = True
    durable: bool = True   # fsync the checkpoint's snapshots (and CDI spec folders' renames)
    sync: bool = False     # also fdatasync the checkpoint journal before each answer
    pools: Mapping[str, str] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return self.plugin_dir / self.driver

    @property
    def dra_socket(self) -> Path:
        return self.data_dir / "dra.sock"

    @property
    def registration_socket(self) -> Path:
        return self.registry_dir / f"{self.driver}-reg.sock"

    @property
    def checkpoint_path(self) -> Path:
        return (self.state_dir or self.data_dir) / CHECKPOINT_NAME


class ClaimOutcome(NamedTuple):
    """The answer for one claim: devices, or an error."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str | None = None


class ClaimError(Exception):
    """A per-claim failure; the message goes into the response's ``error`` field."""




class FakeDriver:
    """Node-side operations of one fake DRA driver on one emulated node."""

    def __init__(self, config: PluginConfig, inventory: NodeInventory, claims: ClaimSource) -> None:
        if config.device_metadata:
            metadata.check_versions(config.metadata_versions)
        from drakit.reports.safefs import check_name
        check_name(config.driver, "driver name")  # its folders and sockets are named after it: never a path
        self.config = config
        self.driver = config.driver
        self.inventory = inventory
        self.claims = claims
        # whether a call never waits on anything but this process and the local disk's page cache
        # (claims from a file or memory, no journal flush), so the gRPC server may run it on its
        # queue thread; otherwise a pool thread runs it and other calls go on meanwhile
        self.answers_inline = not config.sync and bool(getattr(claims, "local", False))
        try:
            devices = inventory.devices(config.driver)
        except KeyError:
            raise ValueError(f"driver {config.driver} has no devices on node {inventory.node_name} "
                             f"(drivers there: {', '.join(inventory.drivers)})") from None
        self.devices: dict[str, Device] = {d.name: d for d in devices}
        self.pools: dict[str, str] = {name: config.pools.get(name, inventory.node_name)
                                      for name in self.devices}
        # device -> (CDI class, CDI kind, containerEdits as JSON text): the same for every claim
        self._cdi: dict[str, tuple[str, str, str]] = {
            name: (cdi.cdi_class(d), cdi.cdi_kind(config.driver, cdi.cdi_class(d)), cdi.device_edits_text(d))
            for name, d in self.devices.items()}
        ensure_dir(config.data_dir, PRIVATE_DIR_MODE)
        if config.state_dir is not None:
            ensure_dir(config.state_dir, PRIVATE_DIR_MODE)
        self._folders: set[str] = set()  # folders known to exist (the CDI folder)
        self._cdi_dir = str(config.cdi_dir)
        self._metadata_prefix = str(config.data_dir / metadata.HOST_DIR_NAME) + "/"
        self._checkpoint = Checkpoint(config.checkpoint_path, durable=config.durable, sync=config.sync)
        self._state = threading.RLock()
        self._prepared: dict[str, PreparedClaim] = {}
        # device -> uids of the claims holding it with a dedicated allocation
        self._dedicated: dict[tuple[str, str], dict[str, None]] = {}
        for record in self._checkpoint.load().values():
            self._hold(record)
        self._recover(self._checkpoint.interrupted())
        self._checkpoint.start()
        self._claim_locks = ClaimLocks()
        # devices with a "lost" hardware fault (FakePlugin wires it to its health monitor)
        self.lost: Callable[[], set[str]] = set
        # every NodePrepareResources / NodeUnprepareResources call, oldest first (bounded)
        self.calls: collections.deque[dict[str, Any]] = collections.deque(maxlen=MAX_CALLS)
        self.planted = planted()  # faults planted on purpose (DRAKIT_FAKE_DRIVER_PLANT)
        self._failed_once: set[str] = set()  # claims whose unprepare the planted fault failed
        if "env-wrong-value" in self.planted:  # every variable of the CDI edits is there, its value wrong
            self._cdi = {n: (k, kind, edits.replace("=", "=wrong-")) for n, (k, kind, edits) in self._cdi.items()}

    def _recover(self, interrupted: dict[str, PreparedClaim]) -> None:
        """Remove what prepares cut short by a crash wrote: they were never answered, so the
        kubelet prepares those claims again."""
        for record in interrupted.values():
            log.info("prepare %s/%s (%s) was interrupted: removing its files", record.namespace, record.name,
                     record.uid)
            self._remove_files(record)
            self._remove_leftovers(ClaimRef(record.namespace, record.uid, record.name), record)

    def close(self) -> None:
        """Fold the checkpoint's journal into its snapshot (the driver may still be used)."""
        self._checkpoint.close()

    # -- public ---------------------------------------------------------------------------------

    def prepared(self) -> dict[str, PreparedClaim]:
        with self._state:
            return dict(self._prepared)

    def prepare(self, refs: Sequence[ClaimRef]) -> dict[str, ClaimOutcome]:
        self.calls.append({"operation": "NodePrepareResources", "claims": [f"{r.namespace}/{r.name}" for r in refs]})
        out: dict[str, ClaimOutcome] = {}
        for ref in refs:
            if ref.uid in out:
                continue
            try:
                out[ref.uid] = ClaimOutcome(self._prepare_one(ref))
            except ClaimError as err:
                out[ref.uid] = ClaimOutcome(error=str(err))
            except Exception as err:  # a bug or an I/O failure: still only this claim fails
                log_bug(log, f"prepare {ref} ({ref.uid}) failed", err)
                out[ref.uid] = ClaimOutcome(error=f"internal error preparing {ref}: {err}")
        failed = self._make_durable()
        if failed:  # prepared, but not durably recorded: the kubelet retries
            out = {uid: o if o.error else ClaimOutcome(error=failed) for uid, o in out.items()}
        return out

    def unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str | None]:
        self.calls.append({"operation": "NodeUnprepareResources", "claims": [f"{r.namespace}/{r.name}" for r in refs]})
        out: dict[str, str | None] = {}
        for ref in refs:
            if ref.uid in out:
                continue
            try:
                self._unprepare_one(ref)
                out[ref.uid] = None
            except ClaimError as err:
                out[ref.uid] = str(err)
            except Exception as err:
                log_bug(log, f"unprepare {ref} ({ref.uid}) failed", err)
                out[ref.uid] = f"unprepare {ref} failed: {err}"
        failed = self._make_durable()
        if failed:
            out = {uid: error or failed for uid, error in out.items()}
        return out

    def _make_durable(self) -> str | None:
        """Before answering: everything the checkpoint recorded so far is on disk (with
        ``sync``: one flush for all of a call's claims, shared with concurrent calls; this also
        covers an answer from a record another call just appended). The error, if the flush
        failed."""
        if not self.config.sync:  # nothing to flush: records are written before this
            return None
        try:
            self._checkpoint.make_durable()
        except OSError as err:
            log.warning("flushing the checkpoint journal: %s", err)
            return f"the driver's checkpoint could not be flushed to disk: {err.strerror or err}"
        return None

    # -- prepare --------------------------------------------------------------------------------

    def _prepare_one(self, ref: ClaimRef) -> tuple[PreparedDevice, ...]:
        _check_ref(ref)
        with self._claim_locks.hold(ref.uid):
            with self._state:
                existing = self._prepared.get(ref.uid)
            if existing is not None:
                if (existing.namespace, existing.name) != (ref.namespace, ref.name):
                    raise ClaimError(f"claim uid {ref.uid} was prepared as "
                                     f"{existing.namespace}/{existing.name}, not {ref}")
                self._restore_files(existing)
                return existing.devices
            try:
                claim = self.claims.get_claim(ref.namespace, ref.name)
            except (ClaimSourceError, OSError) as err:
                raise ClaimError(f"reading ResourceClaim {ref}: {err}") from None
            if claim is None:
                raise ClaimError(f"ResourceClaim {ref} not found")
            record, status = self._plan(ref, claim)
            with self._state:
                self._check_conflicts(record)
                self._hold(record)
            try:
                self._checkpoint.begin(record)  # the intent first: a crash from here on is undone at start
                self._write_files(record.files)
                self._checkpoint.commit(ref.uid, wait=False)  # flushed before the answer
            except BaseException:
                with self._state:
                    self._release(ref.uid)
                self._remove_files(record)
                self._checkpoint.abort(ref.uid)
                raise
        if status:
            try:
                self.claims.write_device_status(ref.namespace, ref.name, ref.uid, self.driver, status)
            except Exception as err:  # best effort: status never fails a prepare
                log.warning("writing status.devices of %s: %s", ref, err)
        return record.devices

    def _plan(self, ref: ClaimRef, claim: dict[str, Any]
              ) -> tuple[PreparedClaim, list[dict[str, Any]]]:
        meta = claim.get("metadata") or {}
        if meta.get("uid") != ref.uid:
            raise ClaimError(f"ResourceClaim {ref} has UID {meta.get('uid')!r}, expected {ref.uid} "
                             "(the claim was replaced)")
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            raise ClaimError(f"ResourceClaim {ref} is not allocated")
        every = (allocation.get("devices") or {}).get("results") or []
        results = [r for r in every if r.get("driver") == self.driver]
        if every and not results:  # the kubelet only asks the drivers a claim has devices of
            others = sorted({str(r.get("driver")) for r in every})
            raise ClaimError(f"ResourceClaim {ref} has no device of driver {self.driver} "
                             f"(its devices are of {', '.join(others)})")
        devices: list[tuple[dict[str, Any], Device]] = []
        for result in results:
            name, pool = result.get("device", ""), result.get("pool", "")
            device = self.devices.get(name)
            if name in self.lost():
                raise ClaimError(f"ResourceClaim {ref}: device {pool}/{name} is lost (hardware fault); "
                                 "it cannot be prepared until it is back")
            if device is None or self.pools[name] != pool:
                raise ClaimError(f"ResourceClaim {ref}: device {pool}/{name} is not a device of "
                                 f"driver {self.driver} on node {self.inventory.node_name}")
            devices.append((result, device))
        groups: dict[str, list[tuple[str, str]]] = {}  # CDI class -> (device, edits), classes in first-use order
        for _, device in devices:
            klass, _, edits = self._cdi[device.name]
            groups.setdefault(klass, []).append((device.name, edits))
        files: dict[str, str] = {cdi.claim_spec_file(self._cdi_dir, self.driver, klass, ref.uid):
                                 cdi.claim_spec_text(self.driver, klass, ref.uid, members)
                                 for klass, members in groups.items()}
        if "admin-prepare-fails" in self.planted and any(r.get("adminAccess") for r, _ in devices):
            raise ClaimError(f"ResourceClaim {ref}: planted fault admin-prepare-fails: admin access refused")
        answer: list[PreparedDevice] = []
        shared: set[tuple[str, str]] = set()
        for result, device in devices:
            kind = self._cdi[device.name][1]
            answer.append(PreparedDevice(
                request_names=(metadata.base_request(result.get("request", "")),),
                pool=result["pool"], device=answered(self.planted, device.name, self.pools),
                cdi_ids=(cdi.qualified_name(kind, cdi.claim_device_name(ref.uid, device.name)),),
                share_id=result.get("shareID") or None))
            if result.get("adminAccess") or result.get("shareID"):
                shared.add((result["pool"], device.name))
        # only NICs get status entries (and reading the clock for none is a waste)
        status = device_status(self.inventory, allocation, driver=self.driver) \
            if self.config.device_status and any(d.kind in NIC_KINDS for _, d in devices) else []
        if self.config.device_metadata:
            answer = self._plan_metadata(claim, devices, answer, status, files)
        return (PreparedClaim(ref.uid, ref.namespace, ref.name, tuple(answer), files,
                              frozenset(shared)), status)

    def _plan_metadata(self, claim: dict[str, Any], devices: list[tuple[dict[str, Any], Device]],
                       answer: list[PreparedDevice], status: list[dict[str, Any]],
                       files: dict[str, str]) -> list[PreparedDevice]:
        network = {(e["pool"], e["device"]): e["networkData"] for e in status}
        by_request: dict[str, list[metadata.MetadataDevice]] = {}
        full_names: dict[str, str] = {}
        for result, device in devices:
            request = result.get("request", "")
            base = metadata.base_request(request)
            full_names.setdefault(base, request)
            listed = by_request.setdefault(base, [])
            if any(m.name == device.name and m.pool == result["pool"] for m in listed):
                continue
            listed.append(metadata.MetadataDevice(
                self.driver, result["pool"], device.name,
                {name: value.to_wire() for name, value in device.attributes},
                network.get((result["pool"], device.name))))
        out = list(answer)
        for base, members in by_request.items():
            planned = metadata.plan_request(
                driver=self.driver, plugin_data_dir=self.config.data_dir,
                cdi_dir=self.config.cdi_dir, claim=claim, request=full_names[base],
                devices=members, versions=self.config.metadata_versions)
            files[str(planned.host_file)] = planned.content.decode()
            files[str(planned.spec_file)] = cdi.spec_bytes(planned.spec).decode()
            for i, prepared in enumerate(out):
                if base in prepared.request_names:
                    out[i] = PreparedDevice(prepared.request_names, prepared.pool, prepared.device,
                                            prepared.cdi_ids + (planned.cdi_id,), prepared.share_id)
                    break
        return out

    def _check_conflicts(self, record: PreparedClaim) -> None:
        """The last line of defence: a device prepared for another claim is refused unless one of
        the two allocations is shared (admin access or a share ID). Only the device's holders
        with a dedicated allocation are looked at (:attr:`_dedicated`)."""
        for d in record.devices:
            key = (d.pool, d.device)
            if key in record.shared:
                continue
            for uid in self._dedicated.get(key, ()):
                other = self._prepared.get(uid)
                if other is None or other.uid == record.uid:
                    continue
                raise ClaimError(f"ResourceClaim {record.namespace}/{record.name}: device "
                                 f"{d.pool}/{d.device} is already prepared for ResourceClaim "
                                 f"{other.namespace}/{other.name} ({other.uid})")

    def _hold(self, record: PreparedClaim) -> None:
        """Index the record's devices (call with the state lock held)."""
        self._prepared[record.uid] = record
        for d in record.devices:
            key = (d.pool, d.device)
            if key not in record.shared:
                self._dedicated.setdefault(key, {})[record.uid] = None

    def _release(self, uid: str) -> None:
        """Forget a record and its index entries (call with the state lock held)."""
        record = self._prepared.pop(uid, None)
        if record is None:
            return
        for d in record.devices:
            got = self._dedicated.get((d.pool, d.device))
            if got is not None:
                got.pop(uid, None)
                if not got:
                    del self._dedicated[(d.pool, d.device)]

    def _write_files(self, files: Mapping[str, str]) -> None:
        for path_text, content in files.items():
            folder = os.path.dirname(path_text)
            if self.planted and "no-cdi-spec" in self.planted and folder == self._cdi_dir \
                    and not os.path.basename(path_text).startswith(f"{self.driver}_metadata_"):
                continue  # planted fault: the claim's CDI spec is never written
            if self._is_metadata_file(path_text):
                for parent in reversed(Path(path_text).parents[:3]):
                    ensure_dir(parent, metadata.DIR_MODE)
            elif folder not in self._folders:
                ensure_dir(Path(folder), 0o755)
                self._folders.add(folder)
            # no fsync: these files are rewritten from the checkpoint when missing
            atomic_write_text(path_text, content, cdi.SPEC_MODE)

    def _is_metadata_file(self, path: str) -> bool:
        return path.startswith(self._metadata_prefix)

    def _restore_files(self, record: PreparedClaim) -> None:
        missing = {p: c for p, c in record.files.items() if not os.path.exists(p)}
        if missing:
            log.info("prepare %s/%s: rewriting %d missing file(s)", record.namespace, record.name,
                     len(missing))
            self._write_files(missing)

    # -- unprepare ------------------------------------------------------------------------------

    def _unprepare_one(self, ref: ClaimRef) -> None:
        if "unprepare-fails" in self.planted and ref.uid in self.prepared() and ref.uid not in self._failed_once:
            self._failed_once.add(ref.uid)  # the first call fails; the kubelet's retry (10-15 s later) succeeds
            raise ClaimError("planted fault unprepare-fails")  # a failure on purpose: no crash file
        if "unprepare-always-fails" in self.planted and ref.uid in self.prepared():
            raise ClaimError("planted fault unprepare-always-fails: the device is still in use")  # on purpose
        _check_ref(ref)
        with self._claim_locks.hold(ref.uid):
            with self._state:
                record = self._prepared.get(ref.uid)
            if "leak-on-unprepare" in self.planted:  # planted fault: the files stay behind
                pass
            elif record is not None:
                self._remove_files(record)
            if "leak-on-unprepare" not in self.planted:
                self._remove_leftovers(ref, record)
            if record is not None:
                with self._state:
                    self._release(ref.uid)
                self._checkpoint.remove(ref.uid, wait=False)  # flushed before the answer

    def _remove_files(self, record: PreparedClaim) -> None:
        for path in record.files:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _remove_leftovers(self, ref: ClaimRef, record: PreparedClaim | None) -> None:
        """Files of a claim the checkpoint does not know: a power loss may have cost the
        journal's newest records (a crash of the process cannot: see .checkpoint). A known
        claim's files are exactly its record's, written after the record: nothing to look for
        but its metadata folders."""
        if not ref.uid:
            return
        if record is not None:
            self._remove_metadata_folders(record)
            return
        cdi_dir = self.config.cdi_dir
        if cdi_dir.is_dir():
            for spec in cdi_dir.glob(cdi.claim_spec_glob(self.driver, ref.uid)):
                remove_file(spec)
        namespace = record.namespace if record else ref.namespace
        name = record.name if record else ref.name
        with self._state:
            reused = any(o.uid != ref.uid and (o.namespace, o.name) == (namespace, name)
                         for o in self._prepared.values())
        if reused:  # another live claim of that name owns the metadata folder
            for spec in (cdi_dir.glob(metadata.spec_glob(self.driver, ref.uid))
                         if cdi_dir.is_dir() else ()):
                remove_file(spec)
            return
        metadata.remove_claim(self.config.data_dir, cdi_dir, self.driver, namespace, name, ref.uid)

    def _remove_metadata_folders(self, record: PreparedClaim) -> None:
        """The claim's metadata folder, once its files are gone (unless another live claim of
        the same name uses it)."""
        if not any(self._is_metadata_file(p) for p in record.files):
            return
        folder = metadata.host_dir(self.config.data_dir, record.namespace, record.name)
        with self._state:
            if any(o.uid != record.uid and (o.namespace, o.name) == (record.namespace, record.name)
                   for o in self._prepared.values()):
                return
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
