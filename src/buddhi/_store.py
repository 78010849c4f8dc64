"""The Store seam: scope-keyed interrupt counters and the two-tier exclusion lattice.

A store implements primitives (read, charge and persist counters and exclusions
atomically); the rules are written once, here, as pure functions it calls:
:func:`assess_admission` decides an admission from the counters along the path,
:meth:`ScopeCounter.at` rolls a counter into the current window, and
:meth:`Exclusions.adding` / :meth:`Exclusions.retracting` keep the tiers apart.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import TracebackType
from typing import Protocol, Self

from buddhi._budget import Bar, Scope, ScopePath, window_start
from buddhi._errors import AdmissionRefused, BudgetError, BudgetExhausted
from buddhi._exclusions import ExclusionCause, Exclusions, SourceExcluded, Tier
from buddhi._frozen import builder, fast_init

__all__ = [
    "Admission",
    "AdmissionRequest",
    "Clock",
    "ExclusionCause",
    "Exclusions",
    "ScopeCounter",
    "Store",
    "SystemClock",
    "Tier",
    "assess_admission",
]


class Clock(Protocol):
    """Where a store reads the time that places an admission in its window."""

    def now(self) -> datetime:
        """Return the current time."""
        ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)


@fast_init
@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """One request to spend an interrupt.

    Attributes:
        scope: The path of the scope to charge; every ancestor is charged too.
        item_id: The item whose ask would interrupt a person.
        source: The item's source, checked against the exclusion lattice.
        confidence: The ask's escalation confidence, checked against the bar.
        bar: The pack's graduated bar.
    """

    scope: ScopePath
    item_id: str
    source: str
    confidence: float
    bar: Bar

    def __post_init__(self) -> None:
        value = self.confidence
        scope = self.scope
        if type(value) is float and 0.0 <= value <= 1.0 and type(scope) is tuple and scope:
            return  # the common case, decided in one test
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not 0.0 <= value <= 1.0:  # NaN fails the range check too
            raise BudgetError(
                f"item {self.item_id!r}: an admission's confidence must be a finite number in "
                f"[0, 1], got {value!r}"
            )
        if not isinstance(self.scope, tuple) or not self.scope:
            raise BudgetError(f"an admission's scope must be a scope path, got {self.scope!r}")


@fast_init
@dataclass(frozen=True, slots=True)
class Admission:
    """An admitted interrupt.

    Attributes:
        item_id: The admitted item.
        scope: The charged scope's path.
        load: The load the bar was read at (the most loaded scope, before charging).
        required: The confidence the bar required at that load.
        confidence: The ask's escalation confidence.
        spent: The charged scope's spend in its window, after charging.
        ceiling: The charged scope's ceiling.
    """

    item_id: str
    scope: ScopePath
    load: float
    required: float
    confidence: float
    spent: int
    ceiling: int


@fast_init
@dataclass(frozen=True, slots=True)
class ScopeCounter:
    """A scope's definition and its counters.

    Attributes:
        scope: The scope.
        spent: Interrupts its subtree spent in the current window (all time without one).
        total: Interrupts its subtree spent in all time.
        own: Interrupts charged to this scope itself, in all time.
        window_start: The start of the window ``spent`` counts, or ``None``.
    """

    scope: Scope
    spent: int = 0
    total: int = 0
    own: int = 0
    window_start: datetime | None = None

    @property
    def load(self) -> float:
        """The spent fraction of the ceiling; a zero ceiling is always full."""
        ceiling = self.scope.ceiling
        if ceiling == 0:
            return 1.0
        fraction = self.spent / ceiling
        return fraction if fraction < 1.0 else 1.0

    def at(self, now: datetime) -> ScopeCounter:
        """Return this counter as of ``now``: ``spent`` restarts when a new window began."""
        window = self.scope.window
        if window is None:
            return self
        start = window_start(now, window)
        if self.window_start is not None and start <= self.window_start:
            return self
        return replace(self, spent=0, window_start=start)

    def charged(self, *, own: bool) -> ScopeCounter:
        """Return this counter after one more interrupt; ``own`` when charged here."""
        # Built directly rather than with ``replace``: this runs on every admission.
        return _counter(
            self.scope, self.spent + 1, self.total + 1, self.own + own, self.window_start
        )


# Built on every admission, at half the cost of calling the class: see buddhi._frozen.
_counter = builder(ScopeCounter)
_admission = builder(Admission)


def assess_admission(
    request: AdmissionRequest, chain: Sequence[ScopeCounter], exclusions: Exclusions
) -> Admission | AdmissionRefused:
    """Decide one admission: the rule every store applies inside its atomic section.

    The source must be clear in both tiers; no scope on the path may be at its
    ceiling; and the confidence must reach the bar read at the load of the most
    loaded scope on the path. A store charges every counter of ``chain`` only when
    this returns an :class:`Admission`.

    Args:
        request: The request.
        chain: The counters from the root down to ``request.scope``, rolled to now.
        exclusions: The request's source's exclusions.

    Returns:
        The admission, or the refusal (``SourceExcluded`` or ``BudgetExhausted``).
    """
    if exclusions.excluded:
        return SourceExcluded(item_id=request.item_id, exclusions=exclusions)
    tightest = chain[0] if len(chain) == 1 else max(chain, key=_load)
    load = tightest.load
    required = request.bar(load)
    confidence = request.confidence
    if tightest.spent >= tightest.scope.ceiling:
        return _exhausted(request, tightest, required, "ceiling")
    # Written so that a NaN from a faulty bar refuses rather than admits.
    if not confidence >= required:
        return _exhausted(request, tightest, required, "bar")
    own = chain[-1]
    return _admission(
        request.item_id,
        request.scope,
        load,
        required,
        confidence,
        own.spent + 1,
        own.scope.ceiling,
    )


def _load(counter: ScopeCounter) -> float:
    return counter.load


def _exhausted(
    request: AdmissionRequest, counter: ScopeCounter, required: float, limit: str
) -> BudgetExhausted:
    return BudgetExhausted(
        item_id=request.item_id,
        scope=counter.scope.path,
        spent=counter.spent,
        ceiling=counter.scope.ceiling,
        required=required,
        confidence=request.confidence,
        limit="ceiling" if limit == "ceiling" else "bar",
    )


class Store(ABC):
    """Scope-keyed interrupt counters plus the two-tier source-exclusion lattice.

    Every method is atomic with respect to every other, across threads (and, for a
    durable store, across processes). ``admit`` in particular reads the counters along
    the path, applies :func:`assess_admission`, and charges every counter on the path
    as one indivisible step, so concurrent admissions never overshoot a ceiling.
    A store reads time from the clock it was built with.
    """

    @abstractmethod
    def open_scope(self, scope: Scope) -> None:
        """Open a scope with zeroed counters; opening it again unchanged does nothing.

        Raises:
            UnknownScopeError: The scope's parent has not been opened.
            ScopeConflictError: It is open with a different ceiling, weight or window.
        """

    @abstractmethod
    def admit(self, request: AdmissionRequest) -> Admission:
        """Atomically admit one interrupt, charging the scope and all its ancestors.

        Raises:
            BudgetExhausted: A scope on the path is full, or the bar is too high.
            SourceExcluded: The request's source is excluded.
            UnknownScopeError: The scope has not been opened.
        """

    @abstractmethod
    def counter(self, path: ScopePath) -> ScopeCounter:
        """Return a scope's counters as of now (``spent`` counts the current window).

        Raises:
            UnknownScopeError: The scope has not been opened.
        """

    @abstractmethod
    def scopes(self) -> tuple[Scope, ...]:
        """Return every open scope, each after its parent."""

    @abstractmethod
    def exclude(self, source: str, cause: ExclusionCause) -> Exclusions:
        """Atomically add ``cause`` to ``source``'s exclusions and return the result.

        Raises:
            ExclusionError: The cause's name is held in the other tier.
        """

    @abstractmethod
    def retract(self, source: str, cause: ExclusionCause) -> Exclusions:
        """Atomically retract a transient ``cause`` from ``source`` and return the result.

        Raises:
            ExclusionError: The cause is permanent.
        """

    @abstractmethod
    def exclusions(self, source: str) -> Exclusions:
        """Return ``source``'s exclusions (empty tiers when it was never excluded)."""

    def close(self) -> None:  # noqa: B027 - a store without resources needs no cleanup
        """Release the store's resources; closing twice is harmless."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
