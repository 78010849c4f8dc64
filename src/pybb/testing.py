"""In-memory fills of pybb's seams and the reference workloads, for tests and benchmarks.

* :class:`FakeClock` drives retry back-off without waiting.
* :class:`RecordingObserver` keeps every escalation, resolution, cycle and halt it is told.
* :func:`w1` builds workload W1 (the repair ladder of issue 3) and :func:`w1_expected`
  says how it must end; :func:`w1_app` is W1 as a ``pybb worker`` application;
  :func:`pair` builds the seed's ``example_pair``.
* :func:`entries_digest` digests every entry's own history, whatever order writers
  interleaved in: one worker and many give the same digest.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from blackboard.stores import Store
from pybb._engine.blackboard import Blackboard
from pybb._engine.controller import Controller
from pybb._engine.projection import CYCLE, KINDS
from pybb._engine.seams import ControllerObserver
from pybb._engine.source import KnowledgeSource
from pybb._engine.types import BlackboardEntry, CycleReport, Escalation, Resolution, RunSummary
from pybb.human import Attempt, Channel, Delivery, Notification, Notifier

if TYPE_CHECKING:
    from pybb._engine.worker import AppContext

__all__ = [
    "Decrement",
    "FakeClock",
    "FixComponent",
    "RecordingNotifier",
    "RecordingObserver",
    "ZeroEven",
    "check_notifier",
    "entries_digest",
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


class Decrement(KnowledgeSource):
    """W1's first tier: the measurement minus one, per attempt."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        """Return the measurement minus one."""
        return blackboard.get_entry(key).measurement - 1


class ZeroEven(KnowledgeSource):
    """W1's second tier: an even measurement becomes 0; an odd one stays as it is."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        """Return 0 for an even measurement, else the measurement unchanged."""
        measurement = blackboard.get_entry(key).measurement
        return 0 if measurement % 2 == 0 else measurement


class FixComponent(KnowledgeSource):
    """A component-scoped source that writes ``fix(value)`` to its component.

    Args:
        name: The source's name.
        max_attempts: Its attempts per entry.
        component: Its component.
        fix: The repair, old component value to new one.
    """

    def __init__(
        self, name: str, max_attempts: int, *, component: str, fix: Any, **options: Any
    ) -> None:
        super().__init__(name, max_attempts, component=component, **options)
        self.fix = fix

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        """Write the repaired component."""
        component = self.component
        assert component is not None
        value = blackboard.get_entry(key).measurement[component]
        blackboard.write_component(key, component, self.fix(value))
        return None


def less_than_3(measurement: Any) -> bool:
    """W1's predicate."""
    return bool(measurement < 3)


def is_positive(measurement: Any) -> bool:
    """The pair's ``y`` condition."""
    return bool(measurement > 0)


def w1(
    n: int,
    store: str | Store | None = None,
    *,
    board_id: str = "w1",
    max_cycles: int = 1000,
    write: bool = True,
) -> tuple[Blackboard, Controller]:
    """Workload W1: ``n`` entries ``e{i}`` with measurement ``i % 10``, predicate ``less_than_3``.

    One predicate route for all of them: on_fail = [``decrement`` (3 attempts),
    ``zero_even`` (1 attempt)]. Entries are written in one transaction unless
    ``write`` is false (e.g. to resume a stored board without writing them again).
    """
    board = Blackboard(store, board_id)
    controller = Controller(board, max_cycles=max_cycles)
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate(
        "less_than_3", on_fail=[Decrement("decrement", 3), ZeroEven("zero_even", 1)]
    )
    if write:
        with board.batch():
            for i in range(n):
                board.write_entry(
                    f"e{i}", BlackboardEntry(predicate="less_than_3", measurement=i % 10)
                )
    return board, controller


def w1_app(context: AppContext) -> Controller:
    """W1 as a ``pybb worker`` application (``--app w1``): its controller, no entries written.

    Option ``max_cycles`` (default 1000) is the controller's cycle limit.
    """
    max_cycles = int(context.options.get("max_cycles", "1000"))
    _, controller = w1(
        0, context.store, board_id=context.board_id, max_cycles=max_cycles, write=False
    )
    return controller


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


def w1_expected(n: int) -> dict[str, int]:
    """How W1 must end: per outcome, the number of entries (computed, not recorded)."""
    counts = {"pass": 0, "decrement": 0, "zero_even": 0, "escalated": 0}
    for i in range(n):
        m = i % 10
        if m < 3:
            counts["pass"] += 1
        elif m - 3 < 3:
            counts["decrement"] += 1
        elif m % 2 == 0:
            counts["zero_even"] += 1
        else:
            counts["escalated"] += 1
    return counts


def w1_outcomes(board: Blackboard) -> dict[str, int]:
    """How a W1 board ended, read from its entries' histories on the board."""
    counts = {"pass": 0, "decrement": 0, "zero_even": 0, "escalated": 0}
    for key in board._state.entries:
        entry = board._state.entries[key]
        if entry.segment.value == "escalate":
            counts["escalated"] += 1
        elif not entry.ks_history:
            counts["pass"] += 1
        elif "zero_even" in entry.ks_history:
            counts["zero_even"] += 1
        else:
            counts["decrement"] += 1
    return counts


def pair(
    store: str | Store | None = None, *, board_id: str = "pair"
) -> tuple[Blackboard, Controller]:
    """The seed's ``example_pair``: ``{"x": 5, "y": -2}`` with x < 3 and y > 0.

    ``fix_x`` (3 attempts) decrements x; ``fix_y`` (2 attempts) takes y's absolute value.
    """
    board = Blackboard(store, board_id)
    controller = Controller(board, max_cycles=100)
    controller.register_predicate("less_than_3", less_than_3)
    controller.register_predicate("is_positive", is_positive)
    fix_x = FixComponent("fix_x", 3, component="x", fix=lambda x: x - 1)
    fix_y = FixComponent("fix_y", 2, component="y", fix=abs)
    controller.route("p1", on_fail=[fix_x, fix_y])
    board.write_entry(
        "p1",
        BlackboardEntry(
            conditions={"x": "less_than_3", "y": "is_positive"}, measurement={"x": 5, "y": -2}
        ),
    )
    return board, controller
