"""SIGINT and SIGTERM during ``drakit run``: stop the cases, clean up, and say the run is
incomplete.

The first signal raises :class:`KeyboardInterrupt` in the main thread (what pytest already
understands: the session stops and ``pytest_sessionfinish`` still runs), unless drakit is in a
:meth:`Interrupts.shield` block (tearing down a cluster, writing results): then it is only
recorded, and the block finishes. Every later signal is recorded and ignored, so the cleanup of
what drakit started (case objects, the local clusters, the fake nodes' sockets) always finishes;
``SIGKILL`` is the way to stop drakit at once (its folders are cleaned by the next run, see
:mod:`drakit.clusters.leftovers`).

:data:`INTERRUPTS` is the one state per process: the CLI installs it on the controller before
pytest starts (so messages reach the real stderr) and the plugin installs it on xdist workers
(``--drakit-handle-signals``). The results collector reads which signal came and in which phase
(``start-up``: before the first case finished, ``cases``, ``teardown``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Iterator

import pytest

PHASES = ("start-up", "cases", "teardown")
EXIT_CODES = {"SIGINT": 128 + signal.SIGINT, "SIGTERM": 128 + signal.SIGTERM}  # 130, 143


class Interrupts:
    def __init__(self) -> None:
        self.signal: str | None = None  # the first signal's name
        self.phase: str | None = None   # the phase it came in
        self.current = "start-up"
        self._shielded = 0
        self._holding = False
        self._installed: dict[int, Any] = {}
        self._announce_fd: int | None = None
        self._repeats = 0
        self._unraisable: Any = None

    @property
    def interrupted(self) -> bool:
        return self.signal is not None

    def exit_code(self) -> int | None:
        return EXIT_CODES[self.signal] if self.signal else None

    def install(self, *, announce: bool = True) -> None:
        """Handle SIGINT and SIGTERM from here on (main thread only; a no-op elsewhere or when
        installed already). *announce*: say on stderr what happens (a duplicate of fd 2 is kept,
        so the line is seen even while pytest captures output)."""
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        if announce:
            with contextlib.suppress(OSError):
                self._announce_fd = os.dup(2)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._installed[sig] = signal.signal(sig, self._handle)
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = self._quiet_unraisable

    def uninstall(self) -> None:
        for sig, previous in self._installed.items():
            with contextlib.suppress(Exception):
                signal.signal(sig, previous)
        self._installed.clear()
        if self._unraisable is not None:
            sys.unraisablehook = self._unraisable
            self._unraisable = None
        if self._announce_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._announce_fd)
            self._announce_fd = None

    def reset(self) -> None:
        """Forget a recorded signal (a new run in the same process: tests)."""
        self.signal = self.phase = None
        self.current = "start-up"
        self._repeats = 0
        self._holding = False

    def enter(self, phase: str) -> None:
        """The run moved on to *phase* (one of :data:`PHASES`). From ``teardown`` on, a signal is
        only recorded: what is left is cleaning up and writing the results."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}")
        self.current = phase

    @contextlib.contextmanager
    def shield(self) -> Iterator[None]:
        """A block a first signal does not break: it is recorded, and the block runs to its end."""
        self._shielded += 1
        try:
            yield
        finally:
            self._shielded -= 1

    def hold(self) -> None:
        """From now until :meth:`release`, a first signal is recorded, not raised: ``drakit run``
        holds it from its first instant until its cases are collected, so that a signal in the
        first seconds still stops the run before its first case, with every selected case
        counted as not run in the results it writes."""
        self._holding = True

    def release(self) -> None:
        """End :meth:`hold`; a signal recorded meanwhile is raised now (outside a shield)."""
        if not self._holding:
            return
        self._holding = False
        if self.signal is not None and not self._shielded and self.current != "teardown":
            raise KeyboardInterrupt(self.signal)

    def arrived(self, signum: int) -> None:
        """A signal that came before :meth:`install` (``drakit run`` notes it from its first
        instant): handled as if it came now."""
        self._handle(signum, None)

    def say(self, text: str) -> None:
        """A line on the real stderr (when installed with *announce*), even while pytest captures."""
        self._say(text)

    @property
    def announcing(self) -> bool:
        """Whether :meth:`say` reaches a console (installed with *announce*: ``drakit run``)."""
        return self._announce_fd is not None

    def _say(self, text: str) -> None:
        if self._announce_fd is not None:
            with contextlib.suppress(OSError):
                os.write(self._announce_fd, (text + "\n").encode())

    def _quiet_unraisable(self, unraisable: Any) -> None:
        """Our KeyboardInterrupt, raised where Python cannot propagate it (a ``__del__`` run by the
        garbage collector), is not printed as a traceback: the signal is recorded, and the next
        check between or inside cases raises it again."""
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and self.signal is not None:
            return
        (self._unraisable or sys.__unraisablehook__)(unraisable)

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.signal is not None:
            self._repeats += 1
            if self._repeats == 1:
                self._say(f"drakit: {name} again: still cleaning up what drakit started; SIGKILL stops at once "
                          f"(the next drakit run cleans what is left)")
            return
        self.signal, self.phase = name, self.current
        self._say(f"drakit: {name}: stopping the run; cleaning up what drakit started "
                  f"(further signals are ignored until that is done)")
        if not self._shielded and not self._holding and self.current != "teardown":
            raise KeyboardInterrupt(name)


INTERRUPTS = Interrupts()


class WorkerStart:
    """Ctrl-C while xdist starts its workers: a worker's Python is then importing execnet and
    pytest, and a KeyboardInterrupt there prints a traceback (seen in CI). The controller blocks
    SIGINT while it spawns them (the child inherits the mask, a signal stays pending, none is
    lost); each worker unblocks it once drakit's handler is installed there (:func:`install_in`),
    and the controller after its last spawn or at the end of the run."""

    def __init__(self, interrupts: Interrupts) -> None:
        self._interrupts = interrupts
        self._left = 0

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: Any, specs: list[Any]) -> None:
        self._left = len(specs)
        if self._left:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_newgateway(self, gateway: Any) -> None:
        self._left -= 1
        if self._left <= 0:
            self.unblock()

    def pytest_unconfigure(self, config: Any) -> None:
        self.unblock()  # a spawn that failed

    def unblock(self) -> None:
        self._left = 0
        with self._interrupts.shield():  # a pending signal is recorded, never raised here
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def install_in(config: Any) -> None:
    """drakit run's signal handling in this pytest process (``--drakit-handle-signals``). Ctrl-C
    reaches xdist workers too: each holds it until it has collected all, and unblocks the SIGINT
    its controller blocked while spawning it (:class:`WorkerStart`)."""
    worker = hasattr(config, "workerinput")
    INTERRUPTS.install(announce=not worker)
    if worker:
        INTERRUPTS.hold()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # one held since the spawn arrives now
    else:
        config.pluginmanager.register(WorkerStart(INTERRUPTS), "drakit-worker-start")

