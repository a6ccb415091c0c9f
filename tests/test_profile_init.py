"""``drakit profile init`` without a cluster: the inference from saved ResourceSlices, the
generalisation of probe containers' environment into containerEnv templates (checked with the
driver suite's own expected_env), the draft loading as a profile, and bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from drakit.conformance.cli import main
from drakit.conformance.profileinit.envgen import Observation, generalise_env
from drakit.conformance.profileinit.infer import InferError, infer, role_for
from drakit.conformance.profileinit.render import Extras, render
from drakit.fake_driver.envtemplate import values_for
from drakit.fake_driver.profile import parse_profile

DRIVER = "gpu.example.com"


def _slice(devices: list[dict[str, Any]], node: str | None = "n1", pool: str = "n1", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                         "devices": devices, **spec}
    if node:
        s["nodeName"] = node
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{pool}-s"}, "spec": s}


def _dev(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"productName": {"string": "X100"}, "minor": {"int": 0},
                                          "resource.kubernetes.io/numaNode": {"int": 0},
                                          "driverVersion": {"version": "1.2.3"}},
            "capacity": {"memory": {"value": "80Gi"}}, **extra}


def _draft_text(draft: Any, extras: Extras | None = None) -> str:
    text = render(draft, extras or Extras())
    parse_profile(yaml.safe_load(text), "draft.yaml")  # a draft always loads as a profile
    return text


def test_attributes_map_to_logical_keys_with_types_and_numa() -> None:
    draft = infer(DRIVER, [_slice([_dev("gpu-0"), _dev("gpu-1")])])
    keys = {a.key: (a.name, a.type, a.matched) for a in draft.attributes}
    assert keys["model"] == ("productName", "string", True)
    assert keys["index"] == ("minor", "int", True)
    assert keys["version"] == ("driverVersion", "version", True)
    assert keys["numa"] == ("resource.kubernetes.io/numaNode", "int", True)
    assert draft.numa_node and draft.pools == "per-node" and draft.role == "gpu"
    assert draft.class_proposed and draft.class_name == DRIVER
    data = yaml.safe_load(_draft_text(draft))
    assert data["driverUnderTest"]["attributeTypes"]["model"] == "string"
    assert data["values"]["gpu"] == {"model": "X100", "version": "1.2.3", "memory": "80Gi"}
    assert data["driverUnderTest"]["optional"] == []


def test_behaviours_the_devices_show_are_declared_with_why() -> None:
    devs = [_dev("a", allowMultipleAllocations=True,
                 capacity={"memory": {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}),
            _dev("b", bindingConditions=["ready"], bindingFailureConditions=["failed"]),
            _dev("c", taints=[{"key": "k", "effect": "NoSchedule"}], consumesCounters=[{"counterSet": "cs", "counters": {}}])]
    draft = infer(DRIVER, [_slice(devs, sharedCounters=[{"name": "cs", "counters": {"mem": {"value": "1"}}}])])
    assert [b.name for b in draft.optional] == ["consumable-capacity", "partitionable-devices", "binding-conditions",
                                                "device-taints"]
    text = _draft_text(draft)
    assert "requestPolicy: default 1Gi; range 1Gi..any step 1Gi" in text
    assert "# - admin-access   # decide:" in text  # intent: a commented line saying what to decide


def test_pools_any_mixed_types_and_unknown_names() -> None:
    d1 = _dev("a")
    d1["attributes"]["weird_name"] = {"string": "x"}
    d1["attributes"]["not-an-identifier"] = {"string": "x"}  # the API server refuses it: left out
    d2 = _dev("b")
    d2["attributes"]["weird_name"] = {"int": 1}
    draft = infer(DRIVER, [_slice([d1, d2], node=None, allNodes=True)])
    assert draft.pools == "any"
    assert all(a.name != "not-an-identifier" for a in draft.attributes)
    weird = next(a for a in draft.attributes if a.name == "weird_name")
    assert weird.key == "weirdName" and weird.type is None and "several types" in weird.note
    assert "weirdName" not in yaml.safe_load(_draft_text(draft))["driverUnderTest"]["attributeTypes"]


def test_a_selecting_device_class_is_found() -> None:
    classes = [{"metadata": {"name": "other"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == 'x.y'"}}]}},
               {"metadata": {"name": "mine"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}]
    draft = infer(DRIVER, [_slice([_dev("a")])], classes)
    assert draft.class_name == "mine" and not draft.class_proposed


def test_no_slice_of_the_driver_names_what_was_seen() -> None:
    other = _slice([_dev("a")])
    other["spec"]["driver"] = "other.example.com"
    with pytest.raises(InferError, match="no ResourceSlice of driver 'gpu.example.com' .drivers seen: other.example.com"):
        infer(DRIVER, [other], source="f.yaml")


def test_role_from_the_driver_name() -> None:
    assert role_for("gpu.nvidia.com") == "gpu" and role_for("dra.net") == "nic" and role_for("dra.cpu") == "cpu"
    assert role_for("test-driver.cdi.k8s.io") == "dev"


def _claim(name: str, uid: str, devices: list[str], request: str = "probereq", node: str = "node-1") -> tuple[dict[str, Any], list[dict[str, str]]]:
    claim = {"metadata": {"name": name, "namespace": "ns", "uid": uid},
             "status": {"allocation": {"devices": {"results": [{"request": request, "driver": DRIVER, "pool": node, "device": d}
                                                               for d in devices]}}}}
    return claim, [values_for(r, claim, node) for r in claim["status"]["allocation"]["devices"]["results"]]


def _expected(templates: Any, claim: dict[str, Any], node: str = "node-1") -> dict[str, Any]:
    """What the driver suite's containerEnv check would want of the container, from the draft."""
    from drakit.conformance.cases.driverchecks import expected_env
    env = {k: ({"pattern": v["pattern"]} if isinstance(v, dict) else v) for k, v in templates}
    profile = parse_profile({"version": 2, "name": "t", "drivers": {"gpu": DRIVER},
                             "driverUnderTest": {"containerEnv": env}})
    return expected_env(profile.under_test, claim, None, node)


def _matches(want: dict[str, Any], got: dict[str, str]) -> bool:
    return all(k in got and (v.fullmatch(got[k]) if hasattr(v, "fullmatch") else got[k] == v) for k, v in want.items())


@pytest.mark.parametrize("style", ["fake", "test-driver", "example", "example-driver", "cpuset"])
def test_env_is_generalised_over_devices_and_claims(style: str) -> None:
    one, one_v = _claim("probe-one", "0f1e2d3c-1111-2222-3333-444455556666", ["gpu-3"])
    two, two_v = _claim("probe-two", "aa1e2d3c-1111-2222-3333-444455556666", ["gpu-1", "gpu-2"])

    def env(values: list[dict[str, str]]) -> dict[str, str]:
        if style == "fake":  # DRAKIT_{DEVICE}_DEVICE={device}
            return {f"DRAKIT_{v['device'].replace('-', '_').upper()}_DEVICE": v["device"] for v in values}
        if style == "test-driver":  # claim_<claim>_<request>=true, non-alphanumerics as _
            return {f"claim_{v['claim'].replace('-', '_')}_{v['request']}": "true" for v in values}
        if style == "example":  # GPU_DEVICE_<i>=<device>, i an index in the claim: no placeholder gives it
            return {**{f"GPU_DEVICE_{i}": v["device"] for i, v in enumerate(values)},
                    **{f"GPU_DEVICE_{i}_RESOURCE_CLAIM": v["claimUID"] for i, v in enumerate(values)}}
        if style == "example-driver":  # dra-example-driver: GPU_DEVICE_<device without gpu->=<device>, cdi.go's claim UID
            return {**{f"GPU_DEVICE_{v['device'][4:]}": v["device"] for v in values},
                    **{f"GPU_DEVICE_{v['device'].replace('-', '_').upper()}_RESOURCE_CLAIM": v["claimUID"] for v in values},
                    "DRA_ADMIN_ACCESS": "false", "DRA_RESOURCE_DRIVER_NAME": DRIVER}
        return {f"DRA_CPUSET_{values[0]['claimUID']}": "0-3" if len(values) == 1 else "4,6"}

    result = generalise_env([Observation(env(one_v), one_v), Observation(env(two_v), two_v)])
    templates = dict(result.templates)
    if style == "fake":
        assert templates == {"DRAKIT_{device|ident|upper}_DEVICE": "{device}"}
    elif style == "test-driver":
        assert templates == {"claim_{claim|ident}_{request}": "true"}
    elif style == "example":
        assert templates["GPU_DEVICE_0"] == {"pattern": "gpu\\-[0-9]+"}
        assert templates["GPU_DEVICE_0_RESOURCE_CLAIM"] == "{claimUID}"
        assert result.unexplained == ("GPU_DEVICE_1", "GPU_DEVICE_1_RESOURCE_CLAIM")
    elif style == "example-driver":
        assert templates == {"GPU_DEVICE_{device|trimprefix:gpu-}": "{device}", "DRA_ADMIN_ACCESS": "false",
                             "DRA_RESOURCE_DRIVER_NAME": "{driver}",
                             "GPU_DEVICE_{device|ident|upper}_RESOURCE_CLAIM": "{claimUID}"}, templates
    else:
        assert templates == {"DRA_CPUSET_{claimUID}": {"pattern": ".+"}}  # 0-3 and 4,6: no one shape
    # what the driver suite would want of each probe container, it had
    for claim, values in ((one, one_v), (two, two_v)):
        want = _expected(result.templates, claim)
        assert want and _matches(want, env(values)), (want, env(values))


def test_no_observation_no_template() -> None:
    assert generalise_env([]).templates == ()


# -- the command ------------------------------------------------------------------------------------


def _fake_slices(path: Path) -> Path:
    from drakit.fake_driver.classes import device_classes
    from drakit.fake_driver.slices import publish_slices
    from drakit.fake_hw.inventory import build_inventory
    items = [dict(s, kind="ResourceSlice", apiVersion="resource.k8s.io/v1")
             for i, shape in enumerate(["server-8gpu", "acme-partitionable"])
             for s in publish_slices(build_inventory(shape, f"node-{i}"))]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items + device_classes()}))
    return path


def test_slices_of_the_fake_driver_draft_a_profile_that_lints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.yaml"
    assert main(["profile", "init", "--driver", "gpu.acme.example.com", "--slices", str(_fake_slices(tmp_path / "s.yaml")),
                 "-o", str(out)]) == 0
    data = yaml.safe_load(out.read_text())
    assert data["version"] == 2 and data["drivers"] == {"gpu": "gpu.acme.example.com"}
    assert data["classes"] == {"gpu": "gpu.acme.example.com"}
    assert data["attributes"]["gpu"]["version"] == "driverVersion" and data["capacities"]["gpu"] == {"memory": "memory"}
    assert data["driverUnderTest"]["optional"] == ["partitionable-devices"]
    assert "next: read its commented lines, then: drakit lint --vendor" in capsys.readouterr().err
    assert main(["lint", "--vendor", str(out), "conformance/suites/driver"]) == 0


@pytest.mark.parametrize("argv, code, message", [
    (["--slices", "/nonexistent/s.yaml"], 2, "--slices /nonexistent/s.yaml: cannot read: No such file or directory"),
    (["--slices", "{bad"], 2, "not YAML or JSON"),
    (["--slices", "{other}"], 1, "no ResourceSlice of driver 'gpu.acme.example.com' (drivers seen: other.example.com)"),
    (["--slices", "{empty}"], 2, "no ResourceSlice in the file"),
    ([], 2, "give one of --slices FILE, --kubeconfig K and --cluster local"),
    (["--slices", "{empty}", "--kubeconfig", "k"], 2, "not --slices and --kubeconfig"),
    (["--slices", "{empty}", "--plugin", "x"], 2, "--plugin starts the driver on drakit's local cluster"),
    (["--cluster", "local", "--plugin", "x {nope}"], 2, "--plugin: unknown placeholder {nope}"),
    (["--cluster", "local", "--plugin", "x 'unclosed"], 2, "--plugin: No closing quotation"),
])
def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str) -> None:
    (tmp_path / "bad.yaml").write_text("a: [1,\n")
    other = _slice([_dev("a")])
    other["spec"]["driver"] = "other.example.com"
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    (tmp_path / "empty.yaml").write_text(yaml.safe_dump({"kind": "List", "items": []}))
    files = {"{bad": str(tmp_path / "bad.yaml"), "{other}": str(tmp_path / "other.yaml"), "{empty}": str(tmp_path / "empty.yaml")}
    argv = [files.get(a, a) for a in argv]
    assert main(["profile", "init", "--driver", "gpu.acme.example.com", *argv]) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_values_no_placeholder_explains_become_patterns_of_their_shape() -> None:
    """UUIDs and PCI addresses (the fake driver's DRAKIT_<DEVICE>_UUID): hex runs; one shape or ``.+``."""
    from drakit.conformance.profileinit.envgen import _pattern
    uuids = ["GPU-55afd92c-6c6c-5069-bf69-fdf8ca2d9865", "GPU-6bc83dd1-678b-5cf5-bbcc-ccc74f3d45ef"]
    assert _pattern(uuids) == "GPU\\-[0-9a-f]+\\-[0-9a-f]+\\-[0-9a-f]+\\-[0-9a-f]+\\-[0-9a-f]+"
    assert _pattern(["0000:1b:00.0", "0000:3d:00.0"]) == "[0-9a-f]+:[0-9a-f]+:[0-9a-f]+\\.[0-9a-f]+"
    assert _pattern(["gpu-1", "gpu-22"]) == "gpu\\-[0-9]+"
    assert _pattern(["0-3", "4,6"]) == ".+"
    one, one_v = _claim("probe-one", "0f1e2d3c-1111-2222-3333-444455556666", ["gpu0"])
    two, two_v = _claim("probe-two", "aa1e2d3c-1111-2222-3333-444455556666", ["gpu1", "gpu2"])
    env = {1: {"DRAKIT_GPU0_UUID": uuids[0]}, 2: {"DRAKIT_GPU1_UUID": uuids[1], "DRAKIT_GPU2_UUID": uuids[0]}}
    result = generalise_env([Observation(env[1], one_v), Observation(env[2], two_v)])
    assert dict(result.templates) == {"DRAKIT_{device|upper}_UUID": {"pattern": _pattern(uuids)}}
