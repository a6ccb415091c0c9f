"""The kubelet plugin as a DaemonSet pod sees its folders: the plugin folder and the registry
folder are two hostPath volumes, two bind mounts of one file system. A rename between them fails
with EXDEV although st_dev is equal; the plugin then binds its registration socket in place.
Here the two bind mounts are made for real, in a private mount namespace of the plugin's own."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import grpc

from drakit.clusters.local.pytest_fixture import skip_or_fail
from drakit.fake_driver._gen import pluginregistration_v1_pb2 as rpb, pluginregistration_v1_pb2_grpc as rpg

from .conftest import GPU, NODE

ROOT = Path(__file__).resolve().parents[2]


def _unshare() -> list[str]:
    """A private mount namespace: as root directly, else in a user namespace of our own."""
    if shutil.which("unshare") is None:
        skip_or_fail("two bind mounts need unshare (util-linux)")
    for cmd in (["unshare", "--mount", "--propagation", "private"], ["unshare", "--user", "--map-root-user", "--mount"]):
        if subprocess.run([*cmd, "true"], capture_output=True, check=False).returncode == 0:
            return cmd
    skip_or_fail("two bind mounts need root or unprivileged user namespaces (unshare --mount failed)")
    raise AssertionError("unreachable")


def test_registration_socket_across_two_hostpath_mounts(short_tmp: Path) -> None:
    host_plugin = short_tmp / "kubelet/plugins" / GPU  # what the kubelet sees
    host_registry = short_tmp / "kubelet/plugins_registry"
    pod = short_tmp / "pod"  # the same folders as the pod's volumes
    for d in (host_plugin, host_registry, pod / "plugins" / GPU, pod / "registry", short_tmp / "cdi"):
        d.mkdir(parents=True)
    (short_tmp / "claims.json").write_text("[]")
    script = (f'mount --bind "{host_plugin}" "{pod}/plugins/{GPU}" && '
              f'mount --bind "{host_registry}" "{pod}/registry" && exec "$@"')
    serve = [sys.executable, "-m", "drakit.fake_driver.cli", "driver", "serve", "--driver", GPU, "--node", NODE,
             "--plugin-dir", str(pod / "plugins"), "--registry-dir", str(pod / "registry"),
             "--cdi-dir", str(short_tmp / "cdi"), "--claims", str(short_tmp / "claims.json")]
    proc = subprocess.Popen([*_unshare(), "sh", "-c", script, "sh", *serve], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().decode() if ready else ""
        if "serving" not in line:
            proc.kill()
            raise AssertionError(f"plugin did not start: {line!r} {proc.stderr.read().decode()}")
        reg = host_registry / f"{GPU}-reg.sock"
        assert stat.S_ISSOCK(reg.lstat().st_mode) and stat.S_IMODE(reg.lstat().st_mode) == 0o600
        with grpc.insecure_channel(f"unix://{reg}") as channel:
            info = rpg.RegistrationStub(channel).GetInfo(rpb.InfoRequest(), timeout=5)
        assert (info.name, info.endpoint) == (GPU, str(pod / "plugins" / GPU / "dra.sock"))
        assert sorted(p.name for p in host_plugin.iterdir() if p.name.endswith(".sock")) == ["dra.sock"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    assert code == 0
    assert not reg.exists()  # deregistered on the way out
    assert json.loads((host_plugin / "checkpoint.json").read_text())["claims"] == {}
