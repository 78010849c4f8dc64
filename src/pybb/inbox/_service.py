"""What the inbox does with the board, framework-free: what a person sees, and answering.

Every function here is synchronous (the store is); the routes call them in a thread.
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from blackboard import Model, Record, RecordKind, Rejected, RejectionCause
from pybb.human import (
    ANSWERS,
    ASK_CLOSURES,
    ASKS,
    ASSIGNMENTS,
    Answer,
    AskState,
    MalformedContentError,
    RefusalCode,
    ask_state,
    ask_states,
    judge_answer,
)

__all__ = [
    "Outcome",
    "Submitted",
    "TimelineItem",
    "state_json",
    "submit_answer",
    "timeline",
    "visible_state",
    "visible_states",
]

_log = logging.getLogger("pybb.inbox")
_SUMMARY_LENGTH = 160


class Outcome(enum.Enum):
    """How an answer submission ended."""

    WRITTEN = 201
    NOT_FOUND = 404
    CONFLICT = 409
    INVALID = 422
    FORBIDDEN = 403


@dataclass(frozen=True, slots=True)
class Submitted:
    """The result of submitting an answer.

    Attributes:
        outcome: How it ended (its value is the HTTP status).
        message: A sentence for the person.
        code: Why, for programs: ``written``, ``malformed``, ``unknown_option``,
            ``not_found``, ``answered``, ``closed``, ``run_closed`` or ``forbidden``.
        state: The ask as it stands after the attempt, if it exists for this person.
        answer: The answer written, when written.
        sequence: Its sequence number, when written.
    """

    outcome: Outcome
    message: str
    code: str
    state: AskState | None = None
    answer: Answer | None = None
    sequence: int | None = None


@dataclass(frozen=True, slots=True)
class TimelineItem:
    """One board record, summarised for a person."""

    sequence: int
    at: datetime
    kind: str
    region: str
    writer: str
    summary: str


def visible_states(model: Model, human: str) -> tuple[AskState, ...]:
    """Every ask ``human`` may see (addressed to them or to anyone), oldest first."""
    return tuple(s for s in ask_states(model.reader) if s.ask.addressed_to(human))


def visible_state(model: Model, human: str, ask_id: str) -> AskState | None:
    """The ask ``ask_id`` if ``human`` may see it, else ``None``."""
    state = ask_state(model.reader, ask_id)
    return state if state is not None and state.ask.addressed_to(human) else None


def submit_answer(model: Model, human: str, ask_id: str, option: str, note: str) -> Submitted:
    """Answer ``ask_id`` as ``human``; exactly one answer per ask is ever admitted."""
    try:
        proposed = Answer(ask_id, option, human, note, datetime.now(UTC))
    except MalformedContentError as exc:
        message = f"That answer cannot be read: {exc.problem}."
        return Submitted(Outcome.INVALID, message, "malformed")
    refusal = judge_answer(model.reader, human, proposed.to_json())
    if refusal is not None:
        return _refused(refusal.code, refusal.reason, refusal.state)
    result = model.control.write(human, ANSWERS, proposed.to_json())
    if isinstance(result, Rejected):
        return _lost(model, proposed, result)
    _log.info("%s answered ask %r with %r (sequence %d)", human, ask_id, option, result.sequence)
    state = visible_state(model, human, ask_id)
    message = "Your answer was recorded."
    return Submitted(Outcome.WRITTEN, message, "written", state, proposed, result.sequence)


def state_json(state: AskState) -> dict[str, Any]:
    """An ask with its status, as the JSON API returns it."""
    return {
        "ask": state.ask.to_json(),
        "sequence": state.sequence,
        "status": state.status.value,
        "answer": None if state.answer is None else state.answer.to_json(),
        "closure": None if state.closure is None else state.closure.to_json(),
    }


def timeline(model: Model, human: str, limit: int) -> tuple[TimelineItem, ...]:
    """The board's last ``limit`` records, newest first, summarised for ``human``.

    Records of asks addressed to other people are summarised without their content.
    """
    head = model.reader.head()
    records = model.reader.log(max(0, head - limit))
    visible = {s.ask.ask_id for s in visible_states(model, human)}
    return tuple(_item(r, visible) for r in reversed(records))


def _refused(code: RefusalCode, reason: str, state: AskState | None) -> Submitted:
    if code in (RefusalCode.UNKNOWN_ASK, RefusalCode.NOT_ADDRESSED):
        return Submitted(Outcome.NOT_FOUND, "There is no such ask for you to answer.", "not_found")
    outcome = {
        RefusalCode.ANSWERED: Outcome.CONFLICT,
        RefusalCode.CLOSED: Outcome.CONFLICT,
        RefusalCode.UNKNOWN_OPTION: Outcome.INVALID,
        RefusalCode.MALFORMED: Outcome.INVALID,
    }.get(code, Outcome.FORBIDDEN)
    name = code.value if outcome is not Outcome.FORBIDDEN else "forbidden"
    return Submitted(outcome, _sentence(reason), name, state)


def _lost(model: Model, proposed: Answer, result: Rejected) -> Submitted:
    """The board refused a write that passed our own check: someone got there first."""
    state = visible_state(model, proposed.by, proposed.ask_id)
    if result.cause is RejectionCause.RUN_CLOSED:
        message = "This run has closed; it takes no more answers."
        return Submitted(Outcome.CONFLICT, message, "run_closed", state)
    if result.cause is RejectionCause.NOT_PERMITTED:
        return Submitted(Outcome.FORBIDDEN, _sentence(result.reason), "forbidden", state)
    refusal = judge_answer(model.reader, proposed.by, proposed.to_json())
    if refusal is not None:
        return _refused(refusal.code, refusal.reason, refusal.state)
    return Submitted(Outcome.CONFLICT, _sentence(result.reason), "answered", state)


def _sentence(reason: str) -> str:
    text = reason if reason.startswith("human:") else reason[:1].upper() + reason[1:]
    return text if text.endswith(".") else text + "."


def _item(record: Record, visible: set[str]) -> TimelineItem:
    region = record.region or ""
    return TimelineItem(
        record.sequence,
        record.at,
        record.kind.value,
        region,
        record.writer,
        _summary(record, region, visible),
    )


def _summary(record: Record, region: str, visible: set[str]) -> str:
    content = record.content
    if record.kind is RecordKind.LEVEL and region in (ASKS, ANSWERS, ASK_CLOSURES, ASSIGNMENTS):
        ask_id = content.get("ask_id") if isinstance(content, dict) else None
        if ask_id not in visible:
            return "(an ask for other people)"
        if region == ASKS:
            return f"asked {ask_id}: {content.get('title', '')}"
        if region == ANSWERS:
            return f"{content.get('by', '')} answered {ask_id}: {content.get('option', '')}"
        if region == ASSIGNMENTS:
            return f"{content.get('by', '')} reassigned {ask_id} to {content.get('to', '')}"
        return f"closed {ask_id}: {content.get('reason', '')}"
    text = json.dumps(content, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _SUMMARY_LENGTH else text[: _SUMMARY_LENGTH - 1] + "…"
