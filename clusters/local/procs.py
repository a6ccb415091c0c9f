"""Process groups, free ports and the run-dir state file of the local control plane.

Each component runs in its own session (so its own process group, pgid == pid); teardown
signals the whole group.  A process is identified by pid *and* its start time from
``/proc/<pid>/stat``, so a recycled pid is never signalled.  Linux only.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"
CLUSTER_FILE = ".drakit-cluster"  # in a folder a cluster made outside its run folder (tie)


@dataclass(frozen=True, slots=True)
class ProcInfo:
    name: str
    pid: int
    start_ticks: int
    exe: str
    log: str


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest  # rest[0] is state (field 3), rest[19] is starttime (field 22)


def start_ticks(pid: int) -> int | None:
    f = _stat_fields(pid)
    return int(f[19]) if f and len(f) > 19 else None


def is_alive(pid: int, ticks: int | None = None) -> bool:
    """Running (not a zombie) and, when ``ticks`` is given, the very same process. A process
    whose main thread is a zombie while other threads still exit (a killed Go program) is still
    alive: they hold its files, listening sockets among them."""
    f = _stat_fields(pid)
    if not f or f[0] == "X" or (f[0] == "Z" and not _threads_exiting(pid)):
        return False
    return ticks is None or int(f[19]) == ticks


def _threads_exiting(pid: int) -> bool:
    """Whether a thread other than the (zombie) main one is still there, not yet a zombie."""
    try:
        tids = [t.name for t in Path(f"/proc/{pid}/task").iterdir() if t.name != str(pid)]
    except OSError:
        return False
    for tid in tids:
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        if raw[raw.rfind(")") + 2:].split()[:1] not in (["Z"], ["X"], []):
            return True
    return False


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        f = _stat_fields(int(entry.name))
        if f and len(f) > 2 and int(f[2]) == pgid and f[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def info_alive(p: ProcInfo) -> bool:
    return is_alive(p.pid, p.start_ticks)


def _pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def spawn(
    name: str,
    argv: Sequence[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    die_with_parent: bool = False,
) -> tuple[subprocess.Popen[bytes], ProcInfo]:
    """Start ``argv`` in a new session with stdout+stderr to ``log``.

    ``die_with_parent`` sets PR_SET_PDEATHSIG=SIGKILL. With util-linux ``setpriv`` on PATH it
    is set by ``setpriv --pdeathsig KILL`` exec'ing ``argv`` (same pid), so no Python code runs
    between fork and exec: a ``preexec_fn`` in a process with gRPC threads (the fake drivers of
    the same test process) could die in gRPC's fork handlers before exec. The signal comes
    when the *thread* that called this ends, so call it from a thread that lives as long as
    the component should (drakit calls it from the main thread).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    command, preexec = list(argv), None
    if die_with_parent:
        wrapper = shutil.which("setpriv")
        if wrapper:
            command = [wrapper, "--pdeathsig", "KILL", "--", *argv]
        else:
            preexec = _pdeathsig
    from drakit.reports.safefs import open_append
    with os.fdopen(open_append(log), "ab") as fh:  # never through a link (a log under --out, too)
        fh.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
        fh.flush()
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=preexec,
        )
    if die_with_parent and preexec is None:
        _wait_for_exec(proc, command[0])
    ticks = start_ticks(proc.pid) or 0
    return proc, ProcInfo(name, proc.pid, ticks, argv[0], str(log))


def _wait_for_exec(proc: subprocess.Popen[bytes], wrapper: str, timeout: float = 5.0) -> None:
    """Return once ``setpriv`` (``wrapper``) has set the death signal and exec'd the program
    (the command line is then no longer setpriv's; Popen returns only after setpriv itself was
    exec'd). A parent killed before that moment would leave a child with no death signal set
    (seen on a loaded machine). The program may exec another at once (``unshare`` runs the
    kubelet's shell, which execs the kubelet): waiting for the program's own name then missed
    that moment now and then and always took the whole ``timeout``."""
    wrapped = wrapper.encode()
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0", 1)[0] != wrapped:
                return
        except OSError:
            return
        time.sleep(0.001)


def stop(
    procs: Sequence[ProcInfo],
    timeout: float = 15.0,
    popen: Mapping[int, subprocess.Popen[bytes]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[str]:
    """SIGTERM each process group in order, then SIGKILL what is left; return names killed hard.
    ``timeout`` 0: SIGKILL at once (for what nothing needs to outlive cleanly)."""
    popen = popen or {}
    hard: list[str] = []
    for p in procs:
        if not info_alive(p):
            _reap(popen.get(p.pid))
            continue
        if timeout <= 0:
            _killpg(p.pid, signal.SIGKILL)
            _reap(popen.get(p.pid), 5.0)
            continue
        _killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and info_alive(p):
            _reap(popen.get(p.pid), 0.1)
            time.sleep(0.05)
        if info_alive(p):
            hard.append(p.name)
            if progress:
                progress(f"{p.name} (pid {p.pid}) ignored SIGTERM for {timeout:.0f} s; killing")
            _killpg(p.pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and info_alive(p):
                time.sleep(0.05)
        _killpg(p.pid, signal.SIGKILL)  # stragglers in the group, if any
        _reap(popen.get(p.pid), 1.0)
    return hard


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(proc: subprocess.Popen[bytes] | None, timeout: float = 0.0) -> None:
    if proc is None:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass


#: How long a port handed out by :func:`free_ports` is not handed out again to any drakit
#: process of this user: the time a component may take to bind it on a busy machine.
PORT_HOLD = 120.0


def _port_record() -> Path:
    base = os.environ.get("DRAKIT_CACHE") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "drakit")
    return Path(base).expanduser() / "ports-handed-out.json"


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports the kernel reports free right now, none of them handed out by this
    function in any process in the last :data:`PORT_HOLD` seconds. A port found free is bound
    by its component only later; meanwhile another process's bind-to-0 could be given the same
    one (parallel workers each starting a cluster and kubelets). The ports handed out are kept in
    a record under the user's drakit cache, read and written under an ``flock``; without it
    (an unwritable cache) the kernel's choice alone is used."""
    import fcntl
    record = _port_record()
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(record, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return _kernel_ports(n, host, set())
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        now = time.time()
        try:
            raw = os.read(fd, 1 << 20)
            recent = {int(p): float(t) for p, t in (json.loads(raw) if raw else {}).items() if now - float(t) < PORT_HOLD}
        except (ValueError, TypeError, AttributeError, OSError):
            recent = {}
        ports = _kernel_ports(n, host, set(recent))
        recent.update({p: now for p in ports})
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({str(p): t for p, t in recent.items()}).encode())
        return ports
    finally:
        os.close(fd)  # releases the flock


def _kernel_ports(n: int, host: str, taken: set[int]) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n + len(taken) + 64):
            if len(ports) == n:
                return ports
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)  # a port in ``taken`` stays bound meanwhile, so the kernel gives another
            if s.getsockname()[1] not in taken:
                ports.append(s.getsockname()[1])
        raise OSError(f"no {n} free ports on {host}")
    finally:
        for s in socks:
            s.close()


def listening_sockets() -> dict[int, set[str]]:
    """TCP ports in LISTEN state on this host (IPv4 and IPv6), each with the inodes of its
    sockets (``/proc/net/tcp``'s column 10)."""
    ports: dict[int, set[str]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "0A":
                ports.setdefault(int(parts[1].rsplit(":", 1)[1], 16), set()).add(parts[9])
    return ports


def listening_ports() -> set[int]:
    """TCP ports in LISTEN state on this host (IPv4 and IPv6)."""
    return set(listening_sockets())


def port_listening(port: int, host: str = "127.0.0.1") -> bool:
    if Path("/proc/net/tcp").exists():
        return port in listening_ports()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def write_state(run_dir: Path, state: Mapping[str, Any]) -> None:
    tmp = run_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, run_dir / STATE_FILE)


def read_state(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def tie(folder: Path, run_dir: Path) -> None:
    """Mark *folder*, made outside *run_dir* (the kubelet nodes' folder, or a record standing for
    the run's pods' cgroups), as *run_dir*'s, so that a sweep can remove it, and those cgroups,
    once that run folder is gone (clusters/leftovers.py)."""
    (folder / CLUSTER_FILE).write_text(json.dumps({"run_dir": str(run_dir)}))


def procs_from_state(state: Mapping[str, Any]) -> list[ProcInfo]:
    out = []
    for d in state.get("processes", []):
        try:
            out.append(ProcInfo(str(d["name"]), int(d["pid"]), int(d["start_ticks"]), str(d["exe"]), str(d["log"])))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def procs_to_state(procs: Sequence[ProcInfo]) -> list[dict[str, Any]]:
    return [asdict(p) for p in procs]


#: Teardown order: consumers first (drivers, then kubelets, then their runtimes), etcd last.
_STOP_ORDER = {"driver": -3, "kubelet": -2, "fakecri": -1, "containerd": -1, "kwok": 0, "kube-scheduler": 1,
               "kube-controller-manager": 2, "kube-apiserver": 3, "etcd": 4}


def stop_order(infos: Sequence[ProcInfo]) -> list[ProcInfo]:
    """``infos`` in teardown order; a node's processes are named ``<role>/<node>[/...]``."""
    return sorted(infos, key=lambda p: _STOP_ORDER.get(p.name.split("/", 1)[0], 0))
