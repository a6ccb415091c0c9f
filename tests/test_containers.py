"""What a container gets from a CDI runtime, as the reference's kubelet part computes it
(``conformance.backends.containers``), and the fake CRI's record read the same way."""

from __future__ import annotations

import json

from drakit.conformance.backends.containers import container_env, from_cri_event, resolve


def _spec(tmp_path, name="k8s.gpu.example.com-gpu_x.json"):
    spec = {"cdiVersion": "0.6.0", "kind": "k8s.gpu.example.com/gpu",
            "containerEdits": {"env": ["SHARED=1"]},
            "devices": [{"name": "x-gpu0", "containerEdits": {"env": ["GPU=0", "APP=cdi"],
                                                               "mounts": [{"hostPath": "/h", "containerPath": "/c", "options": ["ro"]}],
                                                               "deviceNodes": [{"path": "/dev/fake0"}]}},
                        {"name": "x-gpu1", "containerEdits": {"env": ["GPU=1"]}}]}
    (tmp_path / name).write_text(json.dumps(spec))


def test_resolve_applies_spec_edits_once_then_each_device_and_cdi_env_replaces(tmp_path):
    _spec(tmp_path)
    got = resolve(["k8s.gpu.example.com/gpu=x-gpu0", "k8s.gpu.example.com/gpu=x-gpu1"], [tmp_path], ["APP=spec", "KEEP=1"])
    assert got["env"] == ["APP=cdi", "KEEP=1", "SHARED=1", "GPU=1"]
    assert got["mounts"] == [{"containerPath": "/c", "hostPath": "/h", "options": ["ro"], "readOnly": True,
                              "source": "k8s.gpu.example.com/gpu=x-gpu0"}]
    assert got["deviceNodes"] == [{"containerPath": "/dev/fake0", "hostPath": "/dev/fake0",
                                   "source": "k8s.gpu.example.com/gpu=x-gpu0"}]
    assert "error" not in got


def test_an_unknown_cdi_id_is_the_runtimes_error(tmp_path):
    _spec(tmp_path)
    got = resolve(["k8s.gpu.example.com/gpu=nope"], [tmp_path], [])
    assert got["error"] == "CDI device injection failed: unresolvable CDI devices k8s.gpu.example.com/gpu=nope"


def test_literal_env_only_and_the_cri_record_has_the_same_shape():
    assert container_env({"env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {}}}]}) == ["A=1"]
    event = {"event": "CreateContainer", "cdiDevices": ["v/c=d"],
             "effective": {"env": ["A=1"], "mounts": [{"containerPath": "/c", "hostPath": "/h", "source": "v/c=d"}],
                           "deviceNodes": []}}
    assert from_cri_event(event) == {"cdiDevices": ["v/c=d"], "env": ["A=1"],
                                     "mounts": [{"containerPath": "/c", "hostPath": "/h", "source": "v/c=d"}],
                                     "deviceNodes": []}
