"""In-memory fills of pybb's seams and aids to compare runs, for tests and benchmarks.

* :class:`FakeClock` drives retry back-off without waiting.
* :class:`RecordingObserver` keeps every escalation, resolution, cycle and halt it is told.
* :func:`entries_digest` digests every entry's own history, whatever order writers
  interleaved in: one worker and many give the same digest.

The reference workloads (W1, the seed's pair) live in :mod:`pybb.workloads`; they are
re-exported here for the tests that import them from this module.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pybb import Blackboard, ControllerObserver, CycleReport, Escalation, Resolution, RunSummary
from pybb._engine.projection import CYCLE, KINDS
from pybb.human import Attempt, Channel, Delivery, Notification, Notifier
from pybb.workloads import (
    Decrement,
    FixComponent,
    ZeroEven,
    less_than_3,
    pair,
    w1,
    w1_app,
    w1_expected,
    w1_outcomes,
)

__all__ = [
    "Decrement",
    "FakeClock",
    "FixComponent",
    "RecordingNotifier",
    "RecordingObserver",
    "ZeroEven",
    "check_notifier",
    "entries_digest",
    "less_than_3",
    "pair",
    "w1",
    "w1_app",
    "w1_expected",
    "w1_outcomes",
]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class FakeClock:
    """A clock that only moves when slept on (or advanced by hand).

    Args:
        start: The time it starts at.
    """

    def __init__(self, start: datetime = EPOCH) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        """The fake time."""
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        """Move the fake time on by ``seconds`` at once."""
        with self._lock:
            self.sleeps.append(seconds)
            self._now += timedelta(seconds=seconds)

    def advance(self, seconds: float) -> None:
        """Move the fake time on without recording a sleep."""
        with self._lock:
            self._now += timedelta(seconds=seconds)


class RecordingNotifier(Notifier):
    """The in-memory fill of ``pybb.human.Notifier``: keeps every notification it is given.

    Args:
        fail: Report every delivery as failed (with ``error``), to test the failure path.
        error: The failure's text.
    """

    def __init__(self, *, fail: bool = False, error: str = "refused by the test") -> None:
        self.sent: list[Notification] = []
        self.fail = fail
        self.error = error
        self.closed = False

    def send(self, notification: Notification) -> Delivery:
        """Keep the notification; deliver it (or fail, if told to)."""
        self.sent.append(notification)
        at = datetime.now(UTC)
        if self.fail:
            return Delivery(False, (Attempt(at, None, self.error),))
        return Delivery(True, (Attempt(at, 200),))

    def close(self) -> None:
        """Note that it was closed."""
        self.closed = True


def check_notifier(
    make: Callable[[], Notifier], channel: Channel, received: Callable[[], int]
) -> None:
    """The conformance check of a ``pybb.human.Notifier``: run it on your own transport.

    A notifier delivers a notification over its channel and says so in a ``Delivery``
    whose attempts carry timezone-aware times; it reports a failure rather than raising;
    closing it twice is harmless.

    Args:
        make: Builds the notifier under test.
        channel: A channel it delivers to, whose receiver ``received`` counts.
        received: How many notifications the receiver has got so far.

    Raises:
        AssertionError: The notifier breaks the seam's contract (the message says how).
    """
    at = datetime.now(UTC)
    notification = Notification(
        "check/ask/human:check", "check", "human:check", "ask", "A check", "A check of the seam",
        "http://127.0.0.1/link/check", at + timedelta(hours=1), channel,
    )  # fmt: skip
    notifier = make()
    try:
        before = received()
        delivery = notifier.send(notification)
        _require(isinstance(delivery, Delivery), f"send returned {delivery!r}, not a Delivery")
        _require(delivery.ok, f"the notification was not delivered: {delivery.error}")
        _require(bool(delivery.attempts), "a delivery must list its attempts")
        for attempt in delivery.attempts:
            _require(attempt.at.tzinfo is not None, f"attempt time {attempt.at!r} is naive")
        _require(received() == before + 1, "the receiver did not get exactly one notification")
    finally:
        notifier.close()
        notifier.close()


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(f"Notifier contract: {message}")


class RecordingObserver(ControllerObserver):
    """Keeps everything a controller tells it, in order."""

    def __init__(self) -> None:
        self.escalations: list[Escalation] = []
        self.resolutions: list[Resolution] = []
        self.cycles: list[CycleReport] = []
        self.halts: list[RunSummary] = []

    def on_escalated(self, escalation: Escalation) -> None:
        """Keep the escalation."""
        self.escalations.append(escalation)

    def on_resolved(self, resolution: Resolution) -> None:
        """Keep the resolution."""
        self.resolutions.append(resolution)

    def on_cycle(self, cycle: CycleReport) -> None:
        """Keep the cycle report."""
        self.cycles.append(cycle)

    def on_halted(self, summary: RunSummary) -> None:
        """Keep the summary."""
        self.halts.append(summary)


def entries_digest(board: Blackboard) -> str:
    """SHA-256 of every entry's own history, blind to how writers interleaved.

    Per entry, in board order: the kind, writer and content of each of its records,
    without sequence numbers and timestamps (``at``, ``retry_at``). Entries are taken in
    key order, so a run worked by one process and by many (whose records interleave
    differently) digest the same when every entry went through the same steps.
    """
    histories: dict[str, list[Any]] = {}
    for record in board.model.reader.log():
        region = record.region or ""
        content = record.content
        if region not in KINDS or region == CYCLE or not isinstance(content, dict):
            continue
        kept = {k: v for k, v in content.items() if k not in ("at", "retry_at")}
        histories.setdefault(str(content.get("key")), []).append(
            [KINDS[region], record.writer, kept]
        )
    text = json.dumps(histories, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
