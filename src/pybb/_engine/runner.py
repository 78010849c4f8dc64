"""Running one knowledge-source attempt: inline, or on a thread under the source's timeout.

A source with a timeout runs on a worker thread that starts with the attempt in its own
context; when the timeout passes, the attempt is closed, so anything the abandoned thread
writes afterwards is refused, not applied.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from blackboard.faults import fault_point
from pybb._engine.attempt import AttemptContext, Outcome, enter, leave
from pybb._engine.blackboard import Blackboard
from pybb._engine.source import KnowledgeSource
from pybb._engine.types import AttemptStatus
from pybb._engine.values import NotJSONError, copy_value, describe
from pybb.errors import AttemptError, SourceError

__all__ = ["AttemptRunner", "run_inline"]


class AttemptRunner:
    """Runs attempts: inline, or on a thread per source under the source's timeout.

    A timed-out attempt's thread is abandoned (it may be stuck for good) and the
    source's next attempt gets a fresh one, so it never queues behind the stuck one.
    """

    def __init__(self) -> None:
        self._threads: dict[str, Worker] = {}
        self._lock = threading.Lock()

    def run(self, source: KnowledgeSource, board: Blackboard, context: AttemptContext) -> Outcome:
        """Run ``source.execute`` for one attempt; a timeout or an exception is an outcome."""
        timeout = source.timeout
        if timeout is None:
            return run_inline(source, board, context)
        worker = self._thread(source.name)
        future = worker.submit(lambda: run_inline(source, board, context))
        try:
            return future.result(timeout.total_seconds())
        except FutureTimeout:
            context.close()
            self._abandon(source.name, worker)
            seconds = timeout.total_seconds()
            error = f"timed out after {seconds:g} s"
            return Outcome(AttemptStatus.TIMEOUT, [], error, context.report)

    def _thread(self, name: str) -> Worker:
        with self._lock:
            worker = self._threads.get(name)
            if worker is None:
                worker = self._threads[name] = Worker(name)
            return worker

    def _abandon(self, name: str, worker: Worker) -> None:
        with self._lock:
            worker.abandoned = True
            if self._threads.get(name) is worker:
                del self._threads[name]


_SCALARS = frozenset({int, str, bool, type(None)})  # copy_value returns these as they are


def run_inline(source: KnowledgeSource, board: Blackboard, context: AttemptContext) -> Outcome:
    """Run one attempt on this thread (what :meth:`AttemptRunner.run` does without a timeout)."""
    token = enter(context)
    try:
        fault_point("ks.mid")
        returned = source.execute(board, context.key)
        if returned is None:
            context.close()
        else:
            try:
                copied = returned if type(returned) in _SCALARS else copy_value(returned)
            except NotJSONError as exc:
                what = f"the knowledge source returned {describe(returned)}, which {exc}"
                raise SourceError(what) from None
            # Closed with its one write: no later write of the attempt can land between.
            context.write_last(None, copied)
    except AttemptError as exc:
        return _failed(context, str(exc), exc.report)
    except Exception as exc:
        return _failed(context, f"{type(exc).__name__}: {exc}", None)
    finally:
        leave(token)
    # ``Outcome(None, writes, None, report)`` without the named tuple's ``__new__`` frame.
    return _outcome(Outcome, (None, context.writes, None, context.report))


_outcome = tuple.__new__


def _failed(context: AttemptContext, error: str, report: Any) -> Outcome:
    context.close()
    if report is None:
        report = context.report
    try:
        report = copy_value(report)
    except NotJSONError as exc:
        error = f"{error} (its report was dropped: it {exc})"
        report = None
    return Outcome(AttemptStatus.ERROR, [], error, report)


class Worker:
    """A daemon thread that runs one source's timed attempts, one at a time.

    Daemon, so a source stuck forever cannot keep the process from exiting; abandoned
    after a timeout, so the next attempt does not queue behind the stuck one.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Outcome], Future[Outcome]]] = (
            queue.SimpleQueue()
        )
        self.abandoned = False
        self._thread = threading.Thread(target=self._loop, name=f"pybb-{name}", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], Outcome]) -> Future[Outcome]:
        """Queue ``job``; its future holds the outcome."""
        future: Future[Outcome] = Future()
        self._jobs.put((job, future))
        return future

    def _loop(self) -> None:
        while not self.abandoned:
            job, future = self._jobs.get()
            try:
                future.set_result(job())
            except BaseException as exc:  # the job catches Exception; this is the rest
                future.set_exception(exc)
