"""Reading the human loop off a board, and the writes that drive it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime

from blackboard import BoardReader, Control, Rejected, Written
from pybb.human._index import lookup, snapshot
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
    :func:`answer_rule` into its admission rule) are skipped. Each board record is read
    and parsed once per reader; later calls cost only what arrived since.
    """
    found = snapshot(reader)
    return tuple(
        _state(ask, sequence, found.answers.get(ask_id), found.closures.get(ask_id))
        for ask_id, (sequence, ask) in found.asks.items()
    )


def ask_state(reader: BoardReader, ask_id: str) -> AskState | None:
    """The ask ``ask_id`` as it stands, or ``None`` when the board has no such ask."""
    posted, answered, closed = lookup(reader, ask_id)
    return None if posted is None else _state(posted[1], posted[0], answered, closed)


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
