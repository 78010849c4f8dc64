"""Shared parts of the PostgreSQL store's tests: a schema per test, raw readers, faults.

Invariants are read straight from the tables with a separate psycopg connection, never
through the store under test. The pass criteria for a run of writers are the kernel's
own (``bb_reliability``: the same functions judge the SQLite runs). The broken stores at
the end are the real store with one rule removed, for the negative controls.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/blackboard: bb_reliability

from bb_reliability import LogRow, WriterReport, run_violations, sequence_violations

from blackboard import Fence, Record
from blackboard.stores import PendingWrite, apply_writes
from blackboard.stores._base import AppendOutcome
from blackboard.stores._postgres import PostgresStore, _PgTxn
from storekit import drop_pg_schema, new_pg_schema, pg_server

__all__ = ["LogRow", "WriterReport", "run_violations", "sequence_violations"]

# -- a schema of its own for each test --------------------------------------------------


@dataclass
class PgSpace:
    """One test's schema: its URL for stores, and raw access for the checkers."""

    server: str
    schema: str

    @property
    def url(self) -> str:
        return f"{self.server}{'&' if '?' in self.server else '?'}schema={self.schema}"

    def connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.server, autocommit=True)
        conn.execute(f'SET search_path TO "{self.schema}"')
        return conn

    def rows(self, board: str) -> tuple[list[LogRow], int]:
        """Every record of the board in sequence order, and the stored head counter."""
        with self.connect() as conn, conn.transaction():
            # One snapshot for records and head (a killed writer's COMMIT may still land).
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            rows = [
                LogRow(int(seq), kind, writer, json.loads(payload))
                for seq, kind, writer, payload in conn.execute(
                    "SELECT seq, kind, writer, payload FROM bb_records WHERE board_id = %s"
                    " ORDER BY seq",
                    (board,),
                )
            ]
            found = conn.execute("SELECT head FROM bb_boards WHERE board_id = %s", (board,))
            row = found.fetchone()
        return rows, int(row[0]) if row else 0

    def violations(self, board: str) -> list[str]:
        """What must hold of a board at rest: gap-free sequence, head = max, derived rows."""
        rows, head = self.rows(board)
        problems = sequence_violations(rows, head)
        with self.connect() as conn:
            problems += _premise_violations(conn, board)
            problems += _close_violations(conn, board, rows)
        return problems

    def digest(self, board: str) -> str:
        """SHA-256 of everything stored for the board except admission times."""
        with self.connect() as conn:
            parts = [
                conn.execute(query, (board,)).fetchall()
                for query in (
                    "SELECT head, closed_seq, declaration FROM bb_boards WHERE board_id = %s",
                    "SELECT seq, kind, region, writer, payload, version, ikey, fingerprint"
                    " FROM bb_records WHERE board_id = %s ORDER BY seq",
                    "SELECT name, seq, version FROM bb_premises WHERE board_id = %s ORDER BY 1",
                    "SELECT region, ukey_sha256, seq FROM bb_uniques WHERE board_id = %s"
                    " ORDER BY 1, 2",
                    "SELECT agent, region FROM bb_grants WHERE board_id = %s ORDER BY 1, 2",
                )
            ]
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()

    def sessions(self, application_name: str) -> list[str]:
        """The states of the server sessions a store opened under ``application_name``."""
        with psycopg.connect(self.server, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT state FROM pg_stat_activity WHERE application_name = %s",
                (application_name,),
            ).fetchall()
        return [str(state) for (state,) in rows]


def _premise_violations(conn: psycopg.Connection[Any], board: str) -> list[str]:
    history: dict[str, list[tuple[int, int]]] = {}
    for region, seq, version in conn.execute(
        "SELECT region, seq, version FROM bb_records WHERE board_id = %s AND kind = 'premise'"
        " ORDER BY seq",
        (board,),
    ):
        history.setdefault(region, []).append((int(seq), int(version)))
    stored = {
        name: (int(seq), int(version))
        for name, seq, version in conn.execute(
            "SELECT name, seq, version FROM bb_premises WHERE board_id = %s", (board,)
        )
    }
    problems = []
    for name, records in history.items():
        if [v for _, v in records] != list(range(1, len(records) + 1)):
            problems.append(f"premise {name!r}: versions are not 1..{len(records)}")
        if stored.get(name) != (records[-1][0], len(records)):
            problems.append(f"premise {name!r}: row {stored.get(name)} != last record")
    return problems


def _close_violations(conn: psycopg.Connection[Any], board: str, rows: list[LogRow]) -> list[str]:
    found = conn.execute("SELECT closed_seq FROM bb_boards WHERE board_id = %s", (board,))
    row = found.fetchone()
    closed = None if row is None or row[0] is None else int(row[0])
    closes = [r.seq for r in rows if r.kind == "close"]
    if closes != ([] if closed is None else [closed]):
        return [f"close records {closes} but closed_seq {closed}"]
    late = [r.seq for r in rows if closed is not None and r.seq > closed]
    return [f"writes admitted after the close at {closed}: {late[:5]}"] if late else []


@pytest.fixture
def pg_space() -> Iterator[PgSpace]:
    """A fresh schema, dropped with everything in it when the test ends."""
    server = pg_server()
    space = PgSpace(server, new_pg_schema(server))
    yield space
    drop_pg_schema(server, space.schema)


def go_at(delay: float = 0.5) -> float:
    """A start moment far enough ahead for every worker to have its command."""
    return time.time() + delay


# -- faults injected into a real connection ----------------------------------------------


@dataclass
class FaultPlan:
    """Fail the ``at``-th statement a store sends (once, or that one and every later one).

    Kinds: ``drop`` terminates the session (``pg_terminate_backend``) before the statement
    goes out; ``40001`` / ``40P01`` make the server raise a serialization failure or a
    deadlock there; ``lost-ack`` lets the ``at``-th COMMIT land, then drops the session
    before the store reads its answer (persistent: every statement after it drops too);
    ``lost-answers`` is ``lost-ack`` with no answer of the transaction read at all, not
    even those of the statements before COMMIT (the server sends them all at the end).
    Connection set-up (``SET``) and the pool's liveness checks are not counted.
    """

    server: str
    kind: str = "drop"
    at: int = 1
    persistent: bool = False
    armed: bool = False
    count: int = 0
    fired: int = 0
    log: list[str] = field(default_factory=list)

    def arm(self, kind: str, at: int, persistent: bool) -> None:
        self.kind, self.at, self.persistent = kind, at, persistent
        self.count = self.fired = 0
        self.log.clear()
        self.armed = True

    def disarm(self) -> None:
        self.armed = False

    def due(self, text: str) -> str | None:
        """The fault to inject before sending ``text``, if any."""
        if not self.armed or not text or text.startswith("SET "):
            return None
        if self.kind in ("lost-ack", "lost-answers"):
            if self.fired and self.persistent:
                return "drop"
            if text != "COMMIT":
                return None
        self.count += 1
        if self.count == self.at or (self.persistent and self.count > self.at):
            self.fired += 1
            self.log.append(f"{self.kind}@{self.count}:{text[:40]}")
            return self.kind
        return None


def faulty_connection_class(plan: FaultPlan) -> type[psycopg.Connection[Any]]:
    """A psycopg connection class that injects ``plan``'s faults into real sessions."""

    class FaultyConnection(psycopg.Connection[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            fault = plan.due(query if isinstance(query, str) else "")
            if fault in ("40001", "40P01"):
                super().execute(
                    f"DO $$BEGIN RAISE EXCEPTION 'injected fault' USING ERRCODE = '{fault}'; END$$"
                )
            elif fault == "drop":
                _terminate(plan.server, self.info.backend_pid)
            elif fault == "lost-ack":
                super().execute(query, params, **kwargs)
                if self._pipeline is not None:
                    self._pipeline.sync()
                _terminate(plan.server, self.info.backend_pid)
                self.close()
                raise psycopg.OperationalError("injected: the session dropped after COMMIT")
            elif fault == "lost-answers":
                super().execute(query, params, **kwargs)
                self.pgconn.flush()  # the statements reach the server; no answer is read
                _wait_committed(plan.server, self.info.backend_pid)
                _terminate(plan.server, self.info.backend_pid)
                self.close()
                raise psycopg.OperationalError("injected: the session dropped, answers unread")
            return super().execute(query, params, **kwargs)

    return FaultyConnection


def _wait_committed(server: str, pid: int) -> None:
    """Wait until session ``pid`` has run the COMMIT it was sent.

    A pipeline's session stays ``active`` until its Sync, which never comes, but a
    COMMIT ends its transaction when it runs: the session then holds no transaction id.
    """
    with psycopg.connect(server, autocommit=True) as conn:
        for _ in range(2000):
            row = conn.execute("SELECT backend_xid FROM pg_stat_activity WHERE pid = %s", (pid,))
            found = row.fetchone()
            if found is None or found[0] is None:
                return
            time.sleep(0.005)
    raise AssertionError(f"session {pid} never ran the COMMIT it was sent: {found}")


def _terminate(server: str, pid: int) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(200):
            gone = conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))
            if gone.fetchone() is None:
                return
            time.sleep(0.005)


# -- deliberately broken stores (negative controls) ----------------------------------------


class SequenceStore(PostgresStore):
    """BROKEN ON PURPOSE: sequence numbers from a PostgreSQL SEQUENCE (``nextval``).

    ``nextval`` is never rolled back, so a transaction that aborts after taking a number
    leaves a gap, however well the rest is locked.
    """

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        with self._pool.connection() as conn:
            conn.execute("CREATE SEQUENCE IF NOT EXISTS bb_broken_seq")

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        def work(conn: Any) -> tuple[list[AppendOutcome], str]:
            txn = _SequenceTxn(conn, board_id)
            outcomes = apply_writes(txn, writes, fence)
            txn.finish()
            return outcomes, txn.xid

        outcomes, _ = self._transact("append", work, lambda result: result[1])
        return outcomes


class _SequenceTxn(_PgTxn):
    def head(self) -> int:
        # apply_writes asks for the head once per record it builds: sequence = head + 1.
        row = self.conn.execute("SELECT nextval('bb_broken_seq')").fetchone()
        assert row is not None
        return int(row[0]) - 1


class TwoTransactionStore(PostgresStore):
    """BROKEN ON PURPOSE: keeps the records in one transaction, bumps the counter in a second.

    A fault between the two leaves records the counter does not cover: a partial write.
    """

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        def records(conn: Any) -> tuple[list[AppendOutcome], str, int, int | None]:
            txn = _PgTxn(conn, board_id)
            outcomes = apply_writes(txn, writes, fence)
            txn.flush()  # the records (and derived rows), without the counter
            return outcomes, txn.xid, txn.head(), txn.closed_at()

        outcomes, _, head, closed = self._transact("keep records", records, lambda r: r[1])
        self._transact(
            "bump the counter",
            lambda conn: conn.execute(
                "UPDATE bb_boards SET head = %s, closed_seq = %s WHERE board_id = %s",
                (head, closed, board_id),
            ),
        )
        return outcomes


class UnguardedCasStore(PostgresStore):
    """BROKEN ON PURPOSE: a premise's version is read before the admitting transaction.

    The SELECT-then-UPDATE compare-and-set: two writers read the same version, both
    pass the check, both succeed.
    """

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        names = {w.region for w in writes if w.expected_version is not None and w.region}
        versions = {name: self._version(board_id, name) for name in names}
        time.sleep(0.002)  # the window between the read and the write

        def work(conn: Any) -> tuple[list[AppendOutcome], str]:
            txn = _StaleVersions(conn, board_id, versions)
            outcomes = apply_writes(txn, writes, fence)
            txn.finish()
            return outcomes, txn.xid

        outcomes, _ = self._transact("append", work, lambda result: result[1])
        return outcomes

    def _version(self, board_id: str, name: str) -> int | None:
        record: Record | None = self.read_premise(board_id, name)
        return None if record is None else record.version


class _StaleVersions(_PgTxn):
    def __init__(self, conn: Any, board_id: str, versions: dict[str, int | None]) -> None:
        super().__init__(conn, board_id)
        self._versions = versions

    def premise_version(self, name: str) -> int | None:
        if name in self._versions:
            return self._versions[name]
        return super().premise_version(name)
