"""How a shard in a pod hands its results back: in its log, no volume needed.

``drakit run --emit-results`` prints, as cases finish, ``::drakit-progress DONE TOTAL`` lines,
and at the end the shard's ``results.json``, gzipped and base64-encoded, between a
``::drakit-results-begin BYTES`` and a ``::drakit-results-end SHA256`` line (of the gzip bytes).
:func:`find_results` takes it out of a log again, checked; a log without a whole, intact frame
(the pod was killed, the log was cut) gives None.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from typing import Any, Iterable, TextIO

import pytest

BEGIN, END, PROGRESS = "::drakit-results-begin", "::drakit-results-end", "::drakit-progress"
_LINE = 76


def emit_results(results_text: str, stream: TextIO) -> None:
    packed = gzip.compress(results_text.encode("utf-8"), mtime=0)
    body = base64.b64encode(packed).decode("ascii")
    stream.write(f"{BEGIN} {len(packed)}\n")
    for i in range(0, len(body), _LINE):
        stream.write(body[i:i + _LINE] + "\n")
    stream.write(f"{END} {hashlib.sha256(packed).hexdigest()}\n")
    stream.flush()


def find_results(log: str) -> dict[str, Any] | None:
    """The results a shard's log carries, or None (no frame, a frame cut short or damaged)."""
    lines = log.splitlines()
    begins = [i for i, line in enumerate(lines) if line.startswith(BEGIN + " ")]
    if not begins:
        return None
    start = begins[-1]
    for j in range(start + 1, len(lines)):
        if lines[j].startswith(END + " "):
            try:
                packed = base64.b64decode("".join(lines[start + 1:j]), validate=True)
            except ValueError:
                return None
            if hashlib.sha256(packed).hexdigest() != lines[j].split()[1] or len(packed) != int(lines[start].split()[1]):
                return None
            try:
                data = json.loads(gzip.decompress(packed).decode("utf-8"))
            except (OSError, ValueError):
                return None
            return data if isinstance(data, dict) else None
    return None


_PROGRESS = re.compile(r"^::drakit-progress (\d+) (\d+)$")


def last_progress(lines: Iterable[str]) -> tuple[int, int] | None:
    """(cases done, cases of the shard) of the last progress line, if any."""
    found = None
    for line in lines:
        m = _PROGRESS.match(line.strip())
        if m:
            found = (int(m.group(1)), int(m.group(2)))
    return found


class ProgressLines:
    """A pytest plugin (controller only) printing a progress line as each case finishes."""

    def __init__(self, stream: TextIO, channel: Any = None) -> None:
        self.stream = stream
        self.channel = channel  # incluster.channel.Channel: the progress in a ConfigMap too
        self.total = 0
        self.done: set[str] = set()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:
            self.total = len(session.items)
            self._say()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.total = len(ids)
        self._say()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown" and report.nodeid not in self.done:
            self.done.add(report.nodeid)
            self._say()

    def _say(self) -> None:
        self.stream.write(f"{PROGRESS} {len(self.done)} {self.total}\n")
        self.stream.flush()
        if self.channel is not None:
            self.channel.progress(len(self.done), self.total, force=len(self.done) in (0, self.total))
