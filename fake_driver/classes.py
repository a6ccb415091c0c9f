"""DeviceClass manifests for the fake drivers, in Kubernetes wire form.

One class per vendor, named after its driver and selecting every device of that driver
(partitions and virtual functions included). Two more classes cover common intents:
``gpu.example.com`` (any whole GPU, whatever the vendor) and
``gpu-partition.acme.example.com`` (Acme GPU partitions only).
"""

from __future__ import annotations

from typing import Any

from drakit.fake_hw.vendors import ACME, VENDORS

API_VERSION = "resource.k8s.io/v1"
ANY_GPU_CLASS = "gpu.example.com"
ACME_PARTITION_CLASS = "gpu-partition.acme.example.com"


def device_class(name: str, expression: str) -> dict[str, Any]:
    """A DeviceClass with a single CEL selector."""
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def device_classes() -> list[dict[str, Any]]:
    """The vendor classes (in vendor order), then the generic GPU and Acme partition classes."""
    classes = [device_class(v.driver, f'device.driver == "{v.driver}"') for v in VENDORS]
    acme_type = f'device.attributes["{ACME.driver}"].type'
    whole_gpu = " || ".join(
        f'(device.driver == "{v.driver}" && {acme_type} == "gpu")' if v is ACME
        else f'device.driver == "{v.driver}"'
        for v in VENDORS if v.kind == "gpu"
    )
    classes.append(device_class(ANY_GPU_CLASS, whole_gpu))
    classes.append(device_class(
        ACME_PARTITION_CLASS, f'device.driver == "{ACME.driver}" && {acme_type} == "partition"'))
    return classes
