"""The SQLite store: the embedded default. One file, WAL, durable at every ``Written``.

Several processes may write one file: each admitting transaction starts with
``BEGIN IMMEDIATE``, which takes SQLite's single write lock before reading the head,
so the sequence counter is read and bumped by one writer at a time and stays gap-free.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from blackboard._claims import Claim, Fence
from blackboard._json import decode
from blackboard._records import Outcome, Record, RecordKind, RunStatus
from blackboard.errors import StoreConfigError, StoreError
from blackboard.faults import fault_point
from blackboard.stores import _leases
from blackboard.stores._base import (
    AppendOutcome,
    PendingWrite,
    Store,
    apply_writes,
    stored_fingerprint,
)

__all__ = ["SQLiteStore"]

# Version 3 changes no table: a keyed row's fingerprint may be NULL, derived from the row
# when its key comes again (ADR 0027). A store of version 2 would compare the NULL and
# raise on a true repeat, so the version goes up for it to refuse the file instead.
SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS bb_boards (
    board_id TEXT PRIMARY KEY,
    declaration TEXT NOT NULL,
    head INTEGER NOT NULL DEFAULT 0,
    closed_seq INTEGER
);
CREATE TABLE IF NOT EXISTS bb_records (
    board_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    region TEXT,
    writer TEXT NOT NULL,
    payload TEXT NOT NULL,
    version INTEGER,
    at REAL NOT NULL,
    ikey TEXT,
    fingerprint TEXT,
    PRIMARY KEY (board_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS bb_records_region ON bb_records (board_id, region, seq);
CREATE UNIQUE INDEX IF NOT EXISTS bb_records_ikey ON bb_records (board_id, ikey)
    WHERE ikey IS NOT NULL;
CREATE TABLE IF NOT EXISTS bb_premises (
    board_id TEXT NOT NULL,
    name TEXT NOT NULL,
    seq INTEGER NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (board_id, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bb_uniques (
    board_id TEXT NOT NULL,
    region TEXT NOT NULL,
    ukey TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (board_id, region, ukey)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bb_grants (
    board_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    region TEXT NOT NULL,
    PRIMARY KEY (board_id, agent, region)
) WITHOUT ROWID;
"""

# Version 2: leased claims. A holder of NULL is a released claim; its token is kept.
_CLAIMS = """
CREATE TABLE IF NOT EXISTS bb_claims (
    board_id TEXT NOT NULL,
    key TEXT NOT NULL,
    holder TEXT,
    expires REAL NOT NULL,
    token INTEGER NOT NULL,
    PRIMARY KEY (board_id, key)
) WITHOUT ROWID
"""

_COLUMNS = "seq, kind, region, writer, payload, version, at, ikey"
# Keys by the ikey index: left to itself, SQLite answers "ikey IN (...)" by scanning the
# whole board through the primary key (the partial index is not seen to apply), which made
# every 500-key look-up cost a pass over the board: 21 ms against 2.8 ms at 100,000 records.
_FIND_KEYS = (
    f"SELECT {_COLUMNS}, fingerprint FROM bb_records INDEXED BY bb_records_ikey"
    " WHERE board_id = ? AND ikey IN ({})"
)
# The board's head with its close record if any (marked 1) and the keyed rows (marked 0),
# as one statement.
_KEYS_AND_OUTCOME = (
    "SELECT 1, r.seq, b.head, NULL, NULL, r.payload, NULL, NULL, NULL, NULL FROM bb_boards b"
    " LEFT JOIN bb_records r ON r.board_id = b.board_id AND r.seq = b.closed_seq"
    " WHERE b.board_id = ? UNION ALL"
    f" SELECT 0, {_COLUMNS}, fingerprint FROM bb_records INDEXED BY bb_records_ikey"
    " WHERE board_id = ? AND ikey IN ({})"
)
# A single write's transaction reads the board row, its key's row and its unique key's
# holder in this one statement, not three: a NULL key or unique key matches nothing.
_PROBE = (
    "SELECT b.head, b.closed_seq, (SELECT u.seq FROM bb_uniques u WHERE u.board_id ="
    " b.board_id AND u.region = ? AND u.ukey = ?),"
    f" {', '.join('k.' + c for c in _COLUMNS.split(', '))}, k.fingerprint"
    " FROM bb_boards b LEFT JOIN bb_records k INDEXED BY bb_records_ikey"
    " ON k.board_id = b.board_id AND k.ikey = ? WHERE b.board_id = ?"
)
_INSERT_RECORD = (
    "INSERT INTO bb_records (board_id, seq, kind, region, writer, payload, version, at,"
    " ikey, fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Nearly every record: a contribution (no version) whose fingerprint is derived (none
# kept). Its constants are written in the SQL, not bound: sqlite3 binds a None through its
# adapter look-up, whose failed attribute look-up on the protocol type formats an
# AttributeError and drops it, about 3,000 instructions a None (two per record here).
_INSERT_LEVEL = (
    "INSERT INTO bb_records (board_id, seq, kind, region, writer, payload, version, at,"
    " ikey, fingerprint) VALUES (?, ?, 'level', ?, ?, ?, NULL, ?, ?, NULL)"
)
_INSERT_UNIQUE = "INSERT INTO bb_uniques (board_id, region, ukey, seq) VALUES (?, ?, ?, ?)"
# Held-back rows are written this many to a statement run, in one multi-row INSERT: a run
# per row cost SQLite its set-up and wind-down (and the driver its loop) for each, 6 % of
# a W1 entry's instructions. 50 rows of 10 values stay within SQLite's oldest limit of 999
# bound values. The rows left over (fewer than 50) go one to a run, as before.
_ROWS_PER_INSERT = 50


def _many_rows(sql: str) -> str:
    """``sql``, an INSERT of one row's ``VALUES (...)``, as an INSERT of _ROWS_PER_INSERT rows."""
    head, row = sql.split(" VALUES ")
    return f"{head} VALUES {', '.join([row] * _ROWS_PER_INSERT)}"


_MANY_ROWS = {sql: _many_rows(sql) for sql in (_INSERT_RECORD, _INSERT_LEVEL, _INSERT_UNIQUE)}
# Held-back rows of a statement are written every this many records: a W1 cycle of 30,000
# records held whole put about 1 KiB an entry on the process's peak memory.
_FLUSH_ROWS = 1000
_TABLES = frozenset(
    {"bb_boards", "bb_records", "bb_premises", "bb_uniques", "bb_grants", "bb_claims"}
)
_BUSY_RETRIES = 10  # on top of busy_timeout: a stuck lock surfaces within a minute
# RecordKind.X costs about 0.1 µs a look-up (the enum metaclass); these are per write.
_LEVEL, _PREMISE, _GRANT = RecordKind.LEVEL, RecordKind.PREMISE, RecordKind.GRANT
_REVOKE, _CLOSE = RecordKind.REVOKE, RecordKind.CLOSE
_OPEN = Outcome(RunStatus.OPEN)

ConnectionFactory = Callable[[str], sqlite3.Connection]


def _connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)


class SQLiteStore(Store):
    """Boards in one SQLite file.

    Args:
        path: The database file; created with its schema if absent.
        synchronous: SQLite's ``synchronous`` setting. ``"FULL"`` (the default) makes
            every returned ``Written`` survive a power loss; ``"NORMAL"`` survives a
            process crash but may lose the last commits on power loss.
        connect: Opens the connection; tests pass one that injects faults.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "FULL",
        connect: ConnectionFactory | None = None,
    ) -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreConfigError(
                f"synchronous={synchronous!r} is not a SQLite setting; "
                "use FULL, NORMAL, EXTRA or OFF"
            )
        self.path = str(path)
        self._lock = threading.Lock()
        # What the last read_ahead found: the board, its head then, and the keys absent.
        # Records are only ever added, each moving the head: an append whose transaction
        # finds that head unmoved knows those keys are still absent, without looking them
        # up again (4 % of a W1 entry's instructions). Taken by the next append.
        self._ahead: tuple[str, int, frozenset[str]] | None = None
        try:
            self._conn = (connect or _connect)(self.path)
            self._refuse_foreign_tables(self._conn)  # before WAL mode rewrites the header
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._conn.execute("PRAGMA busy_timeout=5000")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store at {self.path!r}: {exc}") from exc

    # -- schema ------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._transaction() as cur:
            (version,) = cur.execute("PRAGMA user_version").fetchone()
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path!r} has schema version {version}, newer than this mrpybb "
                    f"understands ({SCHEMA_VERSION}); upgrade mrpybb to open it"
                )
            if version < 1:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        cur.execute(statement)
            if version < 2:
                cur.execute(_CLAIMS)
            # Nothing to do for 3: older rows keep their fingerprints, and are judged by them.
            if version < SCHEMA_VERSION:
                cur.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _refuse_foreign_tables(self, conn: sqlite3.Connection) -> None:
        """A file without our schema version that has a table of ours: someone else's.

        ``CREATE TABLE IF NOT EXISTS`` would keep their table and fail later on a column
        it lacks ("no such column: board_id"), after writing to the file.
        """
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version >= 1:
            return
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        names = {row[0] for row in conn.execute(query)}
        ours = sorted(name for name in names if name in _TABLES)
        if ours:
            raise StoreError(
                f"{self.path!r} has a table {ours[0]} that this store did not create (the "
                "file is not a blackboard store, or one of another program); give a --store "
                "file of its own, nothing was written to this one"
            )

    # -- transactions ------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """One ``BEGIN IMMEDIATE`` transaction, retried while another process holds the lock."""
        with self._lock:
            self._begin()
            cur = self._conn.cursor()
            try:
                yield cur
                self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def _begin(self) -> None:
        for attempt in range(_BUSY_RETRIES):
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                time.sleep(min(0.001 * 2**attempt, 0.1))
        self._conn.execute("BEGIN IMMEDIATE")

    def _rollback(self) -> None:
        """End a failed transaction; never leave it, and SQLite's write lock, open."""
        if not self._conn.in_transaction:
            return  # the fault that ended the transaction already rolled it back
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("ROLLBACK")
            return
        # The fault that failed the transaction failed the ROLLBACK too. Left open, the
        # transaction would hold the write lock and fail every later call ("cannot start
        # a transaction within a transaction"): try the driver's own rollback, and as a
        # last resort close the connection, which rolls back (later calls then raise).
        with contextlib.suppress(sqlite3.Error):
            self._conn.rollback()
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()

    def _run(self, what: str, work: Callable[[sqlite3.Cursor], Any]) -> Any:
        # _transaction spelled out: its generator and context manager cost 1.3 us a call,
        # once per write of the seed's loop.
        try:
            with self._lock:
                self._begin()
                try:
                    result = work(self._conn.cursor())
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise
                return result
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite store {self.path!r} failed to {what}: {exc}") from exc

    def _read(self, what: str, work: Callable[[sqlite3.Cursor], Any]) -> Any:
        with self._lock:
            try:
                return work(self._conn.cursor())
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {self.path!r} failed to {what}: {exc}") from exc

    # -- the store interface -------------------------------------------------------

    def open_board(self, board_id: str, declaration: str, opening: Sequence[PendingWrite]) -> str:
        """Create the board with its opening writes, or return the stored declaration."""

        def work(cur: sqlite3.Cursor) -> str:
            row = cur.execute(
                "SELECT declaration FROM bb_boards WHERE board_id = ?", (board_id,)
            ).fetchone()
            if row is not None:
                return str(row[0])
            cur.execute(
                "INSERT INTO bb_boards (board_id, declaration) VALUES (?, ?)",
                (board_id, declaration),
            )
            txn = _SQLiteTxn(cur, board_id)
            apply_writes(txn, opening)
            txn.finish()
            return declaration

        result: str = self._run("open a board", work)
        return result

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        """Judge and keep ``writes`` in one durable transaction."""

        def work(cur: sqlite3.Cursor) -> list[AppendOutcome]:
            ahead, self._ahead = self._ahead, None
            txn = _SQLiteTxn(cur, board_id)
            if ahead is not None and ahead[0] == board_id:
                txn.absent_at = ahead[1:]
            outcomes = apply_writes(txn, writes, fence)
            txn.finish()
            fault_point("store.before_commit")
            return outcomes

        result: list[AppendOutcome] = self._run("append", work)
        return result

    def find_key(self, board_id: str, key: str) -> tuple[Record, str] | None:
        """The record written under ``key``, with its fingerprint."""
        result: tuple[Record, str] | None = self._read(
            "find an idempotency key", lambda cur: _SQLiteTxn(cur, board_id).find_key(key)
        )
        return result

    def find_keys(self, board_id: str, keys: Sequence[str]) -> dict[str, tuple[Record, str]]:
        """The keys already written, in one query per 500 keys."""
        result: dict[str, tuple[Record, str]] = self._read(
            "find idempotency keys", lambda cur: _found_keys(cur, board_id, keys)
        )
        return result

    def read_ahead(
        self, board_id: str, writes: Sequence[PendingWrite]
    ) -> tuple[dict[str, tuple[Record, str]], Outcome]:
        """The writes' keys already written and the run's state, under one lock.

        Outside the write lock, as the two reads one after the other: what they say is
        checked again by the append's transaction (the keys found absent, by the head).
        """
        keys = [w.idempotency_key for w in writes if w.idempotency_key is not None]

        def work(cur: sqlite3.Cursor) -> tuple[dict[str, tuple[Record, str]], Outcome]:
            self._ahead = None
            if not keys:
                return {}, _outcome(cur, board_id)
            found, outcome, head = _keys_and_outcome(cur, board_id, keys)
            if head is not None:
                self._ahead = (board_id, head, frozenset(keys).difference(found))
            return found, outcome

        result: tuple[dict[str, tuple[Record, str]], Outcome] = self._read(
            "read ahead of a batch", work
        )
        return result

    def head(self, board_id: str) -> int:
        """The board's highest sequence number."""
        return int(self._read("read the head", lambda cur: _head(cur, board_id)))

    def read_log(self, board_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        """Records after ``after`` up to ``until``."""
        bound = 2**62 if until is None else until
        rows = self._read(
            "read the log",
            lambda cur: cur.execute(
                f"SELECT {_COLUMNS} FROM bb_records WHERE board_id = ? AND seq > ? AND seq <= ?"
                " ORDER BY seq",
                (board_id, after, bound),
            ).fetchall(),
        )
        return [_record(row) for row in rows]

    def read_region(self, board_id: str, region: str) -> list[Record]:
        """Every record of a level, in order."""
        rows = self._read(
            "read a level",
            lambda cur: cur.execute(
                f"SELECT {_COLUMNS} FROM bb_records WHERE board_id = ? AND region = ?"
                " AND kind = 'level' ORDER BY seq",
                (board_id, region),
            ).fetchall(),
        )
        return [_record(row) for row in rows]

    def read_premise(self, board_id: str, name: str) -> Record | None:
        """The record holding the premise's current value."""
        row = self._read(
            "read a premise",
            lambda cur: cur.execute(
                f"SELECT {_COLUMNS} FROM bb_records r WHERE board_id = ? AND seq ="
                " (SELECT seq FROM bb_premises WHERE board_id = ? AND name = ?)",
                (board_id, board_id, name),
            ).fetchone(),
        )
        return None if row is None else _record(row)

    def outcome(self, board_id: str) -> Outcome:
        """How the run stands."""
        result: Outcome = self._read("read the run's outcome", lambda cur: _outcome(cur, board_id))
        return result

    def permissions(self, board_id: str) -> frozenset[tuple[str, str]]:
        """The current grants."""
        rows = self._read(
            "read permissions",
            lambda cur: cur.execute(
                "SELECT agent, region FROM bb_grants WHERE board_id = ?", (board_id,)
            ).fetchall(),
        )
        return frozenset((str(a), str(r)) for a, r in rows)

    # -- leased claims ---------------------------------------------------------------

    def claim(
        self, board_id: str, holder: str, keys: Sequence[str], limit: int, lease: timedelta
    ) -> list[Claim]:
        """Take up to ``limit`` of ``keys`` (the write lock makes every claim exclusive)."""

        def work(cur: sqlite3.Cursor) -> list[Claim]:
            _head(cur, board_id)  # the board must exist
            at = _leases.now()
            until = at + lease.total_seconds()
            taken: list[Claim] = []
            for key in dict.fromkeys(keys):
                if len(taken) >= limit:
                    break
                row = _leases.taken(_lease(cur, board_id, key), holder, at, until)
                if row is not None:
                    _keep_lease(cur, board_id, key, row)
                    taken.append(_leases.to_claim(key, row))
            return taken

        result: list[Claim] = self._run("claim keys", work)
        return result

    def renew(
        self, board_id: str, holder: str, keys: Sequence[str], lease: timedelta
    ) -> list[Claim]:
        """Extend ``holder``'s claims on ``keys``."""

        def work(cur: sqlite3.Cursor) -> list[Claim]:
            until = _leases.now() + lease.total_seconds()
            renewed: list[Claim] = []
            for key in dict.fromkeys(keys):
                row = _lease(cur, board_id, key)
                if row is not None and row.holder == holder:
                    row.expires = until
                    _keep_lease(cur, board_id, key, row)
                    renewed.append(_leases.to_claim(key, row))
            return renewed

        result: list[Claim] = self._run("renew claims", work)
        return result

    def release(self, board_id: str, holder: str, keys: Sequence[str]) -> int:
        """Give up ``holder``'s claims on ``keys``."""

        def work(cur: sqlite3.Cursor) -> int:
            released = 0
            for key in dict.fromkeys(keys):
                released += cur.execute(
                    "UPDATE bb_claims SET holder = NULL WHERE board_id = ? AND key = ?"
                    " AND holder = ?",
                    (board_id, key, holder),
                ).rowcount
            return released

        result: int = self._run("release claims", work)
        return result

    def claims(self, board_id: str) -> list[Claim]:
        """Every key held now."""
        rows = self._read(
            "read claims",
            lambda cur: cur.execute(
                "SELECT key, holder, expires, token FROM bb_claims"
                " WHERE board_id = ? AND holder IS NOT NULL ORDER BY key",
                (board_id,),
            ).fetchall(),
        )
        return [_leases.to_claim(k, _leases.Lease(h, e, t)) for k, h, e, t in rows]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error as exc:  # pragma: no cover - close only fails on misuse
                raise StoreError(f"cannot close SQLite store {self.path!r}: {exc}") from exc

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open on this store's connection (tests check none leak)."""
        try:
            return self._conn.in_transaction
        except sqlite3.ProgrammingError:  # closed: by close(), or after a failed rollback
            return False


def _found_keys(
    cur: sqlite3.Cursor, board_id: str, keys: Sequence[str]
) -> dict[str, tuple[Record, str]]:
    found: dict[str, tuple[Record, str]] = {}
    for start in range(0, len(keys), 500):
        chunk = list(keys[start : start + 500])
        marks = ",".join("?" * len(chunk))
        rows = cur.execute(_FIND_KEYS.format(marks), (board_id, *chunk)).fetchall()
        found.update((row[7], _found(row)) for row in rows)
    return found


def _keys_and_outcome(
    cur: sqlite3.Cursor, board_id: str, keys: Sequence[str]
) -> tuple[dict[str, tuple[Record, str]], Outcome, int | None]:
    """The keys already written, the run's state and the head (None: no such board).

    The first 500 keys are read with the board row in one statement, which is one read
    transaction: two shared-lock round trips (fcntl) fewer than the two reads one after
    the other, and one call into SQLite fewer, per single write. The head is read before
    any key: a key absent from a later chunk is absent at that head if it is unmoved.
    """
    chunk = list(keys[:500])
    rows = cur.execute(
        _KEYS_AND_OUTCOME.format(",".join("?" * len(chunk))), (board_id, board_id, *chunk)
    ).fetchall()
    found: dict[str, tuple[Record, str]] = {}
    outcome = _OPEN
    head = None
    for row in rows:
        if not row[0]:
            found[row[8]] = _found(row[1:])
            continue
        head = int(row[2])
        if row[1] is not None:  # the close record, which the board's closed_seq names
            content = decode(row[5])
            outcome = Outcome(RunStatus(content["status"]), content["reason"], int(row[1]))
    if len(keys) > 500:
        found.update(_found_keys(cur, board_id, keys[500:]))
    return found, outcome, head


def _found(row: tuple[Any, ...]) -> tuple[Record, str]:
    """A keyed row (``_COLUMNS`` and ``fingerprint``) as its record and its write's fingerprint.

    The fingerprint column holds what earlier versions stored for every write (kept, so
    that a repeat of an old write is judged exactly as before) and what apply_writes hands
    over for a write its record cannot tell; it is NULL for every other row written since,
    whose fingerprint is derived from the row.
    """
    kept = row[8]
    return _record(row[:8]), kept or stored_fingerprint(row[1], row[2], row[3], row[4], row[5])


def _outcome(cur: sqlite3.Cursor, board_id: str) -> Outcome:
    row = cur.execute(
        "SELECT r.payload, r.seq FROM bb_boards b JOIN bb_records r"
        " ON r.board_id = b.board_id AND r.seq = b.closed_seq WHERE b.board_id = ?",
        (board_id,),
    ).fetchone()
    if row is None:
        return _OPEN
    content = decode(row[0])
    return Outcome(RunStatus(content["status"]), content["reason"], int(row[1]))


def _head(cur: sqlite3.Cursor, board_id: str) -> int:
    row = cur.execute("SELECT head FROM bb_boards WHERE board_id = ?", (board_id,)).fetchone()
    if row is None:
        raise StoreError(f"no board {board_id!r} in this store; open it first")
    return int(row[0])


def _lease(cur: sqlite3.Cursor, board_id: str, key: str) -> _leases.Lease | None:
    row = cur.execute(
        "SELECT holder, expires, token FROM bb_claims WHERE board_id = ? AND key = ?",
        (board_id, key),
    ).fetchone()
    return None if row is None else _leases.Lease(row[0], float(row[1]), int(row[2]))


def _keep_lease(cur: sqlite3.Cursor, board_id: str, key: str, lease: _leases.Lease) -> None:
    cur.execute(
        "INSERT INTO bb_claims (board_id, key, holder, expires, token) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (board_id, key) DO UPDATE SET holder = excluded.holder,"
        " expires = excluded.expires, token = excluded.token",
        (board_id, key, lease.holder, lease.expires, lease.token),
    )


def _record(row: tuple[Any, ...]) -> Record:
    seq, kind, region, writer, payload, version, at, ikey = row
    return Record(
        sequence=seq,
        kind=RecordKind(kind),
        region=region,
        writer=writer,
        content=decode(payload),
        version=version,
        at=datetime.fromtimestamp(at, UTC),
        idempotency_key=ikey,
    )


class _SQLiteTxn:
    """The transaction primitives over an open ``BEGIN IMMEDIATE`` cursor."""

    # A row's fingerprint is derived from its columns when its key is found (_found): the
    # column stays NULL, 64 bytes less per record, and apply_writes spares the SHA-256.
    derives_fingerprints = True

    def __init__(self, cur: sqlite3.Cursor, board_id: str) -> None:
        self.cur = cur
        self.board_id = board_id
        self._head: int | None = None
        self._stored_head: int | None = None
        self._closed: int | None = None
        self._closed_read = False
        # Keys prefetch_keys found on the board, and keys it found absent: under BEGIN
        # IMMEDIATE no one else can write a key before this transaction ends.
        self._found: dict[str, tuple[Record, str]] = {}
        self._absent: set[str] = set()
        self._at: datetime | None = None
        self._at_seconds = 0.0
        # Rows of bb_records and bb_uniques held back until flush(), which writes each
        # table's with one executemany: one Cursor.execute per record was most of a
        # batch's SQLite time. A look-up that must read those tables flushes first.
        # A record's row is _INSERT_LEVEL's if it fits it, else _INSERT_RECORD's.
        self._rows: list[tuple[Any, ...]] = []
        self._level_rows: list[tuple[Any, ...]] = []
        self._unique_rows: list[tuple[Any, ...]] = []
        # Per level, unique keys prefetch_uniques looked up (None: free) or this
        # transaction took (their sequence).
        self._held: dict[str, dict[str, int | None]] = {}
        # The head a read ahead saw and the keys it found absent (SQLiteStore._ahead).
        self.absent_at: tuple[int, frozenset[str]] | None = None
        # A single write's key and unique key, looked up with the board row by _probe.
        self._probe_key: str | None = None
        self._probe_unique: tuple[str, str] | None = None

    def head(self) -> int:
        if self._head is None:
            self._read_board()
        assert self._head is not None
        return self._head

    def _read_board(self) -> None:
        """The head and the close, in one statement (a write asks for both)."""
        probing = self._probe_key is not None or self._probe_unique is not None
        if probing and self._probe():
            return
        row = self.cur.execute(
            "SELECT head, closed_seq FROM bb_boards WHERE board_id = ?", (self.board_id,)
        ).fetchone()
        if row is None:
            raise StoreError(f"no board {self.board_id!r} in this store; open it first")
        if self._head is None:
            self._head = self._stored_head = int(row[0])
        if not self._closed_read:
            self._closed = None if row[1] is None else int(row[1])
            self._closed_read = True

    def _probe(self) -> bool:
        """Read the board row with the key and the unique key a single write prefetched.

        False when there is no board: the look-ups then run on their own, and the head's
        read raises as it does without the probe.
        """
        key, unique = self._probe_key, self._probe_unique
        self._probe_key = self._probe_unique = None
        region, ukey = unique if unique is not None else (None, None)
        row = self.cur.execute(_PROBE, (region, ukey, key, self.board_id)).fetchone()
        if row is None:
            return False
        if self._head is None:
            self._head = self._stored_head = int(row[0])
        if not self._closed_read:
            self._closed = None if row[1] is None else int(row[1])
            self._closed_read = True
        if unique is not None:
            self._held.setdefault(unique[0], {})[unique[1]] = (
                None if row[2] is None else int(row[2])
            )
        if key is not None:
            if row[3] is None:
                self._absent.add(key)
            else:
                self._found[key] = _found(row[3:])
        return True

    def flush(self) -> None:
        """Write the records and unique keys held back so far, one statement per table."""
        if self._rows:
            self._execute_many(_INSERT_RECORD, self._rows)
            self._rows = []
        if self._level_rows:
            self._execute_many(_INSERT_LEVEL, self._level_rows)
            self._level_rows = []
        if self._unique_rows:
            self._execute_many(_INSERT_UNIQUE, self._unique_rows)
            self._unique_rows = []

    def _execute_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        # A cursor of its own, closed at once: executemany leaves its statement active,
        # and an active statement keeps a connection that is closed as a last resort
        # (SQLiteStore._rollback) open as a zombie that still holds the write lock.
        whole = len(rows) - len(rows) % _ROWS_PER_INSERT
        if whole:  # each run ends with its statement, as a single row's does
            many, flat = _MANY_ROWS[sql], itertools.chain.from_iterable
            for start in range(0, whole, _ROWS_PER_INSERT):
                self.cur.execute(many, list(flat(rows[start : start + _ROWS_PER_INSERT])))
            rows = rows[whole:]
        if len(rows) == 1:  # a single row runs to its end: no statement is left active
            self.cur.execute(sql, rows[0])
        elif rows:
            cursor = self.cur.connection.cursor()
            try:
                cursor.executemany(sql, rows)
            finally:
                cursor.close()

    def finish(self) -> None:
        """Write the held-back rows, then the head once for the whole batch."""
        self.flush()
        if self._head is not None and self._head != self._stored_head:
            self.cur.execute(
                "UPDATE bb_boards SET head = ? WHERE board_id = ?", (self._head, self.board_id)
            )

    def closed_at(self) -> int | None:
        # Read once per transaction: only this transaction can change it until COMMIT.
        if not self._closed_read:
            self._read_board()
        return self._closed

    def permitted(self, agent: str, region: str) -> bool:
        row = self.cur.execute(
            "SELECT 1 FROM bb_grants WHERE board_id = ? AND agent = ? AND region = ?",
            (self.board_id, agent, region),
        ).fetchone()
        return row is not None

    def premise_version(self, name: str) -> int | None:
        row = self.cur.execute(
            "SELECT version FROM bb_premises WHERE board_id = ? AND name = ?",
            (self.board_id, name),
        ).fetchone()
        return None if row is None else int(row[0])

    def prefetch_uniques(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Look a batch's unique keys up in one query per level and 500 keys."""
        if len(pairs) == 1 and self._head is None:
            self._probe_unique = pairs[0]  # read with the board row, by _probe
            return
        by_region: dict[str, list[str]] = {}
        for region, key in pairs:
            by_region.setdefault(region, []).append(key)
        for region, keys in by_region.items():
            unique = list(dict.fromkeys(keys))
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self.cur.execute(
                    f"SELECT ukey, seq FROM bb_uniques WHERE board_id = ? AND region = ?"
                    f" AND ukey IN ({marks})",
                    (self.board_id, region, *chunk),
                ).fetchall()
                found = {str(ukey): int(seq) for ukey, seq in rows}
                held = self._held.setdefault(region, {})
                for key in chunk:
                    held[key] = found.get(key)

    def unique_holder(self, region: str, key: str) -> int | None:
        if self._probe_unique is not None:
            self._read_board()
        held = self._held.get(region)
        if held is not None and key in held:  # under BEGIN IMMEDIATE it stays true
            return held[key]
        self.flush()
        row = self.cur.execute(
            "SELECT seq FROM bb_uniques WHERE board_id = ? AND region = ? AND ukey = ?",
            (self.board_id, region, key),
        ).fetchone()
        return None if row is None else int(row[0])

    def holds(self, holder: str, keys: frozenset[str]) -> bool:
        # Inside BEGIN IMMEDIATE: no claim can change before this transaction ends.
        held = 0
        ordered = sorted(keys)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start : start + 500]
            marks = ",".join("?" * len(chunk))
            (count,) = self.cur.execute(
                f"SELECT count(*) FROM bb_claims WHERE board_id = ? AND holder = ?"
                f" AND key IN ({marks})",
                (self.board_id, holder, *chunk),
            ).fetchone()
            held += int(count)
        return held == len(ordered)

    def prefetch_keys(self, keys: Sequence[str]) -> None:
        """Look a batch's keys up in one query per 500, for find_key to answer from."""
        if len(keys) == 1 and self._head is None:
            self._probe_key = keys[0]  # read with the board row, by _probe
            return
        if self.absent_at is not None:
            if self._head is None:
                self._read_board()  # asked anyway, next: the head the keys are judged by
            head, absent = self.absent_at
            if head == self._head and absent.issuperset(keys):
                self._absent.update(keys)
                return
        for start in range(0, len(keys), 500):
            chunk = list(dict.fromkeys(keys[start : start + 500]))
            marks = ",".join("?" * len(chunk))
            rows = self.cur.execute(_FIND_KEYS.format(marks), (self.board_id, *chunk)).fetchall()
            found = {row[7]: _found(row) for row in rows}
            self._found.update(found)
            self._absent.update(key for key in chunk if key not in found)

    def find_key(self, key: str) -> tuple[Record, str] | None:
        if self._probe_key is not None:
            self._read_board()
        if key in self._absent:
            return None
        if key in self._found:
            return self._found[key]
        self.flush()  # a key this transaction wrote may be in a held-back row
        row = self.cur.execute(
            f"SELECT {_COLUMNS}, fingerprint FROM bb_records WHERE board_id = ? AND ikey = ?",
            (self.board_id, key),
        ).fetchone()
        return None if row is None else _found(row)

    def insert(self, record: Record, write: PendingWrite, fingerprint: str) -> None:
        key = record.idempotency_key
        if key is not None:
            # The key is taken now: find_key reads it back from the table, as before.
            self._absent.discard(key)
        kind, at = record.kind, record.at
        # A batch's records share one admission time: converted once, not per record.
        seconds = self._at_seconds if at is self._at else self._timestamp(at)
        if kind is _LEVEL and not fingerprint:
            rows = self._level_rows
            rows.append(
                (
                    self.board_id,
                    record.sequence,
                    record.region,
                    record.writer,
                    write.payload,
                    seconds,
                    key,
                )
            )
        else:
            rows = self._rows
            rows.append(
                (
                    self.board_id,
                    record.sequence,
                    kind._value_,  # what .value returns, without the enum property's call
                    record.region,
                    record.writer,
                    write.payload,
                    record.version,
                    seconds,
                    key,
                    fingerprint or None,
                )
            )
        if kind is _LEVEL:
            if write.unique_key is not None:
                self._held.setdefault(record.region or "", {})[write.unique_key] = record.sequence
                self._unique_rows.append(
                    (self.board_id, record.region, write.unique_key, record.sequence)
                )
        else:  # a plain contribution derives nothing; the other kinds are rare
            self._derive(record, write)
        # The head row is written once per transaction, in finish().
        self._head = record.sequence
        if len(rows) >= _FLUSH_ROWS:
            self.flush()

    def _timestamp(self, at: datetime) -> float:
        """``at`` in seconds, kept for the next record (a batch's records share their time)."""
        self._at, self._at_seconds = at, at.timestamp()
        return self._at_seconds

    def _derive(self, record: Record, write: PendingWrite) -> None:
        cur, board, region = self.cur, self.board_id, record.region
        if record.kind is _PREMISE:
            cur.execute(
                "INSERT INTO bb_premises (board_id, name, seq, version) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (board_id, name) DO UPDATE SET seq = excluded.seq,"
                " version = excluded.version",
                (board, region, record.sequence, record.version),
            )
        elif record.kind is _LEVEL and write.unique_key is not None:
            cur.execute(_INSERT_UNIQUE, (board, region, write.unique_key, record.sequence))
        elif record.kind is _GRANT:
            cur.execute(
                "INSERT OR IGNORE INTO bb_grants (board_id, agent, region) VALUES (?, ?, ?)",
                (board, record.content["agent"], region),
            )
        elif record.kind is _REVOKE:
            cur.execute(
                "DELETE FROM bb_grants WHERE board_id = ? AND agent = ? AND region = ?",
                (board, record.content["agent"], region),
            )
        elif record.kind is _CLOSE:
            cur.execute(
                "UPDATE bb_boards SET closed_seq = ? WHERE board_id = ?", (record.sequence, board)
            )
            self._closed, self._closed_read = record.sequence, True
