"""RA-03 ``store_fault_loop``, SQLite: fail the N-th store call, N = 1, 2, ... until done.

The store runs on a real file through a ``sqlite3.Connection`` subclass whose
``execute`` (and its cursors' ``execute`` and ``executemany``) raise
``sqlite3.OperationalError`` at the
N-th call, before the statement reaches SQLite: once ("fail once") or from then on
("fail persistently"). Plus a real ``SQLITE_FULL`` from ``PRAGMA max_page_count``.
For every N: the call succeeds or raises ``StoreError``; after a failed call the board
digest equals the digest before, ``integrity_check`` is ok, every derived row agrees
with the log, no transaction is left open, and once the fault is removed the same
operation succeeds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar, overload

import pytest
from bb_reliability import raw_connect, sqlite_board_violations

from blackboard import (
    Agent,
    BlackboardError,
    Fence,
    Level,
    Model,
    Outcome,
    Premise,
    Record,
    StoreError,
    Written,
    create_model,
)
from blackboard.stores import AppendOutcome, PendingWrite, SQLiteStore, apply_writes
from blackboard.stores._sqlite import _SQLiteTxn

# -- fault injection -------------------------------------------------------------------

_CursorT = TypeVar("_CursorT", bound=sqlite3.Cursor)


@dataclass
class FaultPlan:
    """When the connection's calls fail: the N-th call (and later ones if persistent)."""

    message: str = "disk I/O error"
    fail_at: int = 0  # 0: disarmed
    persistent: bool = False
    fail_rollback: bool = False  # the driver's own rollback() fails too
    calls: int = 0
    fired: int = 0

    def arm(self, fail_at: int, persistent: bool) -> None:
        self.fail_at, self.persistent, self.calls, self.fired = fail_at, persistent, 0, 0

    def disarm(self) -> None:
        self.fail_at = 0

    def tick(self) -> None:
        if not self.fail_at:
            return
        self.calls += 1
        if self.calls == self.fail_at or (self.persistent and self.calls > self.fail_at):
            self.fired += 1
            raise sqlite3.OperationalError(self.message)


class FaultyConnection(sqlite3.Connection):
    plan: FaultPlan

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.plan.tick()
        return super().execute(sql, parameters)

    @overload
    def cursor(self, factory: None = None) -> sqlite3.Cursor: ...
    @overload
    def cursor(self, factory: Callable[[sqlite3.Connection], _CursorT]) -> _CursorT: ...
    def cursor(
        self, factory: Callable[[sqlite3.Connection], sqlite3.Cursor] | None = None
    ) -> sqlite3.Cursor:
        return super().cursor(factory or FaultyCursor)

    def rollback(self) -> None:
        if self.plan.fail_rollback and self.plan.fail_at:
            raise sqlite3.OperationalError(self.plan.message)
        super().rollback()


class FaultyCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        connection = self.connection
        assert isinstance(connection, FaultyConnection)
        connection.plan.tick()
        return super().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Self:
        connection = self.connection
        assert isinstance(connection, FaultyConnection)
        connection.plan.tick()
        return super().executemany(sql, seq_of_parameters)


@dataclass
class Rig:
    """A store on a real file whose connection fails on plan."""

    store: SQLiteStore
    plan: FaultPlan
    connections: list[FaultyConnection] = field(default_factory=list)


def open_rig(path: Path, store_class: type[SQLiteStore] = SQLiteStore) -> Rig:
    plan = FaultPlan()
    connections: list[FaultyConnection] = []

    def connect(target: str) -> sqlite3.Connection:
        conn = sqlite3.connect(
            target,
            factory=FaultyConnection,
            isolation_level=None,
            check_same_thread=False,
            timeout=30.0,
        )
        assert isinstance(conn, FaultyConnection)
        conn.plan = plan
        connections.append(conn)
        return conn

    return Rig(store_class(path, connect=connect), plan, connections)


# -- the operations --------------------------------------------------------------------

Act = Callable[[], Any]


def _model(store: SQLiteStore, board: str) -> Model:
    done = (lambda reader: len(reader.read_level("events")) >= 1) if "done" in board else None
    return create_model(
        [Level("events"), Level("more"), Premise("p")],
        premises={"p": 0},
        agents=[Agent("clerk", writes_to=["events"])],
        termination_predicate=done,
        store=store,
        board_id=board,
    )


def _write(model: Model, size: int) -> Act:
    return lambda: model.control.write("clerk", "events", {"blob": "x" * size})


def _cas(model: Model, size: int) -> Act:
    version = model.reader.read_premise("p").version
    return lambda: model.control.set_premise("clerk", "p", "x" * size, expected_version=version)


def _close(model: Model, size: int) -> Act:
    return lambda: model.control.abort("x" * size)


def _grant(model: Model, size: int) -> Act:
    return lambda: model.control.grant("clerk", "more")


def _revoke(model: Model, size: int) -> Act:
    return lambda: model.control.revoke("clerk", "events")


OPERATIONS: dict[str, Callable[[Model, int], Act]] = {
    "write": _write,
    "write-done": _write,  # on a model whose termination predicate closes the run after it
    "cas": _cas,
    "close": _close,
    "grant": _grant,
    "revoke": _revoke,
}


def _board(op: str, n: int, *tags: object) -> str:
    return "-".join([op, *map(str, tags), str(n)])


def _succeeded(result: Any) -> bool:
    if isinstance(result, Outcome):
        return result.closed
    return isinstance(result, Written) and not result.repeat


# -- the loop --------------------------------------------------------------------------


@dataclass
class LoopReport:
    problems: list[str] = field(default_factory=list)
    failed: int = 0  # N for which the call raised StoreError
    survived: int = 0  # N for which the fault fired and the kernel retried past it
    completed_at: int = 0  # the first N beyond the operation's last call


def _after_failure(rig: Rig, model: Model, before: str, act: Act, n: int) -> list[str]:
    problems = []
    if rig.store.in_transaction:
        problems.append(f"N={n}: a transaction was left open")
    if model.reader.digest() != before:
        problems.append(f"N={n}: the board changed although the call failed")
    problems += [f"N={n}: {p}" for p in sqlite_board_violations(rig.store.path, model.board_id)]
    try:
        result = act()
    except BlackboardError as exc:
        return [*problems, f"N={n}: with the fault removed the call still fails: {exc}"]
    if not _succeeded(result):
        problems.append(f"N={n}: with the fault removed the call gave {result!r}")
    return problems


def fault_loop(rig: Rig, op: str, persistent: bool, message: str) -> LoopReport:
    """Fail the N-th call of ``op`` for N = 1, 2, ... until ``op`` completes untouched."""
    report = LoopReport()
    rig.plan.message = message
    for n in range(1, 200):
        try:
            model = _model(rig.store, _board(op, n, persistent, message[:4]))
            act = OPERATIONS[op](model, 64)
        except StoreError as exc:
            report.problems.append(f"N={n}: the store is unusable after the last fault: {exc}")
            return report
        before = model.reader.digest()
        rig.plan.arm(n, persistent)
        try:
            result: Any = act()
            error: BaseException | None = None
        except BaseException as exc:
            result, error = None, exc
        finally:
            rig.plan.disarm()
        if error is not None and not isinstance(error, StoreError):
            report.problems.append(f"N={n}: untyped {type(error).__name__}: {error}")
        elif error is not None:
            report.failed += 1
            report.problems += _after_failure(rig, model, before, act, n)
        elif not _succeeded(result):
            report.problems.append(f"N={n}: the call neither failed nor succeeded: {result!r}")
        elif rig.plan.fired:
            report.survived += 1
        else:
            report.completed_at = n
            return report
    report.problems.append("the operation never completed")
    return report


MESSAGES = ["disk I/O error", "database is locked"]


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "persistent"])
@pytest.mark.parametrize("message", MESSAGES, ids=["ioerr", "locked"])
@pytest.mark.parametrize("op", list(OPERATIONS))
def test_fault_at_every_call_leaves_the_board_as_it_was(
    tmp_path: Path, op: str, message: str, persistent: bool
) -> None:
    rig = open_rig(tmp_path / "board.db")
    try:
        report = fault_loop(rig, op, persistent, message)
    finally:
        rig.store.close()
    assert report.problems == []
    assert report.failed >= 1, "no injected fault ever surfaced: the loop tested nothing"
    assert report.completed_at > 2


# -- a real SQLITE_FULL ---------------------------------------------------------------


@pytest.mark.parametrize("op", list(OPERATIONS))
def test_disk_full_leaves_the_board_as_it_was(tmp_path: Path, op: str) -> None:
    rig = open_rig(tmp_path / "board.db")
    connection = rig.connections[0]
    try:
        model = _model(rig.store, "full")
        (pages,) = connection.execute("PRAGMA page_count").fetchone()
        connection.execute(f"PRAGMA max_page_count = {pages}")
        failure: StoreError | None = None
        for _ in range(2_000):  # small writes fit in free space until a page runs out
            act = OPERATIONS[op](model, 100_000)
            before = model.reader.digest()
            try:
                if not _succeeded(act()):
                    break
            except StoreError as exc:
                failure = exc
                break
        assert failure is not None, "the capped file never filled up"
        assert "full" in str(failure)
        connection.execute("PRAGMA max_page_count = 1073741823")
        assert _after_failure(rig, model, before, act, 0) == []
    finally:
        rig.store.close()


# -- ROLLBACK fails too: the last resort closes the connection --------------------------


def test_when_rollback_fails_too_the_lock_is_released_and_the_store_says_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "board.db"
    failed = closed = 0
    for n in range(1, 50):
        rig = open_rig(path)
        try:
            model = _model(rig.store, _board("write", n))
            before = model.reader.digest()
            rig.plan.fail_rollback = True
            rig.plan.arm(n, persistent=True)
            try:
                model.control.write("clerk", "events", {"x": n})
                error: StoreError | None = None
            except StoreError as exc:
                error = exc
            rig.plan.disarm()
            if error is None:
                break
            failed += 1
            assert not rig.store.in_transaction
            with closing(raw_connect(path)) as other:  # nobody is left holding the write lock
                other.execute("PRAGMA busy_timeout = 0")
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
            try:  # the store works again, or says plainly that it cannot
                model.reader.head()
            except StoreError:
                closed += 1
        finally:
            rig.store.close()
        with closing(SQLiteStore(path)) as fresh:
            assert _model(fresh, _board("write", n)).reader.digest() == before
        assert sqlite_board_violations(path, _board("write", n)) == []
    assert failed >= 3
    assert closed >= 1, "the last resort (closing the connection) never ran"


# -- negative control ------------------------------------------------------------------


class TwoStepStore(SQLiteStore):
    """BROKEN ON PURPOSE: commits the record, then bumps the head in a second transaction."""

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        outcomes: list[AppendOutcome] = self._run(
            "append", lambda cur: apply_writes(_NoHeadBump(cur, board_id), writes, fence)
        )
        head = max((o.record.sequence for o in outcomes if hasattr(o, "record")), default=0)
        if head:
            self._run(
                "bump the head",
                lambda cur: cur.execute(
                    "UPDATE bb_boards SET head = ? WHERE board_id = ?", (head, board_id)
                ),
            )
        return outcomes


class _NoHeadBump(_SQLiteTxn):
    def insert(self, record: Record, write: PendingWrite, fingerprint: str) -> None:
        self.cur.execute(
            "INSERT INTO bb_records (board_id, seq, kind, region, writer, payload, version, at,"
            " ikey, fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.board_id,
                record.sequence,
                record.kind.value,
                record.region,
                record.writer,
                write.payload,
                record.version,
                record.at.timestamp(),
                record.idempotency_key,
                fingerprint,
            ),
        )
        self._derive(record, write)
        self._head = record.sequence


def test_negative_control_two_transaction_append_is_caught(tmp_path: Path) -> None:
    rig = open_rig(tmp_path / "board.db", TwoStepStore)
    try:
        report = fault_loop(rig, "write", persistent=False, message="disk I/O error")
    finally:
        rig.store.close()
    assert any("changed" in p for p in report.problems), report.problems
    assert any("head" in p for p in report.problems), report.problems


def test_fault_plan_counts_every_statement(tmp_path: Path) -> None:
    """The rig sees the store's statements: a write makes several, a read at least one."""
    rig = open_rig(tmp_path / "board.db")
    try:
        model = _model(rig.store, "count")
        rig.plan.arm(10**9, False)
        model.control.write("clerk", "events", {"x": 1})
        writes = rig.plan.calls
        rig.plan.arm(10**9, False)
        model.reader.head()
        reads = rig.plan.calls
        rig.plan.disarm()
    finally:
        rig.store.close()
    assert writes >= 5
    assert reads >= 1
    with closing(raw_connect(tmp_path / "board.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_file_with_a_foreign_table_of_our_name_is_refused_and_left_alone(tmp_path: Path) -> None:
    file = tmp_path / "theirs.db"
    with closing(sqlite3.connect(file)) as conn:
        conn.execute("CREATE TABLE bb_records (x INTEGER)")
        conn.commit()
    before = file.read_bytes()
    with pytest.raises(StoreError, match=r"has a table bb_records that this store did not create"):
        SQLiteStore(file)
    assert file.read_bytes() == before  # not even switched to WAL
