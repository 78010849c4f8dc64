"""Controller.reopen: a fresh measurement of a settled entry runs its route again, once.

The next generation of the entry is a record on the board; the controller judges,
dispatches and works it like a new entry (attempts, restores, escalation), the
generations before stay in the history, and two controllers (or a restart) reopening
the same entry under one idempotency key open it once (docs/adr/0019).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pybb_sources import Confirm, Const

from pybb import (
    AttemptError,
    Blackboard,
    BlackboardEntry,
    Controller,
    ControllerObserver,
    EntryError,
    Escalation,
    KnowledgeSource,
    ReopenError,
    Stage,
)

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


class Repair(KnowledgeSource):
    """Repairs a measurement of -1 to 1; fails (with a report) on anything worse."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        value = blackboard.get_entry(key).measurement
        if value == -1:
            return 1
        raise AttemptError(f"cannot repair {value}", {"value": value})


class Told(ControllerObserver):
    def __init__(self) -> None:
        self.escalations: list[Escalation] = []

    def on_escalated(self, escalation: Escalation) -> None:
        self.escalations.append(escalation)


def controller(board: Blackboard, *sources: KnowledgeSource, **kw: Any) -> Controller:
    made = Controller(board, **kw)
    made.register_predicate("pos", lambda v: v > 0)
    made.route_all(on_fail=list(sources) or [Repair("repair", 2)], on_pass=[Confirm("confirm")])
    return made


def escalated(open_board: Callable[..., Blackboard], told: Told | None = None) -> Controller:
    board = open_board("t")
    run = controller(board, observers=[told] if told else [])
    board.write_entry("dev", BlackboardEntry(predicate="pos", measurement=-9))
    run.run()
    assert board.get_entry("dev").stage is Stage.ESCALATED
    return run


def kinds(board: Blackboard) -> list[tuple[str, int]]:
    return [(e.kind, e.data.get("generation", 1)) for e in board.get_history("dev")]


def test_fresh_evidence_that_passes_goes_through_the_ladder(open_board: Any) -> None:
    run = escalated(open_board)
    board = run.blackboard
    assert run.reopen("dev", 5, by="alice", at=AT, note="measured again") == 2
    entry = board.get_entry("dev")
    assert (entry.stage, entry.generation, entry.original_measurement) == (Stage.NEW, 2, 5)
    assert "dev" in board.entries and "dev" not in board.escalate
    summary = run.run()
    entry = board.get_entry("dev")
    # A provisional pass, confirmed by the on_pass tier like a new entry's.
    assert (entry.stage, entry.good_standing, entry.ks_history) == (
        Stage.GOOD,
        True,
        {"confirm": 1},
    )
    assert (summary.good, summary.escalated) == (1, 0)
    assert board.get_escalation("dev") is None  # the first generation's is history now
    history = kinds(board)
    assert ("escalation", 1) in history and ("entry", 2) in history
    opening = next(
        e for e in board.get_history("dev") if (e.kind, e.data.get("generation")) == ("entry", 2)
    )
    assert (opening.data["by"], opening.data["note"]) == ("alice", "measured again")
    assert opening.data["after"]["stage"] == "escalated"


def test_fresh_evidence_that_still_fails_and_is_repairable_is_repaired(open_board: Any) -> None:
    run = escalated(open_board)
    board = run.blackboard
    run.reopen("dev", -1, by="alice", at=AT)
    run.run()
    entry = board.get_entry("dev")
    assert (entry.stage, entry.measurement, entry.ks_history) == (Stage.GOOD, 1, {"repair": 1})
    attempts = [e for e in board.get_history("dev") if e.kind == "attempt"]
    assert [(a.data["attempt"], a.data.get("generation", 1)) for a in attempts] == [
        (1, 1), (2, 1), (1, 2),
    ]  # fmt: skip


def test_fresh_evidence_that_still_fails_is_escalated_again_as_a_new_escalation(
    open_board: Any,
) -> None:
    told = Told()
    run = escalated(open_board, told)
    board = run.blackboard
    first = board.get_escalation("dev")
    assert first is not None
    run.reopen("dev", -4, by="alice", at=AT)
    run.run()
    again = board.get_escalation("dev")
    assert again is not None and again.id != first.id and again.sequence > first.sequence
    assert [e.id for e in told.escalations] == [first.id, again.id]
    assert again.report.measurement == -4 and again.report.original_measurement == -4
    assert [a.attempt for a in again.report.attempts] == [1, 2]  # the ladder ran in full
    assert board.get_entry("dev").generation == 2
    assert kinds(board).count(("escalation", 1)) == 1
    assert kinds(board).count(("escalation", 2)) == 1
    # The new escalation is resolved like any: its own resolution, under the entry's key.
    resolution = run.resolve("dev", "keep", by="bob", at=AT)
    assert (resolution.key, board.get_entry("dev").stage) == ("dev", Stage.RESOLVED)
    assert kinds(board).count(("resolution", 2)) == 1


def test_a_resolved_entry_reopens_and_keeps_its_resolution_in_history(open_board: Any) -> None:
    run = escalated(open_board)
    board = run.blackboard
    run.resolve("dev", "keep", by="bob", at=AT)
    run.reopen("dev", -1, by="bob", at=AT)
    assert board.get_resolution("dev") is None
    run.run()
    assert board.get_entry("dev").stage is Stage.GOOD
    assert [e.kind for e in board.get_history("dev")].count("resolution") == 1
    # The entry as first written can still be written again (a resumed script): no-op.
    board.write_entry("dev", BlackboardEntry(predicate="pos", measurement=-9))
    assert board.get_entry("dev").generation == 2


def test_a_second_controller_and_a_restart_reopen_once(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'reopen.db'}"
    one, two = Blackboard(store, "t"), Blackboard(store, "t")
    try:
        first = controller(one)
        second = controller(two)
        one.write_entry("dev", BlackboardEntry(predicate="pos", measurement=-9))
        first.run()
        second.refresh()
        key = "remeasure/ask-1"
        # Both saw it escalated; both reopen it, one a little later (another time).
        assert first.reopen("dev", -4, by="alice", at=AT, idempotency_key=key) == 2
        later = datetime(2026, 12, 1, 9, 31, tzinfo=UTC)
        assert second.reopen("dev", -4, by="alice", at=later, idempotency_key=key) == 2
        assert second.reopen("dev", -4, by="alice", at=AT, idempotency_key=key) == 2
        first.run()
        second.run()
        for board in (one, two):
            board.refresh()
            assert kinds(board).count(("entry", 2)) == 1
            assert kinds(board).count(("dispatch", 2)) == 1
            assert kinds(board).count(("attempt", 2)) == 2
            assert kinds(board).count(("escalation", 2)) == 1
    finally:
        one.close()
        two.close()
    with Blackboard(store, "t") as board:  # a restart: the same request again
        again = controller(board)
        again.run()
        assert again.reopen("dev", -4, by="alice", at=AT, idempotency_key=key) == 2
        again.run()
        assert kinds(board).count(("entry", 2)) == 1
        assert board.get_entry("dev").stage is Stage.ESCALATED
        # A new request (a new key) opens the next generation.
        assert again.reopen("dev", 5, by="alice", at=AT, idempotency_key="remeasure/ask-2") == 3


def test_reopen_refuses_what_it_cannot_do_and_writes_nothing(open_board: Any) -> None:
    board = open_board("t")
    run = controller(board, Const("slow", value=-9))
    board.write_entry("dev", BlackboardEntry(predicate="pos", measurement=-9))
    board.write_entry("parts", BlackboardEntry(conditions={"a": "pos"}, measurement={"a": -1}))
    head = board.head
    with pytest.raises(ReopenError, match="still being worked on"):
        run.reopen("dev", 5, by="alice")
    run.run()
    with pytest.raises(ReopenError, match="non-empty string"):
        run.reopen("dev", 5, by="")
    with pytest.raises(ReopenError, match="timezone-aware"):
        run.reopen("dev", 5, by="alice", at=datetime(2026, 1, 1))
    with pytest.raises(ReopenError, match="fresh measurement"):
        run.reopen("dev", None, by="alice")
    with pytest.raises(ReopenError, match=r"components \['a'\]"):
        run.reopen("parts", {"b": 1}, by="alice")
    with pytest.raises(ReopenError, match="takes no conditions"):
        run.reopen("dev", 5, by="alice", conditions={"a": "pos"})
    assert board.get_entry("dev").generation == 1
    assert [e.kind for e in board.get_history() if e.sequence > head].count("entry") == 0
    with pytest.raises(EntryError, match="U\\+001F"):
        board.write_entry("dev\x1f2", BlackboardEntry(predicate="pos", measurement=1))


@pytest.mark.parametrize(
    ("key", "at"),
    [
        ("remeasure/ask-1", AT),  # the same write again: the kernel's repeat
        ("remeasure/ask-1", datetime(2026, 12, 1, 9, 31, tzinfo=UTC)),  # the key, reused
        ("reopen/other", AT),  # another key: the generation's record is unique
    ],
)
def test_a_controller_that_has_not_seen_the_reopening_opens_nothing(
    tmp_path: Path, key: str, at: datetime
) -> None:
    store = f"sqlite:///{tmp_path / 'race.db'}"
    with Blackboard(store, "t") as one, Blackboard(store, "t") as two:
        first, second = controller(one), controller(two)
        one.write_entry("dev", BlackboardEntry(predicate="pos", measurement=-9))
        first.run()
        second.refresh()
        assert first.reopen("dev", -4, by="alice", at=AT, idempotency_key="remeasure/ask-1") == 2
        # The other process decided before it could see the reopening: its view is stale.
        second.take_in = list  # type: ignore[method-assign]
        assert second.reopen("dev", -4, by="alice", at=at, idempotency_key=key) == 2
        first.run()
        del second.take_in
        second.run()
        one.refresh()
        assert kinds(one).count(("entry", 2)) == 1
        assert kinds(one).count(("attempt", 2)) == 2
        assert kinds(one).count(("escalation", 2)) == 1


def test_a_fresh_measurement_with_other_components_brings_its_conditions(open_board: Any) -> None:
    board = open_board("t")
    run = controller(board)
    first = BlackboardEntry(conditions={"a": "pos"}, measurement={"a": -9})
    board.write_entry("parts", first)
    run.run()
    assert run.reopen("parts", {"b": 1}, by="alice", conditions={"b": "pos"}) == 2
    run.run()
    entry = board.get_entry("parts")
    assert (entry.stage, entry.conditions, entry.measurement) == (
        Stage.GOOD, {"b": "pos"}, {"b": 1},
    )  # fmt: skip
    board.write_entry("parts", first)  # the entry as first written: still a repeat
