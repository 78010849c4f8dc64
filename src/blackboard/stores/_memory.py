"""The in-memory store: for tests and scratch runs; gone when the process ends."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeAlias

from blackboard._claims import Claim, Fence
from blackboard._json import decode
from blackboard._records import Outcome, Record, RecordKind, RunStatus, new_record
from blackboard.errors import StoreError
from blackboard.faults import fault_point
from blackboard.stores import _leases
from blackboard.stores._base import (
    AppendOutcome,
    PendingWrite,
    Store,
    apply_writes,
    stored_fingerprint,
)

__all__ = ["MemoryStore"]

_OPEN = Outcome(RunStatus.OPEN)  # frozen, so one instance serves every open board


# A kept record: (sequence, kind's value, region, writer, canonical text, version, at,
# idempotency key). Plain values only, so the cyclic GC stops tracking the tuple at its
# first look, where a kept Record and its content's dicts and lists would be walked again
# by every full collection as the board grows: on a board of 350,000 records that was
# half of a single write's CPU time. A read builds the Record (as SQLite's does).
_Row: TypeAlias = tuple[int, str, str | None, str, str, int | None, datetime, str | None]
_KINDS = {kind.value: kind for kind in RecordKind}


def _record(row: _Row) -> Record:
    sequence, kind, region, writer, text, version, at, key = row
    return new_record(sequence, _KINDS[kind], region, writer, decode(text), version, at, key)


def _found(board: _Board, key: str) -> tuple[Record, str] | None:
    """The record kept under ``key``, and its write's fingerprint (kept, else derived)."""
    index = board.keys.get(key)
    if index is None:
        return None
    row = board.records[index]
    kept = board.prints.get(key) if board.prints else None
    return _record(row), kept or stored_fingerprint(row[1], row[2], row[3], row[4], row[5])


@dataclass(slots=True)
class _Board:
    declaration: str
    records: list[_Row] = field(default_factory=list)
    by_region: dict[str, list[int]] = field(default_factory=dict)
    premises: dict[str, int] = field(default_factory=dict)  # name -> index into records
    uniques: dict[tuple[str, str], int] = field(default_factory=dict)
    grants: set[tuple[str, str]] = field(default_factory=set)
    keys: dict[str, int] = field(default_factory=dict)  # idempotency key -> index
    # The fingerprints of keyed writes their record cannot tell (stored_fingerprint): only
    # a store used directly makes those. Every other one is derived when its key is found.
    prints: dict[str, str] = field(default_factory=dict)
    closed: int | None = None
    claims: dict[str, _leases.Lease] = field(default_factory=dict)


# RecordKind.X costs about 0.1 µs a look-up (the enum metaclass); these are per write.
_LEVEL, _PREMISE, _GRANT = RecordKind.LEVEL, RecordKind.PREMISE, RecordKind.GRANT
_REVOKE, _CLOSE = RecordKind.REVOKE, RecordKind.CLOSE


class _Txn:
    """Writes buffered over a board, applied only when the whole batch succeeded."""

    __slots__ = (
        "_own_grants",
        "added",
        "board",
        "closed",
        "grants",
        "keys",
        "premises",
        "texts",
        "uniques",
    )

    # No fingerprint is kept but the few apply_writes hands over (board.prints): find_key
    # derives it from the record, so apply_writes computes one only for a key found again.
    derives_fingerprints = True

    def __init__(self, board: _Board) -> None:
        self.board = board
        # Records only: their idempotency key is the write's, and what a keyed record's
        # fingerprint needs is in self.keys. No tuple per write for the cyclic GC to walk.
        self.added: list[Record] = []
        self.texts: list[str] = []  # the canonical text of each added record, in step
        self.premises: dict[str, int] = {}
        self.uniques: dict[tuple[str, str], int] = {}
        self.grants = board.grants  # copied on the first grant or revoke (copy-on-write)
        self._own_grants = False
        # key -> (record, its canonical text, its write's fingerprint if it was given one)
        self.keys: dict[str, tuple[Record, str, str]] = {}
        self.closed = board.closed

    def head(self) -> int:
        return len(self.board.records) + len(self.added)

    def closed_at(self) -> int | None:
        return self.closed

    def permitted(self, agent: str, region: str) -> bool:
        return (agent, region) in self.grants

    def premise_version(self, name: str) -> int | None:
        if name in self.premises:
            return self.premises[name]
        index = self.board.premises.get(name)
        return None if index is None else self.board.records[index][5]

    def unique_holder(self, region: str, key: str) -> int | None:
        return self.uniques.get((region, key), self.board.uniques.get((region, key)))

    def holds(self, holder: str, keys: frozenset[str]) -> bool:
        # Under the store's lock: nobody can take a key before this batch commits.
        claims = self.board.claims
        return all((lease := claims.get(k)) is not None and lease.holder == holder for k in keys)

    def find_key(self, key: str) -> tuple[Record, str] | None:
        if key in self.keys:
            record, text, kept = self.keys[key]
            if kept:
                return record, kept
            derived = stored_fingerprint(
                record.kind, record.region, record.writer, text, record.version
            )
            return record, derived
        # A miss (nearly every key) answers here, without _found's call.
        return None if key not in self.board.keys else _found(self.board, key)

    def insert(self, record: Record, write: PendingWrite, fingerprint: str) -> None:
        self.added.append(record)
        self.texts.append(write.payload)
        if record.idempotency_key is not None:
            self.keys[record.idempotency_key] = (record, write.payload, fingerprint)
        region, kind = record.region, record.kind
        if kind is _LEVEL:  # the common case first; the kinds exclude each other
            if write.unique_key is not None and region:
                self.uniques[(region, write.unique_key)] = record.sequence
        elif kind is _PREMISE and region is not None:
            self.premises[region] = record.version or 0
        elif kind is _GRANT and region is not None:
            self._writable_grants().add((record.content["agent"], region))
        elif kind is _REVOKE and region is not None:
            self._writable_grants().discard((record.content["agent"], region))
        elif kind is _CLOSE:
            self.closed = record.sequence

    def _writable_grants(self) -> set[tuple[str, str]]:
        if not self._own_grants:
            self.grants, self._own_grants = set(self.grants), True
        return self.grants

    def commit(self) -> None:
        board = self.board
        records, by_region = board.records, board.by_region
        for record, text in zip(self.added, self.texts, strict=True):
            index = len(records)
            records.append(
                (record.sequence, record.kind._value_, record.region, record.writer, text,
                 record.version, record.at, record.idempotency_key)
            )  # fmt: skip
            region, kind = record.region, record.kind
            if region is not None and kind is _LEVEL:
                indexes = by_region.get(region)  # setdefault would build a list per record
                if indexes is None:
                    by_region[region] = [index]
                else:
                    indexes.append(index)
            elif kind is _PREMISE and region is not None:
                board.premises[region] = index
            key = record.idempotency_key
            if key is not None:
                board.keys[key] = index
                kept = self.keys[key][2]
                if kept:
                    board.prints[key] = kept
        if self.uniques:
            board.uniques.update(self.uniques)
        board.grants = self.grants
        board.closed = self.closed


class MemoryStore(Store):
    """Boards held in this process's memory, safe to share between threads."""

    # The transaction checks the run's state anyway, and no other process waits for a turn
    # at this store's lock: a read ahead would only cost (0.25 µs of a 9 µs write).
    reads_run_state_ahead = False

    def __init__(self) -> None:
        self._boards: dict[str, _Board] = {}
        # One lock; the condition on it wakes wait(). Most calls take the lock itself,
        # which is cheaper than the condition's Python-level enter and exit.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiting = 0  # callers inside wait(): notify only when there is someone

    def open_board(self, board_id: str, declaration: str, opening: Sequence[PendingWrite]) -> str:
        with self._lock:
            board = self._boards.get(board_id)
            if board is not None:
                return board.declaration
            board = _Board(declaration)
            txn = _Txn(board)
            apply_writes(txn, opening)
            txn.commit()
            self._boards[board_id] = board
            self._changed.notify_all()
            return declaration

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        with self._lock:
            board = self._boards.get(board_id)
            txn = _Txn(board if board is not None else self._board(board_id))
            outcomes = apply_writes(txn, writes, fence)
            fault_point("store.before_commit")
            txn.commit()
            if txn.added and self._waiting:
                self._changed.notify_all()
            return outcomes

    def find_key(self, board_id: str, key: str) -> tuple[Record, str] | None:
        with self._lock:
            return _Txn(self._board(board_id)).find_key(key)

    def find_keys(self, board_id: str, keys: Sequence[str]) -> dict[str, tuple[Record, str]]:
        with self._lock:
            board = self._board(board_id)
            # Only the keys already kept are looked at: a batch's new keys cost one test each.
            written = board.keys
            return {key: found for key in keys if key in written and (found := _found(board, key))}

    def head(self, board_id: str) -> int:
        with self._lock:
            return len(self._board(board_id).records)

    def read_log(self, board_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        with self._lock:
            records = self._board(board_id).records
            rows = records[max(after, 0) : len(records) if until is None else max(until, 0)]
        return [_record(row) for row in rows]  # built outside the lock

    def read_region(self, board_id: str, region: str) -> list[Record]:
        with self._lock:
            board = self._board(board_id)
            rows = [board.records[i] for i in board.by_region.get(region, ())]
        return [_record(row) for row in rows]

    def read_premise(self, board_id: str, name: str) -> Record | None:
        with self._lock:
            board = self._board(board_id)
            index = board.premises.get(name)
            row = None if index is None else board.records[index]
        return None if row is None else _record(row)

    def outcome(self, board_id: str) -> Outcome:
        with self._lock:
            board = self._board(board_id)
            if board.closed is None:
                return _OPEN
            content = decode(board.records[board.closed - 1][4])
            return Outcome(RunStatus(content["status"]), content["reason"], board.closed)

    def permissions(self, board_id: str) -> frozenset[tuple[str, str]]:
        with self._lock:
            return frozenset(self._board(board_id).grants)

    def claim(
        self, board_id: str, holder: str, keys: Sequence[str], limit: int, lease: timedelta
    ) -> list[Claim]:
        with self._lock:
            claims = self._board(board_id).claims
            at = _leases.now()
            until = at + lease.total_seconds()
            taken: list[Claim] = []
            for key in dict.fromkeys(keys):
                if len(taken) >= limit:
                    break
                row = _leases.taken(claims.get(key), holder, at, until)
                if row is not None:
                    claims[key] = row
                    taken.append(_leases.to_claim(key, row))
            return taken

    def renew(
        self, board_id: str, holder: str, keys: Sequence[str], lease: timedelta
    ) -> list[Claim]:
        with self._lock:
            claims = self._board(board_id).claims
            until = _leases.now() + lease.total_seconds()
            renewed: list[Claim] = []
            for key in dict.fromkeys(keys):
                row = claims.get(key)
                if row is not None and row.holder == holder:
                    row.expires = until
                    renewed.append(_leases.to_claim(key, row))
            return renewed

    def release(self, board_id: str, holder: str, keys: Sequence[str]) -> int:
        with self._lock:
            claims = self._board(board_id).claims
            released = 0
            for key in dict.fromkeys(keys):
                row = claims.get(key)
                if row is not None and row.holder == holder:
                    row.holder = None
                    released += 1
            return released

    def claims(self, board_id: str) -> list[Claim]:
        with self._lock:
            claims = self._board(board_id).claims
            return [_leases.to_claim(k, r) for k, r in sorted(claims.items()) if r.holder]

    def wait(self, board_id: str, after: int, timeout: float) -> bool:
        with self._changed:
            self._waiting += 1
            try:
                return self._changed.wait_for(
                    lambda: len(self._board(board_id).records) > after, timeout
                )
            finally:
                self._waiting -= 1

    def close(self) -> None:
        """Nothing to release: the boards live as long as this object."""

    def _board(self, board_id: str) -> _Board:
        try:
            return self._boards[board_id]
        except KeyError:
            raise StoreError(f"no board {board_id!r} in this store; open it first") from None
