"""Claim sources: file (re-read on change), function, and the Kubernetes one with a stand-in API."""

from __future__ import annotations

import json
import os
import types

import pytest
import yaml

from drakit.fake_driver.plugin.claims import (ClaimSourceError, FileClaimSource, FunctionClaimSource,
                                       KubernetesClaimSource)
from drakit.fake_driver.sampleclaims import allocated_claim

from .conftest import GPU, NODE


def claim(name, uid=None):
    return allocated_claim(name, "ns", uid or f"uid-{name}", NODE,
                           [{"request": "r", "driver": GPU, "pool": NODE, "device": "gpu0"}])


def test_file_source_reads_folders_and_yaml_and_notices_changes(short_tmp):
    (short_tmp / "a.yaml").write_text(yaml.safe_dump_all([claim("a"), {"kind": "Pod", "metadata": {"name": "x"}}]))
    (short_tmp / "b.json").write_text(json.dumps({"kind": "List", "items": [claim("b")]}))
    source = FileClaimSource(short_tmp, status_dir=short_tmp / "status")
    assert source.get_claim("ns", "a")["metadata"]["uid"] == "uid-a"
    assert source.get_claim("ns", "b") is not None and source.get_claim("ns", "x") is None
    (short_tmp / "b.json").write_text(json.dumps([claim("b", "uid-b2")]))
    os.utime(short_tmp / "b.json", ns=(1, 1))
    assert source.get_claim("ns", "b")["metadata"]["uid"] == "uid-b2"
    assert [c["metadata"]["name"] for c in source.claims()] == ["a", "b"]
    os.unlink(short_tmp / "b.json")  # a file that goes takes its claims along
    assert source.get_claim("ns", "b") is None and [c["metadata"]["name"] for c in source.claims()] == ["a"]
    (short_tmp / "b.json").write_text(json.dumps([claim("b", "uid-b2")]))
    source.write_device_status("ns", "b", "uid-b2", GPU, [{"driver": GPU, "pool": NODE, "device": "gpu0"}])
    assert json.loads((short_tmp / "status" / "ns_b.json").read_text())[0]["device"] == "gpu0"
    (short_tmp / "c.yaml").write_text("kind: [")
    with pytest.raises(ClaimSourceError, match="c.yaml: not valid JSON/YAML"):
        source.get_claim("ns", "a")
    with pytest.raises(ClaimSourceError, match="no such claims file"):
        FileClaimSource(short_tmp / "missing").get_claim("ns", "a")


def test_function_source_keeps_statuses_per_driver():
    source = FunctionClaimSource(lambda ns, name: claim(name) if name == "a" else None)
    assert source.get_claim("ns", "a")["metadata"]["name"] == "a"
    source.write_device_status("ns", "a", "uid-a", "x.example.com", [{"driver": "x.example.com", "device": "d"}])
    source.write_device_status("ns", "a", "uid-a", GPU, [{"driver": GPU, "device": "gpu0"}])
    source.write_device_status("ns", "a", "uid-a", "x.example.com", [])
    assert source.statuses[("ns", "a")] == [{"driver": GPU, "device": "gpu0"}]


class FakeApiError(Exception):
    def __init__(self, status):
        super().__init__(f"HTTP {status}")
        self.status = status


class StandInApi:
    """Has the two things KubernetesClaimSource uses of ResourceV1Api."""

    class api_client:  # noqa: N801 - mirrors the attribute name of the real client
        @staticmethod
        def sanitize_for_serialization(obj):
            return {"kind": "ResourceClaim", "metadata": vars(obj)}

    def read_namespaced_resource_claim(self, name, namespace):
        if name == "gone":
            raise FakeApiError(404)
        if name == "broken":
            raise FakeApiError(500)
        return types.SimpleNamespace(name=name, namespace=namespace)  # a typed model stand-in


def test_kubernetes_source_reads_and_leaves_status_to_the_cluster_work():
    source = KubernetesClaimSource(StandInApi())
    assert source.get_claim("ns", "a") == {"kind": "ResourceClaim", "metadata": {"name": "a", "namespace": "ns"}}
    assert source.get_claim("ns", "gone") is None
    with pytest.raises(ClaimSourceError, match="HTTP 500"):
        source.get_claim("ns", "broken")
    with pytest.raises(NotImplementedError, match="server-side apply"):
        source.write_device_status("ns", "a", "uid", GPU, [])
