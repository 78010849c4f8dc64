"""A broken worker for the negative control: it works every entry without claiming any.

``python worker_child.py greedy URL BOARD LEDGER``: the same slow W1 application as the
real workers, but its "claims" are taken without asking the board and its batches are not
fenced, so several of them work one entry at once. The test must notice.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

from worker_apps import slow_w1

from blackboard.stores import open_store
from pybb import AppContext, Worker, WorkerSettings


class Greedy(Worker):
    """BROKEN ON PURPOSE: holds whatever it wants, asks no one."""

    def _refill(self, settled: list[str]) -> None:
        room = self.settings.batch - len(self._held)
        with self._held_lock:
            self._held.update(dict.fromkeys(self._candidates(room)))

    def _release(self, keys: list[str]) -> None:
        self._forget(keys)

    def _beat(self) -> None:
        self._beating.wait()

    def _work(self) -> None:
        self._board.journal.holder = None  # and writes without a fence
        super()._work()


def main(argv: list[str]) -> None:
    url, board, ledger = argv
    store = open_store(url)
    options = {"ledger": ledger, "delay": "0.004"}
    controller = slow_w1(AppContext(store, board, options))
    worker: Any = Greedy(controller, settings=WorkerSettings(lease=timedelta(seconds=5), batch=16))
    try:
        worker.run()
    except Exception as exc:  # two greedy workers collide on idempotency keys: expected
        print(f"greedy worker stopped: {type(exc).__name__}", file=sys.stderr)
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
