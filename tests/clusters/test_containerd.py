"""The pure parts of the containerd node runtime: its configuration, the node namespace's script,
and reading what containerd gave a container."""

from __future__ import annotations

import base64
import json
import tomllib
from pathlib import Path

from drakit.clusters.local import containerd as ctd
from drakit.clusters.local.kubeletnode import NodePaths, kubelet_args, kubelet_config


def test_config_keeps_every_path_in_the_node_and_turns_on_what_drivers_need(tmp_path):
    node, bins = tmp_path / "n1", tmp_path / "bin"
    cfg = tomllib.loads(ctd.config_toml(node, bins))
    assert cfg["version"] == 3
    assert cfg["root"] == str(node / "containerd") and cfg["grpc"]["address"] == str(node / "containerd.sock")
    # state and ttrpc live in the node namespace's private /run
    assert cfg["state"].startswith("/run/") and cfg["ttrpc"]["address"].startswith("/run/")
    # /opt/containerd would be created on the host's file system
    assert "io.containerd.internal.v1.opt" in cfg["disabled_plugins"]
    runtime = cfg["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["cdi_spec_dirs"] == [str(node / "cdi")]
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["BinaryName"] == str(bins / "runc")
    assert runtime["cni"]["conf_dir"] == str(node / "cni") and runtime["cni"]["bin_dirs"] == [str(node / "cni-bin")]
    images = cfg["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == "registry.k8s.io/pause:3.10"
    nri = cfg["plugins"]["io.containerd.nri.v1.nri"]
    assert nri["disable"] is False and nri["socket_path"] == "/var/run/nri/nri.sock"
    for key in ("plugin_path", "plugin_config_path"):  # never /opt/nri on the host
        assert nri[key].startswith(str(node))
    # the CRI streaming server (logs, exec) listens on the loopback only
    assert cfg["plugins"]["io.containerd.grpc.v1.cri"]["stream_server_address"] == "127.0.0.1"


def test_node_namespace_script_mounts_privately_shadows_sysctls_and_execs_containerd(tmp_path):
    node, bins = tmp_path / "n1", tmp_path / "bin"
    shadow = {"vm/overcommit_memory": node / "sysctl" / "vm.overcommit_memory"}
    script = ctd.namespace_script(node, bins, shadow, node / "cwd")
    lines = script.splitlines()
    assert lines[0] == "set -eu"
    for folder in ("/var/lib", "/var/log", "/run"):
        assert f"mount -t tmpfs -o mode=0755,size=256m drakit-node {folder}" in lines
    assert f"mount --bind {node / 'r'} /var/lib/kubelet" in lines
    assert f"mount --bind {node / 'sysctl' / 'vm.overcommit_memory'} /proc/sys/vm/overcommit_memory" in lines
    assert lines[-1] == f"exec {bins / 'containerd'} --config {node / 'containerd.toml'}"
    # the stock CDI folder a driver pod writes to (hostPath /var/run/cdi) is the one containerd reads
    cdi = f"mkdir -p {node / 'cdi'} /var/run/cdi && mount --bind {node / 'cdi'} /var/run/cdi"
    assert cdi in lines and lines.index(cdi) > lines.index("mount -t tmpfs -o mode=0755,size=256m drakit-node /run")
    assert ctd.config_toml(node, bins).count(f'cdi_spec_dirs = ["{node / "cdi"}"]') == 1
    # the bind of the kubelet folder comes after the tmpfs it lands on
    assert lines.index(f"mount --bind {node / 'r'} /var/lib/kubelet") > lines.index(
        "mount -t tmpfs -o mode=0755,size=256m drakit-node /var/lib")
    argv = ctd.unshare_argv(script)
    # new mount and PID namespaces, a /proc of their own, and PID 1 killed with unshare
    for flag in ("--mount", "--pid", "--fork", "--mount-proc", "--kill-child"):
        assert flag in argv
    assert argv[-1] == script


def test_cni_config_is_podnet_with_host_local_state_in_the_node(tmp_path):
    conf = ctd.cni_config(tmp_path, ctd.node_subnet("node-1"))
    assert conf["type"] == "podnet" and conf["ipam"]["type"] == "host-local"
    assert conf["ipam"]["dataDir"] == str(tmp_path / "cni-ipam")
    assert conf["ipam"]["ranges"][0][0]["subnet"].startswith("10.244.")
    assert ctd.node_subnet("node-1") == ctd.node_subnet("node-1")


def test_cgroup_parent_is_per_run_and_node():
    a = ctd.cgroup_parent(Path("/tmp/run-a"), "node-1")
    assert a.startswith("/drakit-") and a.endswith("/node-1")
    assert a != ctd.cgroup_parent(Path("/tmp/run-b"), "node-1")
    assert a != ctd.cgroup_parent(Path("/tmp/run-a"), "node-2")
    assert ctd.cgroup_parent(Path("/tmp/run-a"), "").strip("/") == a.strip("/").split("/")[0]


def test_kubelet_on_containerd_uses_its_socket_the_cgroup_parent_and_the_stock_root(tmp_path):
    paths = NodePaths(tmp_path / "n")
    cfg = kubelet_config(paths, port=1, healthz_port=2, ca_file=tmp_path / "ca", tls_cert=tmp_path / "c",
                         tls_key=tmp_path / "k", v1=True, runtime_socket=tmp_path / "n" / "containerd.sock",
                         cgroup_root="/drakit-x/n")
    assert cfg["containerRuntimeEndpoint"] == f"unix://{tmp_path / 'n' / 'containerd.sock'}"
    assert cfg["imageServiceEndpoint"] == cfg["containerRuntimeEndpoint"]
    # the kubelet hands the runtime a parent only with cgroupsPerQOS (else containerd uses /k8s.io)
    assert cfg["cgroupRoot"] == "/drakit-x/n" and cfg["cgroupsPerQOS"] is True
    args = kubelet_args(paths, "n", {}, "", root_dir="/var/lib/kubelet")
    assert "--root-dir=/var/lib/kubelet" in args and "--node-ip=127.0.0.1" in args


def _info(kind: str, pod: str, container: str, env: list[str], cdi: list[str], created: str) -> dict:
    meta = {"Version": "v1", "Metadata": {"ID": "x", "Config": {"CDI_devices": [{"name": n} for n in cdi]}}}
    return {
        "ID": f"{pod}-{container}", "CreatedAt": created,
        "Labels": {"io.cri-containerd.kind": kind, "io.kubernetes.pod.namespace": "ns",
                   "io.kubernetes.pod.name": pod, "io.kubernetes.container.name": container},
        "Spec": {"process": {"env": env},
                 "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                            {"destination": "/etc/gpu", "type": "bind", "source": "/n/meta"}],
                 "linux": {"devices": [{"path": "/dev/gpu0", "type": "c"}]}},
        "Extensions": {"io.cri-containerd.container.metadata": {
            "type_url": "github.com/containerd/cri/pkg/store/container/Metadata",
            "value": base64.b64encode(json.dumps(meta).encode()).decode()}},
    }


def test_containers_from_info_reads_cdi_ids_env_mounts_and_devices_and_skips_sandboxes():
    infos = [
        _info("container", "p", "main", ["A=1", "GPU=gpu0"], ["gpu.acme.example.com/claim=abc-gpu0"], "2026-01-01T00:00:02Z"),
        _info("sandbox", "p", "POD", [], [], "2026-01-01T00:00:00Z"),
        _info("container", "p", "side", ["A=1"], [], "2026-01-01T00:00:01Z"),
    ]
    found = ctd.containers_from_info(infos)
    assert [e["container"] for e in found] == ["side", "main"]  # oldest first, no sandbox
    main = found[1]
    assert main["pod"] == {"namespace": "ns", "name": "p", "uid": None}
    assert main["cdiDevices"] == ["gpu.acme.example.com/claim=abc-gpu0"]
    assert main["effective"]["env"] == ["A=1", "GPU=gpu0"]
    assert main["effective"]["mounts"] == [{"containerPath": "/etc/gpu", "hostPath": "/n/meta"}]
    assert main["effective"]["deviceNodes"] == [{"path": "/dev/gpu0", "type": "c"}]


def test_a_cdi_mount_without_a_type_is_a_bind_mount_of_the_container():
    """A CDI spec's mount edit (the fake driver's device-metadata file) gives only ``ro, bind``
    options; containerd copies it into the OCI spec without a type. Seen: the metadata cases failed
    on containerd nodes because such a mount was not read."""
    info = _info("container", "p", "main", [], [], "2026-01-01T00:00:02Z")
    info["Spec"]["mounts"] += [{"destination": "/var/run/meta.json", "source": "/n/m.json", "options": ["ro", "bind"]},
                               {"destination": "/dev/pts", "source": "devpts", "options": ["nosuid"]}]
    mounts = ctd.containers_from_info([info])[0]["effective"]["mounts"]
    assert mounts == [{"containerPath": "/etc/gpu", "hostPath": "/n/meta"},
                      {"containerPath": "/var/run/meta.json", "hostPath": "/n/m.json"}]


def test_folders_below_run_stay_visible_in_the_node_namespace():
    node = Path("/run/user/0/drakit/local/n/node-1")
    script = ctd.namespace_script(node, Path("/root/.cache/bin"), {}, node / "cwd",
                                  keep=[Path("/run/user/0/drakit/local/pki"), Path("/root/.cache/bin")])
    lines = script.splitlines()
    # only the outermost hidden folders, bound aside on /var/log's tmpfs before /run's hides them
    assert ctd.hidden_by_tmpfs([node, Path("/run/user/0/drakit/local/pki")]) == [
        Path("/run/user/0/drakit/local/n/node-1"), Path("/run/user/0/drakit/local/pki")]
    aside = lines.index("mkdir -p /var/log/.drakit-keep/0 && mount --bind /run/user/0/drakit/local/n/node-1 "
                        "/var/log/.drakit-keep/0")
    back = lines.index("mkdir -p /run/user/0/drakit/local/n/node-1 && mount --bind /var/log/.drakit-keep/0 "
                       "/run/user/0/drakit/local/n/node-1")
    run_tmpfs = lines.index("mount -t tmpfs -o mode=0755,size=256m drakit-node /run")
    assert aside < run_tmpfs < back
    assert not any("/root/.cache" in ln and "keep" in ln for ln in lines)
