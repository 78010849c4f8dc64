"""A clock the test moves by hand."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

__all__ = ["FakeClock"]


class FakeClock:
    """A thread-safe clock that only moves when told to.

    Args:
        start: The time it starts at; by default 2030-01-01 00:00 UTC.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = datetime(2030, 1, 1, tzinfo=UTC) if start is None else start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """Return the clock's current time."""
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward by ``delta`` and return the new time.

        Raises:
            ValueError: ``delta`` is negative; a clock does not run backwards.
        """
        if delta < timedelta(0):
            raise ValueError(f"a clock does not run backwards; got {delta!r}")
        with self._lock:
            self._now += delta
            return self._now
