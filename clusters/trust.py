"""Proof that a folder, a file or a process is drakit's own, before anything is removed or signalled
on the strength of a file drakit finds (a killed run's ``state.json``, owner and tie records).

drakit runs as root, in temp folders others write to. A record found there says what to stop and
remove; it is believed only as far as what it names can be proven drakit's, whatever it says:

- a **folder**: seen with ``lstat`` (never through a link), a folder, owned by this effective uid,
  mode 0700, named ``<prefix>`` and mkdtemp's eight characters, directly in the temp folder that
  is scanned (:func:`own_folder`, :func:`temp_child`);
- a **file** in it (the records themselves): opened with ``O_NOFOLLOW | O_NONBLOCK``, a regular
  file owned by this uid, at most :data:`RECORD_LIMIT` bytes (:func:`read_own`);
- a **process**: alive with the recorded start time, run by this uid, the leader of its own process
  group, its program drakit's (a binary in drakit's cache ``bin`` folder, the fake driver's Python
  ``-m drakit.fake_driver.cli``, or util-linux ``unshare`` that drakit starts its nodes through),
  its command line naming the run folder (or a folder tied to it), and started after that folder
  was made (:func:`proven`).
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import stat
import time
from collections.abc import Sequence
from pathlib import Path

#: A record (state, owner, tie) larger than this is not drakit's.
RECORD_LIMIT = 1 << 20
#: Clock slack between a folder's birth time and a process's start time (the kernel's clocks).
START_SLACK = 1.0
_MKDTEMP = re.compile(r"[a-z0-9_]{8}")


def own_folder(path: Path, prefix: str | None = None) -> bool:
    """Whether *path* itself (not a link's target) is a folder of this effective uid with mode
    0700 and, given *prefix*, a name mkdtemp made with it."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) != 0o700:
        return False
    if prefix is not None:
        name = path.name
        return name.startswith(prefix) and _MKDTEMP.fullmatch(name[len(prefix):]) is not None
    return True


def temp_child(path: Path, roots: Sequence[Path]) -> bool:
    """Whether *path* is absolute, plain (no ``..``) and directly in one of *roots*."""
    text = os.fspath(path)
    if not os.path.isabs(text) or os.path.normpath(text) != text or "\0" in text:
        return False
    return any(os.path.normpath(os.fspath(r)) == os.path.dirname(text) for r in roots)


def read_own(folder: Path, name: str, limit: int = RECORD_LIMIT) -> bytes | None:
    """The bytes of *folder*/*name* when it is a regular file of this uid, no larger than *limit*,
    reached without following a link (neither the folder nor the file); None else."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        dfd = os.open(folder, flags | getattr(os, "O_DIRECTORY", 0) | nofollow)
    except OSError:
        return None
    try:
        fd = os.open(name, flags | nofollow | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > limit:
            return None
        return os.read(fd, limit + 1)[: limit]
    except OSError:
        return None
    finally:
        os.close(fd)


class _StatxTimestamp(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_uint32), ("reserved", ctypes.c_int32)]


class _Statx(ctypes.Structure):
    _fields_ = [("mask", ctypes.c_uint32), ("blksize", ctypes.c_uint32), ("attributes", ctypes.c_uint64),
                ("nlink", ctypes.c_uint32), ("uid", ctypes.c_uint32), ("gid", ctypes.c_uint32),
                ("mode", ctypes.c_uint16), ("spare0", ctypes.c_uint16), ("ino", ctypes.c_uint64),
                ("size", ctypes.c_uint64), ("blocks", ctypes.c_uint64), ("attributes_mask", ctypes.c_uint64),
                ("atime", _StatxTimestamp), ("btime", _StatxTimestamp), ("ctime", _StatxTimestamp),
                ("mtime", _StatxTimestamp), ("rest", ctypes.c_uint64 * 48)]  # the kernel's is 256 bytes: room to spare


_STATX_BTIME, _AT_SYMLINK_NOFOLLOW, _AT_FDCWD = 0x800, 0x100, -100


def birth_time(path: Path) -> float | None:
    """When *path* (not a link's target) was made, as a Unix time (``statx``'s birth time); None
    when the file system or the C library does not say."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        statx = libc.statx
    except (OSError, AttributeError):
        return None
    buf = _Statx()
    assert ctypes.sizeof(buf) >= 256
    if statx(_AT_FDCWD, os.fsencode(path), _AT_SYMLINK_NOFOLLOW, _STATX_BTIME, ctypes.byref(buf)) != 0:
        return None
    if not buf.mask & _STATX_BTIME:
        return None
    return buf.btime.tv_sec + buf.btime.tv_nsec / 1e9


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


def start_time(pid: int) -> float | None:
    """When process *pid* started, as a Unix time (its start ticks after boot, and the boot time
    from ``/proc/uptime``: both the kernel's boot-time clock)."""
    fields = _stat(pid)
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        ticks = int(fields[19]) if fields else None
    except (OSError, ValueError, IndexError):
        return None
    if ticks is None:
        return None
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


def _uids(pid: int) -> set[int]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return {int(u) for u in line.split()[1:]}
    except (OSError, ValueError):
        pass
    return set()


def drakit_programs() -> list[str]:
    """The folders and programs a process drakit started runs: drakit's cache ``bin`` folder
    (resolved) and util-linux ``unshare``."""
    from drakit.clusters.cache import cache_root
    out = [os.path.realpath(cache_root() / "bin") + "/"]
    unshare = shutil.which("unshare")
    if unshare:
        out.append(os.path.realpath(unshare))
    return out


def _drakit_program(exe: str, argv: list[bytes], programs: Sequence[str]) -> bool:
    exe = exe.removesuffix(" (deleted)")
    if any(exe.startswith(p) if p.endswith("/") else exe == p for p in programs):
        return True
    return os.path.basename(exe).startswith("python") and argv[1:3] == [b"-m", b"drakit.fake_driver.cli"]


def proven(pid: int, ticks: int | None, folders: Sequence[Path], born: float | None,
           programs: Sequence[str] | None = None) -> bool:
    """Whether process *pid* (start ticks *ticks*) is one drakit started for the run in
    ``folders[0]`` (the others: folders tied to it), the run folder made at *born*: see the module
    docstring. Anything not proven is never signalled."""
    fields = _stat(pid)
    if not fields or len(fields) < 20 or fields[0] in ("Z", "X") or ticks is None or int(fields[19]) != ticks:
        return False
    if int(fields[2]) != pid or _uids(pid) != {os.geteuid()}:  # its own group's leader, this uid only
        return False
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if not _drakit_program(exe, argv, drakit_programs() if programs is None else programs):
        return False
    line = b"\0".join(argv)
    if not any(os.fsencode(f) + b"/" in line for f in folders):
        return False
    started = start_time(pid)
    return born is not None and started is not None and started + START_SLACK >= born
