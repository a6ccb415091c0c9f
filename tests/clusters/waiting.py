"""Polling helper for the tests on a real cluster."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 60.0,
             logs: Callable[[], str] = lambda: "", poll: float = 0.2) -> Any:
    """Poll ``fn`` until it returns something truthy and return that; on timeout fail naming
    ``what``, the last value seen and whatever ``logs()`` adds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}{logs()}")
