"""The controller's seams: who it tells what happened, and where its time comes from."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

from pybb._engine.types import CycleReport, Escalation, Resolution, RunSummary

__all__ = ["Clock", "ControllerObserver", "SystemClock"]


class ControllerObserver:
    """Told what a controller did; subclass it and override the hooks you need.

    Every hook is called after the change it reports is durable on the board, and an
    exception from a hook is logged, not raised: the board, not the observer, is the
    record. This is the seam an escalation supervisor (e.g. ``buddhi``) plugs into:
    it takes escalations from :meth:`on_escalated` and answers them, possibly from
    another process, with ``Blackboard.resolve``.
    """

    def on_escalated(self, escalation: Escalation) -> None:
        """An entry was moved to the escalate segment with a report.

        Delivery is at least once: the first ``run()`` of a controller on a board that
        already holds unresolved escalations tells them again (``redelivered=True``),
        since the process that escalated them may have stopped before telling anyone.
        De-duplicate by ``escalation.id``.
        """

    def on_resolved(self, resolution: Resolution) -> None:
        """An escalated entry was resolved out of band (here or by another process)."""

    def on_cycle(self, cycle: CycleReport) -> None:
        """A controller cycle committed; every write up to ``cycle.sequence`` is durable."""

    def on_halted(self, summary: RunSummary) -> None:
        """``run()`` is about to return ``summary``."""


class Clock(Protocol):
    """Where the controller's time comes from (retry back-off waits on it)."""

    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...


class SystemClock:
    """The real clock: UTC wall time and ``time.sleep``."""

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        """Sleep for ``seconds``."""
        time.sleep(seconds)
