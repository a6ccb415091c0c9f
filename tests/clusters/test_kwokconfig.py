"""drakit.clusters.local.kwokconfig: the project's kwok Stage sets (no binaries needed)."""

from __future__ import annotations

import pytest
import yaml

from drakit.clusters.local import kwokconfig


@pytest.mark.parametrize("stage_set", sorted(kwokconfig.STAGE_SETS))
def test_stage_set_renders_to_stage_documents(stage_set):
    docs = list(yaml.safe_load_all(kwokconfig.render_kwok_config(stage_set)))
    assert docs and all(d["apiVersion"] == "kwok.x-k8s.io/v1alpha1" and d["kind"] == "Stage" for d in docs)
    kinds = {d["spec"]["resourceRef"]["kind"] for d in docs}
    assert kinds == {"Node", "Pod"}
    for d in docs:
        nxt = d["spec"]["next"]
        assert "statusTemplateFile" not in nxt
        if "statusTemplate" in nxt:
            assert "{{" in nxt["statusTemplate"]


def _selector(docs, name):
    return next(d for d in docs if d["metadata"]["name"] == name)["spec"]["selector"]


def test_prepared_set_gates_running_on_annotation():
    docs = kwokconfig.stage_documents(kwokconfig.PREPARED)
    sel = _selector(docs, "drakit-pod-running-when-prepared")
    assert sel["matchAnnotations"] == {kwokconfig.PREPARED_ANNOTATION: "true"}
    no_claims = _selector(docs, "drakit-pod-running-without-claims")
    keys = {e["jq"]["key"]: e["jq"]["operator"] for e in no_claims["matchExpressions"]}
    assert keys[".spec.resourceClaims"] == "DoesNotExist"
    assert keys[".status.extendedResourceClaimStatus"] == "DoesNotExist"


def test_on_bind_set_runs_every_pod():
    docs = kwokconfig.stage_documents(kwokconfig.ON_BIND)
    sel = _selector(docs, "drakit-pod-running-on-bind")
    assert "matchAnnotations" not in sel
    assert all(".spec.resourceClaims" not in e["jq"]["key"] for e in sel["matchExpressions"])


def test_delete_waits_for_unprepare():
    for s in kwokconfig.STAGE_SETS:
        sel = _selector(kwokconfig.stage_documents(s), "drakit-pod-delete")
        ops = {e["jq"]["key"]: (e["jq"]["operator"], e["jq"].get("values")) for e in sel["matchExpressions"]}
        assert ops[f'.metadata.annotations["{kwokconfig.PREPARED_ANNOTATION}"]'] == ("NotIn", ["true"])


def test_nodes_only_set_never_starts_a_pod():
    docs = kwokconfig.stage_documents(kwokconfig.NODES_ONLY)
    pod_stages = [d for d in docs if d["spec"]["resourceRef"]["kind"] == "Pod"]
    assert [d["metadata"]["name"] for d in pod_stages] == ["drakit-pod-delete"]
    assert pod_stages[0]["spec"]["next"] == {"delete": True}


def test_unknown_stage_set():
    with pytest.raises(kwokconfig.StageError, match="unknown stage set"):
        kwokconfig.stage_documents("nope")


def test_fake_node_is_managed_by_kwok():
    node = kwokconfig.fake_node("n1", {"x": "y"})
    k, v = kwokconfig.NODE_ANNOTATION
    assert node["metadata"]["annotations"][k] == v
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
    assert node["metadata"]["labels"]["x"] == "y"


def test_fake_node_declares_what_a_dra_kubelet_declares():
    node = kwokconfig.fake_node("n1")
    assert node["status"]["declaredFeatures"] == sorted(kwokconfig.DECLARED_FEATURES)
    assert {"DRANodeAllocatableResources", "DRAOptionalNodeOperations"} <= set(kwokconfig.DECLARED_FEATURES)
    assert "allocatable" not in node["status"]
    own = kwokconfig.fake_node("n2", declared_features=["DRAOptionalNodeOperations"], allocatable={"cpu": "8"})
    assert own["status"] == {"declaredFeatures": ["DRAOptionalNodeOperations"],
                             "capacity": {"pods": "110", "cpu": "8"}, "allocatable": {"pods": "110", "cpu": "8"}}


def test_node_stage_declares_the_same_features_and_keeps_a_nodes_own():
    ready = next(d for d in kwokconfig.stage_documents(kwokconfig.ON_BIND)
                 if d["metadata"]["name"] == "drakit-node-ready")
    template = ready["spec"]["next"]["statusTemplate"]
    head, _, rest = template.partition("declaredFeatures:")
    keep, _, default = rest.partition("{{ else }}")
    assert "{{ with .status.declaredFeatures }}" in keep
    default_block = default.partition("{{ end }}")[0]
    listed = [ln.strip()[2:] for ln in default_block.splitlines() if ln.strip().startswith("- ")]
    assert listed == list(kwokconfig.DECLARED_FEATURES)


def test_kwok_nodes_declare_features_on_the_cluster(local_cluster):
    """On the real control plane: a kwok node without status gets the stage's declared features
    (so ResourceSlices with nodeAllocatableResources are admitted for it); a node created with its
    own list keeps it, and the API server's NodeDeclaredFeatures admission refuses such a slice."""
    import json
    import time

    client = pytest.importorskip("kubernetes.client", reason="the kubernetes Python client is needed")
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(local_cluster.kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    bare = kwokconfig.fake_node("kwokcfg-bare")
    del bare["status"]
    own = kwokconfig.fake_node("kwokcfg-own", declared_features=["DRAOptionalNodeOperations"])
    try:
        for node in (bare, own):
            core.create_node(node)
        deadline, features = time.monotonic() + 60, {}
        while time.monotonic() < deadline and len(features) < 2:
            for name in ("kwokcfg-bare", "kwokcfg-own"):
                st = core.read_node(name).status
                if any(c.type == "Ready" and c.status == "True" for c in st.conditions or []):
                    features[name] = st.declared_features
            time.sleep(0.25)
        assert features == {"kwokcfg-bare": list(kwokconfig.DECLARED_FEATURES),
                            "kwokcfg-own": ["DRAOptionalNodeOperations"]}

        def cpu_slice(node: str) -> dict:
            return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-cpus"},
                    "spec": {"driver": "cpu.kwokcfg.example.com", "nodeName": node,
                             "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                             "devices": [{"name": "ccx-0",
                                          "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "4"}}}}]}}

        custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", cpu_slice("kwokcfg-bare"))
        with pytest.raises(client.ApiException) as refused:
            custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", cpu_slice("kwokcfg-own"))
        assert refused.value.status == 403
        message = json.loads(refused.value.body)["message"]
        assert 'node "kwokcfg-own" does not support DRANodeAllocatableResources' in message
    finally:
        for name in ("kwokcfg-bare", "kwokcfg-own"):
            for delete in (lambda n=name: custom.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices",
                                                                              f"{n}-cpus"),
                           lambda n=name: core.delete_node(n)):
                try:
                    delete()
                except client.ApiException:
                    pass
