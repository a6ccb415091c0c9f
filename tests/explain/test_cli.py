"""``drakit explain`` from the command line, on a saved state: text (reason first, one screen),
JSON valid against its schema, claim and template files, exit codes and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from drakit.conformance.cli import main
from drakit.conformance.explain.state import KINDS

from tests.reference.helpers import DRIVER, NS, claim, cluster, pod, running, standard

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "conformance" / "explain" / "explain.v1.json").read_text())


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """One node, two GPUs: d0 held by a running pod, d1 an h100; pod p wants an a100."""
    c = standard(cluster(), devices=[{"name": "d0", "attributes": {"model": {"string": "a100"}}},
                                     {"name": "d1", "attributes": {"model": {"string": "h100"}}}])
    c.apply(claim("held"))
    c.apply(pod("holder", claim_name="held"))
    sel = [{"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'a100'"}}]
    c.apply(claim("want", selectors=sel))
    c.apply(pod("p", claim_name="want"))
    assert running(c, "holder") and not running(c, "p")
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([o for k in KINDS for o in c.list(k)]))
    return path


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    rc = main(["explain", *argv])
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_text_puts_the_reason_first_and_fits_a_screen(state: Path, capsys: Any) -> None:
    rc, out, err = _run(capsys, "pod", f"{NS}/p", "--state", str(state))
    assert rc == 1 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"pod {NS}/p: unschedulable: 0/1 nodes are available: 1 cannot allocate all claims."
    assert lines[1].startswith("reason: node node-a: claim demo/want, request r needs 1 device(s), 0 of 2 of class gpu pass; "
                               f"{DRIVER}/s/d0: already allocated to claim {NS}/held")
    assert lines[2].startswith(f"would fit on node-a after one change: free the device(s) held by claim {NS}/held")
    assert f"{DRIVER}/s/d1  selector: claim {NS}/want selector #0 is false" in out and "model = 'h100'" in out
    assert len(lines) <= 25 and max(map(len, lines)) < 200


def test_json_validates_against_the_schema(state: Path, capsys: Any) -> None:
    rc, out, _ = _run(capsys, "pod", f"{NS}/p", "--state", str(state), "-o", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert rc == 1 and doc["verdict"] == "unschedulable" and doc["summary"]["checked"]
    bad = dict(doc, verdict="maybe")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)


def test_scheduled_pod_and_allocated_claim_exit_0(state: Path, capsys: Any) -> None:
    rc, out, _ = _run(capsys, "pod", f"{NS}/holder", "--state", str(state))
    assert rc == 0 and out.startswith(f"pod {NS}/holder: scheduled: already scheduled on node node-a")
    rc, out, _ = _run(capsys, "claim", f"{NS}/held", "--state", str(state), "-o", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert rc == 0 and doc["verdict"] == "allocated" and doc["fitsOn"] == ["node-a"]


def test_claim_and_template_files_would_they_fit(state: Path, tmp_path: Path, capsys: Any) -> None:
    h100 = [{"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'h100'"}}]
    f = tmp_path / "claim.yaml"
    f.write_text(yaml.safe_dump({**claim("new", selectors=h100)}))
    rc, out, _ = _run(capsys, "-f", str(f), "--state", str(state))
    assert rc == 0 and out.startswith(f"claim {NS}/new: fits: fits on 1 of 1 nodes")
    t = tmp_path / "template.yaml"
    t.write_text(yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                                 "metadata": {"name": "t"},
                                 "spec": {"spec": claim("x", selectors=[{"cel": {"expression": "false"}}])["spec"]}}))
    rc, out, _ = _run(capsys, "-f", str(t), "-n", NS, "--state", str(state), "-o", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert rc == 1 and doc["subject"] == f"template {NS}/t" and doc["verdict"] == "unschedulable"


def test_save_state_round_trips(state: Path, tmp_path: Path, capsys: Any) -> None:
    saved = tmp_path / "saved.json"
    rc1, out1, _ = _run(capsys, "pod", f"{NS}/p", "--state", str(state), "--save-state", str(saved),
                        "--feature-gates", "DRAConsumableCapacity=false")
    assert json.loads(saved.read_text())["featureGates"]["DRAConsumableCapacity"] is False
    rc2, out2, _ = _run(capsys, "pod", f"{NS}/p", "--state", str(saved))
    assert (rc1, out1) == (rc2, out2)


def test_saved_state_keeps_no_container_env_nor_annotations(state: Path, tmp_path: Path, capsys: Any) -> None:
    """--save-state now reads every namespace's pods: a saved file must not carry what a pod's
    env or kubectl's last-applied annotation hold (credentials), only what scheduling reads."""
    docs = list(yaml.safe_load_all(state.read_text()))
    for d in docs:
        if d.get("kind") == "Pod":
            d["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = "TOKEN-A"
            for c in d["spec"]["containers"]:
                c["env"] = [{"name": "API_KEY", "value": "TOKEN-B"}]
                c["command"] = ["sh", "-c", "login --password TOKEN-C"]
    state.write_text(yaml.safe_dump_all(docs))
    saved = tmp_path / "saved.json"
    rc1, out1, _ = _run(capsys, "pod", f"{NS}/p", "--state", str(state), "--save-state", str(saved))
    text = saved.read_text()
    assert "TOKEN-" not in text and "API_KEY" not in text
    assert '"resources"' in text  # what scheduling reads stays
    assert _run(capsys, "pod", f"{NS}/p", "--state", str(saved))[:2] == (rc1, out1)


@pytest.mark.parametrize("argv,message", [
    (["pod", f"{NS}/nope"], f"drakit explain: pod {NS}/nope not found in STATE"),
    (["pod"], "drakit explain: say what to explain: pod NS/NAME, claim NS/NAME, or -f CLAIM_OR_TEMPLATE.yaml"),
    (["pod", f"{NS}/p", "--feature-gates", "Nope"], "drakit explain: --feature-gates: "),
])
def test_bad_input_is_one_line_exit_2(state: Path, capsys: Any, argv: list[str], message: str) -> None:
    rc, out, err = _run(capsys, *argv, "--state", str(state))
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(message.replace("STATE", str(state)))


def test_bad_files_and_unreachable_cluster_are_one_line(tmp_path: Path, capsys: Any) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: [\n")
    rc, _, err = _run(capsys, "pod", "a/b", "--state", str(broken))
    assert rc == 2 and err.startswith(f"drakit explain: {broken}:") and len(err.splitlines()) == 1
    rc, _, err = _run(capsys, "pod", "a/b", "--state", str(tmp_path / "missing.yaml"))
    assert rc == 2 and "cannot read" in err and len(err.splitlines()) == 1
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "x",
                                   "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:9"}}],
                                   "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
                                   "users": [{"name": "x", "user": {"token": "t"}}]}))
    rc, _, err = _run(capsys, "pod", "a/b", "--kubeconfig", str(cfg))
    assert rc == 2 and len(err.splitlines()) == 1 and "cannot reach the API server" in err
    notclaim = tmp_path / "pod.yaml"
    notclaim.write_text(yaml.safe_dump(pod("x")))
    rc, _, err = _run(capsys, "-f", str(notclaim), "--state", str(broken))
    assert rc == 2 and len(err.splitlines()) == 1
