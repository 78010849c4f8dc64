"""Answers back: a person's answer resolves its entry exactly once, even across restarts."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from supervision_fixtures import *  # noqa: F403
from supervision_support import BOARD, open_run, settings, write

from blackboard import BoardReader, Rejected, RejectionCause, Written, attach
from blackboard.stores import Store
from pybb import Controller, Escalation, Segment, Stage
from pybb.human import Answer, AskState, answer, answer_rule
from pybb.supervision import (
    AnswerWatcher,
    AppliedAnswer,
    DecisionEffect,
    SupervisedRun,
    applied_answers,
)


class Ledger(DecisionEffect):
    """A DecisionEffect that counts what it did: the side-effect ledger of RA-07."""

    def __init__(self) -> None:
        self.applied: Counter[str] = Counter()

    def apply(self, answer: Answer, escalation: Escalation, controller: Controller) -> None:
        self.applied[answer.ask_id] += 1


def resolutions(reader: BoardReader, key: str) -> list[dict[str, Any]]:
    return [c.content for c in reader.read_level("pybb.resolutions") if c.content["key"] == key]


def test_an_answer_resolves_its_entry_once_and_a_second_answer_is_refused(
    backend: Callable[[], Store],
) -> None:
    ledger = Ledger()
    run = open_run(backend(), settings(effect=ledger))
    write(run.blackboard, {"dev-1": None})
    run.run()
    (ask,) = run.open_asks()
    control = run.blackboard.model.control
    first = answer(control, "human:alice", ask.ask_id, ask.options[1].id, "checked by hand")
    second = answer(control, "human:bob", ask.ask_id, ask.options[0].id)
    assert isinstance(first, Written)
    assert isinstance(second, Rejected) and second.cause is RejectionCause.ADMISSION
    assert "human:alice already answered" in second.reason
    for _ in range(3):
        run.poll()
    reader = run.blackboard.model.reader
    entry = run.blackboard.get_entry("dev-1")
    assert entry.stage is Stage.RESOLVED and entry.segment is Segment.CERTIFY
    assert "dev-1" not in run.blackboard.escalate
    (resolution,) = resolutions(reader, "dev-1")
    given = run.blackboard.get_resolution("dev-1")
    assert given is not None
    assert (given.decision, given.by) == (ask.options[1].id, "human:alice")
    assert resolution["at"] == given.at.isoformat()
    history = run.blackboard.get_history("dev-1")
    assert history[-1].kind == "resolution"
    assert history[-1].data["decision"] == ask.options[1].id
    assert history[-1].data["by"] == "human:alice"
    (applied,) = applied_answers(reader)
    assert (applied.ask_id, applied.outcome, applied.by) == (ask.ask_id, "resolved", "human:alice")
    assert applied.resolution_sequence == given.sequence
    assert ledger.applied == {ask.ask_id: 1}
    assert run.open_asks() == ()
    run.close()


def answer_while_down(backend: Callable[[], Store], watcher: type[AnswerWatcher]) -> Ledger:
    """Escalate, stop; a person answers through the inbox's own attachment; restart 3x."""
    ledger = Ledger()
    run = open_run(backend(), settings(effect=ledger))
    write(run.blackboard, {"dev-1": None, "dev-2": None})
    run.run()
    asks = {a.entry: a.ask_id for a in run.open_asks()}
    run.close()  # the controller is down from here

    inbox = attach(backend(), BOARD, admission_rule=answer_rule)
    assert isinstance(answer(inbox.control, "human:alice", asks["dev-1"], "reject-it"), Written)
    inbox.close()

    for _ in range(3):  # restarts; each one applies what it finds
        run = open_run(backend(), settings(effect=ledger))
        run.watcher = watcher(run.controller, effect=ledger)
        run.run()
        run.close()
    return ledger


def test_an_answer_given_while_the_controller_is_down_is_applied_exactly_once_after_restart(
    backend: Callable[[], Store],
) -> None:
    ledger = answer_while_down(backend, AnswerWatcher)
    run = open_run(backend())
    reader = run.blackboard.model.reader
    assert len(resolutions(reader, "dev-1")) == 1
    assert resolutions(reader, "dev-2") == []
    assert [a.key for a in applied_answers(reader)] == ["dev-1"]
    assert list(ledger.applied.values()) == [1]
    assert run.blackboard.get_entry("dev-1").stage is Stage.RESOLVED
    assert run.blackboard.get_entry("dev-2").stage is Stage.ESCALATED
    run.close()


class Forgetful(AnswerWatcher):
    """The negative control: forgets which answers it applied (re-runs pre-interrupt effects)."""

    def pending(self) -> Iterator[tuple[AskState, Escalation]]:
        self._index.row = lambda record_id: None  # type: ignore[method-assign]
        return super().pending()


def test_negative_control_a_watcher_that_forgets_what_it_applied_is_caught(
    backend: Callable[[], Store],
) -> None:
    ledger = answer_while_down(backend, Forgetful)
    assert max(ledger.applied.values()) > 1  # the ledger check above would fail


def test_an_answer_applied_before_a_crash_is_not_resolved_again(
    backend: Callable[[], Store],
) -> None:
    ledger = Ledger()
    run = open_run(backend(), settings(effect=ledger))
    write(run.blackboard, {"dev-1": None})
    run.run()
    (ask,) = run.open_asks()
    answer(run.blackboard.model.control, "human:alice", ask.ask_id, "reject-it")
    # Crash after the resolution and the effect, before the record that it was applied.
    run.watcher._write = _crash  # type: ignore[method-assign]  # patched on this watcher only
    with contextlib.suppress(_Crash):
        run.poll()
    run.close()
    run = open_run(backend(), settings(effect=ledger))
    run.run()
    reader = run.blackboard.model.reader
    assert len(resolutions(reader, "dev-1")) == 1
    assert [a.outcome for a in applied_answers(reader)] == ["resolved"]
    # The effect ran again for the same answer: why DecisionEffect must be idempotent.
    assert ledger.applied == {ask.ask_id: 2}
    run.close()


class _Crash(BaseException):
    pass


def _crash(record: AppliedAnswer) -> NoReturn:
    raise _Crash


def test_the_run_helper_awaits_answers_until_none_is_open(backend: Callable[[], Store]) -> None:
    run: SupervisedRun = open_run(backend())
    write(run.blackboard, {"dev-1": None})
    run.run()
    assert run.run_until_answered(timeout=0.2).escalated == 1  # nobody answered: it gives up
    (ask,) = run.open_asks()
    answer(run.blackboard.model.control, "human:alice", ask.ask_id, "reject-it")
    summary = run.run_until_answered(timeout=10)
    assert (summary.escalated, summary.resolved) == (0, 1)
    run.close()
