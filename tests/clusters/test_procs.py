"""Process groups, stale run dirs and the build cache logic, with stand-in processes (no binaries)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drakit.clusters.local import build, procs
from drakit.clusters.local.launcher import MARKER, ClusterError, LocalCluster

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc (Linux)")


def _sleeper(tmp_path: Path, name: str = "etcd", detached: bool = True) -> procs.ProcInfo:
    _, info = procs.spawn(name, ["sleep", "300"], tmp_path / "logs" / f"{name}.log", die_with_parent=not detached)
    return info


def test_spawn_and_stop_process_group(tmp_path):
    popen, info = procs.spawn("sh", ["sh", "-c", "sleep 300 & sleep 300"], tmp_path / "sh.log")
    time.sleep(0.2)
    assert procs.info_alive(info)
    assert os.getpgid(info.pid) == info.pid  # own group
    hard = procs.stop([info], timeout=5, popen={popen.pid: popen})
    assert hard == []
    assert not procs.info_alive(info)
    # the background child of the group is gone too (it may take a moment to exit on a busy machine)
    deadline = time.monotonic() + 5
    while procs.group_members(info.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert procs.group_members(info.pid) == []


def test_recycled_pid_is_not_signalled():
    me = os.getpid()
    assert procs.is_alive(me, procs.start_ticks(me))
    assert not procs.is_alive(me, (procs.start_ticks(me) or 0) + 1)


def test_free_ports_are_distinct_and_unused():
    ports = procs.free_ports(6)
    assert len(set(ports)) == 6
    assert not any(procs.port_listening(p) for p in ports)


def _hand_out(cache: str, q) -> None:  # type: ignore[no-untyped-def]
    import os
    os.environ["DRAKIT_CACHE"] = cache
    q.put([p for _ in range(20) for p in procs.free_ports(5)])


def test_free_ports_of_concurrent_processes_never_repeat(tmp_path, monkeypatch):
    """Four processes asking at once (parallel workers starting clusters and kubelets) never get
    a port another was handed in the last PORT_HOLD seconds, though none binds them."""
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    workers = [ctx.Process(target=_hand_out, args=(str(tmp_path), q)) for _ in range(4)]
    for w in workers:
        w.start()
    got = [p for _ in workers for p in q.get(timeout=60)]
    for w in workers:
        w.join(30)
    assert len(got) == 400 and len(set(got)) == 400
    monkeypatch.setenv("DRAKIT_CACHE", str(tmp_path))
    assert not set(procs.free_ports(3)) & set(got)
    (tmp_path / "ports-handed-out.json").write_text("not json")  # a damaged record: the kernel's choice
    assert len(set(procs.free_ports(3))) == 3


def _write_stale_state(run_dir: Path, info: procs.ProcInfo, detached: bool) -> None:
    run_dir.mkdir(exist_ok=True)
    (run_dir / MARKER).write_text("x")
    (run_dir / "pki").mkdir()
    (run_dir / "pki" / "ca.key").write_text("secret")
    procs.write_state(
        run_dir,
        {
            "owner": {"pid": 2**22 + 12345, "start_ticks": 1},  # a pid that is not running
            "detached": detached,
            "created_dir": True,
            "processes": procs.procs_to_state([info]),
            "ports": {},
        },
    )


def _proven_sleeper(tmp_path: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> procs.ProcInfo:
    """A process the leftover sweep can prove drakit's (its program in drakit's cache, its command
    line naming the run folder, started after that folder): a copy of tail, run as "etcd"."""
    import shutil
    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    shutil.copy2(shutil.which("tail") or "/usr/bin/tail", cache / "bin" / "etcd")
    monkeypatch.setenv("DRAKIT_CACHE", str(cache))
    run_dir.mkdir(mode=0o700)
    (run_dir / "etcd.log").write_text("")
    _, info = procs.spawn("etcd", [str(cache / "bin" / "etcd"), "-f", f"{run_dir}/etcd.log"],
                          tmp_path / "logs" / "etcd.log", die_with_parent=False)
    return info


def test_stale_run_dir_of_killed_run_is_cleaned(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    info = _proven_sleeper(tmp_path, run_dir, monkeypatch)
    _write_stale_state(run_dir, info, detached=False)
    c = LocalCluster(run_dir, bin_dir=tmp_path / "nobin")
    c._prepare_run_dir()
    assert not procs.info_alive(info)
    assert not (run_dir / "pki").exists()
    assert (run_dir / MARKER).exists()
    c.down()
    assert not run_dir.exists()  # created by the first run: removed entirely


def test_running_detached_cluster_is_not_clobbered(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    info = _proven_sleeper(tmp_path, run_dir, monkeypatch)
    try:
        _write_stale_state(run_dir, info, detached=True)
        with pytest.raises(ClusterError, match="already running"):
            LocalCluster(run_dir, bin_dir=tmp_path / "nobin")._prepare_run_dir()
        assert procs.info_alive(info)
        # 'cluster down' path
        LocalCluster.attach(run_dir).down()
        assert not procs.info_alive(info)
        assert not run_dir.exists()
    finally:
        procs.stop([info], timeout=2)


def test_foreign_non_empty_dir_is_refused(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(ClusterError, match="not a drakit run dir"):
        LocalCluster(tmp_path, bin_dir=tmp_path / "nobin")._prepare_run_dir()
    assert (tmp_path / "precious.txt").exists()


def test_existing_empty_dir_is_kept_but_emptied(tmp_path):
    run_dir = tmp_path / "given"
    run_dir.mkdir()
    c = LocalCluster(run_dir, bin_dir=tmp_path / "nobin")
    c._prepare_run_dir()
    c.down()
    assert run_dir.is_dir() and not any(run_dir.iterdir())


def test_up_without_binaries_says_what_to_do(tmp_path):
    with pytest.raises(ClusterError, match="drakit cluster build"):
        LocalCluster(tmp_path / "run", bin_dir=tmp_path / "nobin").up()
    assert not (tmp_path / "run").exists()


def test_bin_dir_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("DRAKIT_CACHE", str(tmp_path))
    assert build.bin_dir() == tmp_path / "bin" / f"k8s-{build.KUBE_VERSION}"
    monkeypatch.delenv("DRAKIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.bin_dir() == tmp_path / "xdg" / "drakit" / "bin" / f"k8s-{build.KUBE_VERSION}"


def test_disk_check_fails_fast(tmp_path):
    with pytest.raises(build.BuildError, match="GB free"):
        build.check_disk([tmp_path], min_free=10**18)
    build.check_disk([tmp_path / "not" / "yet"], min_free=1)


def test_fake_binary_version_check(tmp_path):
    good = tmp_path / "kube-apiserver"
    good.write_text("#!/bin/sh\necho 'Kubernetes v1.37.2'\n")
    good.chmod(0o755)
    binary = build.GROUPS[0].binaries[0]
    assert build.binary_version_ok(good, binary)
    good.write_text("#!/bin/sh\necho 'Kubernetes v1.37.1'\n")
    assert not build.binary_version_ok(good, binary)
    assert not build.binary_version_ok(tmp_path / "absent", binary)


def test_attached_cluster_without_run_dir_gets_private_temp_dir(tmp_path):
    a = LocalCluster(bin_dir=tmp_path / "nobin")
    b = LocalCluster(bin_dir=tmp_path / "nobin")
    assert a.run_dir != b.run_dir and a.run_dir.is_dir()
    for c in (a, b):
        with pytest.raises(ClusterError):
            c.up()  # no binaries: the temp dir is removed again
        assert not c.run_dir.exists()
    assert LocalCluster(detached=True).run_dir.name == "local"


def test_die_with_parent_kills_the_child_when_its_parent_dies(tmp_path):
    """A component started with die_with_parent goes when the process that started it is
    killed (SIGKILL leaves no time for clean-up), and no Python code ran between fork and exec."""
    import subprocess
    import sys
    import time as _time

    script = ("import sys, time\nfrom pathlib import Path\nfrom drakit.clusters.local import procs\n"
              "_, info = procs.spawn('sleeper', ['sleep', '300'], Path(sys.argv[1]), die_with_parent=True)\n"
              "print(info.pid, flush=True)\ntime.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "sleeper.log")], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())  # type: ignore[union-attr]
        assert procs.is_alive(child, procs.start_ticks(child))
        ticks = procs.start_ticks(child)
        parent.kill()
        parent.wait(10)
        deadline = _time.monotonic() + 10
        while procs.is_alive(child, ticks) and _time.monotonic() < deadline:
            _time.sleep(0.05)
        assert not procs.is_alive(child, ticks), "the child outlived its parent"
    finally:
        parent.kill()


def test_a_kubelet_without_inotify_instances_is_told_apart(tmp_path):
    from drakit.clusters.local.realnodes import _inotify_starved
    log = tmp_path / "kubelet.log"
    log.write_text('E1201 22:55:59.554417   24004 kubelet.go:1833] "Failed to start cAdvisor" err="inotify_init: too many open files"\n')
    assert _inotify_starved(log)
    log.write_text('E1201 22:55:59.554417   24004 server.go:1] "listen tcp 127.0.0.1:10250: bind: address already in use"\n')
    assert not _inotify_starved(log) and not _inotify_starved(tmp_path / "missing.log")


def test_die_with_parent_does_not_wait_when_the_program_execs_another_at_once(tmp_path):
    """spawn waits until setpriv has exec'd the program; a program that execs another at once
    (the kubelet's ``unshare`` -> shell -> kubelet) must not make it wait for its timeout."""
    t0 = time.monotonic()
    popen, info = procs.spawn("chain", ["sh", "-c", "exec sleep 300"], tmp_path / "chain.log", die_with_parent=True)
    took = time.monotonic() - t0
    try:
        assert took < 2.5, f"spawn took {took:.1f} s"
        assert procs.info_alive(info)  # the death signal itself: the test above
    finally:
        procs.stop([info], timeout=5, popen={popen.pid: popen})


def test_a_process_whose_main_thread_exited_first_is_alive_until_its_last_thread_is_gone() -> None:
    """A killed Go program's main thread becomes a zombie while its other threads still exit,
    holding its files (a listening port among them): teardown must wait for those too."""
    child = subprocess.Popen([sys.executable, "-c", "import ctypes, threading, time\n"
                              "threading.Thread(target=time.sleep, args=(60,)).start()\n"
                              "time.sleep(0.1)\nctypes.CDLL(None).pthread_exit(None)\n"])
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child's main thread did not exit"
            time.sleep(0.05)
        assert procs.is_alive(child.pid)  # its sleeping thread is still there
    finally:
        child.kill()
        child.wait()
    assert not procs.is_alive(child.pid)
