"""The kind provider and the fake drivers' install manifests.

Without Docker (the usual case here) this covers: the generated kind config, the manifests
(server-side dry-run against the real local control plane, RBAC checked by the real authorizer,
Pod Security admission), the image build context, and the provider's refusal. The test that
really starts kind runs only where a Docker engine answers and kind is on PATH.
"""

from __future__ import annotations

import argparse

import copy
import os
import re
import shutil
import subprocess
import time
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drakit.clusters.kind import ClusterError, KindCluster, cluster_config, cluster_gates, preflight_problems
from drakit.clusters.kind import config as kindconfig
from drakit.clusters.kind import docker, install
from drakit.clusters.local.gates import GateError
from drakit.clusters.local.launcher import LocalCluster
from drakit.conformance.cli import main as drakit
from drakit.conformance.features import DEFAULT_GATES, LOCKED_GATES
from drakit.fake_driver.classes import device_classes
from drakit.fake_driver.deploy import KNOWN_DRIVERS, NAMESPACE, manifests, plugin_name

ROOT = Path(__file__).resolve().parents[2]
ACME = "gpu.acme.example.com"
PLUGIN_SA = f"system:serviceaccount:{NAMESPACE}:drakit-kubelet-plugin"
CONTROLLER_SA = f"system:serviceaccount:{NAMESPACE}:drakit-controller"


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [obj] = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


# ---------------------------------------------------------------- kind config

def test_kind_config_sets_the_dra_gates_runtime_config_and_cdi() -> None:
    cfg = yaml.safe_load(kindconfig.to_yaml(cluster_config(workers=2)))
    assert cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4" and cfg["kind"] == "Cluster"
    gates = cfg["featureGates"]
    assert gates == {g: True for g in DEFAULT_GATES if g not in LOCKED_GATES}
    assert gates["DRAListTypeAttributes"] is True and gates["DRADeviceBindingConditions"] is True
    assert gates["GenericWorkload"] is True and gates["SchedulerPreQueueingHints"] is True
    assert "DynamicResourceAllocation" not in gates and "DRAPrioritizedList" not in gates  # locked on
    assert cfg["runtimeConfig"] == {
        "resource.k8s.io/v1beta1": "true", "resource.k8s.io/v1beta2": "true",
        "resource.k8s.io/v1alpha3": "true", "scheduling.k8s.io/v1beta1": "true",
    }
    [patch] = cfg["containerdConfigPatches"]
    assert tomllib.loads(patch) == {"plugins": {"io.containerd.grpc.v1.cri": {"enable_cdi": True}}}
    assert [n["role"] for n in cfg["nodes"]] == ["control-plane", "worker", "worker"]
    assert {n["image"] for n in cfg["nodes"]} == {kindconfig.DEFAULT_NODE_IMAGE}
    assert kindconfig.DEFAULT_NODE_IMAGE.startswith("kindest/node:v1.37.")


def test_kind_gates_requested_on_top_and_refused_when_wrong() -> None:
    assert cluster_gates("DRAListTypeAttributes=false")["DRAListTypeAttributes"] is False
    assert cluster_gates("DRAListTypeAttributes=true", dra_gates=False) == {"DRAListTypeAttributes": True}
    with pytest.raises(GateError, match="DRAPrioritizedList are GA and locked on"):
        cluster_gates("DRAPrioritizedList=false")
    with pytest.raises(GateError, match=r"did you mean DRAPrioritizedList\?"):
        cluster_gates("DRAPriortizedList=true")
    with pytest.raises(GateError, match="DRAWorkloadResourceClaims needs GenericWorkload"):
        cluster_gates("GenericWorkload=false")
    with pytest.raises(ValueError, match="not Kubernetes 1.37"):
        cluster_config(node_image="kindest/node:v1.35.0")


@pytest.mark.skipif(shutil.which("kind") is None, reason="kind is not on PATH")
def test_kind_itself_decodes_the_config_strictly(tmp_path: Path) -> None:
    """kind decodes the config (strictly: unknown fields are errors) before it needs Docker."""
    if not preflight_problems():
        pytest.skip("a Docker engine answers: 'kind create' would really create a cluster")
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(kindconfig.to_yaml(cluster_config()))
    wrong = cluster_config()
    wrong["nodes"][0]["featureGates"] = {"X": True}  # a field v1alpha4 nodes do not have
    bad.write_text(kindconfig.to_yaml(wrong))

    def create(path: Path) -> str:
        proc = subprocess.run(["kind", "create", "cluster", "--name", "drakit-config-check", "--config", str(path)],
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode != 0
        return proc.stderr

    assert "decode config" in create(bad)
    out = create(good)
    assert "decode config" not in out and "docker" in out.lower()


# ---------------------------------------------------------------- manifests

def test_manifests_in_apply_order_with_the_fixed_commands() -> None:
    objs = manifests(image="example.test/drakit:1", shape="small-1gpu")
    kinds = [o["kind"] for o in objs]
    assert kinds[0] == "Namespace" and objs[0]["metadata"]["name"] == NAMESPACE
    assert kinds.index("ClusterRole") < kinds.index("ClusterRoleBinding") < kinds.index("DeviceClass")
    assert kinds[-len(KNOWN_DRIVERS):] == ["DaemonSet"] * len(KNOWN_DRIVERS)
    for obj in objs:
        assert obj["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding", "DeviceClass") or \
            obj["metadata"]["namespace"] == NAMESPACE
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "drakit"
    leftover = re.findall(r"@[A-Z]+@", yaml.safe_dump_all(objs))
    assert leftover == []

    ds = one(objs, "DaemonSet", plugin_name(ACME))
    pod = ds["spec"]["template"]["spec"]
    [c] = pod["containers"]
    assert c["image"] == "example.test/drakit:1"
    assert c["command"] + c["args"] == [
        "drakit", "driver", "serve", "--driver", ACME, "--node", "$(NODE_NAME)", "--hardware", "small-1gpu",
        "--hardware-label", "drakit.dev/fake-hardware", "--plugin-dir", "/var/lib/kubelet/plugins", "--registry-dir", "/var/lib/kubelet/plugins_registry",
        "--cdi-dir", "/var/run/cdi", "--state-dir", f"/var/lib/kubelet/plugins/{ACME}/state",
        "--device-metadata", "--in-cluster", "--idle-without-devices", "--ready-file", "/tmp/ready",
    ]
    assert c["readinessProbe"]["exec"]["command"] == ["test", "-f", "/tmp/ready"]
    assert {m["mountPath"]: m["name"] for m in c["volumeMounts"]}["/tmp"] == "tmp"  # an emptyDir: the root is read-only
    assert c["env"] == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert sorted(host.values()) == sorted([f"/var/lib/kubelet/plugins/{ACME}",
                                            "/var/lib/kubelet/plugins_registry", "/var/run/cdi"])
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert all(mounts[name] == path for name, path in host.items())  # same path inside and out
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]} and "privileged" not in sc

    ctl = one(objs, "Deployment", "drakit-controller")["spec"]["template"]["spec"]
    assert ctl["containers"][0]["command"] + ctl["containers"][0]["args"] == [
        "drakit", "driver", "controller", "--in-cluster"]
    assert ctl["securityContext"]["runAsNonRoot"] is True

    classes = [{**c, "metadata": {"name": c["metadata"]["name"]}} for c in by_kind(objs, "DeviceClass")]
    assert classes == device_classes()  # generated from fake_driver.classes, nothing else


def test_plugin_sockets_land_where_the_kubelet_looks() -> None:
    """The paths ``serve`` derives from the DaemonSet's arguments: the DRA socket is the
    kubelet's conventional plugins/<driver>/dra.sock, inside the mounted driver folder (not
    plugins/<driver>/<driver>), the registration socket in the mounted registry folder, the
    API token and CA where the in-cluster config reads them."""
    from drakit.fake_driver import cli as driver_cli
    from drakit.fake_driver.plugin.driver import PluginConfig

    parser = argparse.ArgumentParser()
    driver_cli.add_parsers(parser.add_subparsers(dest="command"))
    for ds in by_kind(manifests(), "DaemonSet"):
        pod = ds["spec"]["template"]["spec"]
        [c] = pod["containers"]
        args = parser.parse_args(c["args"])
        config = PluginConfig(driver=args.driver, node="n", plugin_dir=args.plugin_dir, registry_dir=args.registry_dir,
                              cdi_dir=args.cdi_dir, state_dir=args.state_dir)
        host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        assert str(config.dra_socket) == f"/var/lib/kubelet/plugins/{args.driver}/dra.sock"
        assert str(config.dra_socket.parent) in mounts and host[mounts[str(config.dra_socket.parent)]] == str(
            config.dra_socket.parent)
        assert str(config.registration_socket) == f"/var/lib/kubelet/plugins_registry/{args.driver}-reg.sock"
        assert host[mounts[str(config.registration_socket.parent)]] == "/var/lib/kubelet/plugins_registry"
        assert config.state_dir is not None and config.state_dir.parent == config.dra_socket.parent
    for pod in [w["spec"]["template"]["spec"] for w in by_kind(manifests(), "DaemonSet") + by_kind(manifests(), "Deployment")]:
        assert pod["automountServiceAccountToken"] is False and "hostNetwork" not in pod
        [c] = pod["containers"]
        token = {m["name"]: m for m in c["volumeMounts"]}["kube-api-access"]
        assert token == {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                         "readOnly": True}
        [vol] = [v for v in pod["volumes"] if v["name"] == "kube-api-access"]
        sources = vol["projected"]["sources"]
        assert [src["serviceAccountToken"]["path"] if "serviceAccountToken" in src else
                next(iter(src.values()))["items"][0]["path"] for src in sources] == ["token", "ca.crt", "namespace"]


def test_manifests_for_clusters_without_a_service_network() -> None:
    objs = manifests(api_server="127.0.0.1:36443")
    for w in by_kind(objs, "DaemonSet") + by_kind(objs, "Deployment"):
        pod = w["spec"]["template"]["spec"]
        assert pod["hostNetwork"] is True
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == ("127.0.0.1", "36443")
    assert [o for o in objs if o["kind"] not in ("DaemonSet", "Deployment")] == \
        [o for o in manifests() if o["kind"] not in ("DaemonSet", "Deployment")]
    for bad in ("127.0.0.1", "host:", ":80", "h:99999", "a b:1"):
        with pytest.raises(ValueError, match="bad API server address"):
            manifests(api_server=bad)


def test_manifests_for_some_drivers_and_bad_input() -> None:
    objs = manifests(drivers=["nic.swift.example.com"])
    assert [d["metadata"]["name"] for d in by_kind(objs, "DaemonSet")] == ["drakit-plugin-nic-swift-example-com"]
    for role in by_kind(objs, "ClusterRole"):
        [rule] = [r for r in role["rules"] if r["resources"] == ["resourceclaims/driver"]]
        assert rule["resourceNames"] == ["nic.swift.example.com"]
    with pytest.raises(ValueError, match="unknown fake driver.*'gpu.other.example.com'"):
        manifests(drivers=["gpu.other.example.com"])
    with pytest.raises(ValueError, match="unknown hardware shape 'big'"):
        manifests(shape="big")


def test_manifests_command_prints_the_same_objects(capsys: pytest.CaptureFixture[str]) -> None:
    assert drakit(["driver", "manifests", "--image", "example.test/drakit:2"]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out)) == manifests(image="example.test/drakit:2")
    assert drakit(["driver", "manifests", "--drivers", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("drakit driver manifests: unknown fake driver(s) 'nope'")


FORBIDDEN_RESOURCES = {"secrets", "configmaps", "pods", "serviceaccounts", "serviceaccounts/token",
                       "clusterroles", "roles", "clusterrolebindings", "rolebindings", "resourceclaims/binding"}


def test_rbac_is_narrow_and_every_rule_is_explained() -> None:
    roles = by_kind(manifests(), "ClusterRole")
    assert {r["metadata"]["name"] for r in roles} == {"drakit-kubelet-plugin", "drakit-controller"}
    for role in roles:
        for rule in role["rules"]:
            fields = rule["apiGroups"] + rule["resources"] + rule["verbs"] + rule.get("resourceNames", [])
            assert not any("*" in f for f in fields), rule
            assert not set(rule["resources"]) & FORBIDDEN_RESOURCES, rule
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"]), rule
            assert "nonResourceURLs" not in rule
            if rule["resources"] == ["resourceclaims"]:
                assert set(rule["verbs"]) <= {"get", "list", "watch"}  # never create/update/delete claims
            if "resourceclaims/driver" in rule["resources"]:
                assert rule["resourceNames"] == list(KNOWN_DRIVERS)
    text = (ROOT / "fake_driver/deploy/rbac.yaml").read_text().splitlines()
    for i, line in enumerate(text):
        if line.strip().startswith("- apiGroups:"):
            assert text[i - 1].strip().startswith("#"), f"rbac.yaml:{i + 1}: rule without a comment"


# ---------------------------------------------------------------- against the local control plane

@pytest.fixture(scope="module")
def kube(local_cluster: LocalCluster) -> Iterator[Any]:
    """A client of the local control plane with the drakit-system namespace created for real
    (namespaced objects cannot even be dry-run without it); cleaned up after the module."""
    client = install.dynamic_client(local_cluster.kubeconfig)
    install.apply(client, manifests()[:1])
    yield client
    for kind, api, name in (("Namespace", "v1", NAMESPACE), ("ClusterRole", "rbac.authorization.k8s.io/v1", None),
                            ("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", None)):
        res = client.resources.get(api_version=api, kind=kind)
        names = [name] if name else ["drakit-kubelet-plugin", "drakit-controller"]
        for n in names:
            try:
                res.delete(name=n)
            except Exception:
                pass  # not created by this test


def _exists(client: Any, obj: dict[str, Any]) -> bool:
    from kubernetes.dynamic.exceptions import NotFoundError
    res = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    try:
        res.get(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        return True
    except NotFoundError:
        return False


def test_every_manifest_passes_server_side_dry_run(kube: Any) -> None:
    objs = manifests()
    assert _exists(kube, objs[0]) and objs[0]["kind"] == "Namespace"  # created for real by the fixture
    install.apply(kube, objs[1:], dry_run=True)
    assert not any(_exists(kube, o) for o in objs[1:])  # dryRun=All stored nothing
    # strict: a field the API does not know is refused, naming the object
    bad = copy.deepcopy(one(objs, "DaemonSet", plugin_name(ACME)))
    bad["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    with pytest.raises(install.InstallError, match=rf"DaemonSet {NAMESPACE}/{plugin_name(ACME)}: .*securityContex"):
        install.apply(kube, [bad], dry_run=True)


def _pod(template_owner: dict[str, Any], namespace: str) -> dict[str, Any]:
    tpl = template_owner["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "drakit-psa-check", "namespace": namespace,
                                                            "labels": tpl["metadata"]["labels"]},
            "spec": copy.deepcopy(tpl["spec"])}


def test_pods_are_admitted_and_the_controller_meets_restricted(kube: Any) -> None:
    objs = manifests()
    ds, deploy = one(objs, "DaemonSet", plugin_name(ACME)), one(objs, "Deployment", "drakit-controller")
    # in drakit-system (privileged): both pods pass admission, priority class included
    install.apply(kube, [_pod(ds, NAMESPACE), _pod(deploy, NAMESPACE)], dry_run=True)
    ns = f"drakit-restricted-{uuid.uuid4().hex[:6]}"
    install.apply(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": ns, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}])
    try:
        install.apply(kube, [_pod(deploy, ns)], dry_run=True)
        with pytest.raises(install.InstallError, match="violates PodSecurity.*hostPath"):
            install.apply(kube, [_pod(ds, ns)], dry_run=True)
    finally:
        kube.resources.get(api_version="v1", kind="Namespace").delete(name=ns)


def _allowed(client: Any, user: str, verb: str, resource: str, *, sub: str = "", name: str = "",
             group: str = "resource.k8s.io", namespace: str = "default") -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": user, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"],
        "resourceAttributes": {"group": group, "resource": resource, "subresource": sub, "name": name,
                               "verb": verb, "namespace": namespace}}}
    res = client.resources.get(api_version="authorization.k8s.io/v1", kind="SubjectAccessReview")
    return bool(res.create(body=review).status.allowed)


def test_rbac_grants_what_the_driver_needs_and_nothing_else(kube: Any) -> None:
    objs = manifests()
    install.apply(kube, [o for o in objs if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")])
    ok = {
        PLUGIN_SA: [("get", "resourceclaims", "", ""), ("patch", "resourceclaims", "status", ""),
                    ("associated-node:patch", "resourceclaims", "driver", ACME),
                    ("create", "resourceslices", "", ""), ("delete", "resourceslices", "", ""),
                    ("watch", "resourceslices", "", "")],
        CONTROLLER_SA: [("watch", "resourceclaims", "", ""), ("update", "resourceclaims", "status", ""),
                        ("arbitrary-node:patch", "resourceclaims", "driver", ACME),
                        ("list", "deviceclasses", "", "")],
    }
    denied = {
        PLUGIN_SA: [("associated-node:patch", "resourceclaims", "driver", "gpu.other.example.com"),
                    ("arbitrary-node:patch", "resourceclaims", "driver", ACME),
                    ("update", "resourceclaims", "", ""), ("delete", "resourceclaims", "", ""),
                    ("update", "resourceclaims", "binding", ""), ("create", "deviceclasses", "", "")],
        CONTROLLER_SA: [("create", "resourceslices", "", ""), ("associated-node:patch", "resourceclaims", "driver", ACME),
                        ("create", "resourceclaims", "", "")],
    }
    for user, checks in ok.items():
        for verb, res, sub, name in checks:
            assert _allowed(kube, user, verb, res, sub=sub, name=name), (user, verb, res, sub, name)
    for user, checks in denied.items():
        for verb, res, sub, name in checks:
            assert not _allowed(kube, user, verb, res, sub=sub, name=name), (user, verb, res, sub, name)
        for verb, res in (("get", "secrets"), ("list", "secrets"), ("list", "pods"), ("get", "configmaps")):
            assert not _allowed(kube, user, verb, res, group=""), (user, verb, res)
    assert _allowed(kube, PLUGIN_SA, "get", "nodes", group="", namespace="")
    assert not _allowed(kube, PLUGIN_SA, "update", "nodes", group="", namespace="")


# ---------------------------------------------------------------- the provider

def test_kind_provider_refuses_clearly_without_docker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problems = preflight_problems()
    if not problems:
        pytest.skip("a Docker engine answers and kind is on PATH here")
    run_dir = tmp_path / "kind-run"
    cluster = KindCluster("drakit-refuse", run_dir=run_dir)
    with pytest.raises(ClusterError) as err:
        cluster.up()
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("the kind provider needs a running Docker engine and kind on PATH: ")
    if shutil.which("kind") is None:
        assert "kind is not on PATH" in msg
    engine = docker.engine_problem()
    if engine:
        assert engine in msg and "Docker engine" in engine
    assert not run_dir.exists()  # nothing left behind

    assert drakit(["cluster", "up", "--provider", "kind", "--name", "drakit-refuse", "--run-dir", str(run_dir)]) == 1
    err_text = capsys.readouterr().err
    assert err_text.count("\n") == 1
    assert "the kind provider needs a running Docker engine and kind on PATH" in err_text
    assert drakit(["cluster", "up", "--provider", "kind", "--feature-gates", "DRAPrioritizedList=false"]) == 2


def test_kind_loads_the_offline_archives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the provider hands kind: the archives ``drakit image build`` writes (``kind load
    image-archive``), or an image of the user's own from Docker when told not to build. kind
    itself is a recording stand-in here (kind needs Docker); tests/images/test_containerd.py
    imports the same archives into containerd the way kind's nodes do."""
    from drakit.clusters.images import ensure_images
    from drakit.clusters.local.pytest_fixture import skip_or_fail

    if any(shutil.which(t) is None for t in ("apt-get", "dpkg-deb", "gcc")):
        skip_or_fail("building images needs a Debian host with apt-get, dpkg-deb and gcc")
    log = tmp_path / "kind.log"
    stub = tmp_path / "bin" / "kind"
    stub.parent.mkdir()
    stub.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n'
                    'if [ "$1 $2" = "load image-archive" ]; then tar -tf "$3" | grep -qx oci-layout || exit 1; fi\n')
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub.parent}:{os.environ['PATH']}")
    cluster = KindCluster("drakit-load", run_dir=tmp_path / "run")
    cluster.archives = ensure_images(which=("busybox", "driver"))
    cluster.load_images()
    assert log.read_text().splitlines() == [f"load image-archive {a} --name drakit-load" for a in cluster.archives]
    with pytest.raises(ClusterError, match="pass an image of your own with --no-build"):
        KindCluster("drakit-load", driver_image="example.test/mine:1")
    log.unlink()
    KindCluster("drakit-load", driver_image="example.test/mine:1", build_image=False).load_images()
    assert log.read_text().splitlines() == ["load docker-image example.test/mine:1 --name drakit-load"]


@pytest.mark.skipif(bool(preflight_problems()), reason="needs a running Docker engine and kind on PATH")
def test_kind_cluster_runs_the_fake_drivers(tmp_path: Path) -> None:
    """The whole kind path: cluster, image built and loaded, drivers rolled out, slices published."""
    name = f"drakit-test-{uuid.uuid4().hex[:6]}"
    with KindCluster(name, run_dir=tmp_path / "kind", workers=1, shape="small-1gpu") as cluster:
        client = install.dynamic_client(cluster.kubeconfig)
        slices = client.resources.get(api_version="resource.k8s.io/v1", kind="ResourceSlice")
        deadline = time.monotonic() + 120
        while True:
            drivers = {s["spec"]["driver"] for s in slices.get().to_dict()["items"]}
            if ACME in drivers or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert ACME in drivers
        assert name in subprocess.run(["kind", "get", "clusters"], capture_output=True, text=True).stdout
    assert name not in subprocess.run(["kind", "get", "clusters"], capture_output=True, text=True).stdout
