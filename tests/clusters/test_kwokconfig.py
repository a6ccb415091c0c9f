"""clusters.local.kwokconfig: the project's kwok Stage sets (no binaries needed)."""

from __future__ import annotations

import pytest
import yaml

from clusters.local import kwokconfig


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


def test_unknown_stage_set():
    with pytest.raises(kwokconfig.StageError, match="unknown stage set"):
        kwokconfig.stage_documents("nope")


def test_fake_node_is_managed_by_kwok():
    node = kwokconfig.fake_node("n1", {"x": "y"})
    k, v = kwokconfig.NODE_ANNOTATION
    assert node["metadata"]["annotations"][k] == v
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
    assert node["metadata"]["labels"]["x"] == "y"
