"""File helpers for the kubelet plugin: atomic writes, private directories, socket paths.

Everything the plugin writes goes through ``atomic_write``: a temporary file in the same folder
(named with a leading dot and no ``.json`` suffix, so CDI caches and the kubelet's plugin
watcher ignore it), flushed and fsynced, then renamed over the target and the folder fsynced.
A reader therefore sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

# sun_path is 108 bytes on Linux including the terminating NUL.
MAX_SOCKET_PATH = 107


#: The longest process id (``pid_max`` is at most 2**22 on Linux): 7 digits.
_PID_DIGITS = 7


def staging_socket_name(pid: int) -> str:
    """The registration socket's name while it is bound, in the plugin's data folder, before it
    is renamed into the registry (the kubelet never sees a socket that does not answer yet)."""
    return f".reg-{pid}.sock"


def socket_tails(driver: str, plugins: str = "plugins", registry: str = "registry") -> list[str]:
    """Every Unix socket path a plugin of *driver* binds, relative to the folder holding its
    ``plugins`` and ``registry`` folders (with a leading ``/``): the DRA socket, the registration
    socket and the registration socket's staging name (with the longest process id). A folder
    whose path plus the longest of these is at most :data:`MAX_SOCKET_PATH` bytes holds them all."""
    return [f"/{plugins}/{driver}/dra.sock", f"/{registry}/{driver}-reg.sock",
            f"/{plugins}/{driver}/{staging_socket_name(10 ** _PID_DIGITS - 1)}"]


def longest_socket_tail(drivers: list[str] | tuple[str, ...], **folders: str) -> int:
    """The length in bytes of the longest of :func:`socket_tails` over *drivers*."""
    return max(len(os.fsencode(t)) for d in drivers for t in socket_tails(d, **folders))


class PathTooLong(ValueError):
    """A Unix socket path that does not fit into ``sockaddr_un``."""


def check_socket_path(path: Path) -> Path:
    """``path`` made absolute; raises ``PathTooLong`` when it cannot be bound."""
    path = Path(os.path.abspath(path))
    if len(os.fsencode(str(path))) > MAX_SOCKET_PATH:
        raise PathTooLong(f"socket path {path} is {len(os.fsencode(str(path)))} bytes long; "
                          f"Unix sockets allow at most {MAX_SOCKET_PATH}: use a shorter folder")
    return path


def ensure_dir(path: Path, mode: int) -> Path:
    """Create ``path`` (and parents) if missing; a folder we create gets ``mode`` exactly.

    An existing folder keeps its mode: shared folders such as the kubelet's registry or
    ``/var/run/cdi`` belong to the node, not to us.
    """
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, mode)
    return path


_UMASK: list[int] = []
_PID = [os.getpid()]  # getpid is a system call; a forked child gets its own
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def _umask() -> int:
    """The process umask, read once from /proc (``os.umask`` can only read it by changing it,
    which other threads would see); unknown: every bit, so the mode is always set exactly."""
    if not _UMASK:
        mask = 0o777
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("Umask:"):
                    mask = int(line.split()[1], 8)
        except (OSError, ValueError, IndexError):
            pass
        _UMASK.append(mask)
    return _UMASK[0]


def atomic_write(path: Path | str, data: bytes, mode: int = 0o644, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically, leaving it with permission bits ``mode``.

    The temporary file is named for this process and thread (created exclusively, so a stale
    one from a dead process of the same id is replaced, never shared)."""
    folder, name = os.path.split(path)
    tmp = f"{folder}/.{name}.{_PID[0]}.{threading.get_ident()}.tmp"
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        except FileExistsError:  # left by a dead process that had our pid and thread id
            os.unlink(tmp)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            if mode & _umask():  # created with ``mode`` less the umask: set it exactly
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable:
        fsync_dir(folder)


def atomic_write_text(path: str, text: str, mode: int = 0o644) -> None:
    """:func:`atomic_write` of UTF-8 text, not fsynced (files that can be written again)."""
    atomic_write(path, text.encode(), mode, durable=False)


def fsync_dir(path: Path | str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_file(path: Path) -> bool:
    """Delete ``path`` if it exists; ``True`` when something was deleted."""
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


def remove_stale_socket(path: Path) -> None:
    """Remove a left-over socket before binding; refuse to delete anything that is not one."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise FileExistsError(f"{path} exists and is not a socket; refusing to replace it")
    path.unlink()
