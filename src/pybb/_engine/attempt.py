"""One knowledge-source attempt in progress: its context and what it wrote so far.

While ``execute`` runs, a context variable holds the attempt, so the blackboard knows
that ``write_component`` (or a restore, or ``report``) belongs to that attempt and
buffers it instead of writing it (``pybb._engine.runner`` runs attempts).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, NamedTuple

from pybb._engine.types import AttemptStatus
from pybb.errors import EntryError, SourceError

__all__ = [
    "AttemptContext",
    "Outcome",
    "attempt_on",
    "current_attempt",
    "enter",
    "leave",
    "outside_attempt",
    "running",
]


# One lock for every attempt's context, not one built per attempt: it is held only for the
# few statements of a write or a close, never across a source's own code, so attempts on
# other threads (timed ones) wait on it for nanoseconds at most.
_LOCK = threading.Lock()


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
        self._lock = _LOCK

    def write(self, component: str | None, value: Any) -> None:
        """Buffer a write of the attempt (``component`` None: the whole measurement)."""
        with self._lock:
            if self.closed:
                self._refuse()
            self.writes.append([component, value])

    def attach(self, report: Any) -> None:
        """Attach a report to the attempt (the last one attached wins)."""
        with self._lock:
            if self.closed:
                self._refuse()
            self.report = report

    def close(self) -> None:
        """End the attempt: later writes from a thread still running it are refused."""
        with self._lock:
            self.closed = True

    def write_last(self, component: str | None, value: Any) -> None:
        """:meth:`write` then :meth:`close`, under one hold of the lock (a returned value)."""
        with self._lock:
            if self.closed:
                self._refuse()
            self.writes.append([component, value])
            self.closed = True

    def _refuse(self) -> None:
        raise SourceError(
            f"attempt {self.number} of source {self.source!r} on entry {self.key!r} is "
            "over (it timed out or returned); its later writes are not applied"
        )


_current: ContextVar[AttemptContext | None] = ContextVar("pybb_attempt", default=None)


def current_attempt() -> AttemptContext | None:
    """The attempt the calling code runs inside, if any."""
    return _current.get()


# The attempt's context variable's own methods, not functions around them (a frame each,
# twice per attempt).
enter: Callable[[AttemptContext | None], Token[AttemptContext | None]] = _current.set
"""Make a context the running attempt of this thread's context; returns the token for ``leave``."""
leave: Callable[[Token[AttemptContext | None]], None] = _current.reset
"""End what :func:`enter` began."""
running: Callable[[], AttemptContext | None] = _current.get
"""The running attempt, if any (:func:`current_attempt` without its frame, for a hot read)."""


def attempt_on(key: str) -> AttemptContext | None:
    """The running attempt, if any, which must be on ``key``.

    Raises:
        EntryError: A source working on another entry tried to write ``key``.
    """
    context = _current.get()
    if context is not None and context.key != key:
        raise EntryError(
            key,
            f"knowledge source {context.source!r} is working on entry {context.key!r} "
            "and may write only that entry",
        )
    return context


def outside_attempt(what: str) -> None:
    """Refuse a blackboard call a knowledge source may not make during its attempt.

    Raises:
        SourceError: Called from a running attempt.
    """
    context = _current.get()
    if context is not None:
        raise SourceError(
            f"knowledge source {context.source!r} called {what}() during its attempt on "
            f"entry {context.key!r}; a source writes only its entry's measurement"
        )


class Outcome(NamedTuple):
    """What an attempt produced, before the controller re-evaluates and records it.

    A named tuple: one per attempt, built in a third of a frozen dataclass's time.

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
