"""The PostgreSQL store: one board shared by many processes on many machines.

Every admitting transaction starts by locking the board's row (``SELECT ... FOR UPDATE``,
or for a batch that reads nothing, or only its keys, unique keys and fence, the head's
update itself: ``_pg_plain``, ADRs 0023 and 0024).
The row holds the board's ``head``, the sequence counter: it is read and bumped inside
the transaction that inserts the records, so an aborted transaction gives its numbers
back and the sequence stays gap-free, and because the lock is held until COMMIT, writes
to one board become visible in sequence order. ``docs/adr/0001-gap-free-sequence.md``
gives the argument. Subscribers in other processes wake by LISTEN/NOTIFY: a trigger on
the head's update notifies inside the transaction, so the notification is delivered
only on commit.

Nothing outside this module names psycopg: driver errors become :class:`StoreError`.
"""

from __future__ import annotations

import hashlib
import operator
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.errors import DeadlockDetected, SerializationFailure, UniqueViolation
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout, TooManyRequests

from blackboard._claims import Claim, Fence
from blackboard._json import decode
from blackboard._records import Outcome, Record, RecordKind, RunStatus, new_record
from blackboard.errors import StoreConfigError, StoreError, StoreOutcomeUnknownError
from blackboard.faults import fault_point
from blackboard.stores import _pg_claims, _pg_plain
from blackboard.stores._base import (
    Appended,
    AppendOutcome,
    Closed,
    Duplicate,
    PendingWrite,
    Repeated,
    Store,
    apply_writes,
    new_appended,
)
from blackboard.stores._pg_listen import Listener
from blackboard.stores._pg_schema import MIGRATIONS, SCHEMA_VERSION, dec, enc, migrate

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore"]

T = TypeVar("T")
Conn = psycopg.Connection[Any]

_COLUMNS = "seq, kind, region, writer, payload, version, at, ikey"
_UNBOUNDED = 2**62


@dataclass(frozen=True, slots=True)
class _Target:
    """Where the store connects: libpq conninfo, the schema, and a password-free name."""

    conninfo: str
    schema: str | None
    described: str


class _InDoubtError(Exception):
    """The connection died while COMMIT was in flight: the transaction may have committed."""

    def __init__(self, xid: str, result: object, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.xid = xid
        self.result = result


class PostgresStore(Store):
    """Boards in a PostgreSQL database, shared by any number of processes.

    Args:
        url: ``postgresql://user@host:port/dbname`` (any libpq URL or conninfo). A
            ``schema`` query parameter (``...?schema=name``) keeps the tables in that
            schema; so does ``options=-csearch_path%3Dname`` for an existing schema.
        min_size: Connections the pool keeps open.
        max_size: The most connections the pool opens (one more serves wake-ups once
            :meth:`wait` is used).
        schema: The schema for the tables, created if absent (overrides the URL's).
        retries: How often a transaction that failed for a passing reason (a dropped
            connection, a serialization failure, a deadlock) is tried again before the
            call raises :class:`StoreError`.
        timeout: Seconds to wait for a connection from the pool (and for the first).
        connection_class: The psycopg connection class; tests pass one that injects faults.

    Raises:
        StoreConfigError: The URL or an option is invalid.
        StoreError: The server cannot be reached, or its schema is newer than this code.
    """

    reads_run_state_ahead = False  # every append reads it under the lock: a read ahead only costs

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        schema: str | None = None,
        retries: int = 5,
        timeout: float = 30.0,
        connection_class: type[Conn] | None = None,
    ) -> None:
        _check_options(min_size, max_size, retries, timeout)
        self._target = _target(url, schema)
        self._retries = retries
        self._channel = ""
        self._listener: Listener | None = None
        self._listener_lock = threading.Lock()
        self._ahead = threading.local()  # .spec: what read_ahead read, for the next append
        self._closed = False
        self._pool = self._open_pool(min_size, max_size, timeout, connection_class)
        try:
            self._channel = self._run_migrations()
        except BaseException:
            self._pool.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresStore({self._target.described})"

    # -- connections and transactions ------------------------------------------------

    def _open_pool(
        self, min_size: int, max_size: int, timeout: float, connection_class: type[Conn] | None
    ) -> ConnectionPool[Conn]:
        pool: ConnectionPool[Conn] = ConnectionPool(
            self._target.conninfo,
            connection_class=connection_class or psycopg.Connection,
            kwargs={"autocommit": True},
            min_size=min_size,
            max_size=max_size,
            open=False,
            configure=self._configure,
            timeout=timeout,
            name=f"blackboard:{self._target.described}",
        )
        try:
            pool.open(wait=True, timeout=timeout)
        except psycopg.Error as exc:
            pool.close()
            raise StoreError(
                f"cannot connect to the PostgreSQL store {self._target.described}: {exc}; "
                "check that the server runs and the URL names a database you may use"
            ) from exc
        return pool

    def _configure(self, conn: Conn) -> None:
        # A client that vanishes inside a transaction would hold its board's row lock
        # until the server noticed; this bounds that (our transactions never idle).
        conn.execute("SET idle_in_transaction_session_timeout = '60s'")
        if self._target.schema is not None:
            conn.execute(
                sql.SQL("SET search_path TO {}").format(sql.Identifier(self._target.schema))
            )

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        with self._pool.connection() as conn:
            yield conn

    def _attempt(self, work: Callable[[Conn], T], xid_of: Callable[[T], str] | None) -> T:
        """One transaction: BEGIN, ``work``, COMMIT; a COMMIT cut off raises ``_InDoubtError``.

        The transaction runs in pipeline mode: statements whose results ``work`` does not
        read (the inserts, the counter's update, COMMIT) travel together, so the board's
        row lock is held for one round trip and the commit's flush, not one per statement.
        """
        committing = False
        with self._connection() as conn:
            try:
                with conn.pipeline():
                    conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                    result = work(conn)
                    committing = True
                    conn.execute("COMMIT")
            except psycopg.Error as exc:
                if committing and conn.closed and xid_of is not None:
                    raise _InDoubtError(xid_of(result), result, exc) from exc
                # After an error the server skips the rest of the pipeline, PREPAREs
                # included, which psycopg may already count as done ("prepared statement
                # _pg3_N does not exist" on the next use): start afresh on a new session.
                conn.close()
                raise
            except BaseException:
                _rollback(conn)
                raise
            return result

    def _transact(
        self, what: str, work: Callable[[Conn], T], xid_of: Callable[[T], str] | None = None
    ) -> T:
        """Run ``work`` in a transaction, retried over passing failures, errors translated.

        ``xid_of`` gives the transaction id of a result, to learn after a lost COMMIT
        whether it landed; without it ``work`` must be safe to run again (it checks
        what is already there), and a lost COMMIT is simply retried.
        """
        for attempt in range(self._retries + 1):
            try:
                return self._attempt(work, xid_of)
            except _InDoubtError as doubt:
                status = self._resolve(doubt.xid)
                if status == "committed":
                    result: T = doubt.result  # type: ignore[assignment]
                    return result
                if status != "aborted" or attempt == self._retries:
                    raise self._in_doubt(what, doubt) from doubt.__cause__
            except psycopg.Error as exc:
                if not self._passing(exc, attempt):
                    raise self._error(what, exc) from exc
            self._pause(attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _one_trip(self, what: str, send: Callable[[Conn], Callable[[], T]]) -> T:
        """A transaction whose statements and COMMIT travel in one round trip.

        ``send`` only sends statements (it reads no result inside the transaction, so it
        must be safe to run again: see :meth:`_transact`) and returns a function that reads
        their answers once the transaction has committed.
        """
        answer = self._transact(what, send)
        return answer()

    def _read(self, what: str, work: Callable[[Conn], T]) -> T:
        """Run a read in autocommit, retried over passing failures, errors translated."""
        for attempt in range(self._retries + 1):
            try:
                with self._connection() as conn:
                    return work(conn)
            except psycopg.Error as exc:
                if not self._passing(exc, attempt):
                    raise self._error(what, exc) from exc
            self._pause(attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _passing(self, exc: psycopg.Error, attempt: int) -> bool:
        """Whether ``exc`` may pass if tried again (and this attempt was not the last)."""
        if isinstance(exc, PoolClosed | PoolTimeout | TooManyRequests):
            return False
        if not isinstance(exc, psycopg.OperationalError) or attempt >= self._retries:
            return False
        if not isinstance(exc, SerializationFailure | DeadlockDetected):
            # Connections killed together (a failover, pg_terminate_backend) leave dead
            # ones idle in the pool; test them now rather than fail once per dead one.
            with suppress(psycopg.Error):
                self._pool.check()
        return True

    def _pause(self, attempt: int) -> None:
        time.sleep(min(0.005 * 2**attempt, 0.5) * random.uniform(0.5, 1.0))

    def _resolve(self, xid: str) -> str | None:
        """Ask the server how a transaction whose COMMIT was cut off ended."""
        for attempt in range(self._retries + 1):
            try:
                with self._connection() as conn:
                    row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
                status = None if row is None else row[0]
                if status != "in progress":
                    return None if status is None else str(status)
            except psycopg.Error as exc:
                if not self._passing(exc, attempt):
                    return None
            self._pause(attempt)
        return None

    def _error(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(
            f"PostgreSQL store {self._target.described} failed to {what}: "
            f"{type(exc).__name__}: {exc}"
        )

    def _in_doubt(self, what: str, doubt: _InDoubtError) -> StoreError:
        return StoreOutcomeUnknownError(
            f"PostgreSQL store {self._target.described} lost the connection while committing "
            f"(to {what}) and could not learn whether the commit landed: {doubt}. A write "
            "sent with an idempotency key can be sent again safely; read the board before "
            "repeating one sent without"
        )

    # -- schema --------------------------------------------------------------------

    def _run_migrations(self) -> str:
        """Bring the schema up to date; return the wake-up channel's name."""
        channel: str = self._transact(
            "create or upgrade its schema",
            lambda conn: migrate(conn, self._target.schema, self._target.described),
        )
        return channel

    # -- the store interface -------------------------------------------------------

    def open_board(self, board_id: str, declaration: str, opening: Sequence[PendingWrite]) -> str:
        """Create the board with its opening writes, or return the stored declaration."""
        board = enc(board_id)
        stored = self._read("open a board", lambda conn: _declaration(conn, board))
        if stored is not None:
            return stored

        def work(conn: Conn) -> str:
            created = conn.execute(
                "INSERT INTO bb_boards (board_id, declaration) VALUES (%s, %s)"
                " ON CONFLICT (board_id) DO NOTHING RETURNING board_id",
                (board, declaration),
            ).fetchone()
            if created is None:  # another process created it first; we waited for it
                found = _declaration(conn, board)
                assert found is not None
                return found
            txn = _PgTxn(conn, board_id)
            apply_writes(txn, opening)
            txn.finish()
            return declaration

        result: str = self._transact("open a board", work)
        return result

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        """Judge and keep ``writes`` in one transaction, under the board's row lock.

        The batch is judged first outside the lock, on what the board holds now (a
        :class:`_Plan`); under the lock the same reads are made again, and only if every
        answer is the same is the plan kept, its sequence numbers moved up to the head
        the lock found. Else, or when the fence no longer holds, the batch is judged
        under the lock as always. Either way the outcomes are exactly those of
        ``apply_writes`` under the lock: what it reads are those answers and the head.
        """
        plan = self._plan(board_id, writes)
        if plan is not None:
            kept = self._append_judged(board_id, plan, fence)
            if kept is not None:
                return kept

        def work(conn: Conn) -> tuple[list[AppendOutcome], str]:
            txn = _PgTxn(conn, board_id, writes, fence)
            fenced_out = (
                fence is not None and fence.keys and not txn.holds(fence.holder, fence.keys)
            )
            if plan is not None and not fenced_out and plan.reads == txn.reads():
                outcomes = plan.rebase(txn)
            else:
                outcomes = apply_writes(txn, writes, fence)
            txn.finish()
            fault_point("store.before_commit")
            return outcomes, txn.xid

        outcomes, _ = self._transact("append", work, lambda result: result[1])
        return outcomes

    def _append_judged(
        self, board_id: str, plan: _Plan, fence: Fence | None
    ) -> list[AppendOutcome] | None:
        """Keep a batch the server can judge itself, if it is one (``_pg_plain``).

        None: it is not, or the server's judgement differed from the plan's (the run
        closed, the fence no longer holds, a key was written meanwhile) and nothing was
        written; the caller judges the batch under the lock as always.
        """
        fenced = fence is not None and bool(fence.keys)
        if not fenced:
            rows = plan.plain_rows()
            if rows is not None:
                return self._append_plain(board_id, plan, rows)
        judged = plan.fenced_rows()
        if judged is None:
            return None
        holder, keys = ("", []) if fence is None else (fence.holder, sorted(fence.keys))
        return self._append_fenced(board_id, plan, judged, holder, keys)

    def _append_fenced(
        self,
        board_id: str,
        plan: _Plan,
        judged: tuple[list[tuple[Any, ...]], list[tuple[str, str, int]]],
        holder: str,
        keys: list[str],
    ) -> list[AppendOutcome] | None:
        """Keep a fenced or keyed batch judged ahead in one statement (ADR 0024).

        None: nothing was written, because the run was closed, the fence did not hold or
        a key or unique key was taken meanwhile (a unique index refused the insert).
        """
        rows, uniques = judged
        board, count = enc(board_id), len(rows)
        fenced = [enc(key) for key in keys]
        try:
            rows_json, uniques_json = _pg_plain.rows_json(rows), _pg_plain.rows_json(uniques)
        except (TypeError, ValueError):  # text JSON cannot carry (lone surrogates)
            return None

        def work(conn: Conn) -> _pg_plain.Sent:
            sent = _pg_plain.send_fenced(
                conn, board, count, rows_json, uniques_json, holder, fenced
            )
            fault_point("store.before_commit")
            return sent

        try:
            sent = self._transact("append", work, lambda s: s.xid)
        except StoreError as exc:
            if isinstance(exc.__cause__, UniqueViolation):
                return None
            raise
        return self._kept(board, plan, sent, count)

    def _append_plain(
        self, board_id: str, plan: _Plan, rows: list[tuple[Any, ...]]
    ) -> list[AppendOutcome] | None:
        """Keep a batch that reads nothing with the lock held server-side (``_pg_plain``).

        None: the run was closed (or the board missing) when the lock was taken and
        nothing was written; the caller judges the batch under the lock as always.
        """
        board, count = enc(board_id), len(rows)

        def work(conn: Conn) -> _pg_plain.Sent:
            sent = _pg_plain.send(conn, board, rows)
            fault_point("store.before_commit")
            return sent

        sent = self._transact("append", work, lambda s: s.xid)
        return self._kept(board, plan, sent, count)

    def _kept(
        self, board: str, plan: _Plan, sent: _pg_plain.Sent, count: int
    ) -> list[AppendOutcome] | None:
        """The plan's records as the server numbered them; None: it kept nothing."""
        try:
            base = _pg_plain.base_from_answer(sent, count)
        except psycopg.Error:  # committed (the server said so), but the answer was lost
            base = self._read(
                "read back an append whose answer was lost",
                lambda conn: _pg_plain.base_from_board(conn, board, sent, count),
            )
        if base is None:
            return None
        base -= plan.spec.start  # the plan numbered its records from the head it read
        return [
            new_appended(new_record(r.sequence + base, r.kind, r.region, r.writer, r.content,
                                    r.version, sent.at, r.idempotency_key))
            for r in plan.records()
        ]  # fmt: skip

    def _plan(self, board_id: str, writes: Sequence[PendingWrite]) -> _Plan | None:
        """Judge ``writes`` ahead, outside the lock, so the lock is held for less.

        A board's state that admission reads (its closed mark, grants, premise versions,
        unique keys, idempotency keys) changes only with its head, in transactions that
        hold its lock, so whatever this judges on is checked again under the lock. A
        batch that reads nothing but the closed mark (keyless, unguarded level writes)
        is judged on an empty open board and costs no round trip here.
        """
        spec = self._read_already(board_id, writes)
        if spec is not None:
            pass
        elif any(_reads(write) for write in writes):
            spec = self._read(
                "read ahead for an append", lambda c: _plan_reads(c, board_id, writes)
            )
        else:
            spec = _PgTxn.unread(board_id)
        reads = spec.reads()
        try:
            outcomes = apply_writes(spec, writes)
        except Exception:  # a reused key, an unplanned read: judge it under the lock
            return None
        return _Plan(spec, reads, outcomes)

    def _read_already(self, board_id: str, writes: Sequence[PendingWrite]) -> _PgTxn | None:
        """The reads :meth:`read_ahead` made for exactly these writes, if it was just asked.

        Taken once: a second append of the same writes reads afresh.
        """
        kept: tuple[str, list[PendingWrite], _PgTxn] | None = getattr(self._ahead, "spec", None)
        self._ahead.spec = None
        if kept is None:
            return None
        board, read_for, spec = kept
        if board != board_id or len(read_for) != len(writes):
            return None
        if not all(map(operator.is_, read_for, writes)):
            return None
        return spec

    def find_key(self, board_id: str, key: str) -> tuple[Record, str] | None:
        """The record written under ``key``, with its fingerprint."""
        return self._read("find an idempotency key", lambda conn: _find_key(conn, board_id, key))

    def find_keys(self, board_id: str, keys: Sequence[str]) -> dict[str, tuple[Record, str]]:
        """Every key of ``keys`` already written, with its record and fingerprint (one query)."""
        if not keys:
            return {}
        rows = self._read(
            "find idempotency keys",
            lambda conn: conn.execute(
                _FIND_KEYS, ([enc(key) for key in dict.fromkeys(keys)], enc(board_id))
            ).fetchall(),
        )
        found = [(_record(row[:-1]), str(row[-1])) for row in rows]
        return {record.idempotency_key: (record, print_) for record, print_ in found
                if record.idempotency_key is not None}  # fmt: skip

    def read_ahead(
        self, board_id: str, writes: Sequence[PendingWrite]
    ) -> tuple[dict[str, tuple[Record, str]], Outcome]:
        """The writes' keys already written and the run's state, in one round trip.

        A batch that admission reads for (keys, premises, unique keys, grants) is read
        as :meth:`_plan` reads it, and the reads are kept (for this thread) to judge the
        :meth:`append` of the very same writes that follows: one read ahead, not two.
        What they say is checked again under the lock, as any plan's reads are.
        """
        self._ahead.spec = None
        if not any(_reads(write) for write in writes):
            return {}, self.outcome(board_id)
        try:
            spec = self._read("read ahead of a batch", lambda c: _plan_reads(c, board_id, writes))
        except _NoBoardError:  # as the two reads answer it; the append then raises
            return super().read_ahead(board_id, writes)
        found = {key: hit for key, hit in spec.found.items() if hit is not None}
        outcome = _OPEN if spec.closed_at() is None else self.outcome(board_id)
        self._ahead.spec = (board_id, list(writes), spec)
        return found, outcome

    def head(self, board_id: str) -> int:
        """The board's highest sequence number."""
        return self._read("read the head", lambda conn: _head(conn, board_id))

    def read_log(self, board_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        """Records after ``after`` up to ``until``."""
        bound = _UNBOUNDED if until is None else until
        return self._read(
            "read the log",
            lambda conn: _records(
                conn,
                f"SELECT {_COLUMNS} FROM bb_records WHERE board_id = %s AND seq > %s"
                " AND seq <= %s ORDER BY seq",
                (enc(board_id), after, bound),
            ),
        )

    def read_region(self, board_id: str, region: str) -> list[Record]:
        """Every record of a level, in order."""
        return self._read(
            "read a level",
            lambda conn: _records(
                conn,
                f"SELECT {_COLUMNS} FROM bb_records WHERE board_id = %s AND region = %s"
                " AND kind = 'level' ORDER BY seq",
                (enc(board_id), enc(region)),
            ),
        )

    def read_premise(self, board_id: str, name: str) -> Record | None:
        """The record holding the premise's current value."""
        records = self._read(
            "read a premise",
            lambda conn: _records(
                conn,
                f"SELECT {_COLUMNS} FROM bb_records WHERE board_id = %s AND seq ="
                " (SELECT seq FROM bb_premises WHERE board_id = %s AND name = %s)",
                (enc(board_id), enc(board_id), enc(name)),
            ),
        )
        return records[0] if records else None

    def outcome(self, board_id: str) -> Outcome:
        """How the run stands."""
        return self._read("read the run's outcome", lambda conn: _outcome(conn, board_id))

    def permissions(self, board_id: str) -> frozenset[tuple[str, str]]:
        """The current grants."""
        rows = self._read(
            "read permissions",
            lambda conn: conn.execute(
                "SELECT agent, region FROM bb_grants WHERE board_id = %s", (enc(board_id),)
            ).fetchall(),
        )
        return frozenset((dec(a), dec(r)) for a, r in rows)

    def permitted(self, board_id: str, agent: str, region: str) -> bool:
        """Whether ``agent`` holds a grant for ``region`` now."""
        return self._read(
            "read a permission", lambda conn: _permitted(conn, enc(board_id), agent, region)
        )

    # -- leased claims (the SQL is in _pg_claims) --------------------------------------

    def claim(
        self, board_id: str, holder: str, keys: Sequence[str], limit: int, lease: timedelta
    ) -> list[Claim]:
        """Take up to ``limit`` of ``keys``: ``SELECT ... FOR UPDATE SKIP LOCKED``, then set."""
        return self.release_and_claim(board_id, holder, (), keys, limit, lease)[1]

    def release_and_claim(
        self,
        board_id: str,
        holder: str,
        released: Sequence[str],
        keys: Sequence[str],
        limit: int,
        lease: timedelta,
    ) -> tuple[int, list[Claim]]:
        """Release ``released`` and claim up to ``limit`` of ``keys``: one transaction, one trip.

        The release comes first in the transaction, so a key given up is free for the
        claim (this holder's, or another claimer's once it commits).
        """
        freed = [enc(key) for key in dict.fromkeys(released)]
        wanted = [enc(key) for key in dict.fromkeys(keys)] if limit > 0 else []
        if not wanted:
            return (self.release(board_id, holder, released) if freed else 0), []
        board = enc(board_id)

        def send(conn: Conn) -> _pg_claims.Answer[tuple[int, list[Claim]]]:
            count = _pg_claims.send_release(conn, board, holder, freed) if freed else None
            exists = conn.execute("SELECT 1 FROM bb_boards WHERE board_id = %s", (board,))
            taken = _pg_claims.send_take(conn, board, holder, wanted, limit, lease)

            def answer() -> tuple[int, list[Claim]]:
                if exists.fetchone() is None:
                    raise StoreError(f"no board {board_id!r} in this store; open it first")
                return (0 if count is None else count()), taken()

            return answer

        what = "release and claim keys" if freed else "claim keys"
        return self._one_trip(what, send)

    def renew(
        self, board_id: str, holder: str, keys: Sequence[str], lease: timedelta
    ) -> list[Claim]:
        """Extend ``holder``'s claims on ``keys``."""
        wanted = [enc(key) for key in dict.fromkeys(keys)]
        board = enc(board_id)
        send = lambda conn: _pg_claims.send_renew(conn, board, holder, wanted, lease)  # noqa: E731
        return self._one_trip("renew claims", send) if wanted else []

    def release(self, board_id: str, holder: str, keys: Sequence[str]) -> int:
        """Give up ``holder``'s claims on ``keys``."""
        wanted = [enc(key) for key in dict.fromkeys(keys)]
        board = enc(board_id)
        send = lambda conn: _pg_claims.send_release(conn, board, holder, wanted)  # noqa: E731
        return self._one_trip("release claims", send) if wanted else 0

    def claims(self, board_id: str) -> list[Claim]:
        """Every key held now."""
        return self._read("read claims", lambda conn: _pg_claims.held(conn, enc(board_id)))

    def wait(self, board_id: str, after: int, timeout: float) -> bool:
        """Block until the head passes ``after``: woken by NOTIFY, not by polling."""
        return self._wake_ups().wait(board_id, after, timeout, lambda: self.head(board_id))

    def close(self) -> None:
        """Stop the wake-up listener and close every pooled connection."""
        with self._listener_lock:
            listener, self._listener = self._listener, None
            self._closed = True
        if listener is not None:
            listener.stop()
        self._pool.close()

    @property
    def in_transaction(self) -> bool:
        """Whether any connection is out of the pool (tests check that none leak)."""
        stats = self._pool.get_stats()
        return bool(stats.get("pool_size", 0) != stats.get("pool_available", 0))

    def _wake_ups(self) -> Listener:
        with self._listener_lock:
            if self._closed:
                raise StoreError(f"PostgreSQL store {self._target.described} is closed")
            if self._listener is None:
                self._listener = Listener(self._target.conninfo, self._channel)
            return self._listener


# -- helpers over one connection -------------------------------------------------------


def _scalar(conn: Conn, query: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def _rollback(conn: Conn) -> None:
    """End whatever is open, so the pool gets back a clean connection or a closed one."""
    if conn.closed:
        return
    status = conn.info.transaction_status
    if status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            conn.close()
    elif status != TransactionStatus.IDLE:
        conn.close()  # cut off mid-statement (an aborted pipeline): the pool replaces it


def _declaration(conn: Conn, board: str) -> str | None:
    found = _scalar(conn, "SELECT declaration FROM bb_boards WHERE board_id = %s", (board,))
    return None if found is None else str(found)


def _head(conn: Conn, board_id: str) -> int:
    head = _scalar(conn, "SELECT head FROM bb_boards WHERE board_id = %s", (enc(board_id),))
    if head is None:
        raise StoreError(f"no board {board_id!r} in this store; open it first")
    return int(head)


def _permitted(conn: Conn, board: str, agent: str, region: str) -> bool:
    return (
        _scalar(
            conn,
            "SELECT 1 FROM bb_grants WHERE board_id = %s AND agent = %s AND region = %s",
            (board, enc(agent), enc(region)),
        )
        is not None
    )


def _find_key(conn: Conn, board_id: str, key: str) -> tuple[Record, str] | None:
    row = conn.execute(
        f"SELECT {_COLUMNS}, fingerprint FROM bb_records WHERE board_id = %s AND ikey = %s",
        (enc(board_id), enc(key)),
    ).fetchone()
    return None if row is None else (_record(row[:-1]), str(row[-1]))


_OPEN = Outcome(RunStatus.OPEN)

_OUTCOME = (
    "SELECT r.payload, r.seq FROM bb_boards b JOIN bb_records r"
    " ON r.board_id = b.board_id AND r.seq = b.closed_seq WHERE b.board_id = %s"
)


def _outcome(conn: Conn, board_id: str) -> Outcome:
    return _outcome_of(conn.execute(_OUTCOME, (enc(board_id),)).fetchone())


def _outcome_of(row: Sequence[Any] | None) -> Outcome:
    if row is None:
        return Outcome(RunStatus.OPEN)
    content = decode(row[0])
    return Outcome(RunStatus(content["status"]), content["reason"], int(row[1]))


def _records(conn: Conn, query: str, params: tuple[Any, ...]) -> list[Record]:
    return [_record(row) for row in conn.execute(query, params).fetchall()]


# RecordKind(value) goes through Enum.__new__ (about 3 us, the dearest step of reading a
# record back); a dict look-up is what it finds. An unknown value still raises as before.
_KINDS = {kind.value: kind for kind in RecordKind}


def _record(row: Sequence[Any]) -> Record:
    seq, kind, region, writer, payload, version, at, ikey = row
    return new_record(
        int(seq),
        _KINDS.get(kind) or RecordKind(kind),
        None if region is None else dec(region),
        dec(writer),
        decode(payload),
        None if version is None else int(version),
        at.astimezone(UTC),
        None if ikey is None else dec(ikey),
    )


# One statement per table for a whole batch: the rows travel as arrays, one per column,
# so a batch of 1,000 records costs the server one INSERT, not 1,000 (and psycopg one call).
# Arrays go in binary (%b): text arrays would quote and escape every JSON payload.
_INSERT_RECORDS = (
    "INSERT INTO bb_records (board_id, seq, kind, region, writer, payload, version, at, ikey,"
    " fingerprint) SELECT %s, * FROM unnest(%b::bigint[], %b::text[], %b::text[], %b::text[],"
    " %b::text[], %b::bigint[], %b::timestamptz[], %b::text[], %b::text[])"
)
_INSERT_UNIQUES = (
    "INSERT INTO bb_uniques (board_id, region, ukey_sha256, seq)"
    " SELECT %s, * FROM unnest(%b::text[], %b::text[], %b::bigint[])"
)
_UPSERT_PREMISES = (
    "INSERT INTO bb_premises (board_id, name, seq, version)"
    " SELECT %s, * FROM unnest(%b::text[], %b::bigint[], %b::bigint[])"
    " ON CONFLICT (board_id, name) DO UPDATE SET seq = excluded.seq, version = excluded.version"
)
_INSERT_GRANTS = (
    "INSERT INTO bb_grants (board_id, agent, region)"
    " SELECT %s, * FROM unnest(%b::text[], %b::text[]) ON CONFLICT DO NOTHING"
)
_DELETE_GRANTS = (
    "DELETE FROM bb_grants WHERE board_id = %s"
    " AND (agent, region) IN (SELECT * FROM unnest(%b::text[], %b::text[]))"
)

# The reads a batch needs, for all its writes at once (sent behind the board's lock).
# A look-up of many keys is a LATERAL probe per key: with `= ANY(...)` or a plain join
# the planner, which knows nothing of how many rows one board has (autovacuum may never
# have analysed the table), reads every keyed record of the board and filters them.
_FIND_KEYS = (
    "SELECT r.* FROM unnest(%b::text[]) AS k (ikey) CROSS JOIN LATERAL"
    f" (SELECT {_COLUMNS}, fingerprint FROM bb_records"
    "  WHERE board_id = %s AND ikey = k.ikey LIMIT 1) AS r"
)
_FIND_VERSIONS = "SELECT name, version FROM bb_premises WHERE board_id = %s AND name = ANY(%b)"
_FIND_UNIQUES = (
    "SELECT w.region, w.ukey_sha256, u.seq FROM unnest(%b::text[], %b::text[])"
    " AS w (region, ukey_sha256) CROSS JOIN LATERAL (SELECT seq FROM bb_uniques"
    "  WHERE board_id = %s AND region = w.region AND ukey_sha256 = w.ukey_sha256 LIMIT 1) AS u"
)
_FIND_GRANTS = "SELECT agent, region FROM bb_grants WHERE board_id = %s AND agent = ANY(%b)"

_Read = Callable[[], None]


class _NoBoardError(StoreError):
    """The board a transaction was opened on does not exist (a StoreError to callers)."""


class _UnplannedReadError(Exception):
    """A transaction judging ahead (no lock) met a read it had not made: judge under the lock."""


def _reads(write: PendingWrite) -> bool:
    """Whether admitting ``write`` reads the board beyond its head and closed mark."""
    return (
        write.idempotency_key is not None
        or write.kind is RecordKind.PREMISE
        or write.unique_key is not None
        or write.check_permission
    )


def _plan_reads(conn: Conn, board_id: str, writes: Sequence[PendingWrite]) -> _PgTxn:
    """The reads a batch needs, made together (one round trip) without the lock."""
    try:
        with conn.pipeline():
            return _PgTxn(conn, board_id, writes, lock=False)
    except psycopg.Error:
        conn.close()  # an aborted pipeline leaves psycopg's prepared statements unsure
        raise


@dataclass(frozen=True, slots=True)
class _Plan:
    """A batch judged ahead of the lock: the reads it was judged on, and what it found."""

    spec: _PgTxn
    reads: tuple[Any, ...]
    outcomes: list[AppendOutcome]

    def plain_rows(self) -> list[tuple[Any, ...]] | None:
        """The rows, if the batch reads nothing and keeps only appended level records.

        Such a batch is admitted exactly when the run is open: ``_pg_plain`` keeps it.
        """
        if not self.spec.read_nothing or not all(type(o) is Appended for o in self.outcomes):
            return None
        return self.spec.plain_rows()

    def fenced_rows(self) -> tuple[list[tuple[Any, ...]], list[tuple[str, str, int]]] | None:
        """The rows and unique keys, numbered from 1, if the server can judge the batch.

        That is: the plan appended every write and read nothing but idempotency keys and
        unique keys (none found, or a write would have been repeated or refused as a
        duplicate) and the closed mark, so the server's checks (the run open, the fence
        held, every key and unique key new: the unique indexes) are the whole
        judgement. None otherwise.
        """
        if not all(type(o) is Appended for o in self.outcomes):
            return None
        return self.spec.keyed_rows()

    def records(self) -> list[Record]:
        """The records the plan appended, numbered from the empty board it was judged on."""
        return [o.record for o in self.outcomes if isinstance(o, Appended)]

    def rebase(self, txn: _PgTxn) -> list[AppendOutcome]:
        """Move the plan onto ``txn``, whose reads equal the plan's: new sequence numbers.

        Sequence numbers above the plan's head are the batch's own; they move up by
        how far the head moved. The records are stamped with the time of the lock.
        """
        spec = self.spec
        base = spec.start
        delta = txn.head() - base
        at = datetime.fromtimestamp(time.time(), UTC)
        moved: dict[int, Record] = {}
        for outcome in self.outcomes:
            if isinstance(outcome, Appended):
                r = outcome.record
                moved[r.sequence] = new_record(
                    r.sequence + delta, r.kind, r.region, r.writer, r.content, r.version, at,
                    r.idempotency_key,
                )  # fmt: skip

        def seq(number: int) -> int:
            return number + delta if number > base else number

        outcomes: list[AppendOutcome] = []
        for outcome in self.outcomes:
            if isinstance(outcome, Appended):
                outcome = new_appended(moved[outcome.record.sequence])
            elif isinstance(outcome, Repeated) and outcome.record.sequence > base:
                outcome = Repeated(moved[outcome.record.sequence])
            elif isinstance(outcome, Duplicate):
                outcome = Duplicate(seq(outcome.sequence))
            elif isinstance(outcome, Closed):
                outcome = Closed(seq(outcome.sequence))
            outcomes.append(outcome)
        txn.take_rows(spec, delta, at)
        return outcomes


class _PgTxn:
    """The transaction primitives over one transaction holding the board's row lock.

    Round trips, not statements, are what a batch costs while it holds the lock: so the
    reads the batch's writes will need (idempotency keys, premise versions, unique keys,
    grants, the fence) are sent in the same round trip as the lock, and the rows it keeps
    are sent in one statement per table when it finishes, together with COMMIT.

    What this transaction has read stays true until it ends: every change to a board's
    records and derived rows holds the board's lock, and the fence's claim rows are
    share-locked. What it has written is kept here until :meth:`flush`; each read answers
    from those writes first, so it answers exactly as if every insert had gone straight to
    the tables.
    """

    keyless_fingerprints = False  # a fingerprint is only compared under a key; NULL otherwise

    def __init__(
        self,
        conn: Conn | None,
        board_id: str,
        writes: Sequence[PendingWrite] = (),
        fence: Fence | None = None,
        *,
        lock: bool = True,
    ) -> None:
        self.board_id = board_id
        self.board = enc(board_id)
        self._planning = not lock  # judging ahead: every read must have been made here
        self._found: dict[str, tuple[Record, str] | None] = {}
        self._versions: dict[str, int | None] = {}
        self._uniques: dict[tuple[str, str], int | None] = {}
        self._grants: dict[tuple[str, str], bool] = {}
        self._granted_agents: set[str] = set()
        self._fence: tuple[str, frozenset[str], bool] | None = None
        self._records: list[tuple[Any, ...]] = []
        self._new_uniques: list[tuple[str, str, int]] = []
        self._new_premises: dict[str, tuple[int, int | None]] = {}
        self._new_grants: dict[tuple[str, str], bool] = {}
        self.start = self._head = 0
        self._closed: int | None = None
        self.xid = ""
        self.read_nothing = conn is None
        if conn is None:  # judging ahead a batch that reads nothing: an empty open board
            return
        self.conn = conn
        locked = conn.execute(
            "SELECT head, closed_seq, pg_current_xact_id()::text FROM bb_boards"
            " WHERE board_id = %s FOR UPDATE"
            if lock
            else "SELECT head, closed_seq, '' FROM bb_boards WHERE board_id = %s",
            (self.board,),
        )
        reads = self._send_reads(writes, fence)
        row = locked.fetchone()
        if row is None:
            raise _NoBoardError(f"no board {board_id!r} in this store; open it first")
        self.start = self._head = int(row[0])
        self._closed = None if row[1] is None else int(row[1])
        self.xid = str(row[2])
        for read in reads:
            read()

    @classmethod
    def unread(cls, board_id: str) -> _PgTxn:
        """A transaction judging ahead, on an empty open board, without reading anything."""
        return cls(None, board_id, lock=False)

    @property
    def found(self) -> Mapping[str, tuple[Record, str] | None]:
        """The idempotency keys read: each with its record and fingerprint, or None."""
        return self._found

    def reads(self) -> tuple[Any, ...]:
        """Everything admission could learn from this transaction's reads (not the head)."""
        return (
            self._closed,
            dict(self._found),
            dict(self._versions),
            dict(self._uniques),
            dict(self._grants),
            frozenset(self._granted_agents),
        )

    def plain_rows(self) -> list[tuple[Any, ...]] | None:
        """``(seq, kind, region, writer, payload, version)`` per record kept, if that is all.

        None when the batch keeps anything else: unique keys, premises, grants, a close,
        or a keyed record.
        """
        if self._new_uniques or self._new_premises or self._new_grants or self._closed:
            return None
        if not self._records or any(row[7] is not None for row in self._records):
            return None
        return [row[:6] for row in self._records]

    def keyed_rows(self) -> tuple[list[tuple[Any, ...]], list[tuple[str, str, int]]] | None:
        """The rows and unique keys kept, numbered from 1, if nothing else was read or kept.

        Rows are ``(seq, kind, region, writer, payload, version, ikey, fingerprint)``,
        unique keys ``(region, digest, seq)``. None when the batch read a premise's
        version or a grant (those are judged under the lock), or keeps a premise, a
        grant or a close.
        """
        if self._versions or self._grants or self._granted_agents:
            return None
        if self._new_premises or self._new_grants or self._closed:
            return None
        if not self._records:
            return None
        start = self.start
        rows = [(row[0] - start, *row[1:6], *row[7:9]) for row in self._records]
        return rows, [(region, digest, seq - start) for region, digest, seq in self._new_uniques]

    def take_rows(self, plan: _PgTxn, delta: int, at: datetime) -> None:
        """Keep the rows ``plan`` kept, their sequence numbers moved up by ``delta``."""
        base = plan.start
        self._records = [(s + delta, *rest[:5], at, *rest[6:]) for s, *rest in plan._records]
        self._new_uniques = [(r, d, s + delta) for r, d, s in plan._new_uniques]
        self._new_premises = {n: (s + delta, v) for n, (s, v) in plan._new_premises.items()}
        self._new_grants = dict(plan._new_grants)
        self._head = plan._head + delta
        if plan._closed is not None and plan._closed > base:
            self._closed = plan._closed + delta

    def _unplanned(self) -> None:
        if self._planning:
            raise _UnplannedReadError

    # -- reads, for a whole batch at once ---------------------------------------------

    def _send_reads(self, writes: Sequence[PendingWrite], fence: Fence | None) -> list[_Read]:
        """Send the batch's reads (run once the lock is held); return their collectors."""
        reads: list[_Read] = []
        if fence is not None and fence.keys:
            reads.append(self._send_fence(fence.holder, fence.keys))
        keys = [w.idempotency_key for w in writes if w.idempotency_key is not None]
        if keys:
            reads.append(self._send_keys(keys))
        names = {w.region for w in writes if w.kind is RecordKind.PREMISE and w.region is not None}
        if names:
            reads.append(self._send_versions(names))
        uniques = {
            (w.region, _ukey(w.unique_key))
            for w in writes
            if w.unique_key is not None and w.region is not None
        }
        if uniques:
            reads.append(self._send_uniques(uniques))
        agents = {w.writer for w in writes if w.check_permission}
        if agents:
            reads.append(self._send_grants(agents))
        return reads

    def _send_fence(self, holder: str, keys: frozenset[str]) -> _Read:
        held = _pg_claims.send_holds(self.conn, self.board, holder, [enc(key) for key in keys])

        def read() -> None:
            self._fence = (holder, keys, held())

        return read

    def _send_keys(self, keys: Sequence[str]) -> _Read:
        unique = list(dict.fromkeys(keys))
        cur = self.conn.execute(_FIND_KEYS, ([enc(key) for key in unique], self.board))

        def read() -> None:
            self._found.update(dict.fromkeys(unique))
            for row in cur.fetchall():
                record = _record(row[:-1])
                assert record.idempotency_key is not None
                self._found[record.idempotency_key] = (record, str(row[-1]))

        return read

    def _send_versions(self, names: set[str]) -> _Read:
        cur = self.conn.execute(_FIND_VERSIONS, (self.board, [enc(name) for name in names]))

        def read() -> None:
            self._versions.update(dict.fromkeys(names))
            self._versions.update((dec(name), int(version)) for name, version in cur.fetchall())

        return read

    def _send_uniques(self, uniques: set[tuple[str, str]]) -> _Read:
        regions = [enc(region) for region, _ in uniques]
        cur = self.conn.execute(_FIND_UNIQUES, (regions, [d for _, d in uniques], self.board))

        def read() -> None:
            self._uniques.update(dict.fromkeys(uniques))
            self._uniques.update(((dec(r), d), int(seq)) for r, d, seq in cur.fetchall())

        return read

    def _send_grants(self, agents: set[str]) -> _Read:
        cur = self.conn.execute(_FIND_GRANTS, (self.board, [enc(agent) for agent in agents]))

        def read() -> None:
            self._granted_agents.update(agents)
            self._grants.update(((dec(a), dec(r)), True) for a, r in cur.fetchall())

        return read

    # -- the Transaction protocol ---------------------------------------------------

    def head(self) -> int:
        return self._head

    def closed_at(self) -> int | None:
        return self._closed

    def permitted(self, agent: str, region: str) -> bool:
        known = self._grants.get((agent, region))
        if known is not None:
            return known
        if agent in self._granted_agents:  # every grant of this agent was read
            return False
        self._unplanned()
        granted = _permitted(self.conn, self.board, agent, region)
        self._grants[agent, region] = granted
        return granted

    def premise_version(self, name: str) -> int | None:
        if name in self._versions:
            return self._versions[name]
        self._unplanned()
        version = _scalar(
            self.conn,
            "SELECT version FROM bb_premises WHERE board_id = %s AND name = %s",
            (self.board, enc(name)),
        )
        self._versions[name] = None if version is None else int(version)
        return self._versions[name]

    def unique_holder(self, region: str, key: str) -> int | None:
        pair = (region, _ukey(key))
        if pair in self._uniques:
            return self._uniques[pair]
        self._unplanned()
        seq = _scalar(
            self.conn,
            "SELECT seq FROM bb_uniques WHERE board_id = %s AND region = %s AND ukey_sha256 = %s",
            (self.board, enc(region), pair[1]),
        )
        self._uniques[pair] = None if seq is None else int(seq)
        return self._uniques[pair]

    def holds(self, holder: str, keys: frozenset[str]) -> bool:
        fence = self._fence
        if fence is not None and fence[0] == holder and fence[1] == keys:
            return fence[2]
        self._unplanned()
        return _pg_claims.holds(self.conn, self.board, holder, [enc(key) for key in keys])

    def prefetch_keys(self, keys: Sequence[str]) -> None:
        """Look up in one query the keys not already read with the lock."""
        missing = [key for key in keys if key not in self._found]
        if missing:
            self._unplanned()
            self._send_keys(missing)()

    def find_key(self, key: str) -> tuple[Record, str] | None:
        if key in self._found:
            return self._found[key]
        self._unplanned()
        found = _find_key(self.conn, self.board_id, key)
        self._found[key] = found
        return found

    def insert(self, record: Record, write: PendingWrite, fingerprint: str) -> None:
        key = record.idempotency_key
        self._records.append(
            (
                record.sequence,
                record.kind._value_,
                None if record.region is None else enc(record.region),
                enc(record.writer),
                write.payload,
                record.version,
                record.at,
                None if key is None else enc(key),
                fingerprint if key is not None else None,
            )
        )
        if key is not None:
            self._found[key] = (record, fingerprint)
        self._derive(record, write)
        self._head = record.sequence

    def _derive(self, record: Record, write: PendingWrite) -> None:
        kind, region = record.kind, record.region
        if kind is RecordKind.LEVEL:
            if write.unique_key is not None and region is not None:
                digest = _ukey(write.unique_key)
                self._uniques[region, digest] = record.sequence
                self._new_uniques.append((enc(region), digest, record.sequence))
        elif kind is RecordKind.PREMISE and region is not None:
            self._versions[region] = record.version
            self._new_premises[enc(region)] = (record.sequence, record.version)
        elif kind in (RecordKind.GRANT, RecordKind.REVOKE) and region is not None:
            agent = record.content["agent"]
            granted = kind is RecordKind.GRANT
            self._grants[agent, region] = granted
            self._new_grants[enc(agent), enc(region)] = granted
        elif kind is RecordKind.CLOSE:
            self._closed = record.sequence

    # -- writing what was kept ------------------------------------------------------

    def flush(self) -> None:
        """Send the kept rows: one statement per table (results unread: they pipeline)."""
        conn, board = self.conn, self.board
        if self._records:
            conn.execute(_INSERT_RECORDS, (board, *map(list, zip(*self._records, strict=True))))
            self._records = []
        if self._new_uniques:
            conn.execute(_INSERT_UNIQUES, (board, *map(list, zip(*self._new_uniques, strict=True))))
            self._new_uniques = []
        if self._new_premises:
            names = list(self._new_premises)
            seqs = [self._new_premises[name][0] for name in names]
            versions = [self._new_premises[name][1] for name in names]
            conn.execute(_UPSERT_PREMISES, (board, names, seqs, versions))
            self._new_premises = {}
        if self._new_grants:
            for granted, statement in ((True, _INSERT_GRANTS), (False, _DELETE_GRANTS)):
                pairs = [pair for pair, kept in self._new_grants.items() if kept is granted]
                if pairs:
                    conn.execute(statement, (board, [a for a, _ in pairs], [r for _, r in pairs]))
            self._new_grants = {}

    def finish(self) -> None:
        """Send the kept rows, then bump the counter once; its trigger wakes on commit."""
        self.flush()
        if self._head != self.start:
            self.conn.execute(
                "UPDATE bb_boards SET head = %s, closed_seq = %s WHERE board_id = %s",
                (self._head, self._closed, self.board),
            )


def _ukey(key: str) -> str:
    # A unique key can be as long as the content; btree entries cannot. Its digest can.
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


# -- configuration -------------------------------------------------------------------


def _check_options(min_size: int, max_size: int, retries: int, timeout: float) -> None:
    if not 0 <= min_size <= max_size or max_size < 1:
        raise StoreConfigError(
            f"min_size={min_size!r}, max_size={max_size!r}: the pool needs "
            "0 <= min_size <= max_size and max_size >= 1"
        )
    if retries < 0:
        raise StoreConfigError(f"retries={retries!r} must be 0 or more")
    if timeout <= 0:
        raise StoreConfigError(f"timeout={timeout!r} must be a positive number of seconds")


def _target(url: str, schema: str | None) -> _Target:
    """Split the ``schema`` option off the URL and describe the target without its password."""
    if not isinstance(url, str):
        raise StoreConfigError(f"url={url!r} must be a 'postgresql://...' string")
    conninfo, url_schema = _split_schema(url)
    chosen = schema if schema is not None else url_schema
    if chosen is not None:
        _check_schema(chosen)
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        raise StoreConfigError(f"cannot read the PostgreSQL URL: {exc}") from exc
    params.setdefault("application_name", "blackboard")
    params.setdefault("connect_timeout", 10)
    described = "{}@{}:{}/{}".format(
        params.get("user", ""),
        params.get("host", ""),
        params.get("port", 5432),
        params.get("dbname", ""),
    )
    if chosen is not None:
        described += f"?schema={chosen}"
    return _Target(make_conninfo("", **params), chosen, described)


def _split_schema(url: str) -> tuple[str, str | None]:
    if "://" not in url:
        return url, None
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    kept = [(key, value) for key, value in query if key != "schema"]
    rebuilt = urlunsplit(parts._replace(query=urlencode(kept)))
    return rebuilt, schemas[-1] if schemas else None


def _check_schema(schema: object) -> None:
    if (
        not isinstance(schema, str)
        or not schema
        or "\x00" in schema
        or len(schema.encode()) > 63
        or schema.startswith("pg_")
    ):
        raise StoreConfigError(
            f"schema={schema!r} is not a usable PostgreSQL schema name; use 1 to 63 bytes, "
            "no NUL, not starting with 'pg_'"
        )
