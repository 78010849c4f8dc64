"""The typed values the loop consumes: items, their attempts, and streams of them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from buddhi._errors import ItemError, ItemTypeError

__all__ = ["Attempt", "Item", "Stream"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One iteration the automation made on an item, as the convergence detector sees it.

    Three kinds, told apart by the two fields:

    * ``Attempt(score=0.8)``: a completed iteration whose result scored 0.8;
    * ``Attempt(transient=True)``: a transient failure (timeout, rate limit), retried
      within the policy's bound and left out of convergence accounting;
    * ``Attempt()``: a persistent failure, which breaks any run of agreeing scores.

    Attributes:
        score: The iteration's score, finite; ``None`` for a failure.
        transient: Whether the failure is transient; such an attempt has no score.
    """

    score: float | None = None
    transient: bool = False

    def __post_init__(self) -> None:
        if self.transient and self.score is not None:
            raise ItemError(
                f"a transient failure has no score, got score={self.score!r}; "
                "drop the score or set transient=False"
            )
        if self.score is not None and not _is_finite_number(self.score):
            raise ItemError(f"an attempt's score must be a finite number, got {self.score!r}")


@dataclass(frozen=True, slots=True)
class Item:
    """One unit of work the supervisor decides about.

    Attributes:
        id: The item's identifier, unique within its stream.
        source: Who raised it; the exclusion lattice is keyed by source.
        payload: The domain data, carried untouched.
        confidence: The automation's confidence that it can handle the item, in [0, 1].
        history: The iterations made so far, oldest first.
        trigger: The flag Stage 0's trigger hook recorded, or ``None``.
    """

    id: str
    source: str
    payload: object = None
    confidence: float = 0.0
    history: tuple[Attempt, ...] = ()
    trigger: str | None = None

    def __post_init__(self) -> None:
        _require_name("an item's id", self.id)
        if not isinstance(self.source, str):
            raise ItemError(f"item {self.id!r}: source must be a str, got {self.source!r}")
        _require_unit("item " + repr(self.id), self.confidence)
        _require_history(self.id, self.history)
        if self.trigger is not None and not isinstance(self.trigger, str):
            raise ItemError(
                f"item {self.id!r}: trigger must be a str or None, got {self.trigger!r}"
            )

    @property
    def flagged(self) -> bool:
        """Whether Stage 0's trigger hook flagged this item."""
        return self.trigger is not None

    @property
    def transient_failures(self) -> int:
        """How many transient failures the history holds."""
        return sum(1 for attempt in self.history if attempt.transient)


@dataclass(frozen=True, slots=True)
class Stream:
    """A work stream: items, or further streams, that a supervisor can view as one item.

    Attributes:
        id: The stream's identifier; a granted child scope is named after it.
        entries: The stream's items and child streams, in order.
        source: Who owns the stream, as seen by the exclusion lattice.
        confidence: The automation's confidence that it can handle the whole stream;
            at or above the policy threshold the parent grants it budget.
        weight: The share of its parent's ceiling a granted scope receives, in [0, 1].
        effort_ceiling: The highest effort any of its items may be given, or ``None``.
        history: Iterations over the stream as a whole, for convergence.
        payload: Domain data about the stream itself.
    """

    id: str
    entries: tuple[Item | Stream, ...]
    source: str = "stream"
    confidence: float = 1.0
    weight: float = 1.0
    effort_ceiling: str | None = None
    history: tuple[Attempt, ...] = ()
    payload: object = None

    def __post_init__(self) -> None:
        _require_name("a stream's id", self.id)
        _require_unit("stream " + repr(self.id), self.confidence)
        _require_weight(self.id, self.weight)
        _require_entries(self.id, self.entries)
        _require_history(self.id, self.history)

    def as_item(self) -> Item:
        """View this stream as one item, so the same seven decisions can judge it.

        Returns:
            An item with the stream's id, source, confidence and history, whose payload
            is the stream itself.
        """
        return Item(self.id, self.source, self, self.confidence, self.history)


def _is_finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _require_name(what: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ItemError(f"{what} must be a non-empty str, got {value!r}")


def _require_unit(what: str, value: object) -> None:
    if not _is_finite_number(value) or not 0.0 <= value <= 1.0:  # type: ignore[operator]
        raise ItemError(f"{what}: confidence must be a finite number in [0, 1], got {value!r}")


def _require_weight(stream_id: str, value: object) -> None:
    if not _is_finite_number(value) or not 0.0 <= value <= 1.0:  # type: ignore[operator]
        raise ItemError(f"stream {stream_id!r}: weight must be a number in [0, 1], got {value!r}")


def _require_history(owner: str, history: object) -> None:
    if not isinstance(history, tuple):
        raise ItemError(f"{owner!r}: history must be a tuple of Attempt, got {history!r}")
    for attempt in history:
        if not isinstance(attempt, Attempt):
            raise ItemError(f"{owner!r}: history holds {attempt!r}, which is not an Attempt")


def _require_entries(stream_id: str, entries: object) -> None:
    if not isinstance(entries, tuple):
        raise ItemError(f"stream {stream_id!r}: entries must be a tuple, got {entries!r}")
    seen: set[str] = set()
    for entry in entries:
        if not isinstance(entry, Item | Stream):
            raise ItemTypeError(
                f"stream {stream_id!r} holds {entry!r}; entries must be Item or Stream "
                "(condition raw input with buddhi.stage0.condition first)"
            )
        if entry.id in seen:
            raise ItemError(f"stream {stream_id!r} holds two entries with id {entry.id!r}")
        seen.add(entry.id)
