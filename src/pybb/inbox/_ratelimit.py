"""Token buckets, one per key (a person, or a client address), bounded in number."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from pybb.inbox._settings import RateLimit

__all__ = ["RateLimiter"]

_MAX_KEYS = 10_000


class RateLimiter:
    """Admits at most ``limit.burst`` at once and ``limit.per_minute`` sustained, per key."""

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str) -> float:
        """Spend one request of ``key``'s bucket.

        Returns:
            0.0 when admitted; otherwise the seconds until the next request would be.
        """
        rate = self._limit.per_minute / 60.0
        now = self._clock()
        with self._lock:
            level, then = self._buckets.pop(key, (float(self._limit.burst), now))
            level = min(float(self._limit.burst), level + (now - then) * rate)
            admitted = level >= 1.0
            if admitted:
                level -= 1.0
            self._buckets[key] = (level, now)
            while len(self._buckets) > _MAX_KEYS:
                self._buckets.popitem(last=False)
        return 0.0 if admitted else (1.0 - level) / rate
