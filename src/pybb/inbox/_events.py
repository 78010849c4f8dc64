"""Live updates: one watcher thread per inbox follows the board's head for every stream.

A browser holds one Server-Sent Events stream; each time the board's head moves, the
stream sends a ``board`` event and the page fetches its fresh, server-rendered asks.
The watcher thread runs only while streams are open, so an idle inbox holds no thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable

from starlette.concurrency import run_in_threadpool

from blackboard import BlackboardError, Model

__all__ = ["HeadWatcher", "event_stream"]

_POLL_SECONDS = 1.0
_log = logging.getLogger("pybb.inbox")


class HeadWatcher:
    """Wakes asyncio waiters when the board's head passes what they have seen."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._head = 0
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    async def wait_beyond(self, seen: int, timeout: float) -> int:
        """Wait until the head passes ``seen`` or ``timeout`` passes; return the head."""
        head = await run_in_threadpool(self._read_head)
        if head > seen:
            return head
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.add(waiter)
            self._start()
        try:
            if self._head <= seen:
                await asyncio.wait_for(waiter[1].wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(waiter)
        return max(self._head, head)

    def stop(self) -> None:
        """Stop the thread (the inbox is shutting down)."""
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)

    def _read_head(self) -> int:
        head = self._model.reader.head()
        self._head = max(self._head, head)
        return head

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="pybb-inbox-watch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        store, board = self._model.store, self._model.board_id
        while not self._stopping.is_set():
            with self._lock:
                if not self._waiters:
                    self._thread = None
                    return
            try:
                if store.wait(board, self._head, _POLL_SECONDS):
                    self._read_head()
                    self._wake()
            except BlackboardError as exc:  # the store went away; streams time out on their own
                _log.warning("the inbox stopped watching the board: %s", exc)
                with self._lock:
                    self._thread = None
                return

    def _wake(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)


async def event_stream(
    watcher: HeadWatcher,
    since: int,
    still_allowed: Callable[[], bool],
    heartbeat: float,
    lifetime: float,
) -> AsyncIterator[str]:
    """The text of one event stream: a ``board`` event each time the head moves.

    It ends when ``lifetime`` passes (the browser reconnects, which re-checks the login)
    or the login stops being valid (then it sends ``logout``).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + lifetime
    seen = since
    yield "retry: 2000\n\n"
    while loop.time() < deadline:
        if not await run_in_threadpool(still_allowed):
            yield "event: logout\ndata: {}\n\n"
            return
        remaining = max(0.01, min(heartbeat, deadline - loop.time()))
        head = await watcher.wait_beyond(seen, remaining)
        if head > seen:
            seen = head
            yield f'id: {head}\nevent: board\ndata: {{"head": {head}}}\n\n'
        else:
            yield ": alive\n\n"
