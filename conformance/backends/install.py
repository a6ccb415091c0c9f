"""``--install-driver``: put drakit's fake DRA drivers into the cluster under test, wait until
they publish their ResourceSlices, and take out at the end exactly what was put in.

Without ``--install-driver`` drakit installs nothing cluster-wide beyond each case's own objects.
The manifests are :func:`fake_driver.deploy.manifests`; an object that already exists is left as
it is (and is not removed afterwards).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import ApiRejected
from .base import HarnessError

SLICE_TIMEOUT = 180.0
POLL = 1.0


@dataclass
class Installation:
    """What ``install_fake_driver`` created, newest last."""

    api: Any
    drivers: tuple[str, ...]
    created: list[dict[str, Any]] = field(default_factory=list)

    def remove(self) -> None:
        """Delete what was created, newest first; objects already gone are fine."""
        from kubernetes.dynamic.exceptions import NotFoundError
        while self.created:
            obj = self.created.pop()
            meta = obj["metadata"]
            try:
                self.api.resource(obj["apiVersion"], obj["kind"]).delete(name=meta["name"],
                                                                         namespace=meta.get("namespace"))
            except NotFoundError:
                pass


def _existing(api: Any, obj: dict[str, Any]) -> dict[str, Any] | None:
    from kubernetes.dynamic.exceptions import NotFoundError
    meta = obj["metadata"]
    try:
        got = api.resource(obj["apiVersion"], obj["kind"]).get(name=meta["name"], namespace=meta.get("namespace"))
        return got.to_dict()  # type: ignore[no-any-return]
    except NotFoundError:
        return None


def _present(api: Any, obj: dict[str, Any], deadline: float, clock: Callable[[], float],
             sleep: Callable[[float], None]) -> bool:
    """Whether the object exists; one being deleted (a namespace terminating after an earlier
    run) is waited for until it is gone."""
    while True:
        got = _existing(api, obj)
        if got is None or not (got.get("metadata") or {}).get("deletionTimestamp"):
            return got is not None
        if clock() >= deadline:
            raise HarnessError(f"--install-driver: {obj['kind']} {obj['metadata']['name']} is still being deleted")
        sleep(POLL)


def install_fake_driver(api: Any, *, image: str | None = None, drivers: Sequence[str] | None = None,
                        timeout: float = SLICE_TIMEOUT,
                        manifests: Callable[..., list[dict[str, Any]]] | None = None,
                        clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep) -> Installation:
    """Apply the fake driver's manifests and wait for a ResourceSlice of every driver; on any
    failure what was created is removed again and HarnessError says what went wrong."""
    if manifests is None:
        from drakit.fake_driver.deploy import manifests as bundled
        manifests = bundled
    kwargs: dict[str, Any] = {"drivers": list(drivers) if drivers else None}
    if image:
        kwargs["image"] = image
    try:
        objs = manifests(**kwargs)
    except ValueError as exc:
        raise HarnessError(f"--install-driver: {exc}") from None
    chosen = tuple(drivers) if drivers else tuple(sorted(_fake_drivers()))
    inst = Installation(api, chosen)
    deadline = clock() + timeout
    try:
        for obj in objs:
            if _present(api, obj, deadline, clock, sleep):
                continue
            try:
                api.create(obj)
            except ApiRejected as exc:
                raise HarnessError(f"--install-driver: {obj['kind']} {obj['metadata']['name']}: {exc}") from None
            inst.created.append(obj)
        wait_for_slices(api, chosen, timeout, clock=clock, sleep=sleep, deadline=deadline)
    except BaseException:
        inst.remove()
        raise
    return inst


def _fake_drivers() -> set[str]:
    from drakit.fake_driver.profile import fake_driver_names
    return set(fake_driver_names())


def wait_for_slices(api: Any, drivers: Sequence[str], timeout: float, *,
                    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                    deadline: float | None = None) -> None:
    """Wait until every driver has published at least one ResourceSlice (until ``deadline``,
    default ``timeout`` seconds from now)."""
    deadline = clock() + timeout if deadline is None else deadline
    while True:
        published = {(s.get("spec") or {}).get("driver") for s in api.list("ResourceSlice", None)}
        missing = [d for d in drivers if d not in published]
        if not missing:
            return
        if clock() >= deadline:
            raise HarnessError(f"--install-driver: no ResourceSlice from {', '.join(missing)} within {timeout:.0f} s; "
                               f"are the driver pods running (kubectl -n drakit-system get pods)?")
        sleep(POLL)


def driver_mode(vendor: Any, installed: bool) -> dict[str, Any]:
    """How the run treats the driver under test, for results.json."""
    if vendor is not None and not vendor.fake:
        return {"underTest": "vendor", "profile": vendor.name, "drivers": list(vendor.driver_names),
                "slices": "the cluster's own (drakit publishes no fake hardware)", "installedByDrakit": False}
    drivers = list(vendor.driver_names) if vendor is not None else sorted(_fake_drivers())
    return {"underTest": "drakit fake driver", "profile": vendor.name if vendor is not None else "drakit-fake",
            "drivers": drivers, "slices": "published per case by drakit (the case's hardware)",
            "installedByDrakit": installed}
