"""Proposed writes, the admission rule's answers, and the outcomes of a write."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from blackboard.frozen import builder

if TYPE_CHECKING:
    from blackboard._reader import BoardReader

__all__ = [
    "Accept",
    "AdmissionRule",
    "Conflict",
    "ProposedContribution",
    "ProposedPremiseWrite",
    "ProposedWrite",
    "Reject",
    "Rejected",
    "RejectionCause",
    "WriteResult",
    "Written",
]


@dataclass(frozen=True, slots=True)
class ProposedContribution:
    """A proposed append to a level, as the admission rule sees it."""

    writer: str
    level: str
    content: Any


@dataclass(frozen=True, slots=True)
class ProposedPremiseWrite:
    """A proposed compare-and-set of a premise, as the admission rule sees it."""

    writer: str
    premise: str
    value: Any
    expected_version: int


ProposedWrite: TypeAlias = ProposedContribution | ProposedPremiseWrite


@dataclass(frozen=True, slots=True)
class Accept:
    """The rule admits the write."""


@dataclass(frozen=True, slots=True)
class Reject:
    """The rule refuses the write; ``reason`` reaches the writer in ``Rejected.reason``."""

    reason: str


AdmissionRule: TypeAlias = Callable[[ProposedWrite, "BoardReader"], Accept | Reject]
"""The application's admission rule: ``rule(proposed, reader) -> Accept() | Reject(why)``."""


class RejectionCause(enum.Enum):
    """Why the board refused a write."""

    ADMISSION = "admission"
    """The application's admission rule refused it."""
    NOT_PERMITTED = "not_permitted"
    """A registered agent wrote a region its ``writes_to`` does not name."""
    RUN_CLOSED = "run_closed"
    """The run was closed before the write could land."""
    DUPLICATE = "duplicate"
    """A unique level already holds this content (or this content's key)."""
    CLAIM_LOST = "claim_lost"
    """The batch was fenced and its writer no longer holds a claim it named (taken over)."""


@dataclass(frozen=True, slots=True)
class Written:
    """The write was admitted and stored.

    Attributes:
        sequence: Its sequence number on the board.
        version: The premise's new version, or ``None`` for a level write.
        repeat: True when an idempotency key matched an earlier write; nothing new was
            added and ``sequence``/``version`` are those of the first write.
    """

    sequence: int
    version: int | None = None
    repeat: bool = False


new_written: Callable[[int, int | None, bool], Written] = builder(Written)
"""``Written(sequence, version, repeat)`` at a plain object's cost (``blackboard.frozen``)."""


@dataclass(frozen=True, slots=True)
class Conflict:
    """A premise write named a version that is no longer current."""

    current_version: int


@dataclass(frozen=True, slots=True)
class Rejected:
    """The write was refused; nothing was stored and no sequence number consumed."""

    cause: RejectionCause
    reason: str


WriteResult: TypeAlias = Written | Conflict | Rejected
