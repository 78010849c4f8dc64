"""The seed's control flow, rule by rule, on the memory and SQLite stores."""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta

import pytest
from pybb_sources import Boom, Confirm, Const, Dec, Seen, SetComponent, Sleepy
from rich.console import Console

from blackboard import Accept, ProposedContribution, Rejected, RejectionCause
from pybb import (
    AttemptStatus,
    Blackboard,
    BlackboardEntry,
    Chain,
    Controller,
    HaltReason,
    KnowledgeSource,
    ResolutionError,
    RetryPolicy,
    Segment,
    Stage,
)
from pybb._engine.projection import ATTEMPTS
from pybb.testing import FakeClock, RecordingObserver
from pybb.workloads import FixComponent

OpenBoard = Callable[..., Blackboard]


def controller(board: Blackboard, **kw: object) -> Controller:
    ctl = Controller(board, **kw)  # type: ignore[arg-type]
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    ctl.register_predicate("is_positive", lambda m: m > 0)
    ctl.register_predicate("is_zero", lambda m: m == 0)
    return ctl


def scalar(m: object, predicate: str = "less_than_3") -> BlackboardEntry:
    return BlackboardEntry(predicate=predicate, measurement=m)


def pair(x: int, y: int) -> BlackboardEntry:
    return BlackboardEntry(
        conditions={"x": "less_than_3", "y": "is_positive"}, measurement={"x": x, "y": y}
    )


def kinds(board: Blackboard, key: str) -> list[str]:
    return [event.kind for event in board.get_history(key)]


# -- evaluation and dispatch -----------------------------------------------------------------


def test_failing_first_verdict_dispatches_onto_on_fail(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    dec, confirm = Dec("dec", 3), Seen("confirm")
    ctl.route("e1", on_pass=[confirm], on_fail=[dec])
    board.write_entry("e1", scalar(4))
    ctl.run()
    assert ctl.dispatched["e1"] == (dec,)
    assert board.get_entry("e1").chain is Chain.ON_FAIL
    assert confirm.seen == []
    assert kinds(board, "e1")[:3] == ["entry", "dispatch", "attempt"]
    dispatch = next(e for e in board.get_history("e1") if e.kind == "dispatch")
    # the first verdict travels with the dispatch it chose (docs/adr/0026)
    assert dispatch.data == {
        "key": "e1",
        "result": False,
        "good_standing": False,
        "chain": "on_fail",
        "sources": ["dec"],
    }
    assert board.get_entry("e1").measurement == 2
    assert board.get_entry("e1").good_standing


def test_passing_first_verdict_with_empty_on_pass_is_final(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    dec = Dec("dec", 3)
    ctl.route("e1", [dec])
    board.write_entry("e1", scalar(1))
    summary = ctl.run()
    entry = board.get_entry("e1")
    assert (entry.stage, entry.good_standing, entry.ks_history) == (Stage.GOOD, True, {})
    assert ctl.dispatched["e1"] == ()
    assert summary.halted is HaltReason.SETTLED and summary.attempts == 0


@pytest.mark.parametrize("routed", [True, False])
def test_failing_entry_with_empty_chain_escalates_at_once(
    open_board: OpenBoard, routed: bool
) -> None:
    board = open_board()
    ctl = controller(board)
    if routed:
        ctl.route("e1", on_pass=[Seen("confirm")])
    board.write_entry("e1", scalar(7))
    ctl.run()
    escalation = board.get_escalation("e1")
    assert escalation is not None
    assert (escalation.source, escalation.report.reason) == (None, "empty_chain")
    assert list(board.get_escalate()) == ["e1"] and "e1" not in board.entries


def test_dispatch_happens_once_per_key(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.route("e1", [Dec("dec", 5)])
    board.write_entry("e1", scalar(5))
    ctl.run()
    ctl.route("e1", [Const("other", value=0)])  # too late: the entry was dispatched
    ctl.run()
    assert [e.kind for e in board.get_history("e1")].count("dispatch") == 1
    assert board.get_entry("e1").ks_history == {"dec": 3}


# -- attempts, retries and handoffs ------------------------------------------------------------


def test_reevaluates_after_every_attempt_and_retries_up_to_max_attempts(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.route("e1", [Dec("dec", 3)])
    board.write_entry("e1", scalar(10))
    ctl.run()
    attempts = [e.data for e in board.get_history("e1") if e.kind == "attempt"]
    assert [(a["attempt"], a["writes"], a["result"]) for a in attempts] == [
        (1, [[None, 9]], False),
        (2, [[None, 8]], False),
        (3, [[None, 7]], False),
    ]
    entry = board.get_entry("e1")
    assert entry.ks_history == {"dec": 3}
    assert entry.segment is Segment.ESCALATE
    assert entry.measurement == 10  # the failure handoff restored the original


def test_failure_handoff_gives_the_next_source_the_original(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    second = Seen("second", 1)
    ctl.route("e1", [Dec("dec", 2), second])
    board.write_entry("e1", scalar(9))
    ctl.run()
    assert second.seen == [9]
    history = board.get_history("e1")
    handoff = next(e for e in history if e.kind == "handoff")
    # the restore travels with the handoff (docs/adr/0026): no record of its own before it
    assert [e.kind for e in history if e.sequence < handoff.sequence].count("restore") == 0
    assert handoff.data == {
        "key": "e1",
        "from": "dec",
        "to": "second",
        "reason": "exhausted",
        "restore": {"value": 9},
    }


def test_component_failure_handoff_restores_only_its_component(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    fix_y = SetComponent("fix_y", 2, component="y", value=4)
    break_x = SetComponent("bad_x", 2, component="x", value=99)
    seen = Seen("last", 1, component="x")
    ctl.route("p1", on_fail=[fix_y, break_x, seen])
    board.write_entry("p1", pair(5, -2))
    ctl.run()
    history = board.get_history("p1")
    handoffs = [e.data.get("restore") for e in history if e.kind == "handoff"]
    restores = [e.data for e in history if e.kind == "restore"]
    assert handoffs == [None, {"component": "x", "value": 5}]  # success keeps, failure puts back
    assert restores == [{"key": "p1", "component": "x", "value": 5}]  # the chain's last
    assert seen.seen == [{"x": 5, "y": 4}]  # y's fix kept, x back to the original
    assert board.get_entry("p1").measurement == {"x": 5, "y": 4}
    assert board.get_entry("p1").segment is Segment.ESCALATE


def test_success_handoff_keeps_the_fix_and_the_pair_ends_good(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    fix_x = FixComponent("fix_x", 3, component="x", fix=lambda x: x - 1)
    fix_y = FixComponent("fix_y", 2, component="y", fix=abs)
    ctl.route("p1", on_fail=[fix_x, fix_y])
    board.write_entry("p1", pair(5, -2))
    summary = ctl.run()
    entry = board.get_entry("p1")
    assert entry.measurement == {"x": 2, "y": 2}
    assert entry.result == {"x": True, "y": True} and entry.good_standing
    assert entry.ks_history == {"fix_x": 3, "fix_y": 1}
    assert "restore" not in kinds(board, "p1")
    handoff = next(e for e in board.get_history("p1") if e.kind == "handoff")
    assert handoff.data["reason"] == "passed"
    assert summary.halted is HaltReason.SETTLED and board.get_escalate() == {}


def test_component_already_passing_is_handed_on_without_attempts(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    fix_x = FixComponent("fix_x", 3, component="x", fix=lambda x: x - 1)
    fix_y = FixComponent("fix_y", 2, component="y", fix=abs)
    ctl.route("p1", on_fail=[fix_x, fix_y])
    board.write_entry("p1", pair(1, -2))
    ctl.run()
    assert board.get_entry("p1").ks_history == {"fix_y": 1}


def test_end_of_route_with_the_entry_still_bad_escalates(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.route("p1", on_fail=[FixComponent("fix_x", 3, component="x", fix=lambda x: 0)])
    board.write_entry("p1", pair(5, -2))
    ctl.run()
    escalation = board.get_escalation("p1")
    assert escalation is not None
    assert (escalation.source, escalation.report.reason) == ("fix_x", "end_of_route")
    assert escalation.entry.measurement == {"x": 0, "y": -2}


# -- outcome-routed dispatch: on_pass ----------------------------------------------------------


def test_on_pass_confirmation_that_fails_escalates_with_its_report(open_board: OpenBoard) -> None:
    board = open_board()
    observer = RecordingObserver()
    ctl = controller(board, observers=[observer])
    confirm = Confirm("verify", 2, bad=(2,))
    ctl.route_predicate("less_than_3", on_pass=[confirm], on_fail=[Dec("dec", 3)])
    board.write_entry("ok", scalar(1))
    board.write_entry("bad", scalar(2))
    ctl.run()
    assert board.get_entry("ok").stage is Stage.GOOD
    escalation = board.get_escalation("bad")
    assert escalation is not None and [e.key for e in observer.escalations] == ["bad"]
    report = escalation.report
    assert (report.source, report.chain, report.reason) == ("verify", Chain.ON_PASS, "exhausted")
    assert report.tier_report == {"checked": 2}
    assert [(a.source, a.attempt, a.status, a.error) for a in report.attempts] == [
        ("verify", 1, AttemptStatus.ERROR, "2 failed confirmation"),
        ("verify", 2, AttemptStatus.ERROR, "2 failed confirmation"),
    ]
    # the pass was provisional: the confirming source saw the standing cleared
    assert confirm.standings[0] == (False, True)


def test_on_pass_confirmation_that_passes_rests_in_good_standing(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    confirm = Confirm("verify", 1)
    ctl.route("e1", on_pass=[confirm])
    board.write_entry("e1", scalar(0))
    ctl.run()
    entry = board.get_entry("e1")
    assert (entry.stage, entry.good_standing, entry.ks_history) == (Stage.GOOD, True, {"verify": 1})


# -- failing attempts: raising, timing out, refused ----------------------------------------------


def test_a_source_that_raises_makes_a_failed_attempt_and_the_run_goes_on(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.route("bad", [Boom("boom", 2)])
    ctl.route("good", [Dec("dec", 3)])
    board.write_entry("bad", scalar(5))
    board.write_entry("good", scalar(4))
    summary = ctl.run()
    attempts = [e.data for e in board.get_history("bad") if e.kind == "attempt"]
    assert [(a["status"], a["error"]) for a in attempts] == [
        ("error", "ValueError: cannot repair bad")
    ] * 2
    assert board.get_entry("good").good_standing
    assert summary.escalated == 1 and summary.good == 1


def test_a_source_past_its_timeout_makes_a_failed_attempt_and_its_late_write_is_ignored(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    ctl = controller(board)
    sleepy = Sleepy("sleepy", sleep=0.3, component="x", timeout=timedelta(seconds=0.05))
    ctl.route("p1", [sleepy])
    board.write_entry("p1", pair(5, 1))
    ctl.run()
    head = board.head
    assert sleepy.finished.wait(5)
    attempt = next(e.data for e in board.get_history("p1") if e.kind == "attempt")
    assert (attempt["status"], attempt["error"]) == ("timeout", "timed out after 0.05 s")
    assert board.get_entry("p1").measurement == {"x": 5, "y": 1}
    assert board.head == head and "timed out or returned" in str(sleepy.late_error)


def test_a_component_source_writing_another_component_is_refused_by_admission(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    ctl = controller(board)
    rogue = SetComponent("fix_x", 2, component="x", target="y", value=5)
    ctl.route("p1", [rogue])
    board.write_entry("p1", pair(5, -2))
    ctl.run()
    attempts = [e for e in board.get_history("p1") if e.kind == "attempt"]
    assert [e.data["status"] for e in attempts] == ["refused", "refused"]
    assert all(e.writer == "controller" for e in attempts)
    assert "scoped to component 'x' and may not write component 'y'" in attempts[0].data["error"]
    assert attempts[0].data["refused"] == [["y", 5]]
    assert board.get_entry("p1").measurement == {"x": 5, "y": -2}
    assert board.get_entry("p1").segment is Segment.ESCALATE


def test_the_kernel_refuses_a_scope_violation_written_past_the_controller(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.add_ks(SetComponent("fix_x", 1, component="x", value=0))
    board.write_entry("p1", pair(5, -2))
    head = board.digest()
    content = {
        "key": "p1",
        "source": "fix_x",
        "attempt": 1,
        "status": "changed",
        "writes": [["y", 1]],
    }
    result = board.model.control.write("ks:fix_x", ATTEMPTS, content)
    assert isinstance(result, Rejected) and result.cause is RejectionCause.ADMISSION
    spoof = board.model.control.write("ks:fix_x", ATTEMPTS, {**content, "source": "other"})
    assert isinstance(spoof, Rejected)
    assert board.digest() == head


def test_a_source_can_attach_a_report_to_any_attempt(open_board: OpenBoard) -> None:
    class Reporting(KnowledgeSource):
        def execute(self, blackboard: Blackboard, key: str) -> object:
            blackboard.report(key, {"tried": blackboard.get_entry(key).measurement})
            return None

    board = open_board()
    ctl = controller(board)
    ctl.route("e1", [Reporting("r", 1)])
    board.write_entry("e1", scalar(5))
    ctl.run()
    escalation = board.get_escalation("e1")
    assert escalation is not None and escalation.report.tier_report == {"tried": 5}
    with pytest.raises(Exception, match="outside a knowledge source's attempt"):
        board.report("e1", {"x": 1})


# -- copies, history, halting -------------------------------------------------------------------


def test_get_entry_returns_copies_a_source_cannot_corrupt(open_board: OpenBoard) -> None:
    class Mutator(KnowledgeSource):
        def execute(self, blackboard: Blackboard, key: str) -> object:
            entry = blackboard.get_entry(key)
            entry.measurement["x"] = 0
            entry.original_measurement["x"] = 0
            entry.ks_history["mutator"] = 99  # type: ignore[index]
            return None

    board = open_board()
    ctl = controller(board)
    ctl.route("p1", [Mutator("mutator", 1)])
    board.write_entry("p1", pair(5, 1))
    ctl.run()
    entry = board.get_entry("p1")
    assert entry.measurement == {"x": 5, "y": 1} == entry.original_measurement
    assert entry.ks_history == {"mutator": 1}


def test_a_copy_of_an_entry_is_the_value_its_constructor_builds(open_board: OpenBoard) -> None:
    seen: list[BlackboardEntry] = []

    class Look(KnowledgeSource):
        def execute(self, blackboard: Blackboard, key: str) -> object:
            seen.append(blackboard.get_entry(key))
            blackboard.write_component(key, "x", 1)
            seen.append(blackboard.get_entry(key))
            return None

    board = open_board()
    ctl = controller(board)
    ctl.route("p1", [Look("look", 1, component="x")])
    board.write_entry("p1", pair(5, 1))
    ctl.run()
    seen.append(board.get_entry("p1"))
    for entry in seen:
        built = BlackboardEntry(**{f.name: getattr(entry, f.name) for f in fields(entry)})
        assert entry == built
        assert replace(entry) == entry
    assert [e.measurement for e in seen] == [{"x": 5, "y": 1}, {"x": 1, "y": 1}, {"x": 1, "y": 1}]
    assert seen[0].source == "look" and seen[0].stage is Stage.WORKING and seen[0].generation == 1
    assert seen[-1].source is None and seen[-1].stage is Stage.GOOD


def test_history_is_the_board_log_and_every_change_is_a_write(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.route("e1", [Dec("dec", 1), Dec("dec2", 1)])
    board.write_entry("e1", scalar(9))
    ctl.run()
    history = board.get_history()
    log = [r.sequence for r in board.model.reader.log()]
    assert [e.sequence for e in history] == log
    assert kinds(board, "e1") == [
        "entry",
        "dispatch",
        "attempt",
        "handoff",
        "attempt",
        "restore",
        "escalation",
    ]
    assert board.history == history


def test_halts_at_max_cycles_of_one_run_while_the_board_keeps_counting(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    ctl = controller(board, max_cycles=4)
    ctl.route("e1", [Dec("dec", 100)])
    board.write_entry("e1", scalar(1000))
    assert ctl.run().halted is HaltReason.MAX_CYCLES
    assert ctl.cycle_count == 4 and board.get_entry("e1").ks_history == {"dec": 4}
    again = controller(open_board(), max_cycles=4)
    again.add_ks(Dec("dec", 100))
    assert again.run().halted is HaltReason.MAX_CYCLES and again.cycle_count == 8
    assert again.blackboard.get_entry("e1").ks_history == {"dec": 8}


def test_halts_quiescent_when_no_source_can_contribute(open_board: OpenBoard) -> None:
    class Shy(Dec):
        def can_contribute(self, blackboard: Blackboard) -> list[str]:
            return []

    board = open_board()
    ctl = controller(board)
    ctl.route("e1", [Shy("shy", 3)])
    board.write_entry("e1", scalar(5))
    summary = ctl.run()
    assert (summary.halted, summary.pending) == (HaltReason.QUIESCENT, 1)
    assert list(ctl.knowledge_sources[0].partition) == ["e1"]


def test_routes_per_predicate_and_per_key(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.route_predicate("less_than_3", [Const("zero", value=0)])
    ctl.route("special", [Const("two", value=2)])
    for key in ("a", "b", "special"):
        board.write_entry(key, scalar(7))
    ctl.run()
    assert {k: board.get_entry(k).measurement for k in ("a", "b", "special")} == {
        "a": 0,
        "b": 0,
        "special": 2,
    }
    assert len(ctl.routes) == 1 and len(ctl.predicate_routes) == 1


def test_retry_backoff_follows_the_policy_on_the_fake_clock(open_board: OpenBoard) -> None:
    class ThirdTime(KnowledgeSource):
        def execute(self, blackboard: Blackboard, key: str) -> object:
            return 0 if blackboard.get_entry(key).ks_history.get("third", 0) == 2 else None

    clock = FakeClock()
    board = open_board()
    ctl = controller(board, clock=clock)
    policy = RetryPolicy(timedelta(seconds=5), backoff_coefficient=2.0)
    ctl.route("e1", [ThirdTime("third", 3, retry=policy)])
    board.write_entry("e1", scalar(5))
    ctl.run()
    times = [
        datetime.fromisoformat(e.data["at"]) for e in board.get_history("e1") if e.kind == "attempt"
    ]
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(times)] == [5.0, 10.0]
    assert board.get_entry("e1").good_standing and clock.sleeps == [5.0, 10.0]


# -- out-of-band resolution, observers, resume ---------------------------------------------------


def test_resolving_an_escalated_entry_out_of_band(open_board: OpenBoard) -> None:
    board = open_board()
    observer = RecordingObserver()
    ctl = controller(board, observers=[observer])
    ctl.route("e1", [Dec("dec", 1)])
    board.write_entry("e1", scalar(9))
    ctl.run()
    at = datetime(2026, 3, 1, tzinfo=UTC)
    resolution = ctl.resolve("e1", "set to 1", by="alice", at=at, measurement=1)
    assert (resolution.decision, resolution.by, resolution.at, resolution.measurement) == (
        "set to 1",
        "alice",
        at,
        1,
    )
    entry = board.get_entry("e1")
    assert (entry.segment, entry.stage, entry.good_standing) == (
        Segment.CERTIFY,
        Stage.RESOLVED,
        True,
    )
    assert board.get_escalate() == {} and "e1" in board.entries
    assert kinds(board, "e1")[-2:] == ["resolution", "verdict"]
    assert ctl.resolve("e1", "set to 1", by="alice", at=at, measurement=1) == resolution
    with pytest.raises(ResolutionError, match="already resolved"):
        ctl.resolve("e1", "something else", by="bob", at=at)
    assert observer.resolutions == [resolution]
    assert kinds(board, "e1").count("resolution") == 1


def test_only_escalated_entries_are_resolved(open_board: OpenBoard) -> None:
    board = open_board()
    board.write_entry("e1", scalar(1))
    digest = board.digest()
    with pytest.raises(ResolutionError, match="not escalated"):
        board.resolve("e1", "ok", by="alice")
    assert board.digest() == digest


def test_a_resolution_from_another_process_is_picked_up(open_board: OpenBoard) -> None:
    board = open_board()
    observer = RecordingObserver()
    ctl = controller(board, observers=[observer])
    ctl.route("e1", [Dec("dec", 1)])
    board.write_entry("e1", scalar(9))
    ctl.run()
    elsewhere = open_board()  # e.g. the inbox, a separate process on the same board
    elsewhere.resolve("e1", "use 0", by="bob", at=datetime(2026, 3, 1, tzinfo=UTC), measurement=0)
    summary = ctl.run()
    entry = board.get_entry("e1")
    assert (entry.stage, entry.measurement, entry.good_standing) == (Stage.RESOLVED, 0, True)
    assert [r.by for r in observer.resolutions] == ["bob"] and summary.resolved == 1


def test_escalations_are_told_once_and_redelivered_to_a_resumed_controller(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    first = RecordingObserver()
    ctl = controller(board, observers=[first])
    ctl.route("e1", [Dec("dec", 1)])
    board.write_entry("e1", scalar(9))
    ctl.run()
    ctl.run()
    assert [(e.key, e.redelivered) for e in first.escalations] == [("e1", False)]
    second = RecordingObserver()
    resumed = controller(open_board(), observers=[second])
    resumed.add_ks(Dec("dec", 1))
    resumed.run()
    assert [(e.key, e.redelivered) for e in second.escalations] == [("e1", True)]
    assert second.escalations[0].id == first.escalations[0].id
    assert [c.cycle for c in first.cycles] == [1] and len(first.halts) == 2


def test_a_resumed_board_continues_to_the_same_end(open_board: OpenBoard) -> None:
    def build(board: Blackboard, max_cycles: int) -> Controller:
        ctl = controller(board, max_cycles=max_cycles)
        ctl.route_predicate("less_than_3", [Dec("dec", 4), Const("zero", value=0)])
        board.write_entries({f"e{i}": scalar(i) for i in range(12)})
        return ctl

    reference = open_board("reference")
    build(reference, 1000).run()
    stopped = build(open_board("resumed"), 2)
    assert stopped.run().halted is HaltReason.MAX_CYCLES
    resumed_board = open_board("resumed")
    assert build(resumed_board, 1000).run().halted is HaltReason.SETTLED
    assert _log(resumed_board) == _log(reference)


def _log(board: Blackboard) -> list[tuple[int, str, object]]:
    return [(r.sequence, r.writer, r.content) for r in board.model.reader.log()]


# -- the remaining seed methods ------------------------------------------------------------------


def test_partition_and_can_contribute(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board, max_cycles=1)
    dec = Dec("dec", 5)
    ctl.route_predicate("less_than_3", [dec])
    board.write_entries({"a": scalar(9), "b": scalar(1), "c": scalar(8)})
    ctl.run()
    assert list(dec.partition) == ["a", "c"]
    assert dec.can_contribute(board) == ["a", "c"]


def test_manual_changes_restores_and_counts_are_writes(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    board.write_entry("p1", pair(5, -2))
    board.write_component("p1", "y", 3)
    assert board.get_entry("p1").measurement == {"x": 5, "y": 3}
    board.restore_component("p1", "y")
    board.write_component("p1", "x", 0)
    assert board.get_entry("p1").measurement == {"x": 0, "y": -2}
    board.restore_original("p1")
    assert board.add_ks_history("p1", "manual") == 1
    assert kinds(board, "p1") == ["entry", "change", "restore", "change", "restore", "attempt"]
    board.write_component("p1", "y", 1)
    board.write_component("p1", "x", 1)
    ctl.run()
    assert board.get_entry("p1").good_standing


def test_an_entry_written_to_the_escalate_segment(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    board.write_entry("e1", scalar(9), segment="escalate")
    ctl.run()
    assert list(board.get_escalate()) == ["e1"] and board.get_all_entries() == {}
    ctl.resolve("e1", "fine as is", by="carol")
    assert list(board.get_all_entries()) == ["e1"]


def test_status_prints_a_table(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.route_predicate("less_than_3", [Dec("dec", 1)])
    board.write_entries({f"e{i}": scalar(i) for i in range(30)})
    ctl.run()
    out = io.StringIO()
    ctl.status(limit=5, console=Console(file=out, width=140))
    text = out.getvalue()
    assert f"cycle {ctl.cycle_count}" in text and "escalated" in text
    assert "25 more entries not shown" in text
    assert "│ e4 " in text and "│ e0 " not in text  # escalated entries first


def test_more_regions_beside_pybbs_are_judged_by_the_applications_rule() -> None:
    from blackboard import Accept, Level, Premise, ProposedContribution, Reject

    seen: list[str] = []

    def rule(proposed: object, reader: object) -> Accept | Reject:
        region = getattr(proposed, "level", None) or getattr(proposed, "premise", None)
        seen.append(str(region))
        if isinstance(proposed, ProposedContribution) and proposed.content == "bad":
            return Reject("no bad notes")
        return Accept()

    board = Blackboard(
        regions=[Level("notes"), Premise("mode")], premises={"mode": "auto"}, admission_rule=rule
    )
    ctl = controller(board)
    ctl.route("e1", [Dec("dec", 3)])
    board.write_entry("e1", scalar(4))
    ctl.run()
    assert isinstance(board.model.control.write("app", "notes", "bad"), Rejected)
    assert board.model.control.write("app", "notes", "fine").sequence > 0  # type: ignore[union-attr]
    assert board.model.reader.read_premise("mode").value == "auto"
    # the rule judged the sources' attempts and the notes, never pybb's own bookkeeping
    assert set(seen) == {"pybb.attempts", "notes"}
    assert board.get_entry("e1").good_standing


def test_the_application_rule_judges_each_attempt_once(open_board: OpenBoard) -> None:
    judged: list[int] = []

    def rule(proposed: object, reader: object) -> Accept:
        if isinstance(proposed, ProposedContribution) and proposed.writer.startswith("ks:"):
            judged.append(proposed.content["attempt"])
        return Accept()

    board = open_board(admission_rule=rule)
    ctl = controller(board)
    ctl.route("e1", [Dec("dec", 5)])
    board.write_entry("e1", scalar(6))
    ctl.run()
    attempts = [e for e in board.get_history("e1") if e.kind == "attempt"]
    assert len(attempts) == 4
    assert judged == [1, 2, 3, 4], "each attempt record is put to the rule once, not twice"
