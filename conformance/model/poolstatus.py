"""ResourcePoolStatusRequest (``resource.k8s.io/v1alpha3``, KEP-5677, DRAResourcePoolStatus).

API shape: ``k8s.io/api`` v0.37.2 ``resource/v1alpha3``: cluster-scoped; ``spec.{driver,
poolName?, limit? (1..1000, default 100), defaultPartitionTypeAttribute?}`` (immutable);
``status.{poolCount, pools[]{driver, poolName, generation, resourceSliceCount, totalDevices,
allocatedDevices, availableDevices, unavailableDevices, nodeName, validationError,
partitionSummary, shareableSummary}, conditions[]}`` written once by the controller.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FieldError
from .meta import ObjectMeta, parse_meta
from .reader import Reader, check_dns_subdomain, check_fully_qualified_name

API_VERSION = "resource.k8s.io/v1alpha3"
LIMIT_DEFAULT = 100
LIMIT_MAX = 1000


@dataclass(frozen=True, slots=True, eq=False)
class ResourcePoolStatusRequest:
    meta: ObjectMeta
    driver: str
    pool_name: str | None
    limit: int
    default_partition_type_attribute: str | None = None


def check_pool_name(path: tuple[object, ...], name: str) -> None:
    if len(name) > 253 or not all(part and _subdomain(part) for part in name.split("/")):
        raise FieldError(path, "must be one or more DNS subdomains separated by '/'")


def _subdomain(part: str) -> bool:
    try:
        check_dns_subdomain((), part)
    except FieldError:
        return False
    return True


def parse_resource_pool_status_request(r: Reader) -> ResourcePoolStatusRequest:
    r.str("apiVersion")
    r.str("kind")
    meta = parse_meta(r, namespaced=False)
    s = r.obj("spec", required=True)
    assert s is not None
    driver = s.str("driver", required=True)
    assert driver is not None
    check_dns_subdomain(s.at("driver"), driver.lower())
    pool = s.str("poolName")
    if pool is not None:
        check_pool_name(s.at("poolName"), pool)
    limit = s.int("limit")
    if limit is not None and not 1 <= limit <= LIMIT_MAX:
        raise FieldError(s.at("limit"), f"Invalid value: {limit}: must be between 1 and {LIMIT_MAX}, inclusive")
    attr = s.str("defaultPartitionTypeAttribute")
    if attr is not None:
        check_fully_qualified_name(s.at("defaultPartitionTypeAttribute"), attr)
    s.done()
    r.ignore("status")
    r.done()
    return ResourcePoolStatusRequest(meta, driver, pool, LIMIT_DEFAULT if limit is None else limit, attr)
