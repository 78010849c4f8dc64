"""RA-17, contract half: ``blackboard.testing.check_store`` passes on every built-in store
(memory, SQLite, PostgreSQL) and fails on stores that each break one rule of the contract.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest

from blackboard import Fence, Record
from blackboard.stores import MemoryStore, PendingWrite, Store, apply_writes
from blackboard.stores._base import AppendOutcome
from blackboard.stores._memory import _Txn
from blackboard.testing import STORE_CHECKS, check_store
from storekit import StoreSpec


def test_check_store_passes_on_every_backend(store_spec: StoreSpec) -> None:
    check_store(store_spec.open)


def test_check_store_lists_its_checks() -> None:
    names = [name for name, _ in STORE_CHECKS]
    assert len(names) == len(set(names)) >= 12


# -- negative controls: each store breaks one rule; check_store must say which ------------


class _BrokenTxn(_Txn):
    """A memory transaction with one primitive overridden by the broken store."""

    breaks: str = ""

    def premise_version(self, name: str) -> int | None:
        if self.breaks == "no-version-guard":
            return 1  # every CAS from version 1 passes: no guard at all
        return super().premise_version(name)

    def unique_holder(self, region: str, key: str) -> int | None:
        return None if self.breaks == "no-unique" else super().unique_holder(region, key)

    def find_key(self, key: str) -> tuple[Record, str] | None:
        return None if self.breaks == "no-idempotency" else super().find_key(key)

    def permitted(self, agent: str, region: str) -> bool:
        return True if self.breaks == "no-permissions" else super().permitted(agent, region)

    def closed_at(self) -> int | None:
        return None if self.breaks == "close-ignored" else super().closed_at()

    def head(self) -> int:
        return super().head() + (1 if self.breaks == "off-by-one" else 0)


class BrokenMemoryStore(MemoryStore):
    """BROKEN ON PURPOSE: a memory store with the rule named by ``breaks`` removed."""

    def __init__(self, breaks: str) -> None:
        super().__init__()
        self.breaks = breaks

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        if self.breaks == "racy":
            return self._racy_append(board_id, writes, fence)
        with self._changed:
            txn = _BrokenTxn(self._board(board_id))
            txn.breaks = self.breaks
            try:
                outcomes = apply_writes(txn, writes, fence)
            except BaseException:
                if self.breaks == "not-atomic":
                    txn.commit()  # keeps the writes before the one that raised
                raise
            txn.commit()
            self._changed.notify_all()
            return outcomes

    def _racy_append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None
    ) -> list[AppendOutcome]:
        txn = _Txn(self._board(board_id))  # judged without the lock...
        outcomes = apply_writes(txn, writes, fence)
        time.sleep(0.0005)
        with self._changed:  # ...and kept under it
            txn.commit()
            self._changed.notify_all()
        return outcomes

    def read_log(self, board_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        records = super().read_log(board_id, after, until)
        return records[1:] if self.breaks == "read-log-skips" and after > 0 else records

    def wait(self, board_id: str, after: int, timeout: float) -> bool:
        if self.breaks == "no-wake":
            time.sleep(min(timeout, 0.05))
            return False
        return super().wait(board_id, after, timeout)


BROKEN: dict[str, str] = {
    "no-version-guard": "premise compare-and-set",
    "no-unique": "unique levels",
    "no-idempotency": "idempotency keys",
    "no-permissions": "grants and revokes",
    "close-ignored": "close blocks later writes",
    "off-by-one": "sequence numbers are gap-free",
    "not-atomic": "idempotency keys",
    "read-log-skips": "read_log ranges",
    "no-wake": "wait wakes on a write",
    "racy": "concurrent writers",
}


@pytest.mark.parametrize("breaks", sorted(BROKEN))
def test_check_store_catches_a_broken_store(breaks: str) -> None:
    store = BrokenMemoryStore(breaks)
    with pytest.raises(AssertionError, match=f"check_store: {BROKEN[breaks]}"):
        check_store(lambda: store, threads=4, writes_per_thread=20)


def test_a_store_whose_second_handle_sees_nothing_is_caught() -> None:
    """A factory handing out independent stores is not 'the same storage': caught on reopen."""
    opened: list[Store] = []

    def factory() -> Store:
        opened.append(MemoryStore())
        return opened[-1]

    with pytest.raises((AssertionError, KeyError)):
        check_store(factory)


def test_check_store_reports_errors_from_writer_threads() -> None:
    """A store that fails under concurrency raises from a thread; the check reports it."""

    class FlakyStore(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0
            self.guard = threading.Lock()

        def append(
            self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
        ) -> list[AppendOutcome]:
            with self.guard:
                self.calls += 1
                failing = self.calls > 60
            if failing and len(writes) == 1 and writes[0].region == "l":
                raise RuntimeError("flaky")
            return super().append(board_id, writes, fence)

    store = FlakyStore()
    make: Callable[[], Store] = lambda: store  # noqa: E731
    with pytest.raises(AssertionError, match="a writer thread raised"):
        check_store(make)
