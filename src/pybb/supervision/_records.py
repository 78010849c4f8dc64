"""What the wiring writes on the ``supervision`` level, and an incremental index of it.

Three kinds of record, each unique by its ``id`` (the level is unique on it, so the
store admits one per id however often a redelivered escalation is supervised):

``decision:<escalation id>``
    buddhi's decision for one escalated entry: disposition, the decision that ended
    it, why, the budget scope, the ask posted (when escalated) and the details.
``closed:<escalation id>``
    The ask of an escalated entry was closed because the entry was resolved on the
    board before a person answered: ``RESOLVED_OOB``.
``applied:<ask id>``
    A person's answer was applied to the entry (the resolution's sequence number).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from blackboard import BoardReader, RecordKind
from buddhi import Decision, Disposition
from buddhi.board import ADMISSIONS_LEVEL

__all__ = [
    "SUPERVISION",
    "SUPERVISOR_WRITER",
    "AppliedAnswer",
    "BoardIndex",
    "SupervisionRecord",
    "applied_answers",
    "supervision_records",
]

SUPERVISION = "supervision"
"""The level the wiring records its decisions on (unique on ``id``)."""

SUPERVISOR_WRITER = "pybb:supervision"
"""The writer name of the wiring's records."""


@dataclass(frozen=True, slots=True)
class SupervisionRecord:
    """buddhi's decision about one escalated entry, as the board holds it.

    Attributes:
        escalation_id: The escalation (``Escalation.id``: board, key, sequence).
        key: The entry.
        kind: ``"decision"``, or ``"closed"`` when an ask was closed because the
            entry was resolved on the board before a person answered.
        disposition: One of buddhi's seven dispositions.
        decided_by: The decision that ended the item.
        reason: Why, in a sentence.
        scope: The budget scope the item was judged in, joined with ``/``.
        ask_id: The ask posted for it (``ESCALATED``, and ``closed`` records).
        details: What the ending decision found: for ``DENIED`` the scope, the
            limit (``"ceiling"``, ``"bar"``, ``"open_asks"`` or ``"excluded"``) and
            the counters; for ``ESCALATED`` the admission; see ``docs/human-loop.md``.
        trail: The decisions that ran, in order.
        at: When the wiring wrote it.
        sequence: Its board sequence number.
    """

    escalation_id: str
    key: str
    kind: str
    disposition: Disposition
    decided_by: Decision
    reason: str
    scope: str
    ask_id: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    trail: tuple[Decision, ...] = ()
    at: datetime | None = None
    sequence: int = 0

    @property
    def record_id(self) -> str:
        """The record's unique id on the level."""
        return f"{self.kind}:{self.escalation_id}"

    def to_json(self) -> dict[str, Any]:
        """The record's content on the ``supervision`` level."""
        return {
            "id": self.record_id,
            "kind": self.kind,
            "escalation": self.escalation_id,
            "key": self.key,
            "disposition": self.disposition.name,
            "decided_by": self.decided_by.value,
            "trail": [d.value for d in self.trail],
            "reason": self.reason,
            "scope": self.scope,
            "ask_id": self.ask_id,
            "details": dict(self.details),
            "at": None if self.at is None else self.at.isoformat(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], sequence: int = 0) -> SupervisionRecord:
        """Read the form :meth:`to_json` wrote (``KeyError``/``ValueError`` if it is not one)."""
        at = data.get("at")
        return cls(
            escalation_id=data["escalation"],
            key=data["key"],
            kind=data["kind"],
            disposition=Disposition[data["disposition"]],
            decided_by=Decision(data["decided_by"]),
            reason=data["reason"],
            scope=data["scope"],
            ask_id=data.get("ask_id"),
            details=dict(data.get("details") or {}),
            trail=tuple(Decision(d) for d in data.get("trail", ())),
            at=None if at is None else datetime.fromisoformat(at),
            sequence=sequence,
        )


@dataclass(frozen=True, slots=True)
class AppliedAnswer:
    """A person's answer, applied to its entry as an out-of-band resolution.

    Attributes:
        ask_id: The ask answered.
        escalation_id: The escalation it was asked for.
        key: The entry.
        option: The option chosen (the resolution's ``decision``).
        by: Who answered (``human:<name>``).
        answered_at: When they answered (the resolution's ``at``).
        outcome: ``"resolved"`` (the answer resolved the entry and its effect ran) or
            ``"superseded"`` (the entry was already resolved otherwise; no effect).
        resolution_sequence: The sequence number of the entry's resolution.
        sequence: The board sequence number of this record.
    """

    ask_id: str
    escalation_id: str
    key: str
    option: str
    by: str
    answered_at: datetime
    outcome: str
    resolution_sequence: int = 0
    sequence: int = 0

    def to_json(self) -> dict[str, Any]:
        """The record's content on the ``supervision`` level."""
        return {
            "id": f"applied:{self.ask_id}",
            "kind": "applied",
            "ask_id": self.ask_id,
            "escalation": self.escalation_id,
            "key": self.key,
            "option": self.option,
            "by": self.by,
            "answered_at": self.answered_at.isoformat(),
            "outcome": self.outcome,
            "resolution_sequence": self.resolution_sequence,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], sequence: int = 0) -> AppliedAnswer:
        """Read the form :meth:`to_json` wrote."""
        return cls(
            ask_id=data["ask_id"],
            escalation_id=data["escalation"],
            key=data["key"],
            option=data["option"],
            by=data["by"],
            answered_at=datetime.fromisoformat(data["answered_at"]),
            outcome=data["outcome"],
            resolution_sequence=data.get("resolution_sequence", 0),
            sequence=sequence,
        )


def supervision_records(reader: BoardReader) -> tuple[SupervisionRecord, ...]:
    """Every decision and closure on the board's ``supervision`` level, in board order."""
    return BoardIndex(reader).records()


def applied_answers(reader: BoardReader) -> tuple[AppliedAnswer, ...]:
    """Every answer the wiring applied, in board order."""
    return BoardIndex(reader).applied()


class BoardIndex:
    """What the wiring needs to look up on a board, read incrementally.

    The board's log is append-only and gap-free, so the index reads only the records
    after the last one it saw: supervision records by id, and the budget's admitted
    items (from the ``admissions`` audit trail of a ``buddhi.board.BoardStore``).
    """

    def __init__(self, reader: BoardReader) -> None:
        self.reader = reader
        self._cursor = 0
        self._rows: dict[str, tuple[int, Mapping[str, Any]]] = {}
        self._admitted: dict[str, Mapping[str, Any]] = {}
        self._lock = threading.Lock()

    def row(self, record_id: str) -> tuple[int, Mapping[str, Any]] | None:
        """The supervision record with this id and its sequence number, or ``None``."""
        with self._lock:
            self._catch_up()
            return self._rows.get(record_id)

    def record(self, kind: str, escalation_id: str) -> SupervisionRecord | None:
        """The ``decision`` or ``closed`` record of an escalation, or ``None``."""
        found = self.row(f"{kind}:{escalation_id}")
        return None if found is None else _parsed(SupervisionRecord.from_json, found[1], found[0])

    def admitted(self, item_id: str) -> Mapping[str, Any] | None:
        """The audit record of the budget's admission of ``item_id``, or ``None``."""
        with self._lock:
            self._catch_up()
            return self._admitted.get(item_id)

    def records(self) -> tuple[SupervisionRecord, ...]:
        """Every decision and closure, in board order (rows that are not one are skipped)."""
        return tuple(
            record
            for sequence, content in self._all()
            if content.get("kind") in ("decision", "closed")
            and (record := _parsed(SupervisionRecord.from_json, content, sequence)) is not None
        )

    def applied(self) -> tuple[AppliedAnswer, ...]:
        """Every applied answer, in board order (rows that are not one are skipped)."""
        return tuple(
            record
            for sequence, content in self._all()
            if content.get("kind") == "applied"
            and (record := _parsed(AppliedAnswer.from_json, content, sequence)) is not None
        )

    def rows(self) -> list[tuple[int, Mapping[str, Any]]]:
        """Every row of the level with its sequence number, in board order."""
        return self._all()

    def _all(self) -> list[tuple[int, Mapping[str, Any]]]:
        with self._lock:
            self._catch_up()
            return sorted(self._rows.values(), key=lambda row: row[0])

    def _catch_up(self) -> None:
        for record in self.reader.log(self._cursor):
            self._cursor = record.sequence
            if record.kind is not RecordKind.LEVEL or not isinstance(record.content, dict):
                continue
            content = record.content
            if record.region == SUPERVISION and isinstance(content.get("id"), str):
                self._rows.setdefault(content["id"], (record.sequence, content))
            elif record.region == ADMISSIONS_LEVEL and _is_admitted(content):
                self._admitted.setdefault(content["request"]["item_id"], content)


T = TypeVar("T")


def _parsed(
    parse: Callable[[Mapping[str, Any], int], T], content: Mapping[str, Any], sequence: int
) -> T | None:
    """A record read from its row, or ``None`` for a row another writer got wrong."""
    try:
        return parse(content, sequence)
    except (KeyError, TypeError, ValueError):
        return None


def _is_admitted(content: Mapping[str, Any]) -> bool:
    request = content.get("request")
    return (
        content.get("kind") == "admission"
        and content.get("decision") == "admitted"
        and isinstance(request, dict)
        and isinstance(request.get("item_id"), str)
    )
