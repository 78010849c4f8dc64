"""The admission rule of the human loop, which an application composes into its own.

It guards the three human levels: on ``answers`` it admits only a person's answer to an
open ask addressed to them, naming one of its options, written in their own name; on
``asks`` only a well-formed ask by a non-person; on ``ask_closures`` only a well-formed
closure of an unanswered ask by a non-person. Writes elsewhere pass untouched. One
answer per ask is the store's unique constraint, which holds where a rule cannot (the
rule runs outside the lock, so two answers may both pass it; the store admits one).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from blackboard import (
    Accept,
    AdmissionRule,
    BoardReader,
    ProposedContribution,
    ProposedWrite,
    Reject,
)
from pybb.human._assign import judge_assignment
from pybb.human._board import AskState, AskStatus, ask_state
from pybb.human._errors import MalformedContentError
from pybb.human._people import (
    ASSIGNMENTS,
    DELIVERIES,
    LINK_USES,
    NOTIFICATIONS,
    PEOPLE,
    judge_person,
)
from pybb.human._protocol import (
    ANSWERS,
    ASK_CLOSURES,
    ASKS,
    DEADLINE_BY,
    DEADLINE_WRITER,
    Answer,
    Ask,
    Closure,
    human_name,
)

__all__ = ["Refusal", "RefusalCode", "answer_rule", "compose_rules", "judge_answer"]


class RefusalCode(enum.Enum):
    """Why the human loop refused a write."""

    NOT_A_PERSON = "not_a_person"
    """An answer not written by ``human:<name>``."""
    PERSON_MAY_NOT = "person_may_not"
    """A person posting or closing an ask."""
    MALFORMED = "malformed"
    """The content is not a well-formed ask, answer or closure."""
    SPOOFED = "spoofed"
    """An answer whose ``by`` is not its writer."""
    UNKNOWN_ASK = "unknown_ask"
    """The ask named does not exist."""
    NOT_ADDRESSED = "not_addressed"
    """The ask is addressed to other people."""
    ANSWERED = "answered"
    """The ask was already answered."""
    CLOSED = "closed"
    """The ask was closed without an answer."""
    UNKNOWN_OPTION = "unknown_option"
    """The option named is not one of the ask's."""
    NOT_DUE = "not_due"
    """A deadline default written before the ask's deadline."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refused human-loop write: a code for programs, a reason for the person.

    Attributes:
        code: Why, as a code.
        reason: Why, as a sentence for the person who made the write.
        state: The ask as it stood, where one was found.
    """

    code: RefusalCode
    reason: str
    state: AskState | None = None


def answer_rule(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
    """The human loop's admission rule: compose it into the application's rule.

    Returns:
        ``Reject(reason)`` for a refused write to ``asks``, ``answers`` or
        ``ask_closures`` (the reason is written for the person); ``Accept()`` otherwise.
    """
    if not isinstance(proposed, ProposedContribution):
        return Accept()
    judge = _JUDGES.get(proposed.level)
    if judge is None:
        return Accept()
    refusal = judge(reader, proposed.writer, proposed.content)
    return Accept() if refusal is None else Reject(refusal.reason)


def judge_answer(reader: BoardReader, writer: str, content: Any) -> Refusal | None:
    """Judge a proposed answer as :func:`answer_rule` would; ``None`` means admissible.

    Args:
        reader: The board.
        writer: Who writes it.
        content: The proposed content of the ``answers`` level.
    """
    if writer == DEADLINE_WRITER:
        return _judge_default(reader, content)
    if human_name(writer) is None:
        return Refusal(
            RefusalCode.NOT_A_PERSON,
            f"only a person can answer an ask: answers are written as 'human:<name>', "
            f"not {writer!r}",
        )
    try:
        proposed = Answer.from_json(content)
    except MalformedContentError as exc:
        return Refusal(RefusalCode.MALFORMED, f"this answer cannot be read: {exc}")
    if proposed.by != writer:
        return Refusal(
            RefusalCode.SPOOFED,
            f"this answer says it is by {proposed.by!r} but {writer!r} wrote it; "
            "a person can answer only in their own name",
        )
    state = ask_state(reader, proposed.ask_id)
    return _against_state(state, proposed, writer)


def _judge_default(reader: BoardReader, content: Any) -> Refusal | None:
    """A deadline's default: by "deadline", to an open ask, one of its options, when due."""
    try:
        proposed = Answer.from_json(content)
    except MalformedContentError as exc:
        return Refusal(RefusalCode.MALFORMED, f"this default cannot be read: {exc}")
    if proposed.by != DEADLINE_BY:
        return Refusal(
            RefusalCode.SPOOFED,
            f"{DEADLINE_WRITER} writes only deadline defaults (by={DEADLINE_BY!r}), "
            f"not answers by {proposed.by!r}",
        )
    state = ask_state(reader, proposed.ask_id)
    if state is not None and state.ask.deadline is not None and proposed.at < state.ask.deadline:
        return Refusal(
            RefusalCode.NOT_DUE,
            f"ask {proposed.ask_id!r} is due at {state.ask.deadline.isoformat()}; its default "
            f"cannot be applied at {proposed.at.isoformat()}",
            state,
        )
    return _against_state(state, proposed, DEADLINE_WRITER)


def compose_rules(*rules: AdmissionRule) -> AdmissionRule:
    """One admission rule that admits a write only if every rule in ``rules`` does.

    The first refusal wins, so put the cheapest or most telling rule first.
    """

    def composed(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        for rule in rules:
            verdict = rule(proposed, reader)
            if isinstance(verdict, Reject):
                return verdict
        return Accept()

    return composed


def _against_state(state: AskState | None, proposed: Answer, writer: str) -> Refusal | None:
    if state is None:
        return Refusal(
            RefusalCode.UNKNOWN_ASK,
            f"there is no ask {proposed.ask_id!r} on this board; check the ask id",
        )
    if writer != DEADLINE_WRITER and not state.ask.addressed_to(writer):
        return Refusal(
            RefusalCode.NOT_ADDRESSED,
            f"ask {proposed.ask_id!r} is addressed to other people, not to {writer}",
            state,
        )
    settled = _settled(state, writer)
    if settled is not None:
        return settled
    if state.ask.option(proposed.option) is None:
        ids = ", ".join(repr(o.id) for o in state.ask.options)
        return Refusal(
            RefusalCode.UNKNOWN_OPTION,
            f"{proposed.option!r} is not one of this ask's options ({ids}); choose one of them",
            state,
        )
    return None


def _settled(state: AskState, writer: str) -> Refusal | None:
    if state.status is AskStatus.ANSWERED:
        assert state.answer is not None
        first = state.answer
        chosen = state.ask.option(first.option)
        who = "you" if first.by == writer else first.by
        label = chosen.label if chosen is not None else first.option
        return Refusal(
            RefusalCode.ANSWERED,
            f"{who} already answered this ask at {first.at:%Y-%m-%d %H:%M:%S %Z}, choosing "
            f"“{label}”",
            state,
        )
    if state.status is AskStatus.CLOSED:
        assert state.closure is not None
        return Refusal(
            RefusalCode.CLOSED,
            f"this ask was closed at {state.closure.at:%Y-%m-%d %H:%M:%S %Z} without an "
            f"answer: {state.closure.reason}",
            state,
        )
    return None


def _judge_ask(reader: BoardReader, writer: str, content: Any) -> Refusal | None:
    if human_name(writer) is not None or writer.startswith("human:"):
        return Refusal(
            RefusalCode.PERSON_MAY_NOT,
            "a person cannot post asks; asks come from the escalation supervisor",
        )
    try:
        Ask.from_json(content)
    except MalformedContentError as exc:
        return Refusal(RefusalCode.MALFORMED, f"this ask cannot be kept: {exc}")
    return None


def _judge_closure(reader: BoardReader, writer: str, content: Any) -> Refusal | None:
    if writer.startswith("human:"):
        return Refusal(
            RefusalCode.PERSON_MAY_NOT,
            "a person answers an ask rather than closing it; write to 'answers' instead",
        )
    try:
        closure = Closure.from_json(content)
    except MalformedContentError as exc:
        return Refusal(RefusalCode.MALFORMED, f"this closure cannot be kept: {exc}")
    state = ask_state(reader, closure.ask_id)
    if state is None:
        return Refusal(
            RefusalCode.UNKNOWN_ASK, f"there is no ask {closure.ask_id!r} on this board to close"
        )
    return _settled(state, writer)


def _machine_only(reader: BoardReader, writer: str, content: Any) -> Refusal | None:
    if writer.startswith("human:"):
        return Refusal(
            RefusalCode.PERSON_MAY_NOT,
            "notifications, their deliveries and link uses are written by the inbox and "
            "the notifier, not by people",
        )
    return None


def _judge_people(reader: BoardReader, writer: str, content: Any) -> Refusal | None:
    why = judge_person(reader, writer, content)
    return None if why is None else Refusal(RefusalCode.MALFORMED, why)


def _judge_assignment(reader: BoardReader, writer: str, content: Any) -> Refusal | None:
    why = judge_assignment(reader, writer, content)
    if why is None:
        return None
    code = RefusalCode.NOT_A_PERSON if human_name(writer) is None else RefusalCode.MALFORMED
    return Refusal(code, why)


_JUDGES = {
    ASKS: _judge_ask,
    ANSWERS: judge_answer,
    ASK_CLOSURES: _judge_closure,
    PEOPLE: _judge_people,
    ASSIGNMENTS: _judge_assignment,
    NOTIFICATIONS: _machine_only,
    DELIVERIES: _machine_only,
    LINK_USES: _machine_only,
}
