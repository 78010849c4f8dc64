"""The SQLite store's single-write path: fewer statements, the same answers.

A single write's transaction reads the board row, its idempotency key and its unique key
in one statement (``_PROBE``), and the read ahead of it reads the keys and the run's state
in one (``_KEYS_AND_OUTCOME``). These tests hold the answers of both to what the separate
look-ups gave, and the statement counts to what was measured.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from blackboard._json import encode
from blackboard._records import RecordKind, RunStatus
from blackboard.errors import IdempotencyKeyError, StoreError
from blackboard.stores import SQLiteStore
from blackboard.stores._base import (
    Appended,
    Closed,
    Duplicate,
    PendingWrite,
    Repeated,
)

BOARD = "b"


def _level(
    n: int, *, key: str | None = None, unique: str | None = None, region: str = "events"
) -> PendingWrite:
    return PendingWrite(
        RecordKind.LEVEL,
        region,
        "clerk",
        encode({"n": n}, "content"),
        unique_key=unique,
        idempotency_key=key,
    )


def _close() -> PendingWrite:
    return PendingWrite(
        RecordKind.CLOSE, None, "clerk", encode({"status": "completed", "reason": "done"}, "close")
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "board.db")
    try:
        opened.open_board(BOARD, '{"d":1}', [])
        yield opened
    finally:
        opened.close()


class _Statements:
    """The statements a store's connection runs, as SQLite's trace callback sees them."""

    def __init__(self, store: SQLiteStore) -> None:
        self.seen: list[str] = []
        store._conn.set_trace_callback(self._saw)

    def _saw(self, statement: str) -> None:
        self.seen.append(statement)  # looked up each time: take() swaps the list

    def take(self) -> list[str]:
        seen, self.seen = self.seen, []
        return seen


def test_a_keyed_unique_write_is_five_statements_in_its_transaction(store: SQLiteStore) -> None:
    statements = _Statements(store)
    (outcome,) = store.append(BOARD, [_level(1, key="k1", unique="u1")])
    assert isinstance(outcome, Appended)
    seen = statements.take()
    # BEGIN, the probe, the record, the unique key, the head, COMMIT.
    assert [s.split()[0] for s in seen] == [
        "BEGIN",
        "SELECT",
        "INSERT",
        "INSERT",
        "UPDATE",
        "COMMIT",
    ], seen


def test_the_probe_answers_as_the_separate_look_ups(store: SQLiteStore) -> None:
    assert isinstance(store.append(BOARD, [_level(1, key="k1", unique="u1")])[0], Appended)
    # The same write again: its key is found, the record comes back.
    (again,) = store.append(BOARD, [_level(1, key="k1", unique="u1")])
    assert isinstance(again, Repeated) and again.record.sequence == 1
    # The key with other content: refused as a reuse, nothing written.
    with pytest.raises(IdempotencyKeyError):
        store.append(BOARD, [_level(2, key="k1", unique="u2")])
    # Another key, the same unique key: a duplicate of 1, no sequence taken.
    (dup,) = store.append(BOARD, [_level(3, key="k3", unique="u1")])
    assert isinstance(dup, Duplicate) and dup.sequence == 1
    # The same unique key on another level is free.
    (other,) = store.append(BOARD, [_level(4, key="k4", unique="u1", region="other")])
    assert isinstance(other, Appended) and other.record.sequence == 2
    # Only a key, only a unique key, neither.
    assert store.append(BOARD, [_level(5, key="k5")])[0].record.sequence == 3  # type: ignore[union-attr]
    assert store.append(BOARD, [_level(6, unique="u6")])[0].record.sequence == 4  # type: ignore[union-attr]
    assert store.append(BOARD, [_level(7)])[0].record.sequence == 5  # type: ignore[union-attr]
    assert isinstance(store.append(BOARD, [_level(6, unique="u6")])[0], Duplicate)
    assert store.head(BOARD) == 5
    assert [r.sequence for r in store.read_log(BOARD)] == [1, 2, 3, 4, 5]


def test_a_closed_run_refuses_a_single_keyed_write(store: SQLiteStore) -> None:
    store.append(BOARD, [_level(1, key="k1", unique="u1")])
    (closed,) = store.append(BOARD, [_close()])
    assert isinstance(closed, Appended)
    (refused,) = store.append(BOARD, [_level(2, key="k2", unique="u2")])
    assert isinstance(refused, Closed) and refused.sequence == 2
    # A repeat of a write from before the close is still answered by its key.
    assert isinstance(store.append(BOARD, [_level(1, key="k1", unique="u1")])[0], Repeated)
    assert store.head(BOARD) == 2


def test_a_single_write_to_a_missing_board_raises(store: SQLiteStore) -> None:
    with pytest.raises(StoreError, match="no board"):
        store.append("nowhere", [_level(1, key="k", unique="u")])
    assert not store.in_transaction


def test_a_batch_in_one_transaction_sees_its_own_keys(store: SQLiteStore) -> None:
    # A repeat inside one batch: the second write finds the first's held-back row.
    first, second = store.append(BOARD, [_level(1, key="k"), _level(1, key="k")])
    assert isinstance(first, Appended) and isinstance(second, Repeated)
    assert second.record.sequence == first.record.sequence == 1


def test_read_ahead_is_one_statement_with_the_keys_and_the_state(store: SQLiteStore) -> None:
    store.append(BOARD, [_level(1, key="k1"), _level(2, key="k2")])
    statements = _Statements(store)
    found, outcome = store.read_ahead(BOARD, [_level(1, key="k1"), _level(9, key="k9")])
    assert len(statements.take()) == 1
    assert set(found) == {"k1"} and found["k1"][0].sequence == 1
    assert outcome.status is RunStatus.OPEN
    store.append(BOARD, [_close()])
    found, outcome = store.read_ahead(BOARD, [_level(2, key="k2")])
    assert set(found) == {"k2"}
    assert outcome.status is RunStatus.COMPLETED and outcome.sequence == 3
    assert outcome.reason == "done"
    # Without keys, the state alone; with more than one chunk of keys, every chunk.
    assert store.read_ahead(BOARD, [_level(3)]) == ({}, store.outcome(BOARD))
    many = [_level(i, key=f"m{i}") for i in range(1200)]
    found, outcome = store.read_ahead(BOARD, [*many, _level(2, key="k2")])
    assert set(found) == {"k2"} and outcome == store.outcome(BOARD)


def test_read_ahead_finds_keys_past_the_first_chunk(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "many.db") as store:
        store.open_board(BOARD, "{}", [_level(i, key=f"m{i}") for i in range(1200)])
        found, outcome = store.read_ahead(BOARD, [_level(i, key=f"m{i}") for i in range(1200)])
        assert set(found) == {f"m{i}" for i in range(1200)}
        assert [found[f"m{i}"][0].sequence for i in (0, 499, 500, 1199)] == [1, 500, 501, 1200]
        assert outcome.status is RunStatus.OPEN


def test_a_file_written_this_way_reads_back_with_plain_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    with SQLiteStore(path) as store:
        store.open_board(BOARD, "{}", [])
        for i in range(20):
            store.append(BOARD, [_level(i, key=f"k{i}", unique=f"u{i}")])
    with sqlite3.connect(path) as conn:
        (head,) = conn.execute("SELECT head FROM bb_boards").fetchone()
        seqs = [s for (s,) in conn.execute("SELECT seq FROM bb_records ORDER BY seq")]
        uniques = conn.execute("SELECT count(*) FROM bb_uniques").fetchone()
    assert head == 20 and seqs == list(range(1, 21)) and uniques == (20,)


def test_an_append_after_its_read_ahead_looks_no_key_up_again(store: SQLiteStore) -> None:
    batch = [_level(1, key="k1"), _level(2, key="k2"), _level(3, key="k3")]
    store.read_ahead(BOARD, batch)
    statements = _Statements(store)
    outcomes = store.append(BOARD, batch)
    assert [o.record.sequence for o in outcomes if isinstance(o, Appended)] == [1, 2, 3]
    # BEGIN, the board row, the records (one trace each), the head, COMMIT: no look-up
    # of the keys.
    assert [s.split()[0] for s in statements.take()] == [
        "BEGIN",
        "SELECT",
        *["INSERT"] * 3,
        "UPDATE",
        "COMMIT",
    ]
    # Taken by that append: the next one looks its keys up (and finds them).
    again = store.append(BOARD, batch)
    assert all(isinstance(o, Repeated) for o in again)
    assert sum(s.startswith("SELECT") for s in statements.take()) == 2


def test_a_key_written_after_the_read_ahead_is_found_in_the_transaction(
    store: SQLiteStore, tmp_path: Path
) -> None:
    batch = [_level(1, key="k1"), _level(2, key="k2")]
    found, _ = store.read_ahead(BOARD, batch)
    assert found == {}
    with SQLiteStore(tmp_path / "board.db") as other:  # another process, in effect
        (kept,) = other.append(BOARD, [_level(2, key="k2")])
    assert isinstance(kept, Appended)
    # The head moved since the read ahead: its answers are not taken, the keys are read.
    first, second = store.append(BOARD, batch)
    assert isinstance(first, Appended) and first.record.sequence == 2
    assert isinstance(second, Repeated) and second.record.sequence == 1


def test_a_read_ahead_of_another_board_or_other_keys_is_not_taken(
    store: SQLiteStore,
) -> None:
    store.open_board("other", "{}", [])
    store.append(BOARD, [_level(1, key="k1")])
    store.read_ahead("other", [_level(1, key="k1"), _level(2, key="k2")])
    first, second = store.append(BOARD, [_level(1, key="k1"), _level(2, key="k2")])
    assert isinstance(first, Repeated) and isinstance(second, Appended)
    store.read_ahead(BOARD, [_level(3, key="k3"), _level(4, key="k4")])
    first, second = store.append(BOARD, [_level(3, key="k3"), _level(1, key="k1")])
    assert isinstance(first, Appended) and isinstance(second, Repeated)


def test_a_big_batch_is_written_fifty_rows_to_an_insert(store: SQLiteStore) -> None:
    # Level rows, rows of the general statement (premises) and unique keys, each with a
    # remainder past its last 50: read back as written, in one sequence.
    premise = PendingWrite(RecordKind.PREMISE, "p", "clerk", encode(0, "value"))
    opening = store.append(BOARD, [premise])
    assert isinstance(opening[0], Appended)
    sets = [
        PendingWrite(RecordKind.PREMISE, "p", "clerk", encode(v, "value"), expected_version=v)
        for v in range(1, 61)
    ]
    levels = [_level(i, key=f"k{i}", unique=f"u{i}" if i % 2 else None) for i in range(120)]
    statements = _Statements(store)
    outcomes = store.append(BOARD, [*levels, *sets])
    assert [o.record.sequence for o in outcomes if isinstance(o, Appended)] == list(range(2, 182))
    seen = statements.take()
    # Two runs of 50 level rows and 20 alone; one of 50 premise rows and 10 alone; one of
    # 50 unique keys and 10 alone (and each premise's own upsert).
    assert sum(s.count("), (") == 49 for s in seen) == 4
    assert sum(s.startswith("INSERT INTO bb_records") for s in seen) == 3 + 20 + 10
    log = store.read_log(BOARD)
    assert [r.sequence for r in log] == list(range(1, 182))
    assert [r.content for r in log[1:121]] == [{"n": i} for i in range(120)]
    assert [r.idempotency_key for r in log[1:121]] == [f"k{i}" for i in range(120)]
    assert [r.version for r in log[121:]] == list(range(2, 62))
    again = store.append(BOARD, [_level(0, key="k0"), _level(7, unique="u7")])
    assert isinstance(again[0], Repeated) and isinstance(again[1], Duplicate)
    assert again[1].sequence == 9
