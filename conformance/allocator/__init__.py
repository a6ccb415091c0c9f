"""The reference structured allocator (pure: no I/O, deterministic given its inputs)."""

from .search import Allocator
from .selectors import SelectorCache
from .types import (ALLOCATION_LIMIT, AllocatedState, AllocationError, AllocationResult, ConfigResult, DeviceID,
                    DeviceResult, Features, NodeAllocationError, NodeInfo)

__all__ = ["Allocator", "SelectorCache", "ALLOCATION_LIMIT", "AllocatedState", "AllocationError", "AllocationResult",
           "ConfigResult", "DeviceID", "DeviceResult", "Features", "NodeAllocationError", "NodeInfo"]
