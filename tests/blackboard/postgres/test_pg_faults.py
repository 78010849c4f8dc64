"""RA-03 ``store_fault_loop``, PostgreSQL: fail the N-th statement, N = 1, 2, ... until done.

The store runs on the real server through a psycopg connection class that, at the N-th
statement the store sends (once, or from then on), terminates its own session with
``pg_terminate_backend`` or makes the server raise a serialization failure (40001) or a
deadlock (40P01). Pass, for every N: the call succeeds or raises ``StoreError``; fail
once, it succeeds (the store retries) and the board equals a fault-free run's (applied
exactly once); fail persistently, the board digest after the failed call equals the
digest before, the log stays gap-free with every derived row in agreement, no connection
is left checked out or in a transaction, and once the fault is removed the same call
succeeds. A COMMIT whose answer is lost is resolved by asking the server
(``pg_xact_status``): applied exactly once. The negative control (records and counter in
two transactions) must be caught by the same loop.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pg_harness import FaultPlan, PgSpace, TwoTransactionStore, faulty_connection_class, pg_space

from blackboard import (
    Agent,
    BlackboardError,
    Level,
    Model,
    Outcome,
    Premise,
    StoreError,
    Written,
    create_model,
)
from blackboard.stores._postgres import PostgresStore

__all__ = ["pg_space"]

pytestmark = pytest.mark.postgres

Act = Callable[[], Any]


@dataclass
class Rig:
    """A real store whose connections fail on plan, and what the checks need to see it."""

    space: PgSpace
    store: PostgresStore
    plan: FaultPlan
    app: str


@pytest.fixture
def rig(pg_space: PgSpace) -> Iterator[Rig]:
    yield from _rig(pg_space, PostgresStore)


def _rig(space: PgSpace, store_class: type[PostgresStore]) -> Iterator[Rig]:
    plan = FaultPlan(space.server)
    app = f"ra03-{uuid.uuid4().hex[:8]}"
    store = store_class(
        f"{space.url}&application_name={app}",
        connection_class=faulty_connection_class(plan),
        timeout=10.0,
    )
    yield Rig(space, store, plan, app)
    store.close()


# -- the operations --------------------------------------------------------------------


def _model(store: PostgresStore, board: str) -> Model:
    done = (lambda reader: len(reader.read_level("events")) >= 1) if "done" in board else None
    return create_model(
        [Level("events"), Level("more"), Premise("p")],
        premises={"p": 0},
        agents=[Agent("clerk", writes_to=["events"])],
        termination_predicate=done,
        store=store,
        board_id=board,
    )


def _write(model: Model) -> Act:
    return lambda: model.control.write("clerk", "events", {"blob": "x" * 64})


def _cas(model: Model) -> Act:
    version = model.reader.read_premise("p").version
    return lambda: model.control.set_premise("clerk", "p", "x", expected_version=version)


def _plain(model: Model) -> Act:
    # A writer no agent names, on a model that admits any: nothing guards the write, so
    # the store keeps it in the one trip that holds the lock server-side (_pg_plain).
    return lambda: model.control.write("anyone", "events", {"blob": "y" * 64})


OPERATIONS: dict[str, Callable[[Model], Act]] = {
    "write": _write,
    "write-done": _write,  # the termination predicate closes the run after it
    "plain": _plain,
    "plain-done": _plain,
    "cas": _cas,
    "close": lambda model: lambda: model.control.abort("fault test"),
    "grant": lambda model: lambda: model.control.grant("clerk", "more"),
    "revoke": lambda model: lambda: model.control.revoke("clerk", "events"),
}


def _succeeded(result: Any) -> bool:
    if isinstance(result, Outcome):
        return result.closed
    return isinstance(result, Written) and not result.repeat


def _reference(rig: Rig, op: str) -> str:
    """The digest of a board after ``op`` ran once with no fault."""
    model = _model(rig.store, f"{op}-reference-done" if "done" in op else f"{op}-reference")
    assert _succeeded(OPERATIONS[op](model)())
    return model.reader.digest()


# -- the loop --------------------------------------------------------------------------


@dataclass
class LoopReport:
    problems: list[str] = field(default_factory=list)
    failed: int = 0  # N for which the call raised StoreError
    survived: int = 0  # N for which the fault fired and the store retried past it
    completed_at: int = 0  # the first N beyond the operation's last statement
    errors: list[str] = field(default_factory=list)  # what each failed call raised


def _no_leaks(rig: Rig, n: int) -> list[str]:
    for _ in range(100):  # the pool replaces killed connections in the background
        if not rig.store.in_transaction:
            break
        time.sleep(0.01)
    problems = [f"N={n}: a connection is still out of the pool"] if rig.store.in_transaction else []
    busy = [s for s in rig.space.sessions(rig.app) if s != "idle"]
    return problems + ([f"N={n}: server sessions left {busy}"] if busy else [])


def _after_failure(rig: Rig, model: Model, before: str, act: Act, n: int) -> list[str]:
    problems = _no_leaks(rig, n)
    if model.reader.digest() != before:
        problems.append(f"N={n}: the board changed although the call failed")
    problems += [f"N={n}: {p}" for p in rig.space.violations(model.board_id)]
    try:
        result = act()
    except BlackboardError as exc:
        return [*problems, f"N={n}: with the fault removed the call still fails: {exc}"]
    if not _succeeded(result):
        problems.append(f"N={n}: with the fault removed the call gave {result!r}")
    return problems


def _after_success(rig: Rig, model: Model, reference: str | None, n: int) -> list[str]:
    problems = _no_leaks(rig, n)
    if reference is not None and model.reader.digest() != reference:
        problems.append(f"N={n}: the board differs from a fault-free run's")
    return problems + [f"N={n}: {p}" for p in rig.space.violations(model.board_id)]


def fault_loop(rig: Rig, op: str, kind: str, persistent: bool) -> LoopReport:
    """Fail the N-th statement of ``op`` for N = 1, 2, ... until ``op`` completes untouched."""
    report = LoopReport()
    reference = _reference(rig, op)
    for n in range(1, 100):
        model = _model(rig.store, f"{op}-{kind}-{persistent}-{n}")
        act = OPERATIONS[op](model)
        before = model.reader.digest()
        rig.plan.arm(kind, n, persistent)
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
            report.errors.append(f"N={n} {rig.plan.log}: {error}")
            report.problems += _after_failure(rig, model, before, act, n)
        elif not _succeeded(result):
            report.problems.append(f"N={n}: the call neither failed nor succeeded: {result!r}")
        elif rig.plan.fired:
            # Fail once: retried, so the board must be a fault-free run's. Persistently, a
            # call can still succeed: the write committed and only the termination
            # predicate's close after it failed, which leaves the run open by design.
            report.survived += 1
            report.problems += _after_success(rig, model, None if persistent else reference, n)
        else:
            report.completed_at = n
            return report
    report.problems.append("the operation never completed")
    return report


FAULTS = ["drop", "40001", "40P01"]


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "persistent"])
@pytest.mark.parametrize("kind", FAULTS)
@pytest.mark.parametrize("op", list(OPERATIONS))
def test_fault_at_every_statement(rig: Rig, op: str, kind: str, persistent: bool) -> None:
    report = fault_loop(rig, op, kind, persistent)
    assert report.problems == []
    assert report.completed_at > 3
    if persistent:
        assert report.failed >= 1, "a persistent fault must surface"
        assert report.failed + report.survived == report.completed_at - 1
    else:
        assert report.failed == 0, f"a passing fault must be retried: {report.errors}"
        assert report.survived == report.completed_at - 1


# -- a COMMIT whose answer never arrives -------------------------------------------------


@pytest.mark.parametrize("lost", ["lost-ack", "lost-answers"])
@pytest.mark.parametrize("op", list(OPERATIONS))
def test_lost_commit_answer_is_resolved_and_applied_once(rig: Rig, op: str, lost: str) -> None:
    """The COMMIT lands and its answer is lost (``lost-answers``: every answer of it).

    The store learns from the server that the transaction committed; with every answer
    lost, what a one-trip append kept is read back by the transaction's id, so the call
    still returns the right sequence number.
    """
    reference = _reference(rig, op)
    model = _model(rig.store, f"{op}-{lost}-done" if "done" in op else f"{op}-{lost}")
    act = OPERATIONS[op](model)
    rig.plan.arm(lost, 1, persistent=False)
    try:
        result = act()
    finally:
        rig.plan.disarm()
    assert rig.plan.fired == 1
    assert _succeeded(result)
    if isinstance(result, Written):
        assert result.sequence == model.reader.head() - ("done" in op)
    assert _after_success(rig, model, reference, 1) == []


def test_lost_commit_answer_with_the_server_gone_is_reported_in_doubt(rig: Rig) -> None:
    """The residual case: the commit landed, and nothing could ask the server whether.

    The call raises a StoreError that says so; the write is on the board once, and a
    repeat with the same idempotency key is recognised as a repeat, not written twice.
    """
    model = _model(rig.store, "in-doubt")
    rig.plan.arm("lost-ack", 1, persistent=True)
    try:
        with pytest.raises(StoreError, match="could not learn whether the commit landed"):
            model.control.write("clerk", "events", {"n": 1}, idempotency_key="k1")
    finally:
        rig.plan.disarm()
    again = model.control.write("clerk", "events", {"n": 1}, idempotency_key="k1")
    assert isinstance(again, Written) and again.repeat
    assert [c.content for c in model.reader.read_level("events")] == [{"n": 1}]
    assert rig.space.violations("in-doubt") == []
    assert _no_leaks(rig, 1) == []


# -- the negative control --------------------------------------------------------------


def test_negative_control_two_transaction_append_is_caught(pg_space: PgSpace) -> None:
    for rig in _rig(pg_space, TwoTransactionStore):
        report = fault_loop(rig, "write", "40001", persistent=True)
        assert any("changed although the call failed" in p for p in report.problems), report


def test_fault_plan_counts_statements_and_fires_where_told(rig: Rig) -> None:
    model = _model(rig.store, "plan")
    rig.plan.arm("40001", 10_000, persistent=False)
    model.control.write("clerk", "events", 1)
    rig.plan.disarm()
    assert rig.plan.count >= 5 and rig.plan.fired == 0  # outcome, BEGIN, lock, INSERT, ...
    rig.plan.arm("40001", 1, persistent=True)
    with pytest.raises(StoreError, match="SerializationFailure"):
        model.control.write("clerk", "events", 2)
    rig.plan.disarm()
    assert rig.plan.fired == rig.store._retries + 1
