"""The fake driver's kubelet plugin: registration, DRA v1/v1beta1, health, CDI, metadata.

Entry points: ``FakePlugin`` (everything assembled), ``PluginConfig``, the claim sources in
``fake_driver.plugin.claims``, and ``drakit driver serve`` (``fake_driver.cli``).
"""

from .app import FakePlugin, read_faults_file
from .checkpoint import PreparedClaim, PreparedDevice
from .claims import (ClaimSource, ClaimSourceError, FileClaimSource, FunctionClaimSource,
                     KubernetesClaimSource, MemoryClaimSource)
from .driver import ClaimOutcome, ClaimRef, FakeDriver, PluginConfig
from .health import HealthMonitor
from .server import PluginServer

__all__ = [
    "ClaimOutcome", "ClaimRef", "ClaimSource", "ClaimSourceError", "FakeDriver", "FakePlugin",
    "FileClaimSource", "FunctionClaimSource", "HealthMonitor", "KubernetesClaimSource",
    "MemoryClaimSource", "PluginConfig", "PluginServer", "PreparedClaim", "PreparedDevice",
    "read_faults_file",
]
