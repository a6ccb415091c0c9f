"""The driver suite's pure parts: inventory binding, the slice checks, the driver verdict, planted faults."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from drakit.conformance.cases.driverchecks import expected_env, slice_problems
from drakit.conformance.spec.case import DeviceNeed, Inventory
from drakit.conformance.spec.inventory import Unbound, bind, published_devices
from drakit.fake_driver.planted import planted, wrong_attribute_type
from drakit.fake_driver.profile import load_vendor_profile
from drakit.reports import compute_verdict
from drakit.reports.driver import driver_reasons, driver_section

DRIVER = "d.example.com"


def pool_slice(node: str, devices: list[dict], generation: int = 1, count: int = 1, pool: str | None = None) -> dict:
    return {"metadata": {"name": f"{node}-{generation}"},
            "spec": {"driver": DRIVER, "nodeName": node, "devices": devices,
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count}}}


def dev(name: str, **attrs: dict) -> dict:
    return {"name": name, "attributes": attrs}


SLICES = [pool_slice("n1", [dev("d0", index={"int": 0}), dev("d1", index={"int": 1})]),
          pool_slice("n2", [dev("d0", index={"int": 0})])]


def test_binding_takes_devices_in_order_and_honours_same_and_other_node() -> None:
    devices = published_devices(SLICES, DRIVER)
    inv = Inventory((DeviceNeed("a"), DeviceNeed("b", same_node_as="a"), DeviceNeed("c", other_node_than="a")))
    got = bind(inv, devices, DRIVER)
    index = '"index" in device.attributes["d.example.com"] && device.attributes["d.example.com"].index == '
    assert got == {"inv.nodes": "2", "inv.a.node": "n1", "inv.a.pool": "n1", "inv.a.device": "d0",
                   "inv.b.node": "n1", "inv.b.pool": "n1", "inv.b.device": "d1",
                   "inv.b.cel": index + "1",  # d1 alone has index 1
                   # n2's d0 has index 0 too, but on another node: each is alone on its own
                   "inv.a.cel": index + "0", "inv.c.cel": index + "0",
                   "inv.c.node": "n2", "inv.c.pool": "n2", "inv.c.device": "d0",
                   **{f"inv.{n}.capacity": "{}" for n in "abc"}}


def test_binding_finds_selectable_and_counter_sharing_devices() -> None:
    counters = {"sharedCounters": [{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}]}
    whole = {"name": "gpu0", "attributes": {"uuid": {"string": "u0"}},
             "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "80Gi"}}}]}
    part = {"name": "gpu0-p0", "attributes": {"uuid": {"string": "u0-p0"}},
            "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "10Gi"}}}]}
    plain = {"name": "d0"}
    pool = [pool_slice("n1", [whole, part], count=2), {**pool_slice("n1", [], count=2), "metadata": {"name": "c"}}]
    pool[1]["spec"] = {**pool[1]["spec"], **counters, "devices": []}
    devices = published_devices(pool + [pool_slice("n2", [plain])], DRIVER)
    inv = Inventory((DeviceNeed("a", has="consumesCounters", selectable=True),
                     DeviceNeed("b", selectable=True, shares_counters_with="a"), DeviceNeed("c", plain_node=True)))
    got = bind(inv, devices, DRIVER)
    assert not isinstance(got, Unbound), got
    assert (got["inv.a.device"], got["inv.b.device"], got["inv.c.node"]) == ("gpu0", "gpu0-p0", "n2")
    assert got["inv.a.cel"] == '"uuid" in device.attributes["d.example.com"] && device.attributes["d.example.com"].uuid == "u0"'
    none = bind(Inventory((DeviceNeed("a", selectable=True, plain_node=True),)), devices, DRIVER)
    assert isinstance(none, Unbound) and none.message.startswith(
        "the case needs device 'a': singled out by its attribute values (one, or a combination no other device of its node has) "
        "(2 of 3), on a node whose devices consume no shared counters (1 of 3), none has all of it"), none.message


def test_binding_says_what_is_missing() -> None:
    devices = published_devices(SLICES, DRIVER)
    three = bind(Inventory((DeviceNeed("a"), DeviceNeed("b", same_node_as="a"), DeviceNeed("c", same_node_as="a"))),
                 devices, DRIVER)
    assert isinstance(three, Unbound) and "no choice of them meets 'b' on the node of a; 'c' on the node of a" \
        in three.message
    assert "publishes 3 devices on 2 node(s)" in three.message
    four = bind(Inventory(tuple(DeviceNeed(n) for n in "abcd")), devices, DRIVER)
    assert isinstance(four, Unbound) and four.message.startswith(
        "each device the case needs is published, but no choice of them gives 4 distinct devices (a: 3 candidate(s)"), \
        four.message
    none = bind(Inventory((DeviceNeed("a"),)), [], DRIVER)
    assert isinstance(none, Unbound) and "publishes no devices" in none.message
    attr = bind(Inventory((DeviceNeed("a", attribute="numa"),)), devices, DRIVER, {"numa": "x.io/numa"})
    assert isinstance(attr, Unbound) and "publishing x.io/numa (0 of 3)" in attr.message


def test_an_incomplete_pool_is_not_inventory() -> None:
    half = [pool_slice("n1", [dev("d0")], count=2)]
    assert published_devices(half, DRIVER) == []


class Dut:
    driver, role, pools, numa_node = DRIVER, "gpu", "per-node", False
    attribute_types = (("index", f"{DRIVER}/index", "int"),)
    container_env = (("claim_{claimId}_{requestId}", "true"), ("DEV_{DEVICE}", "{device}"))


def test_slice_checks_pass_good_slices_and_name_each_problem() -> None:
    assert slice_problems(SLICES, Dut, []) == []
    wrong = wrong_attribute_type(copy.deepcopy(SLICES))
    assert slice_problems(wrong, Dut, []) == [
        "device n1/d0: attribute d.example.com/index (index) is string, the profile declares int",
        "device n1/d1: attribute d.example.com/index (index) is string, the profile declares int"]
    stale = SLICES + [pool_slice("n2", [dev("d0", index={"int": 0})], generation=0)]
    assert any("older generations left" in p for p in slice_problems(stale, Dut, []))
    short = [pool_slice("n1", [dev("d0", index={"int": 0})], count=2)]
    assert slice_problems(short, Dut, []) == ["pool n1: 1 slices of generation 1, resourceSliceCount says 2"]
    assert slice_problems(SLICES, Dut, [f"{DRIVER}/memory"])[0] == "device n1/d0: capacity d.example.com/memory is not published"
    numa = type("NumaDut", (Dut,), {"numa_node": True})
    assert "resource.kubernetes.io/numaNode is not published" in slice_problems(SLICES, numa, [])[0]
    assert slice_problems([], Dut, []) == [f"the driver {DRIVER} publishes no ResourceSlice"]


def test_expected_env_fills_the_profile_templates() -> None:
    claim = {"metadata": {"name": "my-claim"}, "status": {"allocation": {"devices": {"results": [
        {"request": "gpu/fast", "driver": DRIVER, "pool": "n1", "device": "dev-0"},
        {"request": "other", "driver": "x.example.com", "pool": "n1", "device": "x"}]}}}}
    assert expected_env(Dut, claim, None) == {"claim_my_claim_gpu": "true", "DEV_DEV_0": "dev-0"}


def case(status: str, behaviour: str | None = None, profile: str = "required") -> dict:
    c = {"id": f"x/{behaviour or 'api'}", "backend": "cluster", "status": status, "profile": profile, "file": "f",
         "skip": {"category": "inventory", "message": "none"} if status == "skipped" else None}
    if behaviour:
        c["behaviour"] = behaviour
    return c


VENDOR = {"vendor": {"fakeDriver": False, "drivers": [DRIVER]}}


def verdict(cases: list[dict], environment: dict | None = None) -> str:
    return compute_verdict(cases, driver_reasons(cases, environment))["result"]


def test_a_run_that_never_exercised_the_driver_under_test_is_incomplete() -> None:
    api_only = [case("passed")]
    assert verdict(api_only) == "pass"  # drakit's fake driver, no driver suite
    assert verdict(api_only, VENDOR) == "incomplete"  # a vendor's driver, never exercised
    reason = driver_reasons(api_only, VENDOR)[0]
    assert reason["code"] == "driver-not-exercised" and DRIVER in reason["message"]
    slices_only = [case("passed"), case("passed", "slices")]
    assert verdict(slices_only) == "incomplete"
    exercised = slices_only + [case("passed", "allocation")]
    assert verdict(exercised, VENDOR) == "pass"
    finding = exercised + [case("failed", "plugin-restart", profile="optional")]
    assert verdict(finding, VENDOR) == "pass"
    section = driver_section({"cases": finding, "environment": VENDOR})
    rows = {r["id"]: r["status"] for r in section["behaviours"]}
    assert rows["allocation"] == "proven" and rows["plugin-restart"] == "finding" and rows["prepare"] == "not-run"
    assert section["exercised"] and section["version"] == "not published"
    # a vendor's own driver case (no behaviour of the suite) that allocated and ran a pod with it
    own = {**case("passed"), "features": ["driver"], "exercised": ["allocated", "ran a pod"]}
    assert verdict(api_only + [own], VENDOR) == "pass"
    assert verdict(api_only + [{**own, "exercised": []}], VENDOR) == "incomplete"
    assert verdict(api_only + [{**own, "status": "failed", "profile": "optional"}], VENDOR) == "incomplete"


def test_planted_faults_are_named_and_checked() -> None:
    assert planted({"DRAKIT_FAKE_DRIVER_PLANT": "no-cdi-spec, unprepare-fails"}) == {"no-cdi-spec", "unprepare-fails"}
    assert planted({}) == frozenset()
    with pytest.raises(ValueError, match="unknown planted fault 'typo'"):
        planted({"DRAKIT_FAKE_DRIVER_PLANT": "typo"})


def test_the_shipped_profiles_describe_a_driver_under_test() -> None:
    upstream = load_vendor_profile(Path(__file__).resolve().parents[1] / "examples" / "upstream-test-driver.yaml").under_test
    assert upstream.driver == "test-driver.cdi.k8s.io" and upstream.plugin is not None
    assert "{node}" in " ".join(upstream.plugin.command)
    fake = load_vendor_profile().under_test
    assert fake.driver == "gpu.acme.example.com" and ("index", "gpu.acme.example.com/index", "int") in fake.attribute_types


def test_a_pod_whose_cdi_devices_do_not_resolve_fails_at_once() -> None:
    from drakit.conformance.cases.checks import ExpectationFailed, check_pod_running

    class Session:
        namespace = "ns"

        def __init__(self, pod: dict) -> None:
            self.pod = pod

        def get(self, kind: str, name: str) -> dict:
            return self.pod

    waiting = {"reason": "CreateContainerError",
               "message": "CDI device injection failed: unresolvable CDI devices k8s.d.example.com/gpu=x-gpu0"}
    stuck = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"},
             "status": {"phase": "Pending", "containerStatuses": [{"name": "main", "state": {"waiting": waiting}}]}}
    with pytest.raises(ExpectationFailed) as err:
        check_pod_running(Session(stuck), {"pod": "p"})  # type: ignore[arg-type]
    assert err.value.final and "unresolvable CDI devices" in err.value.summary
    pulling = copy.deepcopy(stuck)
    pulling["status"]["containerStatuses"][0]["state"]["waiting"] = {"reason": "ContainerCreating"}
    with pytest.raises(ExpectationFailed) as err:
        check_pod_running(Session(pulling), {"pod": "p"})  # type: ignore[arg-type]
    assert not err.value.final  # still starting: the expect step waits


def test_device_health_and_status_checks_read_the_pod_and_the_claim() -> None:
    from types import SimpleNamespace

    from drakit.conformance.cases.checks import ExpectationFailed
    from drakit.conformance.cases.driverchecks import check_device_health, check_device_status

    dut = SimpleNamespace(driver=DRIVER)
    result = {"driver": DRIVER, "pool": "n1", "device": "d0", "request": "dev"}
    claim = {"metadata": {"name": "c"}, "status": {"allocation": {"devices": {"results": [result]}}}}
    health = [{"name": "claim:dev", "resources": [{"resourceID": "x", "health": "Healthy"}]}]
    pod = {"metadata": {"name": "p"}, "spec": {"resourceClaims": [{"name": "dev", "resourceClaimName": "c"}]},
           "status": {"containerStatuses": [{"name": "main", "allocatedResourcesStatus": health}, {"name": "plain"}]}}

    class Session:
        namespace = "ns"
        vendor = SimpleNamespace(under_test=dut)

        def get(self, kind: str, name: str) -> dict:
            return pod if kind == "Pod" else claim

    s = Session()
    check_device_health(s, {"pod": "p", "container": "main", "claim": "c"})  # type: ignore[arg-type]
    check_device_health(s, {"pod": "p", "container": "plain", "claim": "c", "absent": True})  # type: ignore[arg-type]
    health[0]["resources"][0]["health"] = "Unknown"  # a driver that streams nothing
    with pytest.raises(ExpectationFailed, match="expected Healthy"):
        check_device_health(s, {"pod": "p", "container": "main", "claim": "c"})  # type: ignore[arg-type]
    with pytest.raises(ExpectationFailed, match="no device status written"):
        check_device_status(s, {"claim": "c"})  # type: ignore[arg-type]
    claim["status"]["devices"] = [{"driver": DRIVER, "pool": "n1", "device": "d0", "conditions": [{"type": "Ready"}]}]
    check_device_status(s, {"claim": "c"})  # type: ignore[arg-type]
    claim["status"]["devices"].append({"driver": DRIVER, "pool": "n1", "device": "d9", "data": {}})
    with pytest.raises(ExpectationFailed, match="not allocated"):
        check_device_status(s, {"claim": "c"})  # type: ignore[arg-type]


def test_a_plugin_version_is_read_from_its_build_info_metric(tmp_path: Path) -> None:
    from drakit.conformance.backends.driverreads import build_version
    page = tmp_path / "metrics"
    page.write_text('# TYPE go_info gauge\ngo_info{version="go1.26"} 1\n'
                    'kubernetes_build_info{git_commit="0",git_version="v1.37.2",major="1"} 1\n')
    assert build_version(page.as_uri()) == {"buildVersion": "v1.37.2",
                                            "buildVersionSource": "kubernetes_build_info on its metrics endpoint"}
    page.write_text("go_goroutines 7\n")
    assert "no *_build_info metric" in build_version(page.as_uri())["buildVersionError"]


def test_a_missing_version_says_why_the_metrics_gave_none() -> None:
    from drakit.conformance.backends.drivertarget import version_from_metrics
    from drakit.fake_driver.profile import PluginSpec
    with_port = PluginSpec(("drv", "--http-endpoint", "127.0.0.1:{metricsPort}"), metrics_path="/metrics")
    seen = {"buildVersionError": "http://127.0.0.1:1/metrics: no *_build_info metric with a version label"}
    assert version_from_metrics(with_port, seen) == seen["buildVersionError"]
    assert "no plugin.metricsPath" in version_from_metrics(PluginSpec(("drv",)), {})
    assert "no {metricsPort}" in version_from_metrics(PluginSpec(("drv",), metrics_path="/metrics"), {})


def test_configurations_are_side_by_side_in_the_driver_section() -> None:
    from drakit.reports.text import render_summary
    cases = [{**case("passed", "allocation"), "id": "driver/allocation@default", "configuration": "default"},
             {**case("passed", "allocation"), "id": "driver/allocation@shared", "configuration": "shared"},
             {**case("passed", "prepare"), "id": "driver/prepare@default", "configuration": "default"},
             {**case("failed", "prepare"), "id": "driver/prepare@shared", "configuration": "shared"}]
    section = driver_section({"cases": cases, "environment": VENDOR})
    assert [k["name"] for k in section["configurations"]] == ["default", "shared"]
    assert section["configurations"][0]["statuses"]["prepare"] == "proven"
    assert section["configurations"][1]["statuses"]["prepare"] == "failed"
    assert {r["id"]: r["status"] for r in section["behaviours"]}["prepare"] == "failed"
    from drakit.reports import validate_results
    import json
    fixture = json.loads((Path(__file__).parent / "fixtures" / "results" / "all-passed.json").read_text())
    fixture["driver"] = section
    validate_results(fixture)
    text = render_summary({**fixture, "driver": section}, color=False)
    assert "configurations: default, shared" in text and "[proven | failed]" in text
    from drakit.reports.html import render_html
    page = render_html({**fixture, "driver": section})
    assert 'data-configuration="shared"' in page and '<td class="dr-failed">failed</td>' in page


def test_each_pod_of_a_selected_device_runs_on_that_devices_node() -> None:
    """A bound selector singles its device out among the devices of its node only (identical
    nodes publish identical attributes): every pod whose claim selects ``${inv.X.cel}`` must be
    pinned to ``${inv.X.node}``, or the scheduler could allocate the twin on another node."""
    import re

    import yaml
    suite = Path(__file__).resolve().parents[1] / "conformance" / "suites" / "driver"
    checked = 0
    for path in sorted(suite.glob("*.case.yaml")):
        for case in yaml.safe_load_all(path.read_text()):
            objects = [o for step in case.get("steps") or [] for o in step.get("apply") or []]
            picks = {o["metadata"]["name"]: set(re.findall(r"\$\{inv\.(\w+)\.cel\}", str(o["spec"])))
                     for o in objects if o.get("kind") == "ResourceClaim"}
            for pod in (o for o in objects if o.get("kind") == "Pod"):
                used = {r.get("resourceClaimName") for r in pod["spec"].get("resourceClaims") or []}
                for name in set().union(*(picks.get(c, set()) for c in used)):
                    checked += 1
                    host = (pod["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname")
                    assert host == f"${{inv.{name}.node}}", \
                        f"{case['id']}: pod {pod['metadata']['name']} uses a claim selecting ${{inv.{name}.cel}} " \
                        f"but is not pinned to ${{inv.{name}.node}}"
    assert checked >= 10
