"""A batch judged ahead of the board's lock is kept only if the board did not change under it.

The PostgreSQL store judges a batch before it takes the board's row lock (so the lock is
held for a round trip and the commit, not for the judging) and, under the lock, reads the
same things again. These tests commit a competing write from a second store in the gap:
after the first store judged its batch and before it locks the board (a connection class
that runs the competitor just before the locking statement). Every outcome must be the one
judged under the lock: a compare-and-set conflicts, a unique key is a duplicate, a
repeated idempotency key is a repeat, a closed run refuses, and plain writes land after
the competitor's in a gap-free log. Keeping the plan without checking it again breaks
each of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from pg_harness import PgSpace, pg_space

from blackboard import (
    Conflict,
    Fence,
    Level,
    Model,
    Premise,
    ProposedContribution,
    Rejected,
    RejectionCause,
    Written,
    create_model,
)
from blackboard.stores._postgres import PostgresStore

__all__ = ["pg_space"]

pytestmark = pytest.mark.postgres

_before_lock: list[Callable[[], object]] = []


class _GapConnection(psycopg.Connection[Any]):
    """Runs the armed competitor just before this session locks a board.

    A batch that reads something locks it with ``SELECT ... FOR UPDATE``; one that reads
    nothing, or only its keys and its fence, with the head's update itself (``_pg_plain``).
    """

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if (
            isinstance(query, str)
            and "bb_boards" in query
            and ("FOR UPDATE" in query or "UPDATE bb_boards SET head = head +" in query)
        ):
            while _before_lock:
                _before_lock.pop()()
        return super().execute(query, params, **kwargs)


def _model(store: PostgresStore, board: str) -> Model:
    return create_model(
        [Level("events"), Level("ids", unique="id"), Premise("p")],
        premises={"p": 0},
        store=store,
        board_id=board,
    )


@pytest.fixture
def pair(pg_space: PgSpace) -> Iterator[tuple[Model, Model]]:
    """Two models of one board: the first's locks let the second write first."""
    mine = PostgresStore(pg_space.url, connection_class=_GapConnection)
    theirs = PostgresStore(pg_space.url)
    try:
        yield _model(mine, "gap"), _model(theirs, "gap")
    finally:
        _before_lock.clear()
        mine.close()
        theirs.close()


def _in_the_gap(act: Callable[[], object]) -> None:
    _before_lock.append(act)


def _sequences(model: Model) -> list[int]:
    return [record.sequence for record in model.reader.log()]


def test_a_compare_and_set_conflicts_when_the_premise_moved(pair: tuple[Model, Model]) -> None:
    mine, theirs = pair
    _in_the_gap(lambda: theirs.control.set_premise("w", "p", "theirs", expected_version=1))
    result = mine.control.set_premise("w", "p", "mine", expected_version=1)
    assert result == Conflict(2)
    assert mine.reader.read_premise("p").value == "theirs"


def test_a_unique_key_is_a_duplicate_when_it_landed_first(pair: tuple[Model, Model]) -> None:
    mine, theirs = pair
    _in_the_gap(lambda: theirs.control.write("w", "ids", {"id": 7, "by": "theirs"}))
    result = mine.control.write("w", "ids", {"id": 7, "by": "mine"})
    assert isinstance(result, Rejected) and result.cause is RejectionCause.DUPLICATE
    assert [r.content["by"] for r in mine.reader.read_level("ids")] == ["theirs"]


def test_a_key_that_landed_first_is_a_repeat(pair: tuple[Model, Model]) -> None:
    mine, theirs = pair
    landed: list[object] = []
    _in_the_gap(lambda: landed.append(theirs.control.write("w", "events", {"n": 1},
                                                             idempotency_key="k")))  # fmt: skip
    result = mine.control.write("w", "events", {"n": 1}, idempotency_key="k")
    (first,) = landed
    assert isinstance(first, Written) and isinstance(result, Written)
    assert result.repeat and result.sequence == first.sequence
    assert len(mine.reader.read_level("events")) == 1


def test_a_run_closed_in_the_gap_refuses_the_batch(pair: tuple[Model, Model]) -> None:
    mine, theirs = pair
    _in_the_gap(lambda: theirs.control.abort("closed in the gap"))
    result = mine.control.write("w", "events", {"n": 1})
    assert isinstance(result, Rejected) and result.cause is RejectionCause.RUN_CLOSED
    assert list(mine.reader.read_level("events")) == []


def test_plain_writes_land_after_the_competitors(pair: tuple[Model, Model]) -> None:
    mine, theirs = pair
    head = mine.reader.head()
    _in_the_gap(lambda: theirs.control.write("w", "events", {"by": "theirs"}))
    batch = [ProposedContribution("w", "events", {"by": "mine", "n": n}) for n in range(3)]
    results = mine.control.write_all(batch)
    assert [r.sequence for r in results if isinstance(r, Written)] == [
        head + 2,
        head + 3,
        head + 4,
    ]
    by = [r.content["by"] for r in mine.reader.read_level("events")]
    assert by == ["theirs", "mine", "mine", "mine"]
    assert _sequences(mine) == list(range(1, head + 5))


def test_a_batch_with_a_duplicate_inside_it_moves_as_one(pair: tuple[Model, Model]) -> None:
    mine, theirs = pair
    _in_the_gap(lambda: theirs.control.write("w", "events", {"by": "theirs"}))
    batch = [
        ProposedContribution("w", "ids", {"id": 1, "n": 0}),
        ProposedContribution("w", "ids", {"id": 1, "n": 1}),
        ProposedContribution("w", "events", {"by": "mine"}),
    ]
    first, second, third = mine.control.write_all(batch)
    assert isinstance(first, Written) and isinstance(third, Written)
    assert isinstance(second, Rejected) and second.cause is RejectionCause.DUPLICATE
    assert third.sequence == first.sequence + 1
    assert [r.sequence for r in mine.reader.read_level("ids")] == [first.sequence]
    assert _sequences(mine) == list(range(1, third.sequence + 1))


def test_a_batchs_key_that_landed_in_the_gap_is_a_repeat(pair: tuple[Model, Model]) -> None:
    """A keyed batch is judged on the kernel's read ahead; under the lock it is read again."""
    mine, theirs = pair
    landed: list[object] = []
    _in_the_gap(lambda: landed.append(theirs.control.write("w", "events", {"n": 1},
                                                             idempotency_key="k")))  # fmt: skip
    batch = [ProposedContribution("w", "events", {"n": n}) for n in (1, 2)]
    results = mine.control.write_all(batch, idempotency_keys=["k", "k2"])
    (first,) = landed
    assert isinstance(first, Written) and all(isinstance(r, Written) for r in results)
    assert results[0] == Written(first.sequence, None, repeat=True)
    assert results[1] == Written(first.sequence + 1, None)
    assert [r.content["n"] for r in mine.reader.read_level("events")] == [1, 2]
    assert _sequences(mine) == list(range(1, first.sequence + 2))


def test_a_fence_taken_over_in_the_gap_refuses_the_batch(pair: tuple[Model, Model]) -> None:
    """A fenced batch judged ahead lands only if the fence still holds under the lock."""
    mine, theirs = pair
    mine.control.claim("me", ["k"], lease=timedelta(milliseconds=1))
    time.sleep(0.01)  # lapsed: anyone may take it over
    _in_the_gap(lambda: theirs.control.claim("them", ["k"], lease=timedelta(seconds=30)))
    fence = Fence("me", frozenset({"k"}))
    batch = [ProposedContribution("w", "events", {"n": n}) for n in (1, 2)]
    results = mine.control.write_all(batch, idempotency_keys=["k1", "k2"], fence=fence)
    assert all(isinstance(r, Rejected) and r.cause is RejectionCause.CLAIM_LOST for r in results)
    assert list(mine.reader.read_level("events")) == []


def test_a_fenced_batchs_key_that_landed_in_the_gap_is_a_repeat(pair: tuple[Model, Model]) -> None:
    """The unique index of keys refuses the one-statement insert; judged under the lock."""
    mine, theirs = pair
    mine.control.claim("me", ["k"], lease=timedelta(seconds=30))
    landed: list[object] = []
    _in_the_gap(lambda: landed.append(theirs.control.write("w", "events", {"n": 1},
                                                             idempotency_key="k1")))  # fmt: skip
    fence = Fence("me", frozenset({"k"}))
    batch = [ProposedContribution("w", "events", {"n": n}) for n in (1, 2)]
    results = mine.control.write_all(batch, idempotency_keys=["k1", "k2"], fence=fence)
    (first,) = landed
    assert isinstance(first, Written)
    assert results == [
        Written(first.sequence, None, repeat=True),
        Written(first.sequence + 1, None),
    ]
    assert [r.content["n"] for r in mine.reader.read_level("events")] == [1, 2]
    assert _sequences(mine) == list(range(1, first.sequence + 2))


class _KeyCounting(psycopg.Connection[Any]):
    """Counts the look-ups of idempotency keys this session sends."""

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(query, str) and "ikey = k.ikey" in query:
            _key_reads.append(query)
        return super().execute(query, params, **kwargs)


_key_reads: list[str] = []


def test_a_keyed_batch_reads_its_keys_once_ahead_and_under_the_lock_by_the_index(
    pg_space: PgSpace,
) -> None:
    """Under the lock a new key is checked by the unique index of keys, not read again."""
    store = PostgresStore(pg_space.url, connection_class=_KeyCounting)
    try:
        model = _model(store, "once")
        head = model.reader.head()
        _key_reads.clear()
        batch = [ProposedContribution("w", "events", {"n": n}) for n in range(3)]
        results = model.control.write_all(batch, idempotency_keys=["a", "b", "c"])
        assert [r.sequence for r in results if isinstance(r, Written)] == list(
            range(head + 1, head + 4)
        )
        assert len(_key_reads) == 1, "the kernel's read ahead is the plan's: not read twice"
        _key_reads.clear()
        again = model.control.write_all(batch, idempotency_keys=["a", "b", "c"])
        assert [r.repeat for r in again if isinstance(r, Written)] == [True] * 3
        assert len(_key_reads) == 1, "repeats are settled by the read ahead alone"
    finally:
        store.close()


@pytest.mark.parametrize("encoder", ["orjson", "json"])
def test_a_fenced_keyed_batchs_text_lands_exactly(
    pair: tuple[Model, Model], encoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-statement append carries its rows as JSON: every string comes back as sent.

    With orjson, and with json's encoder, which a copy of the kernel without orjson uses.
    """
    if encoder == "json":
        monkeypatch.setattr("blackboard.stores._pg_plain._orjson_dumps", None)
    mine, _ = pair
    mine.control.claim("me", ["k"], lease=timedelta(seconds=30))
    odd = ["\x00nul", 'quote " and \\ back', "\u2028 line \U0001f600", "\x7f\x01 ctl", ""]
    batch = [ProposedContribution("w\x00riter", "events", {"s": s, "n": 2**62}) for s in odd]
    keys = [f"key/\x00/{n}/\u00e9" for n in range(len(odd))]
    results = mine.control.write_all(
        batch, idempotency_keys=keys, fence=Fence("me", frozenset({"k"}))
    )
    assert all(isinstance(r, Written) and not r.repeat for r in results)
    got = list(mine.reader.read_level("events"))
    assert [r.content for r in got] == [{"s": s, "n": 2**62} for s in odd]
    assert {r.writer for r in got} == {"w\x00riter"}
    assert [r.idempotency_key for r in mine.reader.log() if r.region == "events"] == keys
    again = mine.control.write_all(batch, idempotency_keys=keys)
    assert all(isinstance(r, Written) and r.repeat for r in again)
