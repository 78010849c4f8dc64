"""Deadlines: every ask expires, and its default is applied exactly once, by="deadline"."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from deadline_support import defaults_on_board, prepare, race
from human_fixtures import *  # noqa: F403
from human_support import make_ask

from blackboard import Model, Rejected, Written
from pybb.human import (
    DEADLINE_BY,
    DEADLINE_WRITER,
    DEFAULT_DEADLINE,
    Answer,
    Ask,
    AskStatus,
    DeadlinePolicy,
    DeadlineRule,
    HumanLoopError,
    RefusalCode,
    answer,
    apply_deadlines,
    ask_state,
    judge_answer,
    open_asks,
    post_ask,
)
from pybb.testing import FakeClock
from storekit import build

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _ask(ask_id: str, reason: str | None = None, klass: str | None = None) -> Ask:
    ask = make_ask(ask_id)
    tier = {"reason": reason, "class": klass}
    return replace(ask, created_at=START, report_data={"tier_report": tier})


def test_the_default_policy_is_a_day_and_the_recommended_option() -> None:
    ask = _ask("a-1")
    policy = DeadlinePolicy()
    assert timedelta(hours=24) == DEFAULT_DEADLINE
    assert policy.due(ask) == START + timedelta(hours=24)
    assert policy.default_for(ask) == "accept"  # the starred option
    assert policy.reminders(ask) == (START + timedelta(hours=23),)
    stamped = policy.stamp(ask)
    assert (stamped.deadline, stamped.default_option) == (START + timedelta(hours=24), "accept")


def test_rules_override_per_reason_class_and_scope() -> None:
    policy = DeadlinePolicy(
        rules=(
            DeadlineRule(timedelta(minutes=30), "quarantine", reason="tampered_component"),
            DeadlineRule(timedelta(hours=2), "remeasure", klass="fedora37"),
            DeadlineRule(timedelta(hours=3), "no-such-option", scope="fleet"),
        )
    )
    tampered, fedora, other = (
        _ask("t", "tampered_component"),
        _ask("f", klass="fedora37"),
        _ask("o"),
    )
    assert (policy.due(tampered) - START, policy.default_for(tampered)) == (
        timedelta(minutes=30),
        "quarantine",
    )
    assert (policy.due(fedora) - START, policy.default_for(fedora)) == (
        timedelta(hours=2),
        "remeasure",
    )
    # scope "fleet" matches "fleet/site-a"; an option the ask lacks falls back to the star
    assert (policy.due(other) - START, policy.default_for(other)) == (timedelta(hours=3), "accept")


def test_bad_policies_are_refused_with_what_to_do() -> None:
    with pytest.raises(HumanLoopError, match="positive timedelta"):
        DeadlinePolicy(after=timedelta(0))
    with pytest.raises(HumanLoopError, match="remind"):
        DeadlinePolicy(remind=(timedelta(hours=-1),))
    with pytest.raises(HumanLoopError, match="DeadlineRule"):
        DeadlinePolicy(rules=("not a rule",))  # type: ignore[arg-type]


def test_at_the_deadline_the_default_is_applied_once_and_frees_the_ask(board: Model) -> None:
    clock = FakeClock(START)
    policy = DeadlinePolicy(after=timedelta(hours=1), default="quarantine")
    post_ask(board.control, policy.stamp(_ask("a-1")))
    clock.advance(3599)
    assert apply_deadlines(board.control, board.reader, policy, now=clock.now()) == ()
    assert [a.ask_id for a in open_asks(board.reader)] == ["a-1"]
    clock.advance(1)
    applied = apply_deadlines(board.control, board.reader, policy, now=clock.now())
    assert [(a.ask_id, a.option, a.due) for a in applied] == [
        ("a-1", "quarantine", START + timedelta(hours=1))
    ]
    state = ask_state(board.reader, "a-1")
    assert state is not None and state.status is AskStatus.ANSWERED and state.answer is not None
    assert (state.answer.by, state.answer.option) == (DEADLINE_BY, "quarantine")
    assert open_asks(board.reader) == ()  # its open-ask slot is free
    clock.advance(3600)  # a later sweep, or a restart, applies nothing more
    assert apply_deadlines(board.control, board.reader, policy, now=clock.now()) == ()
    answers = board.reader.read_level("answers")
    assert [r.writer for r in answers] == [DEADLINE_WRITER]


def test_an_ask_without_a_stamped_deadline_gets_the_policy_s(board: Model) -> None:
    post_ask(board.control, _ask("a-2"))  # posted by hand, no deadline on it
    policy = DeadlinePolicy(after=timedelta(minutes=5))
    assert (
        apply_deadlines(board.control, board.reader, policy, now=START + timedelta(minutes=4)) == ()
    )
    applied = apply_deadlines(board.control, board.reader, policy, now=START + timedelta(minutes=5))
    assert [a.option for a in applied] == ["accept"]


def test_only_the_deadline_writer_applies_defaults_and_not_before_the_deadline(
    board: Model,
) -> None:
    policy = DeadlinePolicy(after=timedelta(hours=1))
    post_ask(board.control, policy.stamp(_ask("a-3")))
    early = Answer("a-3", "accept", DEADLINE_BY, "", START + timedelta(minutes=59))
    refusal = judge_answer(board.reader, DEADLINE_WRITER, early.to_json())
    assert refusal is not None and refusal.code is RefusalCode.NOT_DUE
    assert isinstance(board.control.write(DEADLINE_WRITER, "answers", early.to_json()), Rejected)
    # a person cannot pass their answer off as the deadline's, nor the machine as a person
    due = replace(early, at=START + timedelta(hours=1))
    spoof = judge_answer(board.reader, "human:mallory", due.to_json())
    assert spoof is not None and spoof.code is RefusalCode.SPOOFED
    as_person = Answer("a-3", "accept", "human:alice", "", START + timedelta(hours=1))
    spoofed = judge_answer(board.reader, DEADLINE_WRITER, as_person.to_json())
    assert spoofed is not None and spoofed.code is RefusalCode.SPOOFED
    found = ask_state(board.reader, "a-3")
    assert found is not None and found.status is AskStatus.OPEN


def test_an_answer_before_the_deadline_wins_and_no_default_follows(board: Model) -> None:
    policy = DeadlinePolicy(after=timedelta(hours=1))
    post_ask(board.control, policy.stamp(_ask("a-4")))
    assert isinstance(answer(board.control, "human:alice", "a-4", "remeasure"), Written)
    assert apply_deadlines(board.control, board.reader, policy, now=START + timedelta(days=2)) == ()
    state = ask_state(board.reader, "a-4")
    assert state is not None and state.answer is not None and state.answer.by == "human:alice"


def _one_race(db: Path, ask_id: str, first: str) -> str:
    """A person and the deadline, in two connections, released together; who won."""
    from human_support import open_board

    policy = DeadlinePolicy(after=timedelta(hours=1))
    models = [open_board(db), open_board(db)]
    try:
        post_ask(models[0].control, policy.stamp(_ask(ask_id)))
        gate = threading.Barrier(2)
        results: dict[str, object] = {}

        def person() -> None:
            gate.wait()
            results["person"] = answer(models[0].control, "human:alice", ask_id, "remeasure")

        def deadline() -> None:
            gate.wait()
            results["deadline"] = apply_deadlines(
                models[1].control, models[1].reader, policy, now=START + timedelta(hours=1)
            )

        order = [person, deadline] if first == "person" else [deadline, person]
        threads = [threading.Thread(target=t) for t in order]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows = [r for r in models[0].reader.read_level("answers") if r.content["ask_id"] == ask_id]
        assert len(rows) == 1, rows
        won: str = rows[0].content["by"]
        state = ask_state(models[1].reader, ask_id)
        assert state is not None and state.answer is not None and state.answer.by == won
        person_won = isinstance(results["person"], Written)
        assert person_won == (won == "human:alice")
        assert (results["deadline"] == ()) == person_won
        return won
    finally:
        for model in models:
            model.close()


@pytest.mark.parametrize("first", ["person", "deadline"])
def test_a_person_and_the_deadline_racing_exactly_one_wins(db: Path, first: str) -> None:
    winners = [_one_race(db, f"r-{trial}", first) for trial in range(20)]
    assert set(winners) <= {"human:alice", DEADLINE_BY}


RACERS = 16


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_sixteen_processes_racing_one_expiry_apply_exactly_one_default(
    tmp_path: Path, backend: str
) -> None:
    spec = build(backend, tmp_path)
    try:
        assert spec.url is not None
        prepare(spec.url, racy=False)
        counts = race(spec.url, tmp_path / "gate", RACERS, racy=False)
        assert sorted(counts) == [0] * (RACERS - 1) + [1]
        assert defaults_on_board(spec.url, racy=False) == 1
    finally:
        spec.close_all()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_negative_control_a_read_then_write_default_is_applied_more_than_once(
    tmp_path: Path, backend: str
) -> None:
    applied = []
    for trial in range(3):  # the racy variant must be caught in at least one trial
        (tmp_path / f"trial-{trial}").mkdir()
        spec = build(backend, tmp_path / f"trial-{trial}")
        try:
            assert spec.url is not None
            prepare(spec.url, racy=True)
            race(spec.url, tmp_path / f"gate-{trial}", RACERS, racy=True)
            applied.append(defaults_on_board(spec.url, racy=True))
        finally:
            spec.close_all()
        if applied[-1] > 1:
            break
    assert max(applied) > 1, applied
