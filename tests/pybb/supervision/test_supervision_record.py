"""The record of the human loop: per escalated device, the budget's decision and who decided.

Issue 15 item 6 / issue 14 item 6: ``human_record`` and ``budget_summary`` read the board
only, so every test here builds a real supervised attestation on a real SQLite file,
acts on it through the public API (answers, resolutions), and reads the record back
on a fresh connection too.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from supervision_support import twin_fleet

from blackboard import Written
from pybb.attestation import Attestation, DeviceOutcome, generate_fleet
from pybb.human import answer
from pybb.supervision import (
    BUDGET_DECISIONS,
    HumanRecord,
    budget_summary,
    human_record,
)
from pybb.supervision.attestation import ACCEPT, SupervisedAttestation, attestation_settings


def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'a.db'}"


def test_each_escalated_device_says_whether_it_was_asked_or_denied_and_why(
    tmp_path: Path,
) -> None:
    fleet = generate_fleet(80, seed=3)
    with SupervisedAttestation(
        fleet, store=_store(tmp_path), settings=attestation_settings(asks=4)
    ) as session:
        report = session.attest()
        records = human_record(session.attestation.blackboard)
        summary = budget_summary(session.attestation.blackboard)
        open_asks = {a.entry: a for a in session.run.open_asks()}
    escalated = {r.device for r in report.devices if r.outcome is DeviceOutcome.ESCALATED}
    assert set(records) == escalated and len(escalated) > 4
    asked = {k for k, r in records.items() if r.budget_decision == "asked"}
    assert asked == set(open_asks) and len(asked) == 4
    for key in asked:
        record = records[key]
        assert record.ask_id == open_asks[key].ask_id and record.ask_status == "open"
        assert record.asked_at == open_asks[key].created_at
        assert record.disposition == "escalated" and record.denied is None
        assert record.decision is None  # nobody has answered
    for key in escalated - asked:
        record = records[key]
        assert record.budget_decision == "denied" and record.ask_id is None
        assert record.denied is not None and record.denied["scope"] == "fleet"
        assert record.denied["limit"] in ("ceiling", "bar")
        assert record.reason.startswith("escalation of item")
        assert record.decided_at is not None and record.decided_at.tzinfo is not None
    assert summary is not None
    assert (summary.limit, summary.asked, summary.denied) == (4, 4, len(escalated) - 4)
    assert summary.spent == 4 and summary.by_decision == {"asked": 4, "denied": len(escalated) - 4}


def test_a_persons_answer_is_recorded_with_who_what_when_and_the_note(tmp_path: Path) -> None:
    fleet = generate_fleet(40, seed=5)
    with SupervisedAttestation(fleet, store=_store(tmp_path)) as session:
        session.attest()
        control = session.attestation.blackboard.model.control
        first, second = session.run.open_asks()[:2]
        before = datetime.now(UTC)
        note = "re-imaged <b>on Tuesday</b>"
        assert isinstance(answer(control, "human:alice", first.ask_id, "quarantine", note), Written)
        session.run.poll()
        # Answered while nobody applies it: shown, as not applied yet.
        assert isinstance(answer(control, "human:bob", second.ask_id, "remeasure"), Written)
        records = human_record(session.attestation.blackboard)
    applied, waiting = records[first.entry], records[second.entry]
    assert applied.ask_status == "answered" and applied.decision is not None
    decision = applied.decision
    assert (decision.by, decision.decision, decision.note, decision.via, decision.applied) == (
        "human:alice",
        "quarantine",
        note,
        "answer",
        True,
    )
    assert before <= decision.at <= datetime.now(UTC)
    assert waiting.decision is not None and waiting.decision.applied is False
    assert (waiting.decision.by, waiting.decision.decision) == ("human:bob", "remeasure")
    data = applied.to_json()
    assert data["decision"]["note"] == note and data["decision"]["at"] == decision.at.isoformat()
    assert data["budget_decision"] == "asked" and data["denied"] is None


def test_an_out_of_band_resolution_is_recorded_with_its_by_and_the_closed_ask(
    tmp_path: Path,
) -> None:
    fleet, first, twin = twin_fleet(between=2)
    with SupervisedAttestation(fleet, store=_store(tmp_path)) as session:
        session.attest()
        board = session.attestation.blackboard
        asks = {a.entry: a for a in session.run.open_asks()}
        answer(board.model.control, "human:alice", asks[first].ask_id, ACCEPT)
        session.run.poll()
        records = human_record(board)
    answered, other = records[first], records[twin]
    assert answered.decision is not None and answered.decision.via == "answer"
    # The twin was explained by alice's accepted digest: resolved out of band, ask closed.
    assert other.budget_decision == "asked" and other.ask_status == "closed"
    assert other.closed_at is not None and other.closed_reason is not None
    assert other.closed_reason.startswith("resolved_oob")
    assert other.decision is not None
    assert (other.decision.by, other.decision.decision, other.decision.via) == (
        "human:alice",
        ACCEPT,
        "out_of_band",
    )


def test_any_resolvers_by_is_shown_and_a_deadline_default_reads_as_one(tmp_path: Path) -> None:
    fleet = generate_fleet(40, seed=5)
    with SupervisedAttestation(fleet, store=_store(tmp_path)) as session:
        session.attest()
        first, second = session.run.open_asks()[:2]
        controller = session.attestation.controller
        at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
        controller.resolve(first.entry, "quarantine", by="deadline", at=at)
        controller.resolve(second.entry, "remeasure", by="ops-script", at=at)
        session.run.poll()
        records = human_record(session.attestation.blackboard)
    deadline, script = records[first.entry].decision, records[second.entry].decision
    assert deadline is not None and script is not None
    assert (deadline.by, deadline.decision, deadline.at, deadline.via) == (
        "deadline",
        "quarantine",
        at,
        "deadline",
    )
    assert (script.by, script.via) == ("ops-script", "out_of_band")
    assert records[first.entry].ask_status == "closed"


def test_the_record_reads_the_same_from_another_connection(tmp_path: Path) -> None:
    fleet = generate_fleet(40, seed=5)
    settings = attestation_settings(asks=3)
    with SupervisedAttestation(fleet, store=_store(tmp_path), settings=settings) as session:
        session.attest()
        ask = session.run.open_asks()[0]
        answer(
            session.attestation.blackboard.model.control, "human:alice", ask.ask_id, "quarantine"
        )
        session.run.poll()
        first = {k: r.to_json() for k, r in human_record(session.attestation.blackboard).items()}
    with SupervisedAttestation(fleet, store=_store(tmp_path), settings=settings) as again:
        second = {k: r.to_json() for k, r in human_record(again.attestation.blackboard).items()}
        summary = budget_summary(again.attestation.blackboard)
    assert first == second and first
    assert summary is not None and summary.limit == 3 and summary.asked == 3


def test_a_board_without_the_human_loop_has_no_record(tmp_path: Path) -> None:
    with Attestation(generate_fleet(20, seed=1), store=_store(tmp_path)) as attestation:
        attestation.run()
        assert human_record(attestation.blackboard) == {}
        assert budget_summary(attestation.blackboard) is None


def test_every_disposition_has_a_budget_decision_and_the_json_keeps_every_key() -> None:
    assert len(BUDGET_DECISIONS) == 7 and "asked" in BUDGET_DECISIONS.values()
    record = HumanRecord("dev", "b/dev/1", "undecided")
    assert set(record.to_json()) == {
        "escalation", "budget_decision", "disposition", "decided_by", "reason", "scope",
        "decided_at", "denied", "ask_id", "asked_at", "ask_status", "closed_at",
        "closed_reason", "decision",
    }  # fmt: skip
