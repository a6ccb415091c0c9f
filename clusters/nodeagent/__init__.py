"""The kubelet's DRA role, as a library (``NodeAgent``) and a command (``drakit node-agent``).

``NodeAgent`` registers DRA plugins found in a registry folder and prepares / unprepares the
claims of pods on its node through the plugins' real gRPC sockets. ``LocalNode`` runs the fake
drivers of an emulated node plus an agent in-process (for the reference backend).
"""

from .agent import (ClaimResult, DeviceHealth, DriverInfo, NodeAgent, PodResult, RetryPolicy,
                    container_cdi_devices, skipped_operations)
from .client import (DeviceResult, PluginInfo, Registration, RegistrationError, register,
                     validate_info)
from .localnode import LocalNode

__all__ = [
    "ClaimResult", "DeviceHealth", "DeviceResult", "DriverInfo", "LocalNode", "NodeAgent",
    "PluginInfo", "PodResult", "Registration", "RegistrationError", "RetryPolicy",
    "container_cdi_devices", "register", "skipped_operations", "validate_info",
]
