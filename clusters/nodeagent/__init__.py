"""The kubelet's DRA role, as a library (``NodeAgent``) and a command (``drakit node-agent``).

``NodeAgent`` (``agent.py``) registers DRA plugins found in a registry folder
(``registry.PluginRegistry``) and prepares / unprepares the claims of pods on its node through
the plugins' real gRPC sockets; its results are in ``results.py``. ``LocalNode`` runs the fake
drivers of an emulated node plus an agent in-process. ``kube.KubeNodeRuntime`` watches a real
cluster's pods bound to fake nodes and prepares their claims through such agents.
"""

from .agent import (ClaimResult, DeviceHealth, DriverInfo, NodeAgent, PodResult, RetryPolicy,
                    container_cdi_devices, skipped_operations)
from .client import (DeviceResult, PluginInfo, Registration, RegistrationError, register,
                     validate_info)
from .localnode import LocalNode
from .registry import PluginRegistry

__all__ = [
    "ClaimResult", "DeviceHealth", "DeviceResult", "DriverInfo", "LocalNode", "NodeAgent",
    "PluginInfo", "PluginRegistry", "PodResult", "Registration", "RegistrationError", "RetryPolicy",
    "container_cdi_devices", "register", "skipped_operations", "validate_info",
]
