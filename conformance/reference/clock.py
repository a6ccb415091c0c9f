"""The reference control plane's clock: simulated time that only moves when a case says so.

Every timestamp the mini control plane writes (creation times, taint ``timeAdded``, condition
transition times, ``allocationTimestamp``) and every deadline it checks (toleration seconds,
binding timeout, the scheduler's flush of unschedulable pods) reads this clock, never the wall
clock, so a run is reproducible and a case can make time pass with an ``advance`` step.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Clock:
    def __init__(self, start: datetime = EPOCH) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time cannot go backwards")
        self._now += timedelta(seconds=seconds)

    def stamp(self) -> str:
        """Now as the API server writes a ``metav1.Time`` (RFC 3339, second resolution)."""
        return format_time(self._now)


def format_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 time as the API server accepts it (``Z`` or an offset, optional fraction)."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"invalid time {text!r}: expected RFC 3339, e.g. 2026-01-01T00:00:00Z") from None
    if t.tzinfo is None:
        raise ValueError(f"invalid time {text!r}: a time zone (Z or an offset) is required")
    return t
