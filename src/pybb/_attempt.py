"""Running one knowledge-source attempt: its context, its writes, its timeout.

While ``execute`` runs, a context variable holds the attempt, so the blackboard knows
that ``write_component`` (or a restore, or ``report``) belongs to that attempt and
buffers it instead of writing it. A source with a timeout runs on a worker thread that
starts with the attempt in its own context; when the timeout passes, the attempt is
closed, so anything the abandoned thread writes afterwards is refused, not applied.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blackboard.faults import fault_point
from pybb._types import AttemptStatus
from pybb._values import NotJSONError, copy_value, describe
from pybb.errors import AttemptError, SourceError

if TYPE_CHECKING:
    from pybb._blackboard import Blackboard
    from pybb._source import KnowledgeSource

__all__ = ["AttemptContext", "Outcome", "current_attempt", "run_attempt"]


class AttemptContext:
    """One attempt in progress: which entry, which source, and what it wrote so far."""

    __slots__ = ("_lock", "closed", "component", "key", "number", "report", "source", "writes")

    def __init__(self, key: str, source: str, component: str | None, number: int) -> None:
        self.key = key
        self.source = source
        self.component = component
        self.number = number
        self.writes: list[list[Any]] = []
        self.report: Any = None
        self.closed = False
        self._lock = threading.Lock()

    def write(self, component: str | None, value: Any) -> None:
        """Buffer a write of the attempt (``component`` None: the whole measurement)."""
        with self._lock:
            self._check_open()
            self.writes.append([component, value])

    def attach(self, report: Any) -> None:
        """Attach a report to the attempt (the last one attached wins)."""
        with self._lock:
            self._check_open()
            self.report = report

    def close(self) -> None:
        """End the attempt: later writes from a thread still running it are refused."""
        with self._lock:
            self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise SourceError(
                f"attempt {self.number} of source {self.source!r} on entry {self.key!r} is "
                "over (it timed out or returned); its later writes are not applied"
            )


_current: ContextVar[AttemptContext | None] = ContextVar("pybb_attempt", default=None)


def current_attempt() -> AttemptContext | None:
    """The attempt the calling code runs inside, if any."""
    return _current.get()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an attempt produced, before the controller re-evaluates and records it.

    Attributes:
        status: ``None`` when ``execute`` completed; else ERROR or TIMEOUT.
        writes: The buffered writes, ``[component or None, value]`` in order.
        error: What went wrong, for a failed attempt.
        report: What the source attached.
    """

    status: AttemptStatus | None
    writes: list[list[Any]]
    error: str | None = None
    report: Any = None


def run_attempt(source: KnowledgeSource, board: Blackboard, context: AttemptContext) -> Outcome:
    """Run ``source.execute`` for one attempt, inline or on a worker under its timeout."""
    timeout = source.timeout
    if timeout is None:
        return _inline(source, board, context)
    worker = source._worker()
    future = worker.submit(lambda: _inline(source, board, context))
    try:
        return future.result(timeout.total_seconds())
    except FutureTimeout:
        context.close()
        source._abandon(worker)
        seconds = timeout.total_seconds()
        return Outcome(AttemptStatus.TIMEOUT, [], f"timed out after {seconds:g} s", context.report)


def _inline(source: KnowledgeSource, board: Blackboard, context: AttemptContext) -> Outcome:
    token = _current.set(context)
    try:
        fault_point("ks.mid")
        returned = source.execute(board, context.key)
        if returned is not None:
            context.write(None, _json(returned, "returned"))
    except AttemptError as exc:
        return _failed(context, str(exc), exc.report)
    except Exception as exc:
        return _failed(context, f"{type(exc).__name__}: {exc}", None)
    finally:
        _current.reset(token)
    context.close()
    return Outcome(None, context.writes, None, context.report)


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


def _json(value: Any, what: str) -> Any:
    try:
        return copy_value(value)
    except NotJSONError as exc:
        raise SourceError(f"the knowledge source {what} {describe(value)}, which {exc}") from None


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
