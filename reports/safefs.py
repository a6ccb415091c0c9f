"""Write a file into a folder a user named, never through a link: the one way drakit writes its
outputs (``results.json``, ``junit.xml``, ``report.html``, the run lock, ``node-check --out``,
``drakit report``'s files, ...).

drakit runs as root, and ``--out`` may be a folder others can write to. So every file goes in by
name relative to the folder's open descriptor: a temporary file created with ``O_EXCL |
O_NOFOLLOW`` beside the target, written, ``fsync``'d, then renamed over it (a rename replaces a
link; it never writes where one points). An entry that is a symbolic link, a folder where a file
belongs, or anything but a regular file is refused in one line (:class:`UnsafePath`), as is a
name that would leave its folder (``/``, ``..``, NUL, control characters). Folders drakit creates
are made one component at a time and checked with ``lstat``. The folder the user named may itself
be a link (their choice); nothing inside it is followed.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

__all__ = ["UnsafePath", "check_name", "check_path", "ensure_dir", "make_subdir", "open_append", "open_lock", "preflight",
           "write_file"]

#: The longest file name drakit takes from an input (a Linux file name is at most 255 bytes).
MAX_NAME = 255

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class UnsafePath(ValueError):
    """A path or name drakit refuses to write to or take; ``str()`` is the one line."""


def _control(text: str) -> str | None:
    for ch in text:
        if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029":
            return ch
    return None


def check_name(name: str, what: str = "name") -> str:
    """*name* when it is one plain file or folder name: not empty, not ``.`` or ``..``, no ``/``,
    no NUL or control character, at most :data:`MAX_NAME` bytes; else :class:`UnsafePath`."""
    if not isinstance(name, str) or not name:
        raise UnsafePath(f"{what} is empty")
    bad = _control(name)
    if bad is not None:
        raise UnsafePath(f"{what} {name!r} holds the control character {bad!r}")
    if "/" in name or name in (".", ".."):
        raise UnsafePath(f"{what} {name!r} is not a plain name: it would leave its folder")
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME:
        raise UnsafePath(f"{what} {name[:40]!r}... is longer than {MAX_NAME} bytes")
    return name


def check_path(path: str | os.PathLike[str], what: str = "path") -> Path:
    """*path* (a folder or file a user gave on the command line) as a Path when it holds no NUL
    or control character (a newline in a path forges console lines); else :class:`UnsafePath`."""
    text = os.fspath(path)
    if not text:
        raise UnsafePath(f"{what} is empty")
    bad = _control(text)
    if bad is not None:
        raise UnsafePath(f"{what} {text!r} holds the control character {bad!r}")
    return Path(text)


def ensure_dir(folder: Path, what: str = "folder") -> Path:
    """*folder*, created (mode 0755 less the umask) with the missing parents when absent; a
    component drakit creates is made by ``mkdir`` and checked with ``lstat`` (a link planted
    there meanwhile is refused). An existing path must be a folder."""
    folder = check_path(folder, what)
    missing: list[Path] = []
    probe = folder
    while not os.path.lexists(probe):
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for part in reversed(missing):
        try:
            os.mkdir(part, 0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UnsafePath(f"{what} {folder}: cannot write there: {exc.strerror or exc}") from None
        st = os.lstat(part)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(f"{what} {folder}: {part} was replaced by something other than a folder while drakit made it")
    if not folder.is_dir():
        raise UnsafePath(f"{what} {folder} is not a folder")
    return folder


def make_subdir(parent: Path, name: str, what: str = "folder") -> Path:
    """*parent*/*name*, a folder drakit makes (mode 0755 less the umask) or finds, never a link:
    made by ``mkdir`` relative to *parent*'s open descriptor and checked with ``lstat``."""
    check_name(name, "folder name")
    dfd = _open_dir(ensure_dir(Path(parent), what), what)
    try:
        try:
            os.mkdir(name, 0o755, dir_fd=dfd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UnsafePath(f"{what} {parent}: cannot create {name}: {exc.strerror or exc}") from None
        st = os.lstat(name, dir_fd=dfd)
        if not stat.S_ISDIR(st.st_mode):  # lstat: a link is not a folder
            kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a folder"
            raise UnsafePath(f"{what} {parent}: {name} is {kind} where drakit makes a folder "
                             f"(drakit never writes through a link): remove it or choose another folder")
    finally:
        os.close(dfd)
    return Path(parent) / name


def open_append(path: Path, mode: int = 0o644) -> int:
    """A descriptor appending to *path* (created if absent), never through a link at its last
    component and never blocking on a FIFO; it must be a regular file (for logs)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def _open_dir(folder: Path, what: str) -> int:
    try:
        return os.open(folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise UnsafePath(f"{what} {folder}: cannot open it: {exc.strerror or exc}") from None


def _check_entry(dfd: int, folder: Path, name: str, what: str) -> None:
    """Refuse an existing *name* in the folder that is not a regular file."""
    try:
        st = os.lstat(name, dir_fd=dfd)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UnsafePath(f"{what} {folder}: {name}: {exc.strerror or exc}") from None
    if stat.S_ISREG(st.st_mode):
        return
    kind = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
            else "not a regular file")
    raise UnsafePath(f"{what} {folder}: {name} is {kind} where drakit writes a file "
                     f"(drakit never writes through a link or over a folder): remove it or choose another folder")


def preflight(folder: Path, names: tuple[str, ...] | list[str], what: str = "folder") -> Path:
    """Before a run: *folder* exists (created if absent), drakit can create files in it, and
    none of *names* is a link, a folder or anything but a regular file; :class:`UnsafePath` else."""
    folder = ensure_dir(folder, what)
    dfd = _open_dir(folder, what)
    try:
        for name in names:
            _check_entry(dfd, folder, check_name(name), what)
        probe = f".drakit-write-test.{secrets.token_hex(4)}"
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dfd))
            os.unlink(probe, dir_fd=dfd)
        except OSError as exc:
            raise UnsafePath(f"{what} {folder}: cannot write there: {exc.strerror or exc}") from None
    finally:
        os.close(dfd)
    return folder


def write_file(folder: Path, name: str, data: str | bytes, *, mode: int = 0o644, what: str = "folder") -> Path:
    """Write *data* (text: UTF-8) as *folder*/*name*: a new ``O_EXCL | O_NOFOLLOW`` file beside it,
    ``fsync``, rename over the old one; the path written. The folder is created if absent."""
    check_name(name, "file name")
    folder = ensure_dir(Path(folder), what)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    dfd = _open_dir(folder, what)
    try:
        _check_entry(dfd, folder, name, what)
        tmp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dfd)
        except OSError as exc:
            raise UnsafePath(f"{what} {folder}: cannot write {name}: {exc.strerror or exc}") from None
        try:
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError as exc:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            if isinstance(exc, IsADirectoryError):
                _check_entry(dfd, folder, name, what)  # a folder planted meanwhile: said as one
            raise UnsafePath(f"{what} {folder}: cannot write {name}: {exc.strerror or exc}") from None
        try:
            os.fsync(dfd)
        except OSError:
            pass
    finally:
        os.close(dfd)
    return folder / name


def open_lock(folder: Path, name: str, what: str = "folder") -> int:
    """An open descriptor (read-write) on *folder*/*name*, created 0600 if absent, never through
    a link (``O_NOFOLLOW``) nor blocking on a FIFO (``O_NONBLOCK``, then it must be a regular
    file); for ``flock``. The caller closes it."""
    check_name(name, "file name")
    dfd = _open_dir(folder, what)
    try:
        _check_entry(dfd, folder, name, what)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, 0o600, dir_fd=dfd)
        except OSError as exc:
            raise UnsafePath(f"{what} {folder}: cannot open {name}: {exc.strerror or exc}") from None
    finally:
        os.close(dfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"{what} {folder}: {name} is not a regular file")
    os.set_blocking(fd, True)
    return fd
