"""The read side of a board: levels, premises, the log, and the board at any past sequence."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping

from blackboard._claims import Claim
from blackboard._records import (
    BoardState,
    Contribution,
    Outcome,
    PremiseState,
    Record,
    RecordKind,
    RunStatus,
)
from blackboard._regions import Region
from blackboard.errors import RegionKindError, SequenceError, UndeclaredRegionError
from blackboard.stores import Store

__all__ = ["BoardReader"]


class BoardReader:
    """Reads one board. Safe to share between threads; every call reads the store afresh."""

    def __init__(self, store: Store, board_id: str, regions: Mapping[str, Region]) -> None:
        self._store = store
        self.board_id = board_id
        self._regions = regions

    @property
    def regions(self) -> Mapping[str, Region]:
        """The declared regions by name."""
        return self._regions

    def read_level(self, level: str) -> tuple[Contribution, ...]:
        """Every contribution on ``level``, in sequence order."""
        self._region(level, "level")
        return tuple(_contribution(r) for r in self._store.read_region(self.board_id, level))

    def read_premise(self, premise: str) -> PremiseState:
        """The premise's current value, version and the sequence that set it."""
        self._region(premise, "premise")
        record = self._store.read_premise(self.board_id, premise)
        if record is None:  # pragma: no cover - every premise is opened with the board
            raise SequenceError(f"premise {premise!r} has no value on board {self.board_id!r}")
        return PremiseState(record.content, record.version or 0, record.sequence)

    def head(self) -> int:
        """The highest sequence number on the board."""
        return self._store.head(self.board_id)

    def log(self, since: int = 0, until: int | None = None) -> tuple[Record, ...]:
        """Every write after sequence ``since`` (up to ``until``), to any region, in order."""
        _check_position(since, "since")
        if until is not None:
            _check_position(until, "until")
        return tuple(self._store.read_log(self.board_id, since, until))

    def outcome(self) -> Outcome:
        """Whether the run is open, or how it closed."""
        return self._store.outcome(self.board_id)

    def claims(self) -> tuple[Claim, ...]:
        """Every key held now (see ``Control.claim``), by key; lapsed leases included."""
        return tuple(self._store.claims(self.board_id))

    def at(self, sequence: int) -> BoardState:
        """The whole board as it stood once write ``sequence`` had landed (0: before any)."""
        head = self.head()
        if isinstance(sequence, bool) or not isinstance(sequence, int) or not 0 <= sequence <= head:
            raise SequenceError(
                f"sequence {sequence!r} is outside this board's log 0..{head}; "
                "ask for a sequence the board has reached"
            )
        return _fold(self._store.read_log(self.board_id, 0, sequence), sequence, self._regions)

    def state(self) -> BoardState:
        """The whole board as it stands now."""
        records = self._store.read_log(self.board_id)
        return _fold(records, records[-1].sequence if records else 0, self._regions)

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the whole board (levels, premises, run, grants)."""
        return digest_of(self.state())

    def follow(self, since: int = 0, *, timeout: float | None = None) -> Iterator[Record]:
        """Yield every write after ``since`` as it lands, until the run closes.

        Args:
            since: Start after this sequence number.
            timeout: Stop once this many seconds pass with nothing new (None: wait on).
        """
        _check_position(since, "since")
        cursor = since
        while True:
            records = self._store.read_log(self.board_id, cursor)
            for record in records:
                cursor = record.sequence
                yield record
            if records:
                continue
            if self.outcome().closed:
                # The CLOSE record may have committed after the read above: yield what is
                # left up to it, or a follower would end one record short.
                yield from self._store.read_log(self.board_id, cursor)
                return
            woke = self._store.wait(self.board_id, cursor, 3600.0 if timeout is None else timeout)
            if not woke and timeout is not None:
                return

    def _region(self, name: str, kind: str) -> Region:
        region = self._regions.get(name) if isinstance(name, str) else None
        if region is None:
            raise UndeclaredRegionError(name, tuple(self._regions))
        if region.kind != kind:
            raise RegionKindError(name, region.kind, kind)
        return region


def _check_position(position: object, name: str) -> None:
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise SequenceError(
            f"{name}={position!r} is not a sequence number; pass a non-negative int"
        )


def _contribution(record: Record) -> Contribution:
    return Contribution(
        record.sequence, record.writer, record.region or "", record.content, record.at
    )


def _fold(records: list[Record], sequence: int, regions: Mapping[str, Region]) -> BoardState:
    levels: dict[str, list[Contribution]] = {n: [] for n, r in regions.items() if r.kind == "level"}
    premises: dict[str, PremiseState] = {}
    grants: set[tuple[str, str]] = set()
    outcome = Outcome(RunStatus.OPEN)
    for record in records:
        region = record.region or ""
        if record.kind is RecordKind.LEVEL:
            levels.setdefault(region, []).append(_contribution(record))
        elif record.kind is RecordKind.PREMISE:
            premises[region] = PremiseState(record.content, record.version or 0, record.sequence)
        elif record.kind is RecordKind.GRANT:
            grants.add((record.content["agent"], region))
        elif record.kind is RecordKind.REVOKE:
            grants.discard((record.content["agent"], region))
        else:
            content = record.content
            outcome = Outcome(RunStatus(content["status"]), content["reason"], record.sequence)
    return BoardState(
        sequence, {k: tuple(v) for k, v in levels.items()}, premises, outcome, frozenset(grants)
    )


def digest_of(state: BoardState) -> str:
    """The board digest of RELIABILITY.md: SHA-256 of canonical JSON, times left out."""
    document = {
        "levels": {
            name: [[c.sequence, c.writer, c.content] for c in contributions]
            for name, contributions in state.levels.items()
        },
        "premises": {name: [p.value, p.version, p.sequence] for name, p in state.premises.items()},
        "run": [state.outcome.status.value, state.outcome.reason, state.outcome.sequence],
        "grants": sorted([list(g) for g in state.permissions]),
        "head": state.sequence,
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
