"""Throughput of the DRA selector environment (a script, not a test).

Generates GPU-like devices, then reports engine setup and compile times, the cost of encoding a
device, and evaluations per second for:

* ``realistic``: the kind of selector a DeviceClass and a request carry together (driver,
  attribute and domain checks, a quantity comparison and a semver comparison: four Python
  callbacks per evaluation);
* ``plain``: the same shape with built-in operators only;
* the allocator pattern: four different selectors against each device.

Each selector runs twice over all devices: the first pass includes converting every device for
the engine (done once per device and thread, then reused by every selector), the second shows
the steady state. The best of ``--repeat`` runs is reported (the machines are shared). Usage::

    .venv/bin/python benchmarks/bench_cel.py [--devices 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from typing import Callable, TypeVar

from drakit.conformance.cel import CelDevice, EncodedDevice, Selector, compile_selector, encode_device
from drakit.conformance.attributes import AttributeValue
from drakit.conformance.quantity import Quantity

GPU = 'device.attributes["gpu.example.com"]'
REALISTIC = (f'device.driver == "gpu.example.com" && {GPU}.model == "h100" '
             f'&& device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0 '
             f'&& {GPU}.driverVersion.isGreaterThan(semver("1.2.0")) '
             f'&& "numaNode" in device.attributes["resource.kubernetes.io"]')
PLAIN = (f'device.driver == "gpu.example.com" && {GPU}.model == "h100" && {GPU}.index >= 2 '
         f'&& {GPU}.uuid.startsWith("GPU-") && "numaNode" in device.attributes["resource.kubernetes.io"]')
ALLOCATOR_SET = [
    'device.driver == "gpu.example.com"',
    f'{GPU}.model == "h100" || {GPU}.model == "a100"',
    'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("30Gi"))',
    f'{GPU}.?partitionable.orValue(false) == false && {GPU}.sharing.includes("mps")',
]
MODELS = ("h100", "a100", "l4", "t4")


def make_device(i: int) -> CelDevice:
    attributes = {
        "model": AttributeValue("string", MODELS[i % len(MODELS)]),
        "index": AttributeValue("int", i % 8),
        "uuid": AttributeValue("string", f"GPU-{i:08x}"),
        "driverVersion": AttributeValue("version", f"1.{i % 5}.{i % 3}"),
        "sharing": AttributeValue("strings", ("timeslicing", "mps") if i % 2 else ("timeslicing",)),
        "dra.example.com/pcieRoot": AttributeValue("string", f"pci0000:{i % 4:02x}"),
        "resource.kubernetes.io/numaNode": AttributeValue("int", i % 2),
    }
    capacity = {"memory": Quantity(f"{(i // 4 % 4 + 1) * 20}Gi"), "cores": Quantity(str(64 + i % 64))}
    return CelDevice(driver="gpu.example.com", attributes=attributes, capacity=capacity)


_R = TypeVar("_R")


def timed(action: Callable[[], _R]) -> tuple[float, _R]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def evaluate_all(selectors: list[Selector], devices: list[EncodedDevice]) -> int:
    return sum(s.matches(d) for d in devices for s in selectors)


def report(name: str, expressions: list[str], raw: list[CelDevice], repeat: int) -> None:
    """Best of ``repeat`` runs of a first pass (fresh devices) and a second pass (warm)."""
    selectors = [compile_selector(e) for e in expressions]
    evals = len(selectors) * len(raw)
    best = [float("inf"), float("inf")]
    matched = 0
    for _ in range(repeat):
        devices = [encode_device(d) for d in raw]
        for i in range(2):
            seconds, matched = timed(lambda devices=devices: evaluate_all(selectors, devices))
            best[i] = min(best[i], seconds)
    for label, seconds in zip(("first pass", "second pass"), best):
        print(f"  {name:<22} {label:<12} {evals / seconds:>10,.0f} evals/s  ({seconds * 1e6 / evals:6.1f} us/eval, "
              f"{matched} matches)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3, help="report the best of this many runs")
    args = parser.parse_args()

    setup, _ = timed(lambda: compile_selector("true"))
    first, _ = timed(lambda: compile_selector(REALISTIC))
    variants = [REALISTIC.replace("40Gi", f"{n}Gi") for n in range(1, 101)]
    many, _ = timed(lambda: [compile_selector(v) for v in variants])
    cached, _ = timed(lambda: [compile_selector(REALISTIC) for _ in range(1000)])
    print(f"engine setup (first compile)       {setup * 1e3:8.1f} ms")
    print(f"compile realistic selector         {first * 1e3:8.2f} ms (first), "
          f"{many / len(variants) * 1e3:.2f} ms (average of {len(variants)} new ones), "
          f"{cached / 1000 * 1e6:.1f} us (cached)")

    build, devices = timed(lambda: [make_device(i) for i in range(args.devices)])
    encode, _ = timed(lambda: [encode_device(d) for d in devices])
    print(f"build {args.devices} devices              {build / args.devices * 1e6:8.1f} us/device")
    print(f"encode_device                      {encode / args.devices * 1e6:8.1f} us/device")

    print(f"evaluation over {args.devices} devices (best of {args.repeat}):")
    report("realistic", [REALISTIC], devices, args.repeat)
    report("plain", [PLAIN], devices, args.repeat)
    report("4 selectors/device", ALLOCATOR_SET, devices, args.repeat)


if __name__ == "__main__":
    main()
