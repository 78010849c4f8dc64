"""The seed's edges (issue 11, items 1-8): each test failed on the controller before the fix."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from typing import Any

import pytest
from pybb_sources import Boom, Const, Dec, SetComponent
from rich.console import Console

from pybb import (
    Blackboard,
    BlackboardEntry,
    Controller,
    HaltReason,
    KnowledgeSource,
    RouteError,
    Segment,
)
from pybb.testing import RecordingObserver

OpenBoard = Callable[..., Blackboard]


def controller(board: Blackboard, **kw: Any) -> Controller:
    ctl = Controller(board, **kw)
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    ctl.register_predicate("is_positive", lambda m: m > 0)
    return ctl


def scalar(m: object, predicate: str = "less_than_3") -> BlackboardEntry:
    return BlackboardEntry(predicate=predicate, measurement=m)


def pair(x: int, y: int) -> BlackboardEntry:
    return BlackboardEntry(
        conditions={"x": "less_than_3", "y": "is_positive"}, measurement={"x": x, "y": y}
    )


class Reporting(KnowledgeSource):
    """A confirmation that says "no" by writing a failing measurement, with a report."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        blackboard.report(key, {"checked": blackboard.get_entry(key).measurement})
        return 99


# -- 1. a failed confirmation escalates, however the source said so ----------------------------


@pytest.mark.parametrize(
    "source",
    [
        Const("confirm", 2, value=99),  # returns a failing measurement
        Reporting("confirm", 1),  # returns one, with a report
        Boom("confirm", 1),  # raises
    ],
    ids=["returns", "returns-with-report", "raises"],
)
def test_a_failed_confirmation_escalates(open_board: OpenBoard, source: KnowledgeSource) -> None:
    board = open_board()
    board.write_entry("e", scalar(1))
    ctl = controller(board)
    ctl.route("e", on_pass=[source], on_fail=[])
    summary = ctl.run()
    assert summary.halted is HaltReason.SETTLED
    assert summary.escalated == 1 and summary.good == 0
    escalation = board.get_escalation("e")
    assert escalation is not None
    assert escalation.report.reason == "exhausted"
    assert escalation.report.source == "confirm"
    assert escalation.report.chain.value == "on_pass"
    assert board.get_escalate()["e"].measurement == 1  # restored before escalating
    if isinstance(source, Reporting):
        assert escalation.report.tier_report == {"checked": 1}


def test_every_confirmation_of_the_chain_must_fail_and_the_last_report_is_kept(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    board.write_entry("e", scalar(1))
    ctl = controller(board)
    first, last = Reporting("first", 1), Reporting("last", 1)
    ctl.route("e", on_pass=[first, last])
    ctl.run()
    escalation = board.get_escalation("e")
    assert escalation is not None and escalation.report.source == "last"
    # failure handoff restored the original before the second source looked
    assert escalation.report.tier_report == {"checked": 1}
    assert [a.source for a in escalation.report.attempts] == ["first", "last"]


def test_a_confirmation_that_leaves_the_entry_passing_ends_in_good_standing(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    board.write_entry("e", scalar(1))
    ctl = controller(board)
    ctl.route("e", on_pass=[Const("confirm", 1, value=2)])
    summary = ctl.run()
    assert (summary.good, summary.escalated) == (1, 0)
    assert board.get_entry("e").measurement == 2


def test_a_component_confirmation_that_fails_restores_only_its_component(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    board.write_entry("p", pair(1, 1))
    ctl = controller(board)
    ctl.route("p", on_pass=[SetComponent("cx", 1, component="x", value=50)])
    ctl.run()
    assert board.get_escalate()["p"].measurement == {"x": 1, "y": 1}
    escalation = board.get_escalation("p")
    assert escalation is not None and escalation.report.reason == "exhausted"


# -- 2. a scope that cannot apply is refused where it is declared ------------------------------


def test_route_refuses_a_scope_the_existing_entry_does_not_have(open_board: OpenBoard) -> None:
    board = open_board()
    board.write_entry("p", pair(5, 1))
    board.write_entry("s", scalar(5))
    ctl = controller(board)
    before = board.digest()
    with pytest.raises(RouteError) as caught:
        ctl.route("p", [SetComponent("fix_z", 1, component="z", value=0)])
    message = str(caught.value)
    assert "'fix_z'" in message and "'z'" in message and "'p'" in message
    assert "['x', 'y']" in message
    with pytest.raises(RouteError, match="single measurement"):
        ctl.route("s", [SetComponent("fix_x", 1, component="x", value=0)])
    assert "p" not in ctl.routes and "s" not in ctl.routes
    assert board.digest() == before
    ctl.route("s", [Dec("dec", 5)])
    assert ctl.run().good == 1  # the other entry is not blocked


def test_route_predicate_refuses_a_scope_an_existing_entry_does_not_have(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    board.write_entry("s", scalar(5))
    ctl = controller(board)
    with pytest.raises(RouteError, match="'s'"):
        ctl.route_predicate("less_than_3", [SetComponent("fix_x", 1, component="x", value=0)])
    assert "less_than_3" not in ctl.predicate_routes


def test_write_entry_refuses_an_entry_its_route_cannot_apply_to(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.route("s", [SetComponent("fix_x", 1, component="x", value=0)])
    ctl.route_predicate("is_positive", [SetComponent("fix_y", 1, component="y", value=0)])
    board.write_entry("ok", scalar(1))
    before = board.digest()
    with pytest.raises(RouteError, match="'s'"):
        board.write_entry("s", scalar(5))
    with pytest.raises(RouteError, match="'t'"):
        board.write_entries({"fine": scalar(0), "t": scalar(5, "is_positive")})
    assert board.digest() == before  # nothing half written: not even "fine"
    assert set(board.get_all_entries()) == {"ok"}
    assert ctl.run().good == 1


def test_run_refuses_a_bad_route_before_its_first_write(open_board: OpenBoard) -> None:
    board = open_board("b")
    ctl = controller(board)
    ctl.route("s", [SetComponent("fix_x", 1, component="x", value=0)])
    writer = open_board("b")  # another process's handle: no controller attached to it
    writer.write_entry("s", scalar(5))
    board.refresh()
    before = board.digest()
    with pytest.raises(RouteError, match="'fix_x'"):
        ctl.run()
    assert board.digest() == before


# -- 3. a settled entry that changes is judged again -------------------------------------------


def test_a_settled_entry_that_changes_is_judged_again(open_board: OpenBoard) -> None:
    board = open_board()
    board.write_entry("p", pair(1, 1))
    board.write_entry("q", pair(1, 1))
    ctl = controller(board)
    assert ctl.run().good == 2
    board.write_component("p", "x", 7)  # an application's write after the entry settled
    board.write_component("q", "x", 2)  # a change that still passes
    summary = ctl.run()
    assert summary.good == 1, "a failing entry is never counted good"
    assert summary.escalated == 1
    escalation = board.get_escalation("p")
    assert escalation is not None and escalation.report.reason == "changed_after_settling"
    assert board.get_entry("q").good_standing is True


def test_a_restored_settled_entry_is_judged_again(open_board: OpenBoard) -> None:
    board = open_board()
    board.write_entry("e", scalar(5))
    ctl = controller(board)
    ctl.route("e", [Dec("dec", 5)])
    assert ctl.run().good == 1
    board.restore_original("e")
    summary = ctl.run()
    assert (summary.good, summary.escalated) == (0, 1)
    assert board.get_escalate()["e"].measurement == 5


def test_a_judged_again_entry_resumes_the_same_on_a_reopened_board(open_board: OpenBoard) -> None:
    board = open_board("r")
    board.write_entry("e", scalar(1))
    controller(board).run()
    board.restore_original("e")  # the original passes: stays good
    reopened = open_board("r")
    summary = controller(reopened).run()
    assert (summary.good, summary.escalated) == (1, 0)


# -- 4. status prints every entry ----------------------------------------------------------------


def test_status_prints_the_cycle_count_and_all_entries(open_board: OpenBoard) -> None:
    board = open_board()
    board.write_entries({f"e{i:02}": scalar(1) for i in range(30)})
    ctl = controller(board)
    ctl.run()
    out = io.StringIO()
    ctl.status(console=Console(file=out, width=200))
    text = out.getvalue()
    assert f"cycle {ctl.cycle_count}" in text
    assert all(f"e{i:02}" in text for i in range(30))
    limited = io.StringIO()
    ctl.status(limit=5, console=Console(file=limited, width=200))
    assert "e29" not in limited.getvalue() and "25 more entries" in limited.getvalue()


# -- 5. a predicate that raises is named in the escalation ---------------------------------------


def test_a_raising_predicate_is_named_in_the_escalation_of_an_empty_chain(
    open_board: OpenBoard,
) -> None:
    board = open_board()
    board.write_entry("e", scalar("seven", "picky"))
    ctl = controller(board)

    def picky(m: Any) -> bool:
        raise ValueError(f"cannot judge {m!r}")

    ctl.register_predicate("picky", picky)
    ctl.run()
    escalation = board.get_escalation("e")
    assert escalation is not None and escalation.report.reason == "empty_chain"
    assert escalation.report.error == "predicate 'picky' raised ValueError: cannot judge 'seven'"
    assert escalation.report.to_json()["error"] == escalation.report.error


def test_a_raising_predicate_is_named_after_the_chain_failed(open_board: OpenBoard) -> None:
    board = open_board()
    board.write_entry("e", scalar(5, "picky"))
    ctl = controller(board)
    ctl.register_predicate("picky", lambda m: 1 / 0)
    ctl.route("e", [Dec("dec", 1)])
    ctl.run()
    escalation = board.get_escalation("e")
    assert escalation is not None
    assert escalation.report.error is not None and "ZeroDivisionError" in escalation.report.error


# -- 6. an entry written straight to the escalate segment ----------------------------------------


def test_an_entry_written_to_escalate_is_escalated_once_without_a_predicate(
    open_board: OpenBoard,
) -> None:
    board = open_board("x")
    board.write_entry("e", scalar(5, "never_registered"), segment=Segment.ESCALATE)
    board.write_entry("ok", scalar(1))
    observer = RecordingObserver()
    ctl = controller(board, observers=[observer])
    summary = ctl.run()
    assert summary.halted is HaltReason.SETTLED
    assert (summary.good, summary.escalated) == (1, 1)
    assert [e.key for e in observer.escalations] == ["e"]
    escalation = board.get_escalation("e")
    assert escalation is not None and escalation.sequence > 0
    assert escalation.report.reason == "written_to_escalate"
    kinds = [event.kind for event in board.get_history("e")]
    assert "verdict" not in kinds and "dispatch" not in kinds  # never judged, never placed
    ctl.run()
    assert len(observer.escalations) == 1  # once, not again on the next run
    # a reopened board does not write it a second escalation
    again = controller(open_board("x"))
    again.run()
    kinds = [event.kind for event in open_board("x").get_history("e")]
    assert kinds.count("escalation") == 1


# -- 7. max_cycles bounds one run() call ----------------------------------------------------------


def test_max_cycles_bounds_each_run_call(
    open_board: OpenBoard, caplog: pytest.LogCaptureFixture
) -> None:
    board = open_board()
    board.write_entry("slow", scalar(30))
    ctl = controller(board)
    ctl.route("slow", [Dec("dec", 100)])
    assert ctl.run().good == 1
    assert ctl.cycle_count >= 10
    board.write_entry("new", scalar(4))
    fresh = controller(board, max_cycles=3)
    fresh.route("new", [Dec("dec2", 5)])
    with caplog.at_level(logging.WARNING, logger="pybb"):
        summary = fresh.run()
    assert summary.good == 2, "a fresh controller works on a new entry of an old board"
    assert not [r for r in caplog.records if "max_cycles" in r.getMessage()]
    board.write_entry("far", scalar(40))
    fresh.route("far", [Dec("dec3", 100)])
    with caplog.at_level(logging.WARNING, logger="pybb"):
        bounded = fresh.run()
    assert bounded.halted is HaltReason.MAX_CYCLES
    assert [r for r in caplog.records if "max_cycles=3" in r.getMessage()]
    before = fresh.cycle_count
    assert fresh.run().halted is HaltReason.MAX_CYCLES
    assert fresh.cycle_count == before + 3  # the count keeps going for the board's life


# -- 8. routes that are not used are reported -----------------------------------------------------


def test_a_route_without_an_entry_is_reported(
    open_board: OpenBoard, caplog: pytest.LogCaptureFixture
) -> None:
    board = open_board()
    board.write_entry("e1", scalar(1))
    ctl = controller(board)
    ctl.route("el", [Dec("dec", 1)])  # a typo for e1
    with caplog.at_level(logging.WARNING, logger="pybb"):
        summary = ctl.run()
    assert summary.routes_without_entry == ("el",)
    assert [r for r in caplog.records if "'el'" in r.getMessage()]


def test_a_route_after_dispatch_is_reported_and_the_same_route_again_is_not(
    open_board: OpenBoard, caplog: pytest.LogCaptureFixture
) -> None:
    board = open_board()
    board.write_entry("e", scalar(5))
    ctl = controller(board)
    dec = Dec("dec", 5)
    ctl.route("e", [dec])
    ctl.run()
    with caplog.at_level(logging.WARNING, logger="pybb"):
        ctl.route("e", [dec])  # a resumed script declaring its routes again
        assert not caplog.records
        ctl.route("e", [Dec("other", 1)])
    assert [r for r in caplog.records if "after it was dispatched" in r.getMessage()]
    assert ctl.run().routes_after_dispatch == ("e",)
    assert board.get_entry("e").good_standing and board.get_entry("e").ks_history == {"dec": 3}


def test_route_all_routes_entries_written_later_and_reports_nothing_unused(
    open_board: OpenBoard, caplog: pytest.LogCaptureFixture
) -> None:
    board = open_board()
    ctl = controller(board)
    ctl.route_all([Dec("dec", 5)])
    with caplog.at_level(logging.WARNING, logger="pybb"):
        for chunk in (["a", "b"], ["c"]):  # an application writing its entries as they come
            board.write_entries({key: scalar(5) for key in chunk})
            summary = ctl.run()
            assert summary.routes_without_entry == ()
    assert not [r for r in caplog.records if "no entry" in r.getMessage()]
    assert ctl.route_of("c") == ctl.route_of("a") and ctl.route_of("zz") is not None
    assert {key: e.measurement for key, e in board.get_all_entries().items()} == dict.fromkeys(
        "abc", 2
    )
    board.write_entry("p", scalar(5))
    with pytest.raises(RouteError, match="'p'"):  # a scoped source cannot route a scalar
        ctl.route_all([SetComponent("fix_x", 1, component="x", value=0)])
