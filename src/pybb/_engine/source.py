"""Knowledge sources: what repairs an entry, how often it may try, and how long it may take."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import KeysView
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pybb._engine.blackboard import Blackboard
from pybb.errors import SourceError

__all__ = ["MAX_NAME", "KnowledgeSource", "RetryPolicy", "check_name"]

MAX_NAME = 64
"""The longest source name; keys of attempt records must fit the kernel's 256 characters."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a source waits before trying an entry again after a failed attempt.

    The wait before attempt ``n + 1`` is ``initial_interval * backoff_coefficient ** (n - 1)``,
    capped at ``maximum_interval``. Time comes from the controller's clock, so a test can
    drive it with ``pybb.testing.FakeClock``.

    Attributes:
        initial_interval: The wait after the first failed attempt.
        backoff_coefficient: How much each further wait grows (1.0: constant).
        maximum_interval: The longest wait, or ``None`` for no cap.
    """

    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    maximum_interval: timedelta | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.initial_interval, timedelta) or self.initial_interval < timedelta():
            raise SourceError(
                f"RetryPolicy.initial_interval must be a timedelta of zero or more, "
                f"got {self.initial_interval!r}"
            )
        coefficient = self.backoff_coefficient
        if isinstance(coefficient, bool) or not isinstance(coefficient, int | float):
            raise SourceError(
                f"RetryPolicy.backoff_coefficient must be a number, got {coefficient!r}"
            )
        if not 1.0 <= coefficient <= 1000.0:
            raise SourceError(
                f"RetryPolicy.backoff_coefficient must be between 1 and 1000, got {coefficient!r}"
            )
        maximum = self.maximum_interval
        if maximum is not None and (not isinstance(maximum, timedelta) or maximum < timedelta()):
            raise SourceError(
                f"RetryPolicy.maximum_interval must be a timedelta of zero or more, got {maximum!r}"
            )

    def delay(self, failed_attempts: int) -> timedelta:
        """The wait before the next attempt once ``failed_attempts`` attempts have failed."""
        delay = self.initial_interval * self.backoff_coefficient ** max(failed_attempts - 1, 0)
        if self.maximum_interval is not None:
            delay = min(delay, self.maximum_interval)
        return delay


class KnowledgeSource(ABC):
    """Something that can repair (or confirm) entries: subclass it and write ``execute``.

    A whole-measurement source returns the repaired measurement from ``execute`` (or
    ``None`` for no change). A component-scoped source (``component="x"``) writes its
    component with ``blackboard.write_component(key, "x", value)``; the board's
    admission rule refuses any other component, and that refusal is a failed attempt.
    ``execute`` failing — raising, or running past ``timeout`` — is a failed attempt
    recorded with its error; raise :class:`pybb.AttemptError` to attach a report.

    Args:
        name: Unique among the controller's sources; the board records attempts by it.
        max_attempts: How many attempts it may make on one entry before handing it on.
        component: The one component of a dict measurement it may write, if scoped.
        timeout: How long one ``execute`` may run (a ``timedelta``, or seconds).
        retry: How long to wait between its attempts on one entry (none: no wait).

    Raises:
        SourceError: A name, ``max_attempts``, ``component``, ``timeout`` or ``retry``
            that cannot be used.
    """

    def __init__(
        self,
        name: str,
        max_attempts: int = 1,
        *,
        component: str | None = None,
        timeout: timedelta | float | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        check_name(name)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise SourceError(
                f"knowledge source {name!r}: max_attempts must be a positive integer, got "
                f"{max_attempts!r}; give it at least 1 attempt"
            )
        if component is not None and (not isinstance(component, str) or not component):
            raise SourceError(
                f"knowledge source {name!r}: component must be a non-empty string or None, "
                f"got {component!r}"
            )
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise SourceError(
                f"knowledge source {name!r}: retry must be a RetryPolicy, got {retry!r}"
            )
        self.name = name
        self.max_attempts = max_attempts
        self.component = component
        self.timeout = _timeout(name, timeout)
        self.retry = retry
        self._board: Blackboard | None = None

    @property
    def partition(self) -> KeysView[str]:
        """The keys of the entries this source is placed on, in the order they arrived.

        A live, read-only view of the blackboard it was last added to (empty before).
        """
        if self._board is None:
            return {}.keys()
        return self._board.journal.partition(self.name)

    def bind(self, blackboard: Blackboard) -> None:
        """Make :attr:`partition` read ``blackboard`` (``Controller.add_ks`` calls this)."""
        self._board = blackboard

    def can_contribute(self, blackboard: Blackboard) -> list[str]:
        """The keys in this source's partition that are not in good standing.

        For a component-scoped source: those whose component does not pass (or whose
        pass is provisional, awaiting confirmation). Override to be more selective;
        an empty list means it cannot contribute this cycle.
        """
        keys = blackboard.journal.partition(self.name)
        needs_work = blackboard.journal.view.needs_work
        component = self.component
        return [key for key in keys if needs_work(key, component)]

    @abstractmethod
    def execute(self, blackboard: Blackboard, key: str) -> Any:
        """Work on the entry ``key``: return its new measurement, or write components.

        Args:
            blackboard: Read the entry with ``blackboard.get_entry(key)`` (a copy);
                write components with ``blackboard.write_component``; attach a report
                with ``blackboard.report``.
            key: The entry to work on.

        Returns:
            The repaired measurement of a whole-measurement source, or ``None`` for
            no change (a component-scoped source returns ``None``).
        """

    def __repr__(self) -> str:
        scope = f", component={self.component!r}" if self.component else ""
        return f"{type(self).__name__}({self.name!r}, max_attempts={self.max_attempts}{scope})"


def check_name(name: object) -> None:
    """Refuse a source name the board cannot record."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME or "/" in name:
        raise SourceError(
            f"knowledge source name {name!r} is invalid; use a non-empty string of at most "
            f"{MAX_NAME} characters without '/'"
        )


def _timeout(name: str, timeout: timedelta | float | None) -> timedelta | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, timedelta | int | float):
        raise SourceError(
            f"knowledge source {name!r}: timeout must be a timedelta or seconds, got {timeout!r}"
        )
    if not isinstance(timeout, timedelta) and not math.isfinite(timeout):
        raise SourceError(f"knowledge source {name!r}: timeout must be finite, got {timeout!r}")
    value = timeout if isinstance(timeout, timedelta) else timedelta(seconds=timeout)
    if value <= timedelta():
        raise SourceError(
            f"knowledge source {name!r}: timeout must be positive, got {timeout!r}; "
            "use None for no timeout"
        )
    return value
