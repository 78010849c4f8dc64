"""Delivering buddhi's asks to the board's ``asks`` level, and seeing resolutions made there.

:class:`BoardTransport` is the ``EscalationTransport`` fill: it turns the pre-reasoned
``buddhi.Ask`` into a ``pybb.human.Ask`` (through an :data:`AskComposer`) and posts it.
:class:`BoardOOBSource` is the ``OOBSource`` fill: an item whose entry was resolved on
the board was resolved out of band.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import buddhi
from blackboard import Rejected, RejectionCause
from buddhi import EscalationTransport, Item, ScopePath
from pybb import Blackboard, Escalation
from pybb.errors import EntryNotFoundError
from pybb.human import ESCALATION_WRITER, Ask, DeadlinePolicy, Option, ask_state, post_ask
from pybb.supervision._errors import SupervisionError
from pybb.supervision._items import ask_id_for, entry_key

__all__ = [
    "AskComposer",
    "AskContext",
    "BoardOOBSource",
    "BoardTransport",
    "ScopeRule",
    "compose_ask",
    "find_escalation",
]

ScopeRule = Callable[[Escalation], ScopePath]
"""Which budget scope an escalation is charged to."""

_REPORT_DATA_LIMIT = 60_000  # pybb.human keeps report_data within 65,536 characters of JSON
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class AskContext:
    """What a composer turns into a board ask.

    Attributes:
        ask: buddhi's validated ask (question, 2–4 options, one starred, confidence).
        escalation: The escalated entry it is about, with its tier's report.
        ask_id: The id the ask must carry (derived from the escalation).
        scope: The budget scope it was charged to.
        at: When it is posted.
    """

    ask: buddhi.Ask
    escalation: Escalation
    ask_id: str
    scope: ScopePath
    at: datetime


AskComposer = Callable[[AskContext], Ask]
"""Turns buddhi's ask into the board's ask (text for people, ids for the answer)."""


def compose_ask(context: AskContext, *, option_ids: Mapping[str, str] | None = None) -> Ask:
    """The default composer: the question, the options, the tier's report as text and data.

    Option ids come from ``option_ids`` (label to id) or a slug of the label; the
    subject is the tier report's ``"subject"`` (or ``"device"``), else the entry key;
    the report text is the tier report's ``"text"``, else its JSON. Over-long text is
    cut to what the board keeps, so composing never fails on length.

    Args:
        context: What to compose.
        option_ids: Ids for the options, by label (e.g. ``{"Accept ...": "accept"}``).
    """
    escalation, tier = context.escalation, context.escalation.report.tier_report
    fields = tier if isinstance(tier, Mapping) else {}
    subject = fields.get("subject") or fields.get("device") or escalation.key
    return Ask(
        ask_id=context.ask_id,
        entry=_cut(escalation.key, 500),
        subject=_cut(str(subject), 500),
        title=_cut(" ".join(context.ask.question.split()), 300),
        report=_cut(report_text(escalation), 65_536),
        options=_options(context.ask, option_ids or {}),
        confidence=context.ask.confidence,
        scope="/".join(context.scope),
        created_at=context.at,
        report_data=report_data(escalation),
    )


def report_text(escalation: Escalation) -> str:
    """The escalation as text for people: who failed, why, and the tier's report."""
    report = escalation.report
    tier = report.tier_report
    head = (
        f"Entry {escalation.key!r} was escalated by {report.source or 'an empty chain'} "
        f"({report.reason}) after {len(report.attempts)} attempt(s)."
    )
    if isinstance(tier, Mapping) and isinstance(tier.get("text"), str):
        return f"{head}\n\n{tier['text']}"
    if tier is None:
        return head
    return f"{head}\n\n{json.dumps(tier, indent=2, sort_keys=True, default=str)}"


def report_data(escalation: Escalation) -> dict[str, Any]:
    """The escalation's structured form for the ask: ids, tier, reason, the tier's report."""
    report = escalation.report
    data: dict[str, Any] = {
        "escalation": escalation.id,
        "entry": escalation.key,
        "tier": report.source,
        "reason": report.reason,
        "tier_report": report.tier_report,
    }
    if len(json.dumps(data, default=str)) > _REPORT_DATA_LIMIT:
        data["tier_report"] = None
        data["truncated"] = True
    return data


class BoardTransport(EscalationTransport):
    """Delivers admitted asks to the board's ``asks`` level (``pybb.human.post_ask``).

    The ask's item id is an escalation id on ``blackboard``; the transport reads the
    escalation back from the board, composes the board ask and posts it. Posting the
    same escalation's ask again (a redelivery) is a no-op: the level is unique on
    ``ask_id`` and the ask id is derived from the escalation.

    Args:
        blackboard: The run's blackboard (declaring ``pybb.human.HUMAN_REGIONS``).
        scope: The budget scope of an escalation, shown on the ask.
        compose: Turns buddhi's ask into the board's (default :func:`compose_ask`).
        writer: The writer name asks are posted under.
        clock: Where ``created_at`` comes from (anything with ``now()``).
        deadlines: Stamps each ask with its deadline and default before it is posted.
    """

    def __init__(
        self,
        blackboard: Blackboard,
        *,
        scope: ScopeRule,
        compose: AskComposer | None = None,
        writer: str = ESCALATION_WRITER,
        clock: buddhi.Clock | None = None,
        deadlines: DeadlinePolicy | None = None,
    ) -> None:
        self._board = blackboard
        self._deadlines = DeadlinePolicy() if deadlines is None else deadlines
        self._scope = scope
        self._compose: AskComposer = compose_ask if compose is None else compose
        self._writer = writer
        self._clock: buddhi.Clock = buddhi.SystemClock() if clock is None else clock

    def deliver(self, ask: buddhi.Ask) -> None:
        """Post the ask for its escalation; raise if the board refuses it."""
        escalation = find_escalation(self._board, ask.item_id)
        if escalation is None:
            raise SupervisionError(
                f"item {ask.item_id!r} is not an escalation on board {self._board.board_id!r}; "
                "BoardTransport delivers only the asks of escalated entries"
            )
        ask_id = ask_id_for(escalation)
        context = AskContext(ask, escalation, ask_id, self._scope(escalation), self._now())
        board_ask = self._deadlines.stamp(self._compose(context))
        result = post_ask(self._board.model.control, board_ask, writer=self._writer)
        if isinstance(result, Rejected) and not self._posted(result, ask_id):
            raise SupervisionError(f"the board refused ask {ask_id!r}: {result.reason}")

    def _posted(self, result: Rejected, ask_id: str) -> bool:
        """A duplicate of an ask already on the board is a delivery made before."""
        return result.cause is RejectionCause.DUPLICATE and (
            ask_state(self._board.model.reader, ask_id) is not None
        )

    def _now(self) -> datetime:
        now = self._clock.now()
        return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


class BoardOOBSource:
    """The board as an out-of-band source: an entry resolved there was resolved out of band.

    It reads the blackboard as last taken in (the controller takes in other processes'
    writes at each cycle, and ``Controller.refresh`` does between runs).
    """

    def __init__(self, blackboard: Blackboard) -> None:
        self._board = blackboard

    def can_observe_oob(self) -> bool:
        """Return ``True``: resolutions are written on the board."""
        return True

    def resolved_out_of_band(self, item: Item) -> buddhi.Resolution | None:
        """The entry's resolution, if the item is an escalation whose entry was resolved."""
        key = entry_key(item.id, self._board.board_id)
        if key is None:
            return None
        try:
            resolution = self._board.get_resolution(key)
        except EntryNotFoundError:
            return None
        if resolution is None:
            return None
        note = f"decided {resolution.decision!r} at board sequence {resolution.sequence}"
        return buddhi.Resolution(item.id, resolution.by, note, resolution.at)


def find_escalation(blackboard: Blackboard, escalation_id: str) -> Escalation | None:
    """The escalation with this id on ``blackboard``, or ``None``."""
    key = entry_key(escalation_id, blackboard.board_id)
    if key is None:
        return None
    try:
        escalation = blackboard.get_escalation(key)
    except EntryNotFoundError:
        return None
    return escalation if escalation is not None and escalation.id == escalation_id else None


def _options(ask: buddhi.Ask, ids: Mapping[str, str]) -> tuple[Option, ...]:
    taken: set[str] = set()
    options = []
    for number, option in enumerate(ask.options, 1):
        option_id = ids.get(option.label) or _slug(option.label) or f"option-{number}"
        if option_id in taken:
            option_id = f"{option_id[:120]}-{number}"
        taken.add(option_id)
        options.append(
            Option(
                option_id,
                _cut(option.label, 200),
                recommended=option.recommended,
                detail=_cut(option.detail, 2_000),
            )
        )
    return tuple(options)


def _slug(label: str) -> str:
    return _SLUG.sub("-", label.lower()).strip("-")[:48].strip("-")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
