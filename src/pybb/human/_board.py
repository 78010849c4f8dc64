"""Reading the human loop off a board, and the writes that drive it."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from blackboard import BoardReader, Control, Rejected, Written
from pybb.human._errors import MalformedContentError
from pybb.human._protocol import ANSWERS, ASK_CLOSURES, ASKS, Answer, Ask, Closure

__all__ = [
    "ESCALATION_WRITER",
    "AskState",
    "AskStatus",
    "answer",
    "ask_state",
    "ask_states",
    "close_ask",
    "open_asks",
    "post_ask",
]

ESCALATION_WRITER = "pybb:escalation"
"""The default writer of asks and closures."""

_log = logging.getLogger("pybb.human")

_T = TypeVar("_T")
_R = TypeVar("_R", Answer, Closure)


class AskStatus(enum.Enum):
    """Where an ask stands."""

    OPEN = "open"
    """Waiting for a person."""
    ANSWERED = "answered"
    """A person answered it."""
    CLOSED = "closed"
    """It was closed without a person's answer."""


@dataclass(frozen=True, slots=True)
class AskState:
    """An ask as it stands on the board.

    When an answer and a closure both landed (they raced), the earlier one by sequence
    number decides the status; both are reported.

    Attributes:
        ask: The ask.
        sequence: The sequence number it was posted at.
        status: Open, answered or closed.
        answer: The admitted answer, if any.
        answered_at: The sequence number of the answer, if any.
        closure: The closure, if any.
        closed_at: The sequence number of the closure, if any.
    """

    ask: Ask
    sequence: int
    status: AskStatus
    answer: Answer | None = None
    answered_at: int | None = None
    closure: Closure | None = None
    closed_at: int | None = None


def ask_states(reader: BoardReader) -> tuple[AskState, ...]:
    """Every well-formed ask on the board with its status, in the order they were posted.

    Rows that are not well formed (possible only where the application did not compose
    :func:`answer_rule` into its admission rule) are skipped.
    """
    answers = _firsts(reader, ANSWERS, Answer.from_json)
    closures = _firsts(reader, ASK_CLOSURES, Closure.from_json)
    states = []
    for sequence, ask in _rows(reader, ASKS, Ask.from_json):
        answered = answers.get(ask.ask_id)
        closed = closures.get(ask.ask_id)
        states.append(_state(ask, sequence, answered, closed))
    return tuple(_first_per_id(states))


def ask_state(reader: BoardReader, ask_id: str) -> AskState | None:
    """The ask ``ask_id`` as it stands, or ``None`` when the board has no such ask."""
    return next((s for s in ask_states(reader) if s.ask.ask_id == ask_id), None)


def open_asks(reader: BoardReader, *, human: str | None = None) -> tuple[Ask, ...]:
    """The asks still waiting for a person, oldest first.

    Args:
        reader: The board.
        human: Only the asks this person (``human:<name>``) may answer; ``None``: all.
    """
    return tuple(
        s.ask
        for s in ask_states(reader)
        if s.status is AskStatus.OPEN and (human is None or s.ask.addressed_to(human))
    )


def post_ask(control: Control, ask: Ask, *, writer: str = ESCALATION_WRITER) -> Written | Rejected:
    """Post ``ask`` on the ``asks`` level.

    Returns:
        ``Written`` or the kernel's ``Rejected`` (``DUPLICATE`` when the ask id is taken).
    """
    return control.write(writer, ASKS, ask.to_json())


def answer(
    control: Control, human: str, ask_id: str, option: str, note: str = ""
) -> Written | Rejected:
    """Write ``human``'s answer to ``ask_id``, choosing ``option``.

    Exactly one answer per ask is admitted; a second gets ``Rejected`` with cause
    ``DUPLICATE``, and :func:`ask_state` tells who answered first.

    Args:
        control: The board's write path.
        human: The person answering, ``human:<name>``; written as both writer and ``by``.
        ask_id: The ask answered.
        option: The id of the option chosen.
        note: Anything the person adds.

    Raises:
        MalformedContentError: ``human``, ``ask_id``, ``option`` or ``note`` is malformed.
    """
    content = Answer(ask_id, option, human, note, datetime.now(UTC))
    return control.write(human, ANSWERS, content.to_json())


def close_ask(
    control: Control, ask_id: str, reason: str, *, writer: str = ESCALATION_WRITER
) -> Written | Rejected:
    """Close ``ask_id`` without a person's answer (e.g. it was resolved out of band).

    Raises:
        MalformedContentError: ``ask_id`` or ``reason`` is malformed.
    """
    content = Closure(ask_id, reason, datetime.now(UTC))
    return control.write(writer, ASK_CLOSURES, content.to_json())


def _state(
    ask: Ask,
    sequence: int,
    answered: tuple[int, Answer] | None,
    closed: tuple[int, Closure] | None,
) -> AskState:
    status = AskStatus.OPEN
    if answered is not None and (closed is None or answered[0] < closed[0]):
        status = AskStatus.ANSWERED
    elif closed is not None:
        status = AskStatus.CLOSED
    return AskState(
        ask,
        sequence,
        status,
        answer=None if answered is None else answered[1],
        answered_at=None if answered is None else answered[0],
        closure=None if closed is None else closed[1],
        closed_at=None if closed is None else closed[0],
    )


def _rows(reader: BoardReader, level: str, parse: Callable[[Any], _T]) -> Iterable[tuple[int, _T]]:
    for contribution in reader.read_level(level):
        try:
            yield contribution.sequence, parse(contribution.content)
        except MalformedContentError as exc:
            _log.debug("skipping malformed %s row at %d: %s", level, contribution.sequence, exc)


def _firsts(
    reader: BoardReader, level: str, parse: Callable[[Any], _R]
) -> dict[str, tuple[int, _R]]:
    found: dict[str, tuple[int, _R]] = {}
    for sequence, value in _rows(reader, level, parse):
        found.setdefault(value.ask_id, (sequence, value))
    return found


def _first_per_id(states: list[AskState]) -> list[AskState]:
    seen: set[str] = set()
    kept = []
    for state in states:
        if state.ask.ask_id not in seen:
            seen.add(state.ask.ask_id)
            kept.append(state)
    return kept
