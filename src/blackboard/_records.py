"""What the board holds and hands out: log records, contributions, premise states."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from blackboard.frozen import builder

__all__ = [
    "BoardState",
    "Contribution",
    "Notification",
    "Outcome",
    "PremiseState",
    "Record",
    "RecordKind",
    "RunStatus",
]


class RecordKind(enum.Enum):
    """What a log record did to the board."""

    LEVEL = "level"
    """A contribution appended to a level."""
    PREMISE = "premise"
    """A premise set (its opening value or a compare-and-set)."""
    GRANT = "grant"
    """A registered agent was allowed to write a region."""
    REVOKE = "revoke"
    """A registered agent's permission to write a region was withdrawn."""
    CLOSE = "close"
    """The run was closed; nothing is admitted after it."""


@dataclass(frozen=True, slots=True)
class Record:
    """One sequenced write, as the board's log keeps it.

    Attributes:
        sequence: Its place in the board's single gap-free sequence.
        kind: What it did.
        region: The level or premise written; for GRANT/REVOKE the region concerned;
            ``None`` for CLOSE.
        writer: Who wrote it (``"@board"`` for the board's own writes).
        content: The contribution, premise value, or for other kinds a small dict.
        version: The premise version it set (PREMISE only).
        at: When it was admitted (UTC). Not part of the board digest.
        idempotency_key: The key it was written with, if any.
    """

    sequence: int
    kind: RecordKind
    region: str | None
    writer: str
    content: Any
    version: int | None
    at: datetime
    idempotency_key: str | None = None


new_record: Callable[
    [int, RecordKind, str | None, str, Any, int | None, datetime, str | None], Record
] = builder(Record)
"""``Record(...)`` with every field given, positionally, at a plain object's cost."""


@dataclass(frozen=True, slots=True)
class Contribution:
    """A contribution on a level."""

    sequence: int
    writer: str
    level: str
    content: Any
    at: datetime


@dataclass(frozen=True, slots=True)
class PremiseState:
    """A premise's current value and the version that a compare-and-set must name."""

    value: Any
    version: int
    sequence: int


class RunStatus(enum.Enum):
    """How a run stands: open, or how it closed."""

    OPEN = "open"
    COMPLETED = "completed"
    """The termination predicate said the run is complete."""
    ABORTED = "aborted"
    """The application aborted it."""
    QUIESCENT = "quiescent"
    """The control loop found nothing left to happen."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run closed (or that it is still open)."""

    status: RunStatus
    reason: str = ""
    sequence: int | None = None

    @property
    def closed(self) -> bool:
        """True once the run is closed."""
        return self.status is not RunStatus.OPEN


@dataclass(frozen=True, slots=True)
class BoardState:
    """The whole board as it stood at one sequence number."""

    sequence: int
    levels: dict[str, tuple[Contribution, ...]]
    premises: dict[str, PremiseState]
    outcome: Outcome
    permissions: frozenset[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Notification:
    """What an agent is told: a write to a region it watches, or a change of its permissions.

    See ``Agent.notify``: a LEVEL or PREMISE record of a subscribed region, or a GRANT or
    REVOKE record naming this agent.
    """

    agent: str
    record: Record
