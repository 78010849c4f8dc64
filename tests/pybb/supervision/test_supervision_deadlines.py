"""The human loop's deadlines, notifications and assignment, wired into a supervised run."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from supervision_support import charges, decisions, open_run, settings, write

from buddhi.board import BUDGET_PREMISE
from pybb.human import (
    DEADLINE_BY,
    AssignmentPolicy,
    Channel,
    DeadlinePolicy,
    Person,
    WebhookNotifier,
    deliveries,
    set_person,
)
from pybb.supervision import NotifySettings
from pybb.testing import FakeClock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "human"))
from notify_support import START, webhook_receiver

HOUR = timedelta(hours=1)


def test_an_unanswered_ask_gets_its_default_by_deadline_and_frees_its_slot(tmp_path: Path) -> None:
    clock = FakeClock(START)
    policy = DeadlinePolicy(after=HOUR)
    run = open_run(
        f"sqlite:///{tmp_path / 'run.db'}",
        settings(max_open_asks=1, deadlines=policy),
        clock=clock,
    )
    try:
        write(run.blackboard, {"a": None})
        run.run()
        (ask,) = run.open_asks()
        assert ask.deadline == START + HOUR and ask.default_option == ask.recommended.id
        write(run.blackboard, {"b": None})
        run.run()
        assert decisions(run.blackboard.model.reader)["b"]["disposition"] == "DENIED"
        clock.advance(3600)
        run.poll()
        resolution = run.blackboard.get_resolution("a")
        assert resolution is not None
        assert (resolution.decision, resolution.by) == (ask.recommended.id, DEADLINE_BY)
        assert run.open_asks() == ()
        (applied,) = run.applied()
        assert (applied.ask_id, applied.by, applied.outcome) == (
            ask.ask_id,
            DEADLINE_BY,
            "resolved",
        )
        # the slot is free: the next escalation is asked again
        write(run.blackboard, {"c": None})
        run.run()
        assert decisions(run.blackboard.model.reader)["c"]["disposition"] == "ESCALATED"
        run.poll()  # polling again applies nothing twice
        assert len(run.applied()) == 1
    finally:
        run.close()


def test_negative_control_before_the_deadline_nothing_is_applied(tmp_path: Path) -> None:
    clock = FakeClock(START)
    run = open_run(
        f"sqlite:///{tmp_path / 'run.db'}",
        settings(deadlines=DeadlinePolicy(after=HOUR)),
        clock=clock,
    )
    try:
        write(run.blackboard, {"a": None})
        run.run()
        clock.advance(3599)
        run.poll()
        assert run.blackboard.get_resolution("a") is None and len(run.open_asks()) == 1
    finally:
        run.close()


def test_every_notification_is_charged_to_the_ask_s_budget(tmp_path: Path) -> None:
    clock = FakeClock(START)
    secret = b"link-secret-0123456789abcdef"
    with webhook_receiver() as hook:
        notify = NotifySettings(
            {"webhook": WebhookNotifier(b"hook-secret-0123456789abcdef")},
            secret,
            "http://127.0.0.1:8765",
        )
        run = open_run(
            f"sqlite:///{tmp_path / 'run.db'}",
            settings(
                ceiling=2,
                deadlines=DeadlinePolicy(after=2 * HOUR, remind=(timedelta(minutes=30),)),
                assignment=AssignmentPolicy(default="human:alice"),
                notify=notify,
            ),
            clock=clock,
        )
        try:
            model = run.blackboard.model
            person = Person("human:alice", (Channel("webhook", hook.url),))
            set_person(model.control, person, writer="app")
            write(run.blackboard, {"a": None})
            run.run()  # the ask: one interrupt
            run.poll()  # its notification: a second one, of the same budget
            (ask,) = run.open_asks()
            spent = model.reader.read_premise(BUDGET_PREMISE).value["global"]["spent"]
            assert spent == 2
            assert charges(model.reader)[f"notify/{ask.ask_id}/ask/human:alice"] == 1
            clock.advance(90 * 60)  # the reminder is due; the budget is spent
            run.poll()
            assert [p.get("status") for p in deliveries(model.reader)] == ["sent", "refused"]
            refused = deliveries(model.reader)[-1]
            assert "global" in refused["reason"] and len(hook.received) == 1
            spent = model.reader.read_premise(BUDGET_PREMISE).value["global"]["spent"]
            assert spent == 2
        finally:
            run.close()


def test_a_bare_supervised_controller_applies_deadlines_when_it_halts(tmp_path: Path) -> None:
    """As a worker's controller does: the default lands; whoever applies answers resolves it."""
    from supervision_support import BOARD, prepare

    from pybb import Controller
    from pybb.human import AskStatus, ask_state
    from pybb.supervision import AnswerWatcher, Supervisor, supervised_blackboard

    clock = FakeClock(START)
    board = supervised_blackboard(f"sqlite:///{tmp_path / 'run.db'}", BOARD)
    try:
        supervisor = Supervisor(board, settings(deadlines=DeadlinePolicy(after=HOUR)), clock=clock)
        controller = prepare(Controller(board, clock=clock))
        supervisor.bind(controller)
        write(board, {"a": None})
        controller.run()
        (ask,) = supervisor.open_asks()
        clock.advance(3600)
        controller.run()  # nothing to do, but it halts: the deadline is applied
        state = ask_state(board.model.reader, ask.ask_id)
        assert state is not None and state.status is AskStatus.ANSWERED
        assert state.answer is not None and state.answer.by == DEADLINE_BY
        assert board.get_resolution("a") is None  # applying answers is the watcher's
        AnswerWatcher(controller).apply()
        resolution = board.get_resolution("a")
        assert resolution is not None and resolution.by == DEADLINE_BY
    finally:
        board.close()


def test_a_deadline_that_passed_while_nothing_ran_is_applied_on_restart(tmp_path: Path) -> None:
    clock = FakeClock(START)
    store = f"sqlite:///{tmp_path / 'run.db'}"
    first = open_run(store, settings(deadlines=DeadlinePolicy(after=HOUR)), clock=clock)
    write(first.blackboard, {"a": None})
    first.run()
    (ask,) = first.open_asks()
    first.close()
    clock.advance(2 * 3600)  # down past the deadline
    for _ in range(3):  # three restarts: applied by the first, never again
        run = open_run(store, settings(deadlines=DeadlinePolicy(after=HOUR)), clock=clock)
        try:
            run.run()
            resolution = run.blackboard.get_resolution("a")
            assert resolution is not None and resolution.by == DEADLINE_BY
            assert resolution.at == ask.deadline  # when it was due, not when it was seen
            assert [a.ask_id for a in run.applied()] == [ask.ask_id]
            answers = run.blackboard.model.reader.read_level("answers")
            assert [r.content["by"] for r in answers] == [DEADLINE_BY]
        finally:
            run.close()
