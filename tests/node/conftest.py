"""Fixtures for the node-side tests: real plugins on real Unix sockets in short temp folders."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import grpc
import pytest

from drakit.fake_driver._gen import dra_v1_pb2, dra_v1_pb2_grpc
from drakit.fake_driver.plugin import FakePlugin, MemoryClaimSource, PluginConfig
from drakit.fake_driver.sampleclaims import sample_claims
from drakit.fake_hw.inventory import NodeInventory, build_inventory

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
NODE = "node-a"
GPU = "gpu.acme.example.com"
NIC = "nic.swift.example.com"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp folder with a short path: Unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="dk", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def inventory() -> NodeInventory:
    return build_inventory("server-8gpu", NODE)


def config_for(root: Path, driver: str = GPU, **kwargs: Any) -> PluginConfig:
    return PluginConfig(driver=driver, node=NODE, plugin_dir=root / "plugins",
                        registry_dir=root / "registry", cdi_dir=root / "cdi", durable=False, **kwargs)


@pytest.fixture
def start_plugin(short_tmp: Path, inventory: NodeInventory
                 ) -> Iterator[Callable[..., tuple[FakePlugin, MemoryClaimSource]]]:
    started: list[FakePlugin] = []

    def start(driver: str = GPU, claims: list[dict[str, Any]] | None = None,
              **kwargs: Any) -> tuple[FakePlugin, MemoryClaimSource]:
        plugin_kwargs = {k: kwargs.pop(k) for k in list(kwargs)
                         if k in ("publisher", "skip_node_ops", "health", "resend_seconds",
                                  "faults_file", "poll_seconds")}
        source = MemoryClaimSource(claims if claims is not None
                                   else sample_claims(inventory, driver))
        plugin = FakePlugin(config_for(short_tmp, driver, **kwargs), inventory, source,
                            **plugin_kwargs)
        plugin.start()
        started.append(plugin)
        return plugin, source

    yield start
    for plugin in started:
        plugin.stop(grace=0)


def dra_stub(socket: Path) -> tuple[grpc.Channel, Any]:
    channel = grpc.insecure_channel(f"unix://{socket}")
    return channel, dra_v1_pb2_grpc.DRAPluginStub(channel)


def claim_msg(claim: dict[str, Any], pb2: Any = dra_v1_pb2) -> Any:
    meta = claim["metadata"]
    return pb2.Claim(namespace=meta.get("namespace", ""), name=meta["name"], uid=meta["uid"])


def by_name(claims: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in claims}
