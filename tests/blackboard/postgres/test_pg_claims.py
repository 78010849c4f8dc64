"""Leased claims: the kernel primitive under pybb's workers (issue 7).

``Control.claim`` / ``renew`` / ``release``, ``BoardReader.claims`` and fenced batches,
on every store; on PostgreSQL, claimers in separate processes that stall past their
lease: the board's log of fenced writes must show no key held by two holders at once
(the checker is :func:`pg_claimers.claim_history`; without fences the same run breaks it).
The negative controls of the contract checks are memory stores with one claim rule removed.
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from pg_claimers import KEYS, claim_history, claimer
from pg_harness import PgSpace, pg_space

from blackboard import (
    Claim,
    ContentError,
    Control,
    Fence,
    Level,
    ProposedContribution,
    Rejected,
    RejectionCause,
    StoreError,
    Written,
    create_model,
)
from blackboard.stores import MemoryStore, PendingWrite, SQLiteStore, _leases
from blackboard.stores._base import AppendOutcome
from blackboard.stores._postgres import PostgresStore
from blackboard.stores._sqlite import SCHEMA_VERSION as SQLITE_SCHEMA
from blackboard.testing import check_store
from storekit import StoreSpec

__all__ = ["pg_space"]

LONG = timedelta(seconds=60)

# -- the kernel API, on every store --------------------------------------------------------


def test_claims_through_the_control_on_every_store(store_spec: StoreSpec) -> None:
    store = store_spec.open()
    model = create_model([Level("work")], store=store, board_id="claims")
    taken = model.control.claim("w1", ["a", "b", "c"], lease=LONG, limit=2)
    assert [c.key for c in taken] == ["a", "b"]
    assert all(isinstance(c, Claim) and c.holder == "w1" for c in taken)
    assert [c.key for c in model.control.claim("w2", ["a", "b", "c"], lease=LONG)] == ["c"]
    assert {(c.key, c.holder) for c in model.reader.claims()} == {
        ("a", "w1"),
        ("b", "w1"),
        ("c", "w2"),
    }
    fenced = model.control.write_all(
        [ProposedContribution("w1", "work", {"key": "c"})], fence=Fence("w1", frozenset({"c"}))
    )
    assert isinstance(fenced[0], Rejected) and fenced[0].cause is RejectionCause.CLAIM_LOST
    assert "no longer holds" in fenced[0].reason
    landed = model.control.write_all(
        [ProposedContribution("w2", "work", {"key": "c"})], fence=Fence("w2", frozenset({"c"}))
    )
    assert isinstance(landed[0], Written) and landed[0].sequence == 1
    assert model.control.release("w1", ["a", "b", "c"]) == 2
    assert [c.key for c in model.reader.claims()] == ["c"]
    assert [c.key for c in model.control.renew("w2", ["c", "a"], lease=LONG)] == ["c"]
    assert model.reader.head() == 1, "claims are not records: only the fenced write landed"


def test_release_and_claim_gives_back_then_takes_on_every_store(store_spec: StoreSpec) -> None:
    store = store_spec.open()
    model = create_model([Level("work")], store=store, board_id="swap")
    control = model.control
    assert [c.key for c in control.claim("w1", ["a", "b"], lease=LONG)] == ["a", "b"]
    assert [c.key for c in control.claim("w2", ["x"], lease=LONG)] == ["x"]
    count, taken = control.release_and_claim("w1", ["a", "x"], ["x", "c", "d"], lease=LONG, limit=1)
    assert count == 1, "only a was w1's to give back (x is w2's)"
    assert [c.key for c in taken] == ["c"], "x is held by w2: skipped; the limit stops at c"
    assert {(c.key, c.holder) for c in model.reader.claims()} == {
        ("b", "w1"), ("c", "w1"), ("x", "w2"),
    }  # fmt: skip
    assert [c.key for c in control.claim("w2", ["a"], lease=LONG)] == ["a"], "a was released"
    assert control.release_and_claim("w1", ["b", "c"], [], lease=LONG) == (2, [])
    count, taken = control.release_and_claim("w1", [], ["b"], lease=LONG)
    assert count == 0 and [(c.key, c.holder) for c in taken] == [("b", "w1")]
    with pytest.raises(ContentError, match="limit"):
        control.release_and_claim("w1", ["b"], ["c"], lease=LONG, limit=-1)
    with pytest.raises(ContentError, match="holder"):
        control.release_and_claim("", ["b"], ["c"], lease=LONG)
    assert [c.key for c in model.reader.claims() if c.holder == "w1"] == ["b"]
    with pytest.raises(StoreError, match="no board"):
        store.release_and_claim("nowhere", "w", ["a"], ["b"], 1, LONG)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.claim("", ["a"], lease=LONG), "holder"),
        (lambda c: c.claim("w\x00", ["a"], lease=LONG), "holder"),
        (lambda c: c.claim("w", "abc", lease=LONG), "single string"),
        (lambda c: c.claim("w", [""], lease=LONG), "claimable key"),
        (lambda c: c.claim("w", ["x" * 257], lease=LONG), "claimable key"),
        (lambda c: c.claim("w", [7], lease=LONG), "claimable key"),
        (lambda c: c.claim("w", ["a"], lease=30), "timedelta"),
        (lambda c: c.claim("w", ["a"], lease=timedelta(0)), "timedelta"),
        (lambda c: c.claim("w", ["a"], lease=LONG, limit=-1), "limit"),
        (lambda c: c.claim("w", ["a"], lease=LONG, limit=True), "limit"),
        (lambda c: c.renew("w", ["a"], lease=-LONG), "timedelta"),
        (lambda c: c.release("", ["a"]), "holder"),
        (lambda c: c.write_all([], fence=("w", {"a"})), "Fence"),
        (lambda c: Fence("w", {"a"}), "frozenset"),  # type: ignore[arg-type]
    ],
)
def test_unusable_claim_arguments_raise_and_change_nothing(call: object, match: str) -> None:
    model = create_model([Level("work")], board_id="bad")
    with pytest.raises(ContentError, match=match):
        call(model.control)  # type: ignore[operator]
    assert model.reader.claims() == () and model.reader.head() == 0


def test_claims_on_a_board_that_does_not_exist_are_store_errors(store_spec: StoreSpec) -> None:
    store = store_spec.open()
    with pytest.raises(StoreError, match="no board"):
        store.claim("nowhere", "w", ["a"], 1, LONG)


def test_a_sqlite_file_of_schema_1_gains_claims_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:  # what a file written before claims looks like
        conn.execute("DROP TABLE bb_claims")
        conn.execute("PRAGMA user_version=1")
    model = create_model([Level("work")], store=f"sqlite:///{path}", board_id="old")
    assert [c.key for c in model.control.claim("w", ["a"], lease=LONG)] == ["a"]
    model.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_SCHEMA,)


# -- negative controls: a store with one claim rule removed fails check_store ------------


class BrokenClaims(MemoryStore):
    """BROKEN ON PURPOSE: a memory store with the claim rule named by ``breaks`` removed."""

    def __init__(self, breaks: str) -> None:
        super().__init__()
        self.breaks = breaks

    def claim(
        self, board_id: str, holder: str, keys: Sequence[str], limit: int, lease: timedelta
    ) -> list[Claim]:
        if self.breaks == "claims-ignore-holders":
            with self._lock:
                self._board(board_id).claims.clear()  # as if nobody held anything
        if self.breaks == "racy-claims":  # judge each row as read, then take without a lock
            with self._lock:
                rows = dict(self._board(board_id).claims)
            at = _leases.now()
            decided = {k: _leases.taken(rows.get(k), holder, at, at + lease.total_seconds())
                       for k in dict.fromkeys(keys)}  # fmt: skip
            taken = {k: row for k, row in decided.items() if row is not None}
            taken = dict(list(taken.items())[:limit])
            time.sleep(0.001)
            with self._lock:
                self._board(board_id).claims.update(taken)
            return [_leases.to_claim(k, row) for k, row in taken.items()]
        return super().claim(board_id, holder, keys, limit, lease)

    def release_and_claim(
        self,
        board_id: str,
        holder: str,
        released: Sequence[str],
        keys: Sequence[str],
        limit: int,
        lease: timedelta,
    ) -> tuple[int, list[Claim]]:
        if self.breaks == "release-skipped":  # one trip by leaving the release out
            return 0, super().claim(board_id, holder, keys, limit, lease) if keys else []
        return super().release_and_claim(board_id, holder, released, keys, limit, lease)

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        if self.breaks == "fence-ignored":
            fence = None
        return super().append(board_id, writes, fence)


BROKEN = {
    "claims-ignore-holders": "claims are exclusive",
    "fence-ignored": "lapsed claims are taken over and fence",
    "racy-claims": "concurrent claimers",
    "release-skipped": "release and claim",
}


@pytest.mark.parametrize("breaks", sorted(BROKEN))
def test_check_store_catches_a_broken_claim_rule(breaks: str) -> None:
    store = BrokenClaims(breaks)
    with pytest.raises(AssertionError, match=f"check_store: {BROKEN[breaks]}"):
        check_store(lambda: store, threads=8, writes_per_thread=5)


# -- PostgreSQL: SKIP LOCKED, and holders in separate processes ---------------------------


@pytest.mark.postgres
def test_a_claimer_skips_a_row_another_transaction_holds_instead_of_waiting(
    pg_space: PgSpace,
) -> None:
    with PostgresStore(pg_space.url) as store:
        model = create_model([Level("work")], store=store, board_id="skip")
        model.control.claim("w1", ["a"], lease=timedelta(milliseconds=1))
        time.sleep(0.01)  # lapsed: claimable by anyone
        with pg_space.connect() as conn, conn.transaction():
            conn.execute("SELECT 1 FROM bb_claims WHERE key = 'a' FOR UPDATE")
            started = time.monotonic()
            taken = model.control.claim("w2", ["a", "b"], lease=LONG)
            waited = time.monotonic() - started
        assert [c.key for c in taken] == ["b"], "the locked row is skipped, the free one taken"
        assert waited < 2.0, f"the claim waited {waited:.2f}s for a locked row"
        assert [c.key for c in model.control.claim("w2", ["a"], lease=LONG)] == ["a"]


@pytest.mark.postgres
def test_a_fenced_append_and_a_takeover_never_overlap(pg_space: PgSpace) -> None:
    """The fence's check and the batch are one transaction: a takeover waits it out."""
    with PostgresStore(pg_space.url) as store, PostgresStore(pg_space.url) as other:
        model = create_model([Level("work")], store=store, board_id="race")
        taker = create_model([Level("work")], store=other, board_id="race")
        results: list[object] = []
        for round_ in range(40):
            holder, rival = ("a", "b") if round_ % 2 == 0 else ("b", "a")
            me, them = (model, taker) if round_ % 2 == 0 else (taker, model)
            (claim,) = me.control.claim(holder, ["k"], lease=timedelta(milliseconds=20))
            time.sleep(0.02)  # lapsed: the rival may take it while we write
            barrier = threading.Barrier(2)

            def take(
                control: Control = them.control,
                name: str = rival,
                barrier: threading.Barrier = barrier,
            ) -> None:
                barrier.wait()
                results.extend(control.claim(name, ["k"], lease=LONG))

            thread = threading.Thread(target=take)
            thread.start()
            barrier.wait()
            content = {"key": "k", "holder": holder, "token": claim.token}
            me.control.write_all(
                [ProposedContribution(holder, "work", content)],
                fence=Fence(holder, frozenset({"k"})),
            )
            thread.join()
            current = [c for c in me.reader.claims() if c.key == "k"]
            if current:  # the writer of the next round takes it over, token and all
                rival_claim = current[0]
                content = {"key": "k", "holder": rival_claim.holder, "token": rival_claim.token}
                them.control.write_all(
                    [ProposedContribution(rival_claim.holder, "work", content)],
                    fence=Fence(rival_claim.holder, frozenset({"k"})),
                )
                them.control.release(rival_claim.holder, ["k"])
        log = [c.content for c in model.reader.read_level("work")]
        assert claim_history(log) == []
        assert len(log) >= 40


def _run_claimers(
    space: PgSpace, fenced: bool, seconds: float = 3.0
) -> tuple[list[str], list[dict[str, int]]]:
    board = f"claims-{uuid.uuid4().hex[:8]}"
    with PostgresStore(space.url) as store:
        model = create_model([Level("work")], store=store, board_id=board)
        context = mp.get_context("spawn")
        with context.Pool(4) as pool:
            jobs = [
                pool.apply_async(claimer, (space.url, board, f"h{n}", seconds, n, fenced))
                for n in range(4)
            ]
            counts = [job.get(timeout=120) for job in jobs]
        contents = [c.content for c in model.reader.read_level("work")]
    return claim_history(contents), counts


@pytest.mark.postgres
def test_four_processes_never_hold_a_key_at_once(pg_space: PgSpace) -> None:
    problems, counts = _run_claimers(pg_space, fenced=True)
    assert problems == []
    assert sum(c["written"] for c in counts) >= 4 * len(KEYS)
    assert sum(c["stalls"] for c in counts) > 0, "no holder stalled: the test proves little"
    assert sum(c["lost"] for c in counts) > 0, "no stalled holder was ever taken over"


@pytest.mark.postgres
def test_negative_control_unfenced_writes_break_the_claim_history(pg_space: PgSpace) -> None:
    problems, counts = _run_claimers(pg_space, fenced=False)
    assert problems, f"writes without a fence went unnoticed: {counts}"
