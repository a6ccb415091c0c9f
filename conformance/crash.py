"""The last resort: an exception drakit did not expect never shows the user a traceback.

Everything a user can get wrong (bad input, bad state, missing config) has its own one-line
message and exit code where it is found. Anything else is a bug in drakit: :func:`last_resort`
(around each command's ``main``) turns it into one line naming the exception, the words "this
is a drakit bug", and the path of a file holding the traceback, with exit code
:data:`EXIT_BUG`. ``KeyboardInterrupt`` and ``SystemExit`` pass through untouched (their codes
belong to whoever raised them), and so does the pytest run's own interrupt handling.

The file goes to ``$DRAKIT_CRASH_DIR`` (``drakit run`` sets it to its ``--out`` folder, so the
traceback lands next to ``results.json``; its xdist workers inherit it), else the temporary
folder; it is readable by its owner only.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, TypeVar

EXIT_BUG = 3
EXIT_OUTPUT = 2  # stdout cannot be written (as for an --out folder that cannot be)
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away
CRASH_DIR_ENV = "DRAKIT_CRASH_DIR"

F = TypeVar("F", bound=Callable[..., int])


def write_crash(exc: BaseException, context: str = "") -> Path | None:
    """Write *exc*'s traceback to a new file readable only by its owner; its path, or None
    when no file could be written (the one line then says so)."""
    text = "".join(traceback.format_exception(exc))
    head = (f"drakit {_version()} crashed at {dt.datetime.now(dt.timezone.utc).isoformat()}\n"
            f"command: {' '.join(sys.argv)}\n{context + chr(10) if context else ''}\n")
    for folder in (os.environ.get(CRASH_DIR_ENV), tempfile.gettempdir()):
        if not folder:
            continue
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix="drakit-crash-", suffix=".txt", dir=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(head + text)
            return Path(name)
        except OSError:
            continue
    return None


def bug_line(exc: BaseException, where: Path | None) -> str:
    """``internal error: ValueError: ...; this is a drakit bug, the traceback is in F``."""
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:300] + "..."
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    tail = f"the traceback is in {where}" if where else "the traceback could not be written"
    return f"internal error: {what}; this is a drakit bug, {tail}"


def report_bug(exc: BaseException, context: str = "") -> str:
    """Write the crash file and return the one line that names it."""
    return bug_line(exc, write_crash(exc, context))


def log_bug(log: Any, what: str, exc: BaseException) -> None:
    """Log an unexpected exception a server survives as one line naming the traceback's file
    (instead of ``log.exception``, whose traceback would reach the user's terminal)."""
    log.error("%s: %s", what, report_bug(exc, context=what))


def last_resort(main: F) -> F:
    """Wrap a command's ``main``: an unexpected exception becomes one line on stderr and exit
    :data:`EXIT_BUG`; a closed stdout (``drakit features | head -1``) ends quietly."""

    @functools.wraps(main)
    def guarded(*args: Any, **kwargs: Any) -> int:
        usable_std_streams()
        previous = threading.excepthook
        threading.excepthook = _thread_hook
        stdout = sys.stdout = _Watched(sys.stdout)
        try:
            code = main(*args, **kwargs)
            sys.stdout.flush()  # here, not at the interpreter's exit: a full disk is said in one line
            return code
        except (KeyboardInterrupt, SystemExit):
            raise
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        except OSError as exc:
            if exc is not stdout.failure:
                _say(f"drakit: {report_bug(exc)}")
                return EXIT_BUG
            _silence_stdout()  # stdout on /dev/full, a full disk, a dead terminal
            _say(f"drakit: cannot write to standard output: {exc.strerror or exc}")
            return EXIT_OUTPUT
        except BaseException as exc:  # noqa: BLE001 - the one place a bug is turned into a line
            _say(f"drakit: {report_bug(exc)}")
            return EXIT_BUG
        finally:
            threading.excepthook = previous
            if sys.stdout is stdout:
                sys.stdout = stdout.stream

    return guarded  # type: ignore[return-value]


def usable_std_streams() -> None:
    """Standard streams a command can always write to, so that the console never decides a run.

    - A closed descriptor 0, 1 or 2 (``drakit run >&-``) is opened on /dev/null: Python set
      ``sys.stdout`` to None (every print was an AttributeError, exit 3), and the next file drakit
      opened took its number, where a child process's output would then land.
    - A console whose encoding cannot show a character (``PYTHONIOENCODING=ascii:strict``, a C
      locale) shows it escaped (``\\xe9``) instead of raising UnicodeEncodeError: the files drakit
      writes are UTF-8 whatever the console is.
    """
    for fd in (0, 1, 2):  # in this order: os.open takes the lowest free number, the one missing
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
                if null != fd:
                    os.dup2(null, fd)
                    os.close(null)
            except OSError:
                pass
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if stream is None:
            try:
                stream = open(fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
            except OSError:
                continue
            setattr(sys, name, stream)
            if getattr(sys, f"__{name}__") is None:
                setattr(sys, f"__{name}__", stream)
            continue
        for each in {id(s): s for s in (stream, getattr(sys, f"__{name}__"))}.values():
            if getattr(each, "errors", None) == "strict" and hasattr(each, "reconfigure"):
                try:
                    each.reconfigure(errors="backslashreplace")
                except (OSError, ValueError):
                    pass


class _Watched:
    """stdout, remembering the error a write to it failed with (to tell a full disk under
    stdout from a bug)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)  # type: ignore[no-any-return]
        except OSError as exc:
            self.failure = exc
            raise

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            self.failure = exc
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _thread_hook(args: threading.ExceptHookArgs) -> None:
    """A background thread that dies of an unexpected exception says so in one line."""
    if args.exc_type is SystemExit or args.exc_value is None:
        return
    name = args.thread.name if args.thread is not None else "a thread"
    _say(f"drakit: {name}: {report_bug(args.exc_value, context=f'thread: {name}')}")


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _stdout_broken() -> bool:
    """Whether stdout cannot take what was written to it (flushing it fails)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("drakit")
    except Exception:  # noqa: BLE001 - a version is decoration here
        return "(unknown version)"
