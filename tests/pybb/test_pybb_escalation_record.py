"""The escalation record's report is ``EscalationReport.to_json()`` of the entry's report.

The controller writes the report's JSON form directly (no report object is built for
it); these tests build the ``EscalationReport`` and its ``AttemptSummary``s from the
entry's state at the moment it escalates, as the record once was, and hold the written
record equal to that object's ``to_json()``, key for key, over
every kind of escalation: exhausted with and without reports, an attempt that raised, a
predicate that raised, component-wise entries, a failed confirmation and an empty chain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybb_sources import Confirm, Dec

from pybb import (
    AttemptError,
    AttemptSummary,
    Blackboard,
    BlackboardEntry,
    Chain,
    Controller,
    EscalationReport,
    KnowledgeSource,
)
from pybb._engine.projection import ESCALATIONS, EntryState
from pybb._engine.types import AttemptStatus
from pybb.workloads import FixComponent

OpenBoard = Callable[..., Blackboard]


class Reporting(KnowledgeSource):
    """Reports what it saw and leaves the measurement as it is."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        blackboard.report(key, {"saw": blackboard.get_entry(key).measurement})
        return None


class Refusing(KnowledgeSource):
    """Raises an ``AttemptError`` with a report."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        raise AttemptError("cannot help", report={"why": ["no", 1]})


def _expected(entry: EntryState, source: str | None, reason: str) -> dict[str, Any]:
    """The report as the controller built it before it wrote the JSON directly."""
    attempts = tuple(
        AttemptSummary(
            content["source"],
            content["attempt"],
            AttemptStatus(content["status"]),
            content.get("error"),
            content.get("report"),
            content.get("good_standing"),
        )
        for content in entry.attempts
    )
    tier_report = None
    for attempt in attempts:
        if attempt.source == source and attempt.report is not None:
            tier_report = attempt.report
    return EscalationReport(
        entry.key,
        source,
        entry.chain_name or Chain.ON_FAIL,
        reason,
        entry.measurement,
        entry.original,
        entry.result,
        attempts,
        tier_report,
        entry.judgement_error,
    ).to_json()


class Witness(Controller):
    """Keeps, for each escalation, the report object's JSON the entry's state makes."""

    def __init__(self, board: Blackboard) -> None:
        super().__init__(board)
        self.expected: dict[str, dict[str, Any]] = {}

    def _escalate(self, entry: EntryState, source: str | None, reason: str) -> None:
        self.expected[entry.record_key] = _expected(entry, source, reason)
        super()._escalate(entry, source, reason)


def _fragile(measurement: Any) -> bool:
    if measurement > 5:
        raise ValueError(f"{measurement} is out of range")
    return bool(measurement < 3)


def test_every_escalation_record_is_the_report_objects_json(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = Witness(board)
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    ctl.register_predicate("is_positive", lambda m: m > 0)
    ctl.register_predicate("fragile", _fragile)
    ctl.route("reported", [Reporting("look", 2), Refusing("refuse", 1)])
    ctl.route("quiet", [Dec("dec", 1)])
    ctl.route("earlier", [Reporting("look3", 1), Dec("dec3", 1)])  # the failing tier: none
    ctl.route("fragile", [Reporting("look2", 1)])
    ctl.route("pair", [FixComponent("fix_x", 1, component="x", fix=lambda x: x - 1)])
    ctl.route("confirm", on_pass=[Confirm("confirm", 1, bad=(1,))])
    ctl.route("empty", [])
    entries = {
        "reported": BlackboardEntry(predicate="less_than_3", measurement=9),
        "quiet": BlackboardEntry(predicate="less_than_3", measurement=9),
        "earlier": BlackboardEntry(predicate="less_than_3", measurement=9),
        "fragile": BlackboardEntry(predicate="fragile", measurement=8),
        "pair": BlackboardEntry(
            conditions={"x": "less_than_3", "y": "is_positive"}, measurement={"x": 9, "y": -1}
        ),
        "confirm": BlackboardEntry(predicate="less_than_3", measurement=1),
        "empty": BlackboardEntry(predicate="less_than_3", measurement=5),
    }
    board.write_entries(entries)
    ctl.run()
    written = {
        record.content["key"]: record.content["report"]
        for record in board.model.reader.log()
        if record.region == ESCALATIONS
    }
    assert set(written) == set(entries) == set(ctl.expected)
    for key, report in written.items():
        assert report == ctl.expected[key], key  # (stored as canonical JSON: keys sorted)
    assert written["reported"]["tier_report"] == {"why": ["no", 1]}
    assert written["earlier"]["tier_report"] is None and written["earlier"]["source"] == "dec3"
    assert written["fragile"]["error"].startswith("predicate 'fragile' raised ValueError")
    assert written["empty"]["source"] is None and written["empty"]["attempts"] == []
    assert written["confirm"]["chain"] == "on_pass"
