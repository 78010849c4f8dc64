"""The projection keeps what the controller needs, not every settled entry's history (issue 13).

A settled entry holds its state and shares its route's chain and the empty containers
with every other one; a committed escalation's report (every attempt, the largest thing
an escalated entry has) stays on the board and is read back by ``get_escalation``. What
the board returns is the same either way.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from pybb import Blackboard, Controller, ControllerObserver, Escalation
from pybb._engine.projection import EntryState
from pybb.workloads import Decrement, ZeroEven, less_than_3, w1, w1_expected, w1_outcomes

# Before issue 13's projection work a W1 board read back from SQLite folded to about
# 1,540 bytes per entry (CPython 3.11, 64-bit); now about 580. The bound leaves room.
MAX_BYTES_PER_ENTRY = 700
N = 4_000


def _folded_bytes(url: str) -> tuple[int, Blackboard]:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        board = Blackboard(url, "w1")  # the journal folds the whole log into its projection
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, board
    finally:
        tracemalloc.stop()


def test_a_folded_w1_board_holds_little_per_entry(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w1.db'}"
    board, controller = w1(N, url)
    controller.run()
    assert w1_outcomes(board) == w1_expected(N)
    board.close()
    size, reopened = _folded_bytes(url)
    try:
        assert len(reopened.journal.view.entries) == N
        assert size / N < MAX_BYTES_PER_ENTRY, f"{size / N:.0f} bytes per entry"
    finally:
        reopened.close()


def test_escalations_read_back_from_the_board_are_what_was_decided(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w1.db'}"
    board, controller = w1(40, url)
    escalated: dict[str, Escalation] = {}

    class Keep(ControllerObserver):
        def on_escalated(self, escalation: Escalation) -> None:
            escalated[escalation.key] = escalation

    controller.add_observer(Keep())
    controller.run()
    keys = sorted(board.escalate)
    assert keys and sorted(escalated) == keys
    for key in keys:
        # Committed: the projection no longer holds the record's content.
        assert board.journal.view.entries[key].escalation is None
        assert board.journal.view.entries[key].escalation_seq > 0
        assert board.get_escalation(key) == escalated[key]
    board.close()
    reopened = Blackboard(url, "w1")
    try:
        for key in keys:
            assert reopened.get_escalation(key) == escalated[key]
        assert reopened.get_escalation("e0") is None  # settled in good standing
    finally:
        reopened.close()


def test_an_escalation_is_read_from_the_projection_until_its_cycle_commits(
    tmp_path: Path,
) -> None:
    seen: list[Escalation | None] = []

    class Looking(Controller):
        def _escalate(self, entry: EntryState, source: str | None, reason: str) -> None:
            super()._escalate(entry, source, reason)
            seen.append(self.blackboard.get_escalation(entry.key))  # inside the cycle's batch

    board, _ = w1(10, f"sqlite:///{tmp_path / 'w1.db'}")
    controller = Looking(board)
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate(
        "less_than_3", on_fail=[Decrement("decrement", 3), ZeroEven("zero_even", 1)]
    )
    controller.run()
    assert [e.key for e in seen if e is not None] == ["e7", "e9"]
    assert all(e is not None and e.sequence == 0 for e in seen)  # not committed yet
    for early in seen:
        assert early is not None
        committed = board.get_escalation(early.key)
        assert committed is not None and committed.sequence > 0
        assert committed.report == early.report
    board.close()
