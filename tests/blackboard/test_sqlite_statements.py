"""What one durable write costs the SQLite store in statements (issue 13's seed loop).

Counted through the store's own connection (its ``connect=`` hook) with SQLite's trace
callback, for a keyed write on a unique level: the kind of write ``write_entry`` makes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from blackboard import Level, Written, create_model
from blackboard.stores import SQLiteStore


def _traced(path: Path, seen: list[str]) -> SQLiteStore:
    def connect(target: str) -> sqlite3.Connection:
        conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        conn.set_trace_callback(seen.append)
        return conn

    return SQLiteStore(path, connect=connect)


def _one_write(tmp_path: Path) -> tuple[list[str], list[str]]:
    """The statements of one keyed unique-level write: (ahead of its transaction, in it)."""
    seen: list[str] = []
    store = _traced(tmp_path / "board.db", seen)
    try:
        model = create_model(
            [Level("entries", unique="key")],
            store=store,
            board_id="b",
        )
        assert isinstance(
            model.control.write("clerk", "entries", {"key": "e0"}, idempotency_key="k0"), Written
        )
        seen.clear()
        outcome = model.control.write("clerk", "entries", {"key": "e1"}, idempotency_key="k1")
        assert isinstance(outcome, Written)
        assert model.reader.head() == outcome.sequence
    finally:
        store.close()
    begin = seen.index("BEGIN IMMEDIATE")
    return seen[:begin], seen[begin : seen.index("COMMIT") + 1]


def test_a_write_reads_its_board_row_once_in_its_transaction(tmp_path: Path) -> None:
    """The head and the close come from one read of the board's row, not one each."""
    _, inside = _one_write(tmp_path)
    board_reads = [s for s in inside if s.startswith("SELECT") and "FROM bb_boards" in s]
    assert len(board_reads) == 1, inside


def test_a_write_keeps_its_one_record_with_a_statement_per_table(tmp_path: Path) -> None:
    """One record, its unique key and the head: three writing statements, then COMMIT."""
    _, inside = _one_write(tmp_path)
    writing = [s.split(" (")[0] for s in inside if not s.startswith(("SELECT", "BEGIN"))]
    assert [s.split(" =")[0] for s in writing] == [
        "INSERT INTO bb_records",
        "INSERT INTO bb_uniques",
        "UPDATE bb_boards SET head",
        "COMMIT",
    ]


def test_the_read_ahead_of_a_keyed_write_is_its_key_and_the_run(tmp_path: Path) -> None:
    """Ahead of the lock: the key looked up and the run's state, nothing else (a guard)."""
    ahead, _ = _one_write(tmp_path)
    assert len(ahead) == 2, ahead
    assert "ikey IN ('k1')" in ahead[0]
    assert "b.closed_seq" in ahead[1]
