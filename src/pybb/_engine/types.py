"""The values pybb hands out: entry snapshots, attempts, escalations, resolutions, summaries."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, final

from blackboard.frozen import builder

__all__ = [
    "AttemptStatus",
    "AttemptSummary",
    "BlackboardEntry",
    "Chain",
    "CycleReport",
    "Escalation",
    "EscalationReport",
    "HaltReason",
    "HistoryEvent",
    "Resolution",
    "RunSummary",
    "Segment",
    "Stage",
]


class Segment(enum.StrEnum):
    """The broad regions of the blackboard an entry lives in."""

    CERTIFY = "certify"
    """Entries in good standing, entries being worked on, and entries resolved by a person."""
    ESCALATE = "escalate"
    """Entries no knowledge source could repair, waiting for a person."""


class Stage(enum.StrEnum):
    """Where an entry is in its life on the board."""

    NEW = "new"
    """Written, not yet evaluated."""
    EVALUATED = "evaluated"
    """Its first verdict exists; dispatch is next."""
    WORKING = "working"
    """Dispatched onto a chain whose sources are working on it."""
    GOOD = "good"
    """Rests in good standing; nothing more to do."""
    ESCALATED = "escalated"
    """In the escalate segment, waiting for a person."""
    RESOLVED = "resolved"
    """A person resolved it out of band; its route is over."""


class Chain(enum.StrEnum):
    """Which of a route's two chains an entry was dispatched onto."""

    ON_PASS = "on_pass"
    ON_FAIL = "on_fail"


class AttemptStatus(enum.StrEnum):
    """How a knowledge source's attempt on an entry went."""

    CHANGED = "changed"
    """It wrote a new measurement (or component); the entry was re-evaluated."""
    UNCHANGED = "unchanged"
    """It completed without writing; the entry was re-evaluated as it stands."""
    ERROR = "error"
    """``execute`` raised (an ``AttemptError`` or anything else)."""
    TIMEOUT = "timeout"
    """``execute`` ran past the source's timeout; whatever it wrote later is ignored."""
    REFUSED = "refused"
    """The board's admission rule refused its write (e.g. another component's)."""
    COUNTED = "counted"
    """Counted by ``Blackboard.add_ks_history`` without a write."""


class HaltReason(enum.StrEnum):
    """Why ``Controller.run`` returned."""

    SETTLED = "settled"
    """Every entry is in good standing, escalated, or resolved by a person."""
    MAX_CYCLES = "max_cycles"
    """The controller reached ``max_cycles``."""
    QUIESCENT = "quiescent"
    """Entries still need work, but no knowledge source can contribute to any of them."""


_FRESH_HISTORY: Mapping[str, int] = MappingProxyType({})
"""``BlackboardEntry``'s default ``ks_history``: a fresh dict for each entry."""


@final
@dataclass(frozen=True, slots=True, init=False)
class BlackboardEntry:
    """One entry: what was measured, the condition it must meet, and how it stands.

    Write one with ``Blackboard.write_entry(key, BlackboardEntry(...))``, giving
    ``predicate`` and ``measurement`` (or ``conditions`` and a dict ``measurement``);
    the other fields are filled in by the board and read back from ``get_entry``.
    Values read back are copies: changing them changes nothing on the board.

    Attributes:
        predicate: The name of the registered predicate that judges the measurement.
        conditions: For a dict measurement, component name to predicate name.
        measurement: The value as it stands now.
        result: The predicate's verdict (``None`` before the first evaluation); for a
            component-wise entry, component name to verdict.
        good_standing: Whether the entry meets its condition(s) and is not provisional.
        original_measurement: The measurement as first written; restored on handoff.
        ks_history: Knowledge source name to the attempts it made on this entry.
        segment: ``"certify"`` or ``"escalate"``.
        stage: Where the entry is in its life (new, evaluated, working, good, ...).
        source: The knowledge source whose partition holds the entry, if any.
        chain: The chain the entry was dispatched onto (``"on_pass"``/``"on_fail"``).
        generation: How many times it was opened: 1 as first written, one more at each
            ``Controller.reopen`` (a fresh measurement that runs its route again).
    """

    predicate: str | None = None
    conditions: Mapping[str, str] | None = None
    measurement: Any = None
    result: bool | dict[str, bool] | None = None
    good_standing: bool = False
    original_measurement: Any = None
    ks_history: Mapping[str, int] = field(default_factory=dict)
    segment: Segment = Segment.CERTIFY
    stage: Stage = Stage.NEW
    source: str | None = None
    chain: Chain | None = None
    generation: int = 1

    def __new__(
        cls,
        predicate: str | None = None,
        conditions: Mapping[str, str] | None = None,
        measurement: Any = None,
        result: bool | dict[str, bool] | None = None,
        good_standing: bool = False,
        original_measurement: Any = None,
        ks_history: Mapping[str, int] = _FRESH_HISTORY,
        segment: Segment = Segment.CERTIFY,
        stage: Stage = Stage.NEW,
        source: str | None = None,
        chain: Chain | None = None,
        generation: int = 1,
    ) -> BlackboardEntry:
        # The dataclass's own ``__init__`` sets each field through ``object.__setattr__``
        # (it is frozen): 19.5k instructions for one entry an application writes, a third
        # of that through its builder (``blackboard.frozen``, docs/adr/0025).
        history = {} if ks_history is _FRESH_HISTORY else ks_history
        return _build_entry(
            predicate,
            conditions,
            measurement,
            result,
            good_standing,
            original_measurement,
            history,
            segment,
            stage,
            source,
            chain,
            generation,
        )


_build_entry = builder(BlackboardEntry)
"""``BlackboardEntry`` from every field, positionally (what its constructor calls)."""


@dataclass(frozen=True, slots=True)
class AttemptSummary:
    """One attempt a knowledge source made on an entry, as the board recorded it.

    Attributes:
        source: The knowledge source.
        attempt: Its attempt number on this entry (1, 2, ...).
        status: How it went.
        error: For a failed attempt, what went wrong.
        report: What the source attached (``AttemptError.report`` or
            ``Blackboard.report``), any JSON value.
        good_standing: The entry's standing after the attempt, when it was re-evaluated.
    """

    source: str
    attempt: int
    status: AttemptStatus
    error: str | None = None
    report: Any = None
    good_standing: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form kept in an escalation record."""
        data: dict[str, Any] = {
            "source": self.source,
            "attempt": self.attempt,
            "status": self.status.value,
        }
        for name in ("error", "report", "good_standing"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttemptSummary:
        """Read the form :meth:`to_json` wrote."""
        return cls(
            data["source"],
            data["attempt"],
            AttemptStatus(data["status"]),
            data.get("error"),
            data.get("report"),
            data.get("good_standing"),
        )


@dataclass(frozen=True, slots=True)
class EscalationReport:
    """Why an entry was escalated: the tier that failed and everything tried before.

    Attributes:
        key: The entry.
        source: The knowledge source (tier) whose failure ended the route; ``None``
            when the chosen chain was empty.
        chain: The chain the entry was on.
        reason: ``"exhausted"`` (the last source used up its attempts; on the
            ``on_pass`` chain: every confirmation failed), ``"end_of_route"`` (the last
            component source fixed its component but the entry as a whole still fails),
            ``"empty_chain"`` (nothing could help), ``"changed_after_settling"`` (an
            entry at rest in good standing changed and now fails; its one dispatch is
            spent) or ``"written_to_escalate"`` (the application wrote it to the
            escalate segment itself).
        measurement: The measurement the entry was escalated with.
        original_measurement: The measurement as first written.
        result: The last verdict.
        attempts: Every attempt on the entry, all tiers, in order.
        tier_report: The last report the failing tier attached, if any.
        error: What the last verdict's predicate raised (exception type and message),
            if it raised.
    """

    key: str
    source: str | None
    chain: Chain
    reason: str
    measurement: Any
    original_measurement: Any
    result: bool | dict[str, bool] | None
    attempts: tuple[AttemptSummary, ...] = ()
    tier_report: Any = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form kept on the board."""
        return {
            "key": self.key,
            "source": self.source,
            "chain": self.chain.value,
            "reason": self.reason,
            "measurement": self.measurement,
            "original_measurement": self.original_measurement,
            "result": self.result,
            "attempts": [a.to_json() for a in self.attempts],
            "tier_report": self.tier_report,
            # Only when a predicate raised, so the records of every other run keep their form.
            **({} if self.error is None else {"error": self.error}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EscalationReport:
        """Read the form :meth:`to_json` wrote."""
        return cls(
            data["key"],
            data["source"],
            Chain(data["chain"]),
            data["reason"],
            data["measurement"],
            data["original_measurement"],
            data["result"],
            tuple(AttemptSummary.from_json(a) for a in data["attempts"]),
            data.get("tier_report"),
            data.get("error"),
        )


@dataclass(frozen=True, slots=True)
class Escalation:
    """What an observer is told when an entry is escalated (see ``ControllerObserver``).

    Attributes:
        board_id: The board the entry is on.
        key: The entry.
        entry: A snapshot of the entry as escalated.
        source: The tier whose failure escalated it (``None``: empty chain).
        report: The structured report.
        sequence: The board sequence number of the escalation record.
        redelivered: True when told again at the start of a resumed run, because the
            process that escalated it may have stopped before telling anyone.
    """

    board_id: str
    key: str
    entry: BlackboardEntry
    source: str | None
    report: EscalationReport
    sequence: int
    redelivered: bool = False

    @property
    def id(self) -> str:
        """A stable identity for de-duplicating deliveries: board, key and sequence."""
        return f"{self.board_id}/{self.key}/{self.sequence}"


@dataclass(frozen=True, slots=True)
class Resolution:
    """A person's out-of-band answer to an escalated entry, as recorded on the board.

    Attributes:
        key: The entry.
        decision: What the person decided (the option they chose).
        by: Who decided.
        at: When they decided (timezone-aware).
        measurement: The new measurement they gave, or ``None`` for none.
        sequence: The board sequence number of the resolution record.
    """

    key: str
    decision: str
    by: str
    at: datetime
    measurement: Any = None
    sequence: int = 0


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One change on the board, as its log holds it.

    Attributes:
        sequence: Its place in the board's gap-free sequence.
        kind: ``entry``, ``verdict``, ``dispatch``, ``attempt``, ``handoff``,
            ``restore``, ``change``, ``escalation``, ``resolution`` or ``cycle``. A
            new entry's first verdict is in its ``dispatch`` (``result``,
            ``good_standing``), and a failure handoff's restore in the ``handoff``
            (``restore``: ``value`` and, for a component, ``component``); a board
            written before docs/adr/0026 has them as records of their own.
        key: The entry it concerns (``None`` for ``cycle``).
        writer: Who wrote it (``app``, ``controller`` or ``ks:<source name>``).
        data: The record as written.
        at: When the board admitted it.
    """

    sequence: int
    kind: str
    key: str | None
    writer: str
    data: Mapping[str, Any]
    at: datetime


@dataclass(frozen=True, slots=True)
class CycleReport:
    """What one committed controller cycle did (see ``ControllerObserver.on_cycle``).

    Attributes:
        cycle: The cycle's number on this board.
        sequence: The board's head once the cycle committed: every write up to it is durable.
        records: How many records the cycle wrote.
        attempts: How many knowledge-source attempts it made.
        escalations: How many entries it escalated.
    """

    cycle: int
    sequence: int
    records: int
    attempts: int
    escalations: int


@dataclass(frozen=True, slots=True)
class RunSummary:
    """How ``Controller.run`` ended.

    Attributes:
        halted: Why it returned.
        cycles: The board's cycle count when it returned.
        entries: Entries on the board.
        good: Entries resting in good standing.
        escalated: Entries in the escalate segment.
        resolved: Entries resolved by a person.
        pending: Entries still new, evaluated or being worked on.
        attempts: Attempts made by this call.
        routes_without_entry: Keys routed with ``route()`` that had no entry on the
            board when the call started (a typo, or an entry not written yet).
        routes_after_dispatch: Keys whose ``route()`` came after the entry was
            dispatched onto another chain: dispatch is once per key, so the route
            is not used.
    """

    halted: HaltReason
    cycles: int
    entries: int
    good: int
    escalated: int
    resolved: int
    pending: int
    attempts: int
    routes_without_entry: tuple[str, ...] = ()
    routes_after_dispatch: tuple[str, ...] = ()
