"""What ``drakit run`` prints while cases finish, in place of pytest's own terminal output
(:class:`ProgressReporter`), and how (:func:`progress_mode`). Controller only, like
:mod:`conformance.results`, whose report reading it shares."""

from __future__ import annotations

import os
import re
import time
from typing import Any, Callable, TextIO

import pytest

from drakit.reports import clean_text, shorten_middle
from drakit.reports.names import clean_name

from .interrupt import INTERRUPTS
from .results import drakit_props, report_status

_XDIST_HEADER = re.compile(r"\A\[gw\d+\] [^\n]*\n")  # "[gw0] linux -- Python 3.11.7 /path"


class ProgressReporter:
    """What ``drakit run`` prints while cases finish, in place of pytest's own terminal output.

    Registered by the CLI on the controller only (``pytest.main(plugins=[...])`` objects do not
    travel to xdist workers), and fed by ``pytest_runtest_logreport``, which the controller sees
    for every phase of every item whichever worker ran it. Modes:

    - ``tty``: one progress line rewritten in place, colour unless ``NO_COLOR`` is set; failures
      are printed above it as they happen;
    - ``plain``: for logs without a terminal: no colour, no carriage returns; a progress line at
      every tenth of the run and a line for every failure as it happens;
    - ``quiet``: nothing while running except collection errors.

    With ``verbose`` every finished case gets a line. At the end, the failure texts (source
    excerpt, diff) of the first :data:`MAX_DETAILS` failures are printed, except in quiet mode.
    """

    MAX_DETAILS = 10
    MAX_DETAIL_LINES = 60
    MAX_LINE = 200  # the one-line mention of a failure as it happens
    MAX_DETAIL_LINE = 500  # a line of the failure details at the end (the one long showing)
    REFRESH_SECONDS = 0.1

    def __init__(self, stream: TextIO, *, mode: str, verbose: bool = False, color: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if mode not in ("tty", "plain", "quiet"):
            raise ValueError(f"unknown progress mode {mode!r}")
        self.stream = stream
        self.mode = mode
        self.verbose = verbose and mode != "quiet"
        self.color = color and mode == "tty"
        self.clock = clock
        self.total: int | None = None
        self.status: dict[str, str] = {}
        self.details: list[str] = []
        self._last_draw = float("-inf")
        self._plain_mark = 0
        self._plain_last = ""
        self._line_open = False
        self.broken: OSError | None = None

    # -- pytest hooks (controller only) ---------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # empty on an xdist controller, which learns the count below
            self.total = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.total = len(ids)  # every worker collects the same ids, or xdist aborts the run

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # not a case file (drakit's own never fail to collect): a conftest.py, say
            last = next((line.strip() for line in reversed(report.longreprtext.splitlines()) if line.strip()), "")
            self._print(clean_text(f"ERROR collecting {clean_name(report.nodeid or '.')}: {shorten_middle(last, self.MAX_LINE)}"))

    def pytest_internalerror(self, excrepr: Any, excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
        """A bug inside the run: one line and the crash file, never pytest's INTERNALERROR dump.
        After SIGINT/SIGTERM it is the signal's doing (Ctrl-C reaches the test workers too, and one
        killed while it starts ends xdist's set-up with an EOFError): no bug is reported, the run
        is the interrupted one."""
        if INTERRUPTS.interrupted:
            self._print(f"drakit: {type(excinfo.value).__name__} after {INTERRUPTS.signal}, while the run was stopped "
                        f"(the signal's doing, e.g. a worker killed as it started)")
            return True
        from .crash import report_bug
        self._print(f"drakit: {report_bug(excinfo.value)}")
        return True

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = drakit_props(report) or {}
        status = report_status(report, data.get("outcome"))
        if status is None:
            return
        first = report.nodeid not in self.status
        self.status[report.nodeid] = status
        # case data is cleaned before it is printed: it must never drive the terminal
        label = clean_name(f"{data['id']} [{data.get('backend', '-')}]" if "id" in data else report.nodeid)
        if status in ("failed", "error"):
            text = clean_text(_XDIST_HEADER.sub("", report.longreprtext).rstrip())
            self.details.append(f"{status.upper()} {label}\n{text}")
            summary = clean_text(((data.get("failure") or {}).get("summary") or "").strip())
            summary = summary.splitlines()[0] if summary else next(
                (line.strip() for line in reversed(text.splitlines()) if line.strip()), status)
            if self.mode != "quiet":
                self._print(f"{self._paint(status.upper())} {label}: {shorten_middle(summary, self.MAX_LINE)}")
        elif self.verbose and first:
            self._print(f"{self._paint(status.upper())} {label} ({report.duration:.2f} s)")
        self._progress(final=False)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._progress(final=True)
        if self.mode == "quiet" or not self.details:
            return
        shown = self.details[: self.MAX_DETAILS]
        self._print("")
        self._print(f"failure details ({len(shown)} of {len(self.details)}):")
        for block in shown:
            lines = [shorten_middle(line, self.MAX_DETAIL_LINE) for line in block.splitlines()]
            if len(lines) > self.MAX_DETAIL_LINES:
                lines = lines[: self.MAX_DETAIL_LINES] + [f"... {len(lines) - self.MAX_DETAIL_LINES} more lines in report.html"]
            self._print("")
            self._print("\n".join(lines))

    # -- output ----------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        out = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        for status in self.status.values():
            out[status] += 1
        return out

    def _paint(self, label: str) -> str:
        code = {"FAILED": "1;31", "ERROR": "1;35", "PASSED": "32", "SKIPPED": "90"}[label]
        return f"\x1b[{code}m{label}\x1b[0m" if self.color else label

    def _line(self) -> str:
        from drakit.reports.text import progress_line
        return progress_line(len(self.status), self.total, self.counts(), color=self.color)

    def _progress(self, *, final: bool) -> None:
        if self.mode == "quiet" or not self.status:
            return
        done = len(self.status)
        if self.mode == "plain":  # a line at each new tenth of the run, and at the end
            mark = done * 10 // self.total if self.total else done // 10
            if mark > self._plain_mark or final:
                self._plain_mark = mark
                line = self._line()
                if line != self._plain_last and done:
                    self._plain_last = line
                    self._write(line + "\n")
            return
        now = self.clock()
        if final or now - self._last_draw >= self.REFRESH_SECONDS:
            self._last_draw = now
            self._write("\r" + self._line() + "\x1b[K" + ("\n" if final else ""))
            self._line_open = not final

    def _print(self, text: str) -> None:
        """A permanent line (or lines), written above the progress line in tty mode."""
        if self._line_open:
            self._write("\r\x1b[K")
            self._line_open = False
            self._last_draw = float("-inf")
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        """Write to the stream; one that cannot be written (stdout on a full disk, a reader that
        went away, a descriptor not open for writing) is given up, the run goes on and its
        results are written (the CLI says so once it is over)."""
        if self.broken is not None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError as exc:
            self.broken = exc


def progress_mode(*, quiet: bool, plain: bool, stream: TextIO) -> tuple[str, bool]:
    """(mode, colour) for ``drakit run``: quiet wins, then ``--plain`` or a stream that is not a
    terminal means plain; colour only on a terminal and only without ``NO_COLOR``."""
    tty = bool(getattr(stream, "isatty", lambda: False)())
    if quiet:
        return "quiet", tty and not os.environ.get("NO_COLOR")
    if plain or not tty:
        return "plain", False
    return "tty", not os.environ.get("NO_COLOR")
