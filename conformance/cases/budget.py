"""A time budget per case: a case over it stops where it is and is an error naming the budget;
the run goes on and its results are kept.

The default is sized from the case's own steps and backend (:func:`budget_of`): the reference
backend runs a case in milliseconds, so a case that takes half a minute there is runaway input
(3,000 pods, a thousand unschedulable claims); a cluster waits for real, so its budget adds the
case's own ``advance`` and ``within`` times. A case may set its own (``timeBudget: 5m``), and
``drakit run --case-timeout`` sets it for every case (it wins over both).

The budget is enforced with ``SIGALRM`` in the main thread (where pytest, and each xdist worker,
runs the cases): :class:`CaseOverBudget` is raised wherever the case is, and the runner turns
it into the case's error at the step it reached. Elsewhere (a thread) no budget applies.

Code the case calls may swallow the exception: a library that turns every exception of a
callback into its own error (the CEL engine turns it into an evaluation error), or a broad
``except``. So once over, the alarm fires again every :data:`REPEAT` seconds until the runner
stands down (:func:`stand_down`), and the runner also asks :func:`expired` after each step: a
step that spins on in Python past its budget ends there, whatever it is doing.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from typing import Any, Iterator

from ..spec.case import Case

BASE = {"reference": 30.0, "cluster": 120.0}
PER_STEP = {"reference": 0.05, "cluster": 15.0}
HOW_TO_RAISE = "raise it with 'timeBudget:' in the case or 'drakit run --case-timeout'"
REPEAT = 0.5   # seconds between alarms once the budget is over (an exception swallowed is raised again)
GRACE = 10.0   # seconds the runner has, once over, to record the failure and collect diagnostics


class CaseOverBudget(BaseException):
    """The case ran over its time budget (a BaseException: no ``except Exception`` of the code
    the case was in swallows it)."""


def budget_of(case: Case, backend: str, override: float | None = None) -> tuple[float, str]:
    """(seconds, how they were arrived at) for *case* on *backend*."""
    if override is not None:
        return override, "--case-timeout"
    if case.time_budget is not None:
        return case.time_budget, "the case's timeBudget"
    kind = backend if backend in BASE else "cluster"
    seconds = BASE[kind] + PER_STEP[kind] * len(case.steps)
    how = f"{BASE[kind]:g} s + {PER_STEP[kind]:g} s a step on the {kind} backend"
    if kind == "cluster":
        waits = sum((s.seconds or 0.0) + (s.within or 0.0) for s in case.steps)
        if waits:
            seconds += waits
            how += f" + its {waits:g} s of advance/within"
    return seconds, how


def _seconds(value: float) -> str:
    return f"{value:g} s" if value < 120 else f"{value:,.0f} s"


class _Armed:
    __slots__ = ("message", "over")

    def __init__(self, message: str) -> None:
        self.message = message
        self.over = False


_armed: _Armed | None = None  # the budget of the case running in this (main) thread


@contextlib.contextmanager
def time_budget(seconds: float, how: str) -> Iterator[None]:
    """Raise :class:`CaseOverBudget` in this (main) thread once *seconds* have passed, and
    again every :data:`REPEAT` seconds until :func:`stand_down` or the end of the block."""
    global _armed
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if seconds <= 0:  # the loader and the options refuse it: never a case without a budget
        raise ValueError(f"a time budget must be more than 0 s, not {seconds!r}")
    armed = _Armed(f"the case ran over its time budget of {_seconds(seconds)} ({how}); {HOW_TO_RAISE}")

    def over(signum: int, frame: Any) -> None:
        armed.over = True
        raise CaseOverBudget(armed.message)

    previous = signal.signal(signal.SIGALRM, over)
    outer, _armed = _armed, armed
    signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _armed = outer


def expired() -> str | None:
    """The budget's message if the running case is over its budget (None: it is not, or no
    budget applies in this thread)."""
    armed = _armed
    return armed.message if armed is not None and armed.over and \
        threading.current_thread() is threading.main_thread() else None


def stand_down() -> None:
    """The case stopped over its budget: the alarms pause for :data:`GRACE` seconds, the time
    the runner has to record the failure (they come again if that hangs too)."""
    if _armed is not None and threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, GRACE, REPEAT)


def over_budget_text(message: str, step_number: int, line: int) -> str:
    """The failure summary of a case stopped over its budget in step *step_number*."""
    return f"timeout: timeBudget exceeded in step {step_number} (line {line}): {message}"


def seconds_option(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h`` -> seconds (at most a day)."""
    m = re.fullmatch(r"([0-9]{1,6}(?:\.[0-9]+)?)(s|m|h)?", text.strip())
    seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)] if m else 0.0
    if not 0 < seconds <= 24 * 3600:
        raise ValueError(f"{text!r} is not a time budget (e.g. 90, 90s, 5m; at most 24h)")
    return seconds
