"""Conformance checks for your own backends.

:func:`check_store` runs the store contract (the one every built-in store passes) against a
:class:`~blackboard.stores.Store` you wrote::

    from blackboard.testing import check_store

    def test_my_store_keeps_the_contract(tmp_path):
        check_store(lambda: MyStore(tmp_path / "boards"))

The factory must return a new handle on *the same* storage each time it is called (a
store that lives in one object, like :class:`~blackboard.stores.MemoryStore`, may return
that object): the checks reopen boards through a second handle and write from several
threads at once. Every check uses boards of its own, with fresh random ids, so a store
that already holds boards can be checked. A broken rule raises :class:`AssertionError`
naming the check and what it saw.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from blackboard._claims import Claim, Fence
from blackboard._json import encode
from blackboard._records import Outcome, Record, RecordKind, RunStatus
from blackboard.errors import IdempotencyKeyError
from blackboard.stores._base import (
    Appended,
    AppendOutcome,
    ClaimLost,
    Closed,
    Duplicate,
    Forbidden,
    PendingWrite,
    Repeated,
    Store,
    VersionConflict,
    fingerprint,
)

__all__ = ["STORE_CHECKS", "check_store"]

StoreFactory = Callable[[], Store]

_BOARD = "@board"
_DECLARATION = '{"contract":1}'


def check_store(factory: StoreFactory, *, threads: int = 4, writes_per_thread: int = 25) -> None:
    """Run every store-contract check against the stores ``factory`` opens.

    Args:
        factory: Returns a new handle on the same storage each time it is called.
        threads: How many threads write at once in the concurrency checks.
        writes_per_thread: How many writes each of them makes.

    Raises:
        AssertionError: The store broke the contract; the message names the check.
    """
    for name, check in STORE_CHECKS:
        try:
            check(_Harness(factory, threads, writes_per_thread))
        except AssertionError as exc:
            raise AssertionError(f"check_store: {name}: {exc}") from exc


class _Harness:
    """What a check gets: store handles (closed afterwards) and fresh board ids."""

    def __init__(self, factory: StoreFactory, threads: int, writes: int) -> None:
        self.factory = factory
        self.threads = threads
        self.writes = writes

    @contextmanager
    def stores(self, count: int = 1) -> Iterator[list[Store]]:
        with ExitStack() as stack:
            handles = [self.factory() for _ in range(count)]
            for handle in handles:
                stack.callback(handle.close)
            yield handles

    @staticmethod
    def board(store: Store, opening: Sequence[PendingWrite] = ()) -> str:
        board_id = f"contract-{uuid.uuid4().hex}"
        _expect(
            store.open_board(board_id, _DECLARATION, opening) == _DECLARATION,
            "open_board of a new board must return the declaration it was given",
        )
        return board_id


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _level(region: str, content: Any, **extra: Any) -> PendingWrite:
    writer = extra.pop("writer", "w")
    return PendingWrite(RecordKind.LEVEL, region, writer, encode(content, "content"), **extra)


def _premise(name: str, value: Any, expected: int | None, **extra: Any) -> PendingWrite:
    return PendingWrite(
        RecordKind.PREMISE, name, "w", encode(value, "value"), expected_version=expected, **extra
    )


def _grant(kind: RecordKind, agent: str, region: str) -> PendingWrite:
    return PendingWrite(kind, region, _BOARD, encode({"agent": agent}, "grant"))


def _close(status: RunStatus = RunStatus.ABORTED, reason: str = "done") -> PendingWrite:
    payload = encode({"status": status.value, "reason": reason}, "close")
    return PendingWrite(RecordKind.CLOSE, None, _BOARD, payload)


def _appended(outcome: AppendOutcome, what: str) -> Record:
    _expect(isinstance(outcome, Appended), f"{what}: expected Appended, got {outcome!r}")
    assert isinstance(outcome, Appended)
    return outcome.record


def _append_one(store: Store, board: str, write: PendingWrite) -> AppendOutcome:
    outcomes = store.append(board, [write])
    _expect(len(outcomes) == 1, f"append of one write returned {len(outcomes)} outcomes")
    return outcomes[0]


# -- the checks ------------------------------------------------------------------------


def _open_and_reopen(h: _Harness) -> None:
    opening = [_premise("p", 0, None), _grant(RecordKind.GRANT, "a", "l")]
    with h.stores(2) as (first, second):
        board = h.board(first, opening)
        _expect(first.head(board) == 2, "the opening writes must take sequences 1 and 2")
        again = second.open_board(board, '{"other":1}', [_premise("p", 9, None)])
        _expect(again == _DECLARATION, f"reopening must return the stored declaration: {again!r}")
        _expect(second.head(board) == 2, "reopening must not apply opening writes again")
        premise = second.read_premise(board, "p")
        _expect(premise is not None and premise.version == 1, f"opening premise: {premise!r}")
        _expect(second.permissions(board) == {("a", "l")}, "the opening grant must be kept")


def _sequence_is_gap_free(h: _Harness) -> None:
    with h.stores(2) as (store, other):
        board = h.board(store)
        seqs = [
            _appended(_append_one(store, board, _level("l", {"i": i})), "append").sequence
            for i in range(3)
        ]
        batch = store.append(board, [_level("l", {"i": i}) for i in range(3, 7)])
        seqs += [_appended(o, "batched append").sequence for o in batch]
        _expect(seqs == list(range(1, 8)), f"sequences must be 1..7 in order, got {seqs}")
        _expect(store.head(board) == 7, f"head must be 7, got {store.head(board)}")
        log = other.read_log(board)
        _expect([r.sequence for r in log] == seqs, "a second handle must read the same log")
        _expect([r.content for r in log] == [{"i": i} for i in range(7)], "contents differ")


def _records_round_trip(h: _Harness) -> None:
    content = {"nested": [1, 2.5, None, True, "x"], "big": 2**62, "text": "é\x00'; --\"", "e": {}}
    region, writer = "lev'el;\"--", "wri\x00ter"
    with h.stores(2) as (store, other):
        board = h.board(store)
        write = _level(region, content, writer=writer, idempotency_key="k\x00'")
        record = _appended(_append_one(store, board, write), "append")
        (read,) = other.read_log(board)
        for field in ("sequence", "kind", "region", "writer", "content", "version"):
            _expect(
                getattr(read, field) == getattr(record, field),
                f"{field} read back {getattr(read, field)!r}, written {getattr(record, field)!r}",
            )
        _expect(read.idempotency_key == "k\x00'", f"key read back {read.idempotency_key!r}")
        _expect(isinstance(read.at, datetime) and read.at.utcoffset() is not None, "at: aware")
        _expect(abs((read.at - record.at).total_seconds()) < 1.0, "at must be kept")


def _premise_compare_and_set(h: _Harness) -> None:
    with h.stores() as (store,):
        board = h.board(store, [_premise("p", "v1", None)])
        second = _appended(_append_one(store, board, _premise("p", "v2", 1)), "CAS at 1")
        _expect(second.version == 2, f"a CAS from version 1 must set version 2: {second!r}")
        stale = _append_one(store, board, _premise("p", "v3", 1))
        _expect(stale == VersionConflict(2), f"a stale CAS must conflict at 2, got {stale!r}")
        reopen = _append_one(store, board, _premise("p", "again", None))
        _expect(reopen == VersionConflict(2), f"a second opening must conflict: {reopen!r}")
        _expect(store.head(board) == 2, "refused writes must not take a sequence number")
        chained = store.append(board, [_premise("p", "a", 2), _premise("p", "b", 3)])
        versions = [_appended(o, "chained CAS").version for o in chained]
        _expect(versions == [3, 4], f"a batch must see its own earlier writes: {versions}")
        current = store.read_premise(board, "p")
        _expect(current is not None and (current.content, current.version) == ("b", 4), "read")
        _expect(store.read_premise(board, "nothing") is None, "an unset premise reads None")


def _unique_levels(h: _Harness) -> None:
    with h.stores() as (store,):
        board = h.board(store)
        first = _appended(_append_one(store, board, _level("u", 1, unique_key="k")), "unique")
        again = _append_one(store, board, _level("u", 2, unique_key="k"))
        _expect(again == Duplicate(first.sequence), f"a repeated unique key: {again!r}")
        elsewhere = _append_one(store, board, _level("v", 1, unique_key="k"))
        _appended(elsewhere, "the same key on another level")
        batch = store.append(
            board, [_level("u", 3, unique_key="z"), _level("u", 4, unique_key="z")]
        )
        _appended(batch[0], "first of a batch")
        _expect(isinstance(batch[1], Duplicate), f"a duplicate inside a batch: {batch[1]!r}")
        _expect(store.head(board) == 3, f"duplicates take no sequence: head {store.head(board)}")


def _idempotency_keys(h: _Harness) -> None:
    with h.stores(2) as (store, other):
        board = h.board(store)
        write = _level("l", {"x": 1}, idempotency_key="key-1")
        first = _appended(_append_one(store, board, write), "keyed write")
        repeat = _append_one(other, board, write)
        _expect(repeat == Repeated(first), f"a repeat must return the first record: {repeat!r}")
        _expect(other.head(board) == 1, "a repeat must not add a record")
        found = other.find_key(board, "key-1")
        _expect(found == (first, fingerprint(write)), f"find_key returned {found!r}")
        _expect(other.find_key(board, "key-2") is None, "an unused key must not be found")
        reused = [_level("l", {"y": 1}), _level("l", {"x": 2}, idempotency_key="key-1")]
        try:
            store.append(board, reused)
        except IdempotencyKeyError:
            pass
        else:
            raise AssertionError("a key reused for another write must raise IdempotencyKeyError")
        _expect(store.head(board) == 1, "a batch that raised must leave nothing behind")


def _grants_and_revokes(h: _Harness) -> None:
    with h.stores() as (store,):
        board = h.board(store)
        guarded = _level("l", 1, writer="a", check_permission=True)
        _expect(_append_one(store, board, guarded) == Forbidden(), "no grant: Forbidden")
        _appended(_append_one(store, board, _grant(RecordKind.GRANT, "a", "l")), "grant")
        _expect(store.permitted(board, "a", "l"), "granted agent must be permitted")
        _expect(store.permissions(board) == {("a", "l")}, f"{store.permissions(board)}")
        _appended(_append_one(store, board, guarded), "write under a grant")
        _appended(_append_one(store, board, _grant(RecordKind.GRANT, "a", "l")), "grant twice")
        _appended(_append_one(store, board, _grant(RecordKind.REVOKE, "a", "l")), "revoke")
        _expect(not store.permitted(board, "a", "l"), "a revoked agent must not be permitted")
        _expect(store.permissions(board) == frozenset(), "revoke must remove the grant")
        _expect(_append_one(store, board, guarded) == Forbidden(), "after revoke: Forbidden")
        _expect(store.head(board) == 4, f"refusals take no sequence: head {store.head(board)}")


def _close_blocks_later_writes(h: _Harness) -> None:
    with h.stores(2) as (store, other):
        board = h.board(store)
        _expect(store.outcome(board) == Outcome(RunStatus.OPEN), "a new run must be open")
        _appended(_append_one(store, board, _level("l", 1)), "write")
        closing = _appended(_append_one(store, board, _close(RunStatus.COMPLETED, "why")), "close")
        expected = Outcome(RunStatus.COMPLETED, "why", closing.sequence)
        _expect(other.outcome(board) == expected, f"outcome: {other.outcome(board)!r}")
        later = other.append(board, [_level("l", 2), _premise("p", 1, None), _close()])
        _expect(all(o == Closed(closing.sequence) for o in later), f"after close: {later!r}")
        _expect(other.head(board) == closing.sequence, "nothing may land after the close")


def _close_within_a_batch(h: _Harness) -> None:
    # A backend's transaction is asked for its head and close once per batch; the writes
    # after a CLOSE in the same batch must still be refused, and the head move by two.
    with h.stores() as (store,):
        board = h.board(store)
        batch = [_level("l", 1), _close(), _level("l", 2), _premise("p", 1, None)]
        outcomes = store.append(board, batch)
        first, closing = (_appended(o, "before the close") for o in outcomes[:2])
        _expect((first.sequence, closing.sequence) == (1, 2), f"sequences {first!r} {closing!r}")
        _expect(outcomes[2:] == [Closed(2), Closed(2)], f"after a close in the batch: {outcomes}")
        _expect(store.head(board) == 2, f"head {store.head(board)} after a batch that closed")


def _read_log_ranges(h: _Harness) -> None:
    with h.stores() as (store,):
        board = h.board(store)
        store.append(board, [_level("l", i) for i in range(1, 6)])

        def seqs(after: int = 0, until: int | None = None) -> list[int]:
            return [r.sequence for r in store.read_log(board, after, until)]

        cases = {
            (0, None): [1, 2, 3, 4, 5],
            (2, None): [3, 4, 5],
            (1, 3): [2, 3],
            (3, 3): [],
            (4, 2): [],
            (0, 0): [],
            (0, 99): [1, 2, 3, 4, 5],
            (5, None): [],
            (9, None): [],
        }
        for (after, until), expected in cases.items():
            got = seqs(after, until)
            _expect(got == expected, f"read_log(after={after}, until={until}) = {got}")


def _read_region(h: _Harness) -> None:
    with h.stores() as (store,):
        board = h.board(store, [_premise("p", 0, None)])
        store.append(board, [_level("a", 1), _level("b", 2), _level("a", 3), _premise("p", 1, 1)])
        got = [(r.sequence, r.content) for r in store.read_region(board, "a")]
        _expect(got == [(2, 1), (4, 3)], f"read_region('a') = {got}")
        _expect(store.read_region(board, "none") == [], "an unwritten level reads empty")


def _wait_wakes(h: _Harness) -> None:
    with h.stores(2) as (store, writer):
        board = h.board(store, [_premise("p", 0, None)])
        _expect(store.wait(board, 0, 0.01), "wait must return True at once when past `after`")
        started = time.monotonic()
        _expect(not store.wait(board, 1, 0.05), "wait must time out when nothing lands")
        _expect(time.monotonic() - started >= 0.04, "wait returned before its timeout")
        later = threading.Timer(0.1, lambda: writer.append(board, [_level("l", 1)]))
        later.start()
        try:
            started = time.monotonic()
            woke = store.wait(board, 1, 10.0)
            elapsed = time.monotonic() - started
        finally:
            later.join()
        _expect(woke and elapsed < 5.0, f"wait must wake on a write (woke={woke}, {elapsed:.2f}s)")


def _concurrent_writers(h: _Harness) -> None:
    with h.stores(h.threads) as handles:
        board = h.board(handles[0], [_premise("p", 0, None)])
        results: dict[int, list[AppendOutcome]] = {}
        errors: list[BaseException] = []

        def work(n: int) -> None:
            store = handles[n % len(handles)]
            mine = results.setdefault(n, [])
            try:
                for i in range(h.writes):
                    mine += store.append(board, [_level("l", {"t": n, "i": i})])
                    current = store.read_premise(board, "p")
                    version = current.version if current is not None else 0
                    mine += store.append(board, [_premise("p", [n, i], version)])
            except BaseException as exc:  # reported below, on the checking thread
                errors.append(exc)

        _run_threads(work, h.threads)
        _expect(not errors, f"a writer thread raised: {errors[:1]!r}")
        _check_concurrent_log(handles[0], board, results, h.threads * h.writes)


def _check_concurrent_log(
    store: Store, board: str, results: dict[int, list[AppendOutcome]], level_writes: int
) -> None:
    log = store.read_log(board)
    seqs = [r.sequence for r in log]
    _expect(seqs == list(range(1, len(log) + 1)), "concurrent writes left gaps or duplicates")
    _expect(store.head(board) == len(log), f"head {store.head(board)} != {len(log)} records")
    levels = [r for r in log if r.kind is RecordKind.LEVEL]
    _expect(len(levels) == level_writes, f"{len(levels)} of {level_writes} level writes landed")
    landed = {r.sequence: r for r in log}
    cas = [o for outcomes in results.values() for o in outcomes if isinstance(o, Appended)]
    for outcome in cas:
        kept = landed.get(outcome.record.sequence)
        _expect(kept is not None and kept.content == outcome.record.content, "ack not in log")
    versions = sorted(o.record.version or 0 for o in cas if o.record.kind is RecordKind.PREMISE)
    _expect(versions == list(range(2, len(versions) + 2)), f"CAS versions {versions[:10]}...")
    current = store.read_premise(board, "p")
    _expect(current is not None and current.version == len(versions) + 1, "premise version")


def _concurrent_open(h: _Harness) -> None:
    board_id = f"contract-{uuid.uuid4().hex}"
    with h.stores(h.threads) as handles:
        answers: list[str] = []

        def work(n: int) -> None:
            opening = [_premise("p", n, None)]
            answers.append(handles[n].open_board(board_id, f'{{"n":{n}}}', opening))

        _run_threads(work, h.threads)
        _expect(len(set(answers)) == 1, f"racing opens disagree on the declaration: {answers}")
        _expect(handles[0].head(board_id) == 1, "racing opens must apply one set of openings")


_LONG = timedelta(seconds=60)


def _keys(claims: Sequence[Claim]) -> list[str]:
    return [claim.key for claim in claims]


def _claims_are_exclusive(h: _Harness) -> None:
    with h.stores(2) as (first, second):
        board = h.board(first)
        taken = first.claim(board, "a", ["k1", "k2", "k3"], 2, _LONG)
        _expect(_keys(taken) == ["k1", "k2"], f"claim must take the first free keys: {taken}")
        _expect(all(c.holder == "a" and c.token == 1 for c in taken), f"new claims: {taken}")
        _expect(all(c.expires > datetime.now(UTC) for c in taken), "a lease must end later")
        other = second.claim(board, "b", ["k1", "k2", "k3", "k4"], 10, _LONG)
        _expect(_keys(other) == ["k3", "k4"], f"held keys must be skipped: {other}")
        again = first.claim(board, "a", ["k1", "k4"], 5, _LONG)
        _expect(_keys(again) == ["k1"], f"a holder re-claims its own, not others': {again}")
        _expect(again[0].token == 1, f"re-claiming one's own key keeps its token: {again}")
        held = {c.key: c.holder for c in second.claims(board)}
        _expect(held == {"k1": "a", "k2": "a", "k3": "b", "k4": "b"}, f"claims(): {held}")
        _expect(first.release(board, "a", ["k1", "k3"]) == 1, "release frees only one's own")
        moved = second.claim(board, "b", ["k1"], 1, _LONG)
        _expect(_keys(moved) == ["k1"] and moved[0].token == 2, f"a freed key: {moved}")
        renewed = first.renew(board, "a", ["k1", "k2"], _LONG)
        _expect(_keys(renewed) == ["k2"], f"renew keeps only what is still held: {renewed}")
        _expect(first.head(board) == 0, "claims must take no sequence number")


def _release_and_claim(h: _Harness) -> None:
    with h.stores(2) as (first, second):
        board = h.board(first)
        _keys(first.claim(board, "a", ["k1", "k2"], 2, _LONG))
        _keys(second.claim(board, "b", ["k3"], 1, _LONG))
        count, taken = first.release_and_claim(
            board, "a", ["k1", "k3"], ["k3", "k4", "k5"], 1, _LONG
        )
        _expect(count == 1, f"release_and_claim must free only one's own keys: {count}")
        _expect(_keys(taken) == ["k4"], f"then claim as claim() does (skip k3, limit 1): {taken}")
        held = {c.key: c.holder for c in second.claims(board)}
        _expect(held == {"k2": "a", "k3": "b", "k4": "a"}, f"after release_and_claim: {held}")
        moved = second.claim(board, "b", ["k1"], 1, _LONG)
        _expect(_keys(moved) == ["k1"] and moved[0].token == 2, f"a key it freed: {moved}")
        _expect(first.release_and_claim(board, "a", ["k2", "k4"], [], 0, _LONG) == (2, []),
                "release_and_claim with nothing to claim only releases")  # fmt: skip


def _read_ahead(h: _Harness) -> None:
    with h.stores() as (store,):
        board = h.board(store)
        keyed = _level("l", {"n": 1}, idempotency_key="ahead")
        _appended(_append_one(store, board, keyed), "a keyed write")
        writes = [keyed, _level("l", {"n": 2}, idempotency_key="new"), _level("l", {"n": 3})]
        found, outcome = store.read_ahead(board, writes)
        _expect(set(found) == {"ahead"}, f"read_ahead must find the keys written: {found}")
        _expect(outcome.status is RunStatus.OPEN, f"read_ahead on an open run: {outcome}")
        outcomes = store.append(board, writes[1:])
        _expect([type(o) for o in outcomes] == [Appended, Appended], f"then append: {outcomes}")
        _appended(_append_one(store, board, _close()), "the close")
        found, outcome = store.read_ahead(board, [_level("l", {"n": 4})])
        _expect(found == {} and outcome.closed, f"read_ahead on a closed run: {outcome}")


def _lapsed_claims_are_taken_over(h: _Harness) -> None:
    short = timedelta(seconds=0.2)
    with h.stores(2) as (first, second):
        board = h.board(first)
        (mine,) = first.claim(board, "a", ["k"], 1, short)
        _expect(second.claim(board, "b", ["k"], 1, _LONG) == [], "an unlapsed claim is held")
        _expect(len(first.claim(board, "a", ["j"], 1, short)) == 1, "a free key is taken")
        time.sleep(0.35)
        (theirs,) = second.claim(board, "b", ["k"], 1, _LONG)
        _expect(theirs.token == mine.token + 1, f"a takeover raises the token: {theirs}")
        _expect(first.renew(board, "a", ["k"], _LONG) == [], "a taken-over claim is lost")
        lost = first.append(board, [_level("l", "a")], Fence("a", frozenset({"k"})))
        _expect(lost == [ClaimLost("a")], f"a fence on a lost claim must refuse: {lost}")
        _expect(first.head(board) == 0, "a refused fenced batch must leave nothing")
        kept = second.append(board, [_level("l", "b")], Fence("b", frozenset({"k"})))
        _appended(kept[0], "a fenced write by the holder")
        late = first.append(board, [_level("l", "a2")], Fence("a", frozenset({"j"})))
        _appended(late[0], "a lapsed claim no one took still fences")
        both = first.append(board, [_level("l", "x")], Fence("a", frozenset({"j", "k"})))
        _expect(both == [ClaimLost("a")], f"every fenced key must be held: {both}")
        _expect(_keys(first.renew(board, "a", ["j"], _LONG)) == ["j"], "renew a lapsed claim")


def _concurrent_claimers(h: _Harness) -> None:
    keys = [f"k{i}" for i in range(8 * h.threads)]
    with h.stores(h.threads) as handles:
        board = h.board(handles[0])
        won: dict[int, list[str]] = {}
        errors: list[BaseException] = []

        def work(n: int) -> None:
            mine = won.setdefault(n, [])
            try:
                for _ in range(len(keys)):
                    others = [key for key in keys if key not in mine]
                    mine += _keys(handles[n].claim(board, f"h{n}", others, 3, _LONG))
            except BaseException as exc:  # reported below, on the checking thread
                errors.append(exc)

        _run_threads(work, h.threads)
        _expect(not errors, f"a claiming thread raised: {errors[:1]!r}")
        holders: dict[str, set[int]] = {}
        for n, taken in won.items():
            for key in taken:
                holders.setdefault(key, set()).add(n)
        shared = {k: v for k, v in holders.items() if len(v) > 1}
        _expect(not shared, f"keys taken by two holders at once: {sorted(shared)[:5]}")
        _expect(set(holders) == set(keys), f"{len(holders)} of {len(keys)} keys were claimed")
        tokens = {c.key: c.token for c in handles[0].claims(board)}
        _expect(set(tokens.values()) == {1}, f"each key taken once: tokens {tokens}")


def _run_threads(work: Callable[[int], None], count: int) -> None:
    barrier = threading.Barrier(count)

    def start(n: int) -> None:
        barrier.wait()
        work(n)

    workers = [threading.Thread(target=start, args=(n,)) for n in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


STORE_CHECKS: tuple[tuple[str, Callable[[_Harness], None]], ...] = (
    ("open and reopen a board", _open_and_reopen),
    ("sequence numbers are gap-free", _sequence_is_gap_free),
    ("records round-trip", _records_round_trip),
    ("premise compare-and-set", _premise_compare_and_set),
    ("unique levels", _unique_levels),
    ("idempotency keys", _idempotency_keys),
    ("grants and revokes", _grants_and_revokes),
    ("close blocks later writes", _close_blocks_later_writes),
    ("a close within a batch", _close_within_a_batch),
    ("read_log ranges", _read_log_ranges),
    ("read_region", _read_region),
    ("wait wakes on a write", _wait_wakes),
    ("concurrent writers", _concurrent_writers),
    ("concurrent opens of one new board", _concurrent_open),
    ("claims are exclusive", _claims_are_exclusive),
    ("release and claim", _release_and_claim),
    ("read ahead of a batch", _read_ahead),
    ("lapsed claims are taken over and fence", _lapsed_claims_are_taken_over),
    ("concurrent claimers", _concurrent_claimers),
)
"""Every check :func:`check_store` runs, by name, in order."""
