"""Wake-ups for :meth:`PostgresStore.wait`: one LISTEN connection per store, not polling.

The trigger on ``bb_boards.head`` sends ``NOTIFY channel, 'head:board'`` inside the
admitting transaction, so PostgreSQL delivers it only once the write has committed.
A waiter registers its board, reads the head (after LISTEN is active, so no commit after
that read goes unheard), then sleeps until the listener hears a head past the one it
waits for. A reconnect may have missed notifications, so it wakes every waiter to read
the head again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
from psycopg import sql

from blackboard.stores._pg_schema import enc

__all__ = ["Listener"]

_TICK = 0.2  # how often the listening thread looks whether it should stop


class Listener:
    """One LISTEN connection per store, on its own thread, shared by every waiter."""

    def __init__(self, conninfo: str, channel: str) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._cond = threading.Condition()
        self._heads: dict[str, int] = {}
        self._watchers: dict[str, int] = {}
        self._epoch = 0  # bumped on every (re)connect: notifications may have been missed
        self._ready = False
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name=f"{channel}-listen", daemon=True)
        self._thread.start()

    def wait(self, board_id: str, after: int, timeout: float, head: Callable[[], int]) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        board = enc(board_id)
        with self._cond:
            self._cond.wait_for(lambda: self._ready or self._stopping, timeout)
            self._watchers[board] = self._watchers.get(board, 0) + 1
        try:
            return self._wait_for(board, after, deadline, head)
        finally:
            with self._cond:
                self._watchers[board] -= 1
                if not self._watchers[board]:
                    del self._watchers[board]
                    self._heads.pop(board, None)

    def _wait_for(self, board: str, after: int, deadline: float, head: Callable[[], int]) -> bool:
        while True:
            with self._cond:
                epoch = self._epoch
            # Read the head only once LISTEN is active, so no commit after it goes unheard.
            if head() > after:
                return True

            def woken(seen: int = epoch) -> bool:
                return self._heads.get(board, 0) > after or self._epoch != seen or self._stopping

            with self._cond:
                self._cond.wait_for(woken, max(deadline - time.monotonic(), 0.0))
                if self._heads.get(board, 0) > after:
                    return True
                if self._stopping:
                    return False
            if time.monotonic() >= deadline:
                return head() > after

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=5 * _TICK)

    def _loop(self) -> None:
        backoff = 0.05
        while not self._stopping:
            try:
                self._listen()
                backoff = 0.05
            except psycopg.Error:
                with self._cond:
                    self._ready = False
                    self._epoch += 1
                    self._cond.notify_all()
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def _listen(self) -> None:
        with psycopg.connect(self._conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
            with self._cond:
                self._ready = True
                self._epoch += 1
                self._cond.notify_all()
            while not self._stopping:
                for note in conn.notifies(timeout=_TICK):
                    self._heard(note.payload)

    def _heard(self, payload: str) -> None:
        head, _, board = payload.partition(":")
        with self._cond:
            if board in self._watchers and head.isdigit():
                self._heads[board] = max(self._heads.get(board, 0), int(head))
                self._cond.notify_all()
